/* e2e_admin_slow - the scheduler's admin API stays answerable while clients hold connections
 * open without sending anything (half-open or slow clients), over the real stack.
 *
 * Asserts:
 *   - 200 idle TCP connections, 20 from each of the ten source addresses 127.0.0.10 - .19 (each
 *     address under the server's per-address limit, so the server holds all 200 rather than
 *     closing most of them at once), are all still open when an admin request from another
 *     client (source 127.0.0.2) is answered 200 in under 1 s;
 *   - the idle connections are closed by the server after its few-second timeout, and then a
 *     request from one of their addresses is answered 200 in under 1 s.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "sign.h"
#include "util.h"

enum {
    IDLE_CONNECTIONS = 200,
    IDLE_ADDRESSES = 10, /* 127.0.0.10 and on: 20 connections each */
    ANSWER_WITHIN_MS = 1000,
    SERVER_TIMEOUT_WAIT_MS = 7000
};

static const char *const ADMIN_KEY = "admin-e2e-secret";

static const char *write_configs(int sim_port, int admin_port, char **sim_cfg)
{
    const char *dir = h_tmpdir();
    char hk[65], ha[65];
    h_key_hash_hex("sk-e2e-slow-1", hk);
    h_key_hash_hex(ADMIN_KEY, ha);
    *sim_cfg = strdup(h_write("sim.json", "{\"deployments\": [{\"name\": \"sim\", \"rpm\": 600,"
                                          " \"api_key\": \"e2e-provider-key\"}]}"));
    char *keyfile = strdup(h_write("provider.key", "e2e-provider-key\n"));
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s/sluice.db\", \"admin_listen\": \"127.0.0.1:%d\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": [{\"name\": \"sim\", \"model\": \"m\", \"api_key_file\": \"%s\","
             "   \"base_url\": \"http://127.0.0.1:%d/sim/v1\", \"limits\": {\"rpm\": 600}}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"sim\"]}],"
             " \"tenants\": [{\"name\": \"t1\", \"tokens_per_min\": 1000000}],"
             " \"keys\": [{\"id\": \"k1\", \"tenant\": \"t1\", \"hash\": \"%s\"}],"
             " \"admin_keys\": [{\"id\": \"ops\", \"hash\": \"%s\", \"role\": \"admin\"}]}",
             dir, dir, admin_port, dir, dir, keyfile, sim_port, hk, ha);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

static size_t discard(char *data, size_t size, size_t n, void *arg)
{
    (void)data;
    (void)arg;
    return size * n;
}

/* GET /v1/status with the admin key from source address from; returns the HTTP status (0 when
 * none came within 10 s) and sets *took_ms. */
static long timed_status(int admin_port, const char *from, double *took_ms)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/status", admin_port);
    CURL *c = curl_easy_init();
    struct curl_slist *hdrs = curl_slist_append(NULL, "Authorization: Bearer admin-e2e-secret");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_INTERFACE, from);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    double t0 = h_wall_ms();
    CURLcode rc = curl_easy_perform(c);
    *took_ms = h_wall_ms() - t0;
    long status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    return status;
}

/* Opens a TCP connection to the admin port from source address 127.0.0.<from> and sends
 * nothing; -1 on failure. */
static int open_idle(int admin_port, int from)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in src;
    memset(&src, 0, sizeof src);
    src.sin_family = AF_INET;
    src.sin_addr.s_addr = htonl((INADDR_LOOPBACK & 0xffffff00u) | (uint32_t)from);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)admin_port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&src, sizeof src) != 0 ||
        connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* How many of the n connections the server has closed (a read sees the end), and how many it
 * still holds open (nothing to read yet). */
static void count_closed(const int *fds, int n, int *closed, int *open)
{
    *closed = *open = 0;
    for (int i = 0; i < n; i++) {
        char byte;
        if (fds[i] < 0)
            continue;
        ssize_t got = recv(fds[i], &byte, 1, MSG_DONTWAIT);
        if (got == 0)
            (*closed)++;
        else if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            (*open)++;
    }
}

int main(void)
{
    sl_crypto_init();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    printf("e2e admin_slow: %d idle connections do not stall the admin API\n", IDLE_CONNECTIONS);
    int sim_port = h_free_port();
    int admin_port = h_free_port();
    char *sim_cfg = NULL;
    const char *cfg = write_configs(sim_port, admin_port, &sim_cfg);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    double took = 0;
    double up_deadline = sl_mono_ms() + 20000;
    while (timed_status(admin_port, "127.0.0.1", &took) != 200 && sl_mono_ms() < up_deadline)
        usleep(100 * 1000);

    int fds[IDLE_CONNECTIONS];
    int opened = 0;
    for (int i = 0; i < IDLE_CONNECTIONS; i++) {
        fds[i] = open_idle(admin_port, 10 + i % IDLE_ADDRESSES);
        opened += fds[i] >= 0;
    }
    h_check(opened == IDLE_CONNECTIONS, "%d of %d idle connections opened from %d addresses",
            opened, IDLE_CONNECTIONS, IDLE_ADDRESSES);
    usleep(300 * 1000); /* let the server take them in */

    long status = timed_status(admin_port, "127.0.0.2", &took);
    int closed = 0, held = 0;
    count_closed(fds, IDLE_CONNECTIONS, &closed, &held);
    printf("  another client, with %d idle held open by the server: status %ld in %.0f ms\n", held,
           status, took);
    h_check(held == opened, "the server held every idle connection while it answered (%d of %d)",
            held, opened);
    h_check(status == 200 && took < ANSWER_WITHIN_MS,
            "another client is answered 200 in under %d ms (status %ld, %.0f ms)", ANSWER_WITHIN_MS,
            status, took);

    usleep(SERVER_TIMEOUT_WAIT_MS * 1000);
    count_closed(fds, IDLE_CONNECTIONS, &closed, &held);
    printf("  after %d ms: %d of %d idle connections closed by the server\n",
           SERVER_TIMEOUT_WAIT_MS, closed, opened);
    h_check(closed == opened, "the server closed every idle connection (%d of %d)", closed, opened);
    status = timed_status(admin_port, "127.0.0.10", &took);
    printf("  an idle client's address afterwards: status %ld in %.0f ms\n", status, took);
    h_check(status == 200 && took < ANSWER_WITHIN_MS,
            "the same address is answered 200 in under %d ms afterwards (status %ld, %.0f ms)",
            ANSWER_WITHIN_MS, status, took);
    for (int i = 0; i < IDLE_CONNECTIONS; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
    }

    int bad = h_stack_down(&st);
    h_check(bad == 0, "every process exited cleanly (%d did not)", bad);
    free(sim_cfg);
    free((char *)cfg);
    curl_global_cleanup();
    int status_code = h_summary("admin_slow");
    h_cleanup(status_code != 0);
    return status_code;
}
