/* log.c - JSON-lines logger (see log.h). */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *log_component = "sluice";
static sl_log_level_t log_min = SL_LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void sl_log_init(const char *component, sl_log_level_t min_level)
{
    log_component = component;
    log_min = min_level;
}

int sl_log_level_parse(const char *name)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, level_names[i]) == 0)
            return i;
    }
    return -1;
}

/* Appends s to buf as JSON string content (without quotes); stops at cap. */
static size_t append_escaped(char *buf, size_t len, size_t cap, const char *s)
{
    for (; *s && len + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[len++] = '\\';
            buf[len++] = (char)c;
        } else if (c < 0x20) {
            len += (size_t)snprintf(buf + len, cap - len, "\\u%04x", c);
        } else {
            buf[len++] = (char)c;
        }
    }
    return len;
}

static void vlog(sl_log_level_t level, const char *key, const char *val, const char *fmt,
                 va_list ap)
{
    if (level < log_min)
        return;
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);

    char line[4096];
    size_t cap = sizeof line - 32; /* room for the fixed tail pieces */
    size_t len = (size_t)snprintf(line, cap,
                                  "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\","
                                  "\"level\":\"%s\",\"component\":\"%s\",",
                                  tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                                  tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, level_names[level],
                                  log_component);
    if (key != NULL && val != NULL && len < cap) {
        line[len++] = '"';
        len = append_escaped(line, len, cap, key);
        memcpy(line + len, "\":\"", 3);
        len += 3;
        len = append_escaped(line, len, cap, val);
        memcpy(line + len, "\",", 2);
        len += 2;
    }
    memcpy(line + len, "\"msg\":\"", 7);
    len += 7;
    len = append_escaped(line, len, cap, msg);
    memcpy(line + len, "\"}\n", 3);
    len += 3;
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

void sl_log(sl_log_level_t level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(level, NULL, NULL, fmt, ap);
    va_end(ap);
}

void sl_logf(sl_log_level_t level, const char *key, const char *val, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(level, key, val, fmt, ap);
    va_end(ap);
}

/* ---- rate-limited call sites ---- */

/* The sites that flush can reach; a site beyond this still limits, its last count rides on its
 * next line instead. */
#define SL_LOG_LIMIT_SITES 64

static pthread_mutex_t limit_lock = PTHREAD_MUTEX_INITIALIZER;
static sl_log_limit_t *limit_sites[SL_LOG_LIMIT_SITES];
static int limit_nsites;

static int64_t default_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t (*limit_now_ms)(void) = default_now_ms;

void sl_log_set_clock(int64_t (*now_ms)(void))
{
    limit_now_ms = now_ms != NULL ? now_ms : default_now_ms;
}

/* Writes n with thousands separators ("29,999"). */
static void format_count(char *buf, size_t cap, uint64_t n)
{
    char digits[32];
    int nd = snprintf(digits, sizeof digits, "%llu", (unsigned long long)n);
    size_t len = 0;
    for (int i = 0; i < nd && len + 2 < cap; i++) {
        if (i > 0 && (nd - i) % 3 == 0)
            buf[len++] = ',';
        buf[len++] = digits[i];
    }
    buf[len] = '\0';
}

/* Formats the held-back tail: " (and N more like it in the last X s)" on a line that is itself
 * an occurrence (also_this), " (N more like it in the last X s)" on a summary that is not. */
static void format_held(char *buf, size_t cap, int also_this, uint64_t held, int64_t span_ms)
{
    char count[40];
    format_count(count, sizeof count, held);
    int64_t span_s = (span_ms + 500) / 1000;
    snprintf(buf, cap, " (%s%s more like it in the last %lld s)", also_this ? "and " : "", count,
             (long long)(span_s > 0 ? span_s : 1));
}

/* Copies src (NULL reads as "") into dst, cut to cap - 1 bytes. */
static void copy_truncated(char *dst, size_t cap, const char *src)
{
    size_t n = src != NULL ? strnlen(src, cap - 1) : 0;
    if (n > 0)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Emits text as the line's message, with the extra field when key is set. */
static void log_text(sl_log_level_t level, const char *key, const char *val, const char *text)
{
    int has_key = key != NULL && key[0] != '\0' && val != NULL;
    sl_logf(level, has_key ? key : NULL, has_key ? val : NULL, "%s", text);
}

void sl_log_limited(sl_log_limit_t *lim, int64_t interval_ms, sl_log_level_t level, const char *key,
                    const char *val, const char *fmt, ...)
{
    if (level < log_min)
        return;
    int64_t now = limit_now_ms();
    pthread_mutex_lock(&limit_lock);
    if (!lim->lim_registered) {
        lim->lim_registered = 1;
        lim->lim_next_ms = now; /* the first occurrence is always printed */
        if (limit_nsites < SL_LOG_LIMIT_SITES)
            limit_sites[limit_nsites++] = lim;
    }
    if (now < lim->lim_next_ms) {
        lim->lim_held++;
        pthread_mutex_unlock(&limit_lock);
        return;
    }
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char tail[96] = "";
    if (lim->lim_held > 0)
        format_held(tail, sizeof tail, 1 /*also this*/, lim->lim_held, now - lim->lim_since_ms);
    lim->lim_held = 0;
    lim->lim_since_ms = now;
    lim->lim_next_ms = now + interval_ms;
    lim->lim_interval_ms = interval_ms;
    lim->lim_level = level;
    copy_truncated(lim->lim_key, sizeof lim->lim_key, key);
    copy_truncated(lim->lim_val, sizeof lim->lim_val, val);
    copy_truncated(lim->lim_msg, sizeof lim->lim_msg, msg);
    pthread_mutex_unlock(&limit_lock);

    char line[2048 + sizeof tail];
    snprintf(line, sizeof line, "%s%s", msg, tail);
    log_text(level, key, val, line);
}

void sl_log_flush_limited(void)
{
    int64_t now = limit_now_ms();
    pthread_mutex_lock(&limit_lock);
    for (int i = 0; i < limit_nsites; i++) {
        sl_log_limit_t *lim = limit_sites[i];
        if (lim->lim_held == 0 || now < lim->lim_next_ms)
            continue;
        char tail[96];
        format_held(tail, sizeof tail, 0 /*a summary only*/, lim->lim_held,
                    now - lim->lim_since_ms);
        char line[SL_LOG_LIMIT_MSG + sizeof tail];
        snprintf(line, sizeof line, "%s%s", lim->lim_msg, tail);
        /* This summary is the interval's one line: later occurrences are counted until the
         * next interval ends. */
        lim->lim_held = 0;
        lim->lim_since_ms = now;
        lim->lim_next_ms = now + lim->lim_interval_ms;
        log_text(lim->lim_level, lim->lim_key, lim->lim_val, line);
    }
    pthread_mutex_unlock(&limit_lock);
}

void sl_log_reset_limited(void)
{
    pthread_mutex_lock(&limit_lock);
    for (int i = 0; i < limit_nsites; i++)
        memset(limit_sites[i], 0, sizeof *limit_sites[i]);
    limit_nsites = 0;
    pthread_mutex_unlock(&limit_lock);
}
