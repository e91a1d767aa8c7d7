/* e2e_log_flood - floods of repeated bad input do not grow the logs with them, over the real
 * stack: 30,000 unsigned dispatch messages and 30,000 cancels of unknown jobs (signed with
 * ingest's key, so that the scheduler reads them).
 *
 * Asserts:
 *   - the dispatcher refuses all 30,000 forged dispatches (its refused counter) but logs at most
 *     a few lines for them, and those lines account for every one ("(and N more like it ...)",
 *     "(N more like it ...)");
 *   - the scheduler logs at most a few lines for the 30,000 cancels of unknown jobs, and they
 *     account for every one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "sign.h"
#include "util.h"

enum { FLOOD = 30000, MAX_LINES = 4, CANCEL_KEYS = 8 };

static const char *write_configs(int sim_port, int metrics_port, int admin_port, char **sim_cfg)
{
    const char *dir = h_tmpdir();
    char hk[65];
    h_key_hash_hex("sk-e2e-flood-1", hk);
    *sim_cfg = strdup(h_write("sim.json", "{\"deployments\": [{\"name\": \"sim\", \"rpm\": 600,"
                                          " \"api_key\": \"e2e-provider-key\"}]}"));
    char *keyfile = strdup(h_write("provider.key", "e2e-provider-key\n"));
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s/sluice.db\", \"admin_listen\": \"127.0.0.1:%d\","
             "                 \"metrics_listen\": \"127.0.0.1:0\"},"
             " \"ingest\": {\"metrics_listen\": \"127.0.0.1:0\"},"
             " \"dispatcher\": {\"metrics_listen\": \"127.0.0.1:%d\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": [{\"name\": \"sim\", \"model\": \"m\", \"api_key_file\": \"%s\","
             "   \"base_url\": \"http://127.0.0.1:%d/sim/v1\", \"limits\": {\"rpm\": 600}}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"sim\"]}],"
             " \"tenants\": [{\"name\": \"t1\", \"tokens_per_min\": 1000000}],"
             " \"keys\": [{\"id\": \"k1\", \"tenant\": \"t1\", \"hash\": \"%s\"}]}",
             dir, dir, admin_port, metrics_port, dir, dir, keyfile, sim_port, hk);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

/* Counts the lines of <tmpdir>/<logname>.log holding text, and the occurrences they stand for:
 * one each, plus the N of "(and N more like it". */
static long count_log(const char *logname, const char *text, long *occurrences)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s.log", h_tmpdir(), logname);
    FILE *f = fopen(path, "r");
    long lines = 0;
    *occurrences = 0;
    if (f == NULL)
        return 0;
    char line[8192];
    while (fgets(line, sizeof line, f) != NULL) {
        if (strstr(line, text) == NULL)
            continue;
        lines++;
        /* "(and N more like it" is this one and N more; "(N more like it" a summary of N. */
        const char *more = strstr(line, " more like it in the last ");
        long n = 1;
        if (more != NULL) {
            const char *p = more;
            while (p > line && ((p[-1] >= '0' && p[-1] <= '9') || p[-1] == ','))
                p--;
            long held = 0;
            for (; p < more; p++) {
                if (*p != ',')
                    held = held * 10 + (*p - '0');
            }
            n = strstr(line, "(and ") != NULL ? 1 + held : held;
        }
        *occurrences += n;
    }
    fclose(f);
    return lines;
}

/* The dispatcher's refused counter from its /metrics; -1 when it cannot be read. */
static long refused_total(const char *metrics_url)
{
    char *text = h_http_text(metrics_url);
    if (text == NULL)
        return -1;
    const char *p = strstr(text, "\nsluice_dispatcher_dispatches_refused_total ");
    long n = p != NULL ? atol(p + strlen("\nsluice_dispatcher_dispatches_refused_total ")) : 0;
    free(text);
    return n;
}

int main(void)
{
    sl_crypto_init();
    printf("e2e log_flood: %d forged dispatches and %d unknown cancels, a few log lines\n", FLOOD,
           FLOOD);
    int sim_port = h_free_port();
    int metrics_port = h_free_port();
    int admin_port = h_free_port();
    char *sim_cfg = NULL;
    const char *cfg = write_configs(sim_port, metrics_port, admin_port, &sim_cfg);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    char metrics_url[64];
    snprintf(metrics_url, sizeof metrics_url, "http://127.0.0.1:%d/metrics", metrics_port);
    for (int i = 0; i < 200 && refused_total(metrics_url) < 0; i++)
        usleep(100 * 1000);

    rd_kafka_t *prod = h_producer(st.bootstrap);
    char msg[512];
    for (int i = 0; i < FLOOD; i++) {
        int len = snprintf(msg, sizeof msg,
                           "{\"v\": 1, \"job_id\": \"forged-%d\", \"deployment\": \"sim\"}", i);
        h_produce(prod, "sluice.dispatch", NULL, msg, (size_t)len);
        len = snprintf(msg, sizeof msg,
                       "{\"v\": 1, \"type\": \"cancel\", \"job_id\": \"nojob-%d\","
                       " \"idempotency_key\": \"c-%d\", \"tenant\": \"t1\","
                       " \"requested_ms\": 1}",
                       i, i);
        /* Signed by ingest's key: a cancel that gets past the signature check. Spread over
         * CANCEL_KEYS keys (so partitions): 30,000 signed cancels on one partition are about
         * 10 MB, past what the dev broker keeps of a partition (about 5 MB), and it dropped
         * the oldest 2,500 before the scheduler read them. */
        char key[16];
        snprintf(key, sizeof key, "t1-%d", i % CANCEL_KEYS);
        h_produce_as(prod, "ingest", "sluice.jobs", key, msg, (size_t)len);
    }
    rd_kafka_flush(prod, 60000);
    rd_kafka_destroy(prod);

    double deadline = sl_mono_ms() + 60000;
    long refused = 0;
    while ((refused = refused_total(metrics_url)) < FLOOD && sl_mono_ms() < deadline)
        usleep(200 * 1000);
    h_check(refused == FLOOD, "the dispatcher refused all %d forged dispatches (%ld)", FLOOD,
            refused);
    /* Held counts come out within one interval (10 s) plus a flush (1 s). */
    long forged_seen = 0, cancels_seen = 0, forged_lines = 0, cancel_lines = 0;
    deadline = sl_mono_ms() + 30000;
    while (sl_mono_ms() < deadline) {
        forged_lines =
            count_log("dispatcher", "refused an unsigned message on sluice.dispatch", &forged_seen);
        cancel_lines = count_log("scheduler", "not queued (unknown or finished)", &cancels_seen);
        if (forged_seen >= FLOOD && cancels_seen >= FLOOD)
            break;
        usleep(500 * 1000);
    }
    printf("  dispatcher: %ld lines for %ld forged dispatches\n", forged_lines, forged_seen);
    printf("  scheduler: %ld lines for %ld unknown cancels\n", cancel_lines, cancels_seen);
    h_check(forged_lines >= 1 && forged_lines <= MAX_LINES && forged_seen == FLOOD,
            "forged dispatches: %ld lines (at most %d) accounting for %ld of %d", forged_lines,
            MAX_LINES, forged_seen, FLOOD);
    h_check(cancel_lines >= 1 && cancel_lines <= MAX_LINES && cancels_seen == FLOOD,
            "unknown cancels: %ld lines (at most %d) accounting for %ld of %d", cancel_lines,
            MAX_LINES, cancels_seen, FLOOD);

    int bad = h_stack_down(&st);
    h_check(bad == 0, "every process exited cleanly (%d did not)", bad);
    free(sim_cfg);
    free((char *)cfg);
    int status_code = h_summary("log_flood");
    h_cleanup(status_code != 0);
    return status_code;
}
