/* util.c - clocks, hex, ids, files, signals (see util.h). */
#include "util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"

int64_t sl_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double sl_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

void sl_hex_encode(const uint8_t *in, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * len] = '\0';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

sl_err_t sl_hex_decode(const char *hex, uint8_t *out, size_t outlen)
{
    if (strlen(hex) != 2 * outlen)
        return SL_EPARSE;
    for (size_t i = 0; i < outlen; i++) {
        int hi = hexval(hex[2 * i]);
        int lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return SL_EPARSE;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return SL_OK;
}

void sl_random_id(char *out, size_t nbytes)
{
    uint8_t buf[32];
    if (nbytes > sizeof buf)
        nbytes = sizeof buf;
    randombytes_buf(buf, nbytes);
    sl_hex_encode(buf, nbytes, out);
}

sl_err_t sl_read_stream(FILE *f, size_t max_bytes, char **out, size_t *len)
{
    *out = NULL;
    sl_err_t rc = SL_OK;
    sl_buf_t buf;
    sl_buf_init(&buf, max_bytes > 0 ? max_bytes : 1);
    char chunk[16384];
    size_t n;
    while (rc == SL_OK && (n = fread(chunk, 1, sizeof chunk, f)) > 0)
        rc = max_bytes > 0 ? sl_buf_add(&buf, chunk, n) : SL_ETOOBIG;
    if (rc == SL_OK && ferror(f))
        rc = SL_EIO;
    /* An empty input is an empty string, not NULL. */
    if (rc == SL_OK && buf.ptr == NULL)
        rc = sl_buf_add(&buf, "", 0);
    if (rc == SL_OK)
        *out = sl_buf_take(&buf, len);
    sl_buf_free(&buf);
    return rc;
}

sl_err_t sl_read_file(const char *path, size_t max_bytes, char **out, size_t *len)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return errno == ENOENT ? SL_ENOTFOUND : SL_EIO;
    sl_err_t rc = sl_read_stream(f, max_bytes, out, len);
    fclose(f);
    return rc;
}

sl_err_t sl_write_file(const char *path, const void *data, size_t len, unsigned mode)
{
    char tmp[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= sizeof tmp)
        return SL_EINVAL;
    FILE *f = fopen(tmp, "wb");
    if (f == NULL)
        return SL_EIO;
    chmod(tmp, (mode_t)mode);
    size_t n = fwrite(data, 1, len, f);
    int closed = fclose(f);
    if (n != len || closed != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return SL_EIO;
    }
    return SL_OK;
}

void sl_resolve_path(const char *path, char *out, size_t cap)
{
    snprintf(out, cap, "%s", path);
    if (path[0] == '/' || access(path, F_OK) == 0)
        return;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    /* exe is <root>/bin/<name> or <root>/bin/tests/<name>: walk up until schema/ exists. */
    for (int up = 0; up < 3; up++) {
        char *slash = strrchr(exe, '/');
        if (slash == NULL)
            return;
        *slash = '\0';
        char cand[PATH_MAX];
        if ((size_t)snprintf(cand, sizeof cand, "%s/%s", exe, path) < sizeof cand &&
            access(cand, F_OK) == 0) {
            snprintf(out, cap, "%s", cand);
            return;
        }
    }
}

static volatile sig_atomic_t stop_flag = 0;
static volatile sig_atomic_t reload_flag = 0;

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static void on_reload_signal(int sig)
{
    (void)sig;
    reload_flag = 1;
}

void sl_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_reload_signal;
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int sl_reload_requested(void)
{
    int r = reload_flag != 0;
    reload_flag = 0;
    return r;
}

int sl_stop_requested(void)
{
    return stop_flag != 0;
}

long long sl_parse_count(const char *s)
{
    int64_t v;
    if (s == NULL || sl_parse_uint(s, strlen(s), INT64_MAX, &v) != 0)
        return -1;
    return (long long)v;
}

int sl_parse_uint(const char *s, size_t len, int64_t max, int64_t *out)
{
    if (len == 0)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        int d = s[i] - '0';
        /* v * 10 + d > max, asked without overflowing. */
        if (v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

size_t sl_scan_decimal(const char *s, size_t len, double *out)
{
    size_t i = 0, digits = 0;
    while (i < len && s[i] >= '0' && s[i] <= '9') {
        i++;
        digits++;
    }
    if (i < len && s[i] == '.') {
        i++;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            i++;
            digits++;
        }
    }
    if (digits == 0 || i > SL_DECIMAL_MAX_CHARS)
        return 0;
    /* strtod rounds correctly; the grammar above already excludes everything else it reads
     * (signs, exponents, hex, inf, nan, leading space), and 63 digits stay far from DBL_MAX. */
    char buf[SL_DECIMAL_MAX_CHARS + 1];
    memcpy(buf, s, i);
    buf[i] = '\0';
    double v = strtod(buf, NULL);
    if (!isfinite(v))
        return 0;
    *out = v;
    return i;
}

int64_t sl_ms_of_double(double ms, int64_t max_ms, int round_up)
{
    /* !(ms >= 0) is also true for NaN. Past this check ms is in [0, max_ms], so the cast is
     * defined. */
    if (!(ms >= 0) || !isfinite(ms) || ms > (double)max_ms)
        return -1;
    double r = round_up ? ceil(ms) : floor(ms + 0.5);
    return r > (double)max_ms ? max_ms : (int64_t)r;
}

/* Parses "HOST:PORT" (IPv4 or "localhost", port 0..65535) into addr. */
int sl_parse_listen(const char *listen, struct sockaddr_in *addr)
{
    if (listen == NULL)
        return 0;
    const char *colon = strrchr(listen, ':');
    if (colon == NULL || colon == listen || (size_t)(colon - listen) >= INET_ADDRSTRLEN + 8)
        return 0;
    char host[INET_ADDRSTRLEN + 8];
    memcpy(host, listen, (size_t)(colon - listen));
    host[colon - listen] = '\0';
    const char *port = colon + 1;
    size_t digits = strlen(port);
    if (digits == 0 || digits > 5 || strspn(port, "0123456789") != digits)
        return 0;
    long number = strtol(port, NULL, 10);
    if (number > 65535)
        return 0;
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_port = htons((uint16_t)number);
    if (strcmp(host, "localhost") == 0)
        strcpy(host, "127.0.0.1");
    return inet_pton(AF_INET, host, &addr->sin_addr) == 1;
}
