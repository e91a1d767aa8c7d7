/* e2e_changelog - a scheduler whose database is lost loses no job. 600 jobs queue against a
 * binding token limit; a third of the way in the scheduler is killed with SIGKILL and its database
 * files are deleted (a copy is kept aside for this test's accounting only); a new scheduler starts
 * on an empty database and rebuilds the queue from the changelog topic. Asserts every job gets a
 * result, none conflicting, the restart restored the queued jobs, a record replayed into the
 * changelog (a finished job's) and one forged there were refused, the simulator refused nothing
 * (the rebuilt buckets start as if just used), and the only provider calls made twice are of
 * jobs that had been dispatched before the kill and whose end the changelog did not yet have. */
#include <jansson.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hmap.h"
#include "sign.h"
#include "util.h"

enum { JOBS = 600, MINUTE_MS = 3000, TPM = 30000 };

static const char *write_configs(int sim_port, char **sim_cfg, char **db)
{
    const char *dir = h_tmpdir();
    char hex[3][65];
    for (int t = 0; t < 3; t++) {
        char key[64];
        snprintf(key, sizeof key, "sk-e2e-changelog-key-%d", t);
        h_key_hash_hex(key, hex[t]);
    }
    static char dbpath[512];
    snprintf(dbpath, sizeof dbpath, "%s/sluice.db", dir);
    *db = dbpath;
    char sim[1024];
    snprintf(sim, sizeof sim,
             "{\"minute_ms\": %d, \"deployments\": [{\"name\": \"sim-a\", \"rpm\": 100000,"
             " \"tpm\": %d, \"slices_per_minute\": 10, \"ttft_ms\": 150, \"ms_per_token\": 1,"
             " \"output_min\": 20, \"output_max\": 80}]}",
             MINUTE_MS, TPM);
    *sim_cfg = strdup(h_write("sim.json", sim));
    char *keyfile = strdup(h_write("provider.key", "any-bearer-token\n"));
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"minute_ms\": %d, \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s\", \"lease_ms\": 3000, \"max_attempts\": 10},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": [{\"name\": \"sim-a\","
             "   \"base_url\": \"http://127.0.0.1:%d/sim-a/v1\", \"model\": \"m\","
             "   \"api_key_file\": \"%s\", \"limits\": {\"rpm\": 100000, \"tpm\": %d},"
             "   \"slices_per_minute\": 10, \"timeout_ms\": 2000, \"idempotent\": true}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"sim-a\"]}],"
             " \"tenants\": [{\"name\": \"alpha\"}, {\"name\": \"beta\"}, {\"name\": \"gamma\"}],"
             " \"keys\": [{\"id\": \"k0\", \"tenant\": \"alpha\", \"hash\": \"%s\"},"
             "          {\"id\": \"k1\", \"tenant\": \"beta\", \"hash\": \"%s\"},"
             "          {\"id\": \"k2\", \"tenant\": \"gamma\", \"hash\": \"%s\"}]}",
             MINUTE_MS, dir, dbpath, dir, dir, sim_port, keyfile, TPM, hex[0], hex[1], hex[2]);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

/* The jobs the killed scheduler had dispatched at least once (its database's copy). */
static sl_hmap_t *dispatched_jobs(const char *db)
{
    sl_hmap_t *ids = sl_hmap_new();
    sqlite3 *h = NULL;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(h);
        return ids;
    }
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, "SELECT job_id FROM jobs WHERE first_dispatch_ms IS NOT NULL", -1,
                           &st, NULL) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW)
            sl_hmap_put(ids, (const char *)sqlite3_column_text(st, 0), (void *)1);
    }
    sqlite3_finalize(st);
    sqlite3_close(h);
    return ids;
}

typedef struct {
    sl_hmap_t *ended;
    int n;
} count_t;

static void count_not_ended(const char *id, void *value, void *arg)
{
    (void)value;
    count_t *c = arg;
    c->n += sl_hmap_get(c->ended, id) == NULL;
}

/* What the changelog said at the kill, read back from its start: the job ids with an end record
 * written before before_us (a record's seq is its writer's clock in microseconds, or just above
 * the seq before it), and how many jobs had a job record then and no end record. A record whose
 * seq is not above the one before it in its partition is a copy put back (this test puts one
 * there) and is skipped, as a restore skips it. */
static sl_hmap_t *ended_jobs(const char *bootstrap, int64_t before_us, int *records, int *live)
{
    sl_hmap_t *ids = sl_hmap_new(), *jobs = sl_hmap_new();
    rd_kafka_t *cons = h_consumer_from_start(bootstrap, "sluice.changelog");
    int64_t last[256] = {0};
    *records = 0;
    for (;;) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(cons, 1500);
        if (m == NULL)
            break;
        json_t *doc = m->err ? NULL : json_loadb(m->payload, m->len, 0, NULL);
        int p = m->partition >= 0 && m->partition < 256 ? m->partition : 0;
        int64_t seq = json_integer_value(json_object_get(doc, "seq"));
        const char *t = json_string_value(json_object_get(doc, "t"));
        const char *job_id =
            json_string_value(json_object_get(json_object_get(doc, "job"), "job_id"));
        /* The forged record is refused for its MAC (it claims a seq ahead of the clock, so a
         * reader that took it would skip the records after it). */
        int forged = job_id != NULL && strncmp(job_id, "forged", 6) == 0;
        if (doc != NULL && !forged && seq > last[p]) {
            last[p] = seq;
            (*records)++;
            const char *end_id = json_string_value(json_object_get(doc, "id"));
            if (t != NULL && strcmp(t, "end") == 0 && end_id != NULL && seq < before_us)
                sl_hmap_put(ids, end_id, (void *)1);
            if (t != NULL && strcmp(t, "job") == 0 && job_id != NULL && seq < before_us)
                sl_hmap_put(jobs, job_id, (void *)1);
        }
        json_decref(doc);
        rd_kafka_message_destroy(m);
    }
    count_t c = {ids, 0};
    sl_hmap_each(jobs, count_not_ended, &c);
    *live = c.n;
    sl_hmap_free(jobs);
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    return ids;
}


/* From the restore's line in the scheduler's log ("new database: N unfinished jobs restored
 * from the changelog ... in T ms (R records refused ..."): N and R, each -1 when not found. */
static void restore_figures(long *restored, long *refused)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/scheduler.log", h_tmpdir());
    FILE *f = fopen(path, "r");
    *restored = *refused = -1;
    char line[8192];
    static const char head[] = "\"msg\":\"new database: ";
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        const char *p = strstr(line, head);
        const char *ms = p != NULL ? strstr(p, "restored from the changelog") : NULL;
        ms = ms != NULL ? strstr(ms, " ms (") : NULL;
        if (ms != NULL) {
            *restored = strtol(p + strlen(head), NULL, 10);
            *refused = strtol(ms + 5, NULL, 10);
        }
    }
    if (f != NULL)
        fclose(f);
}

/* Writes into the changelog what someone with write access but no scheduler key could: a copy
 * of the job record of a finished job (its MAC intact: a replay), and that record with its job
 * id changed (a forgery under the copied MAC). Their ids go to replayed_id and forged_id. */
static void inject(const char *bootstrap, rd_kafka_t *prod, sl_hmap_t *finished,
                   char *replayed_id, char *forged_id, size_t cap)
{
    rd_kafka_t *cons = h_consumer_from_start(bootstrap, "sluice.changelog");
    replayed_id[0] = forged_id[0] = '\0';
    double until = sl_mono_ms() + 20000;
    while (replayed_id[0] == '\0' && sl_mono_ms() < until) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(cons, 500);
        if (m == NULL)
            continue;
        json_t *doc = m->err ? NULL : json_loadb(m->payload, m->len, 0, NULL);
        json_t *job = json_object_get(doc, "job");
        const char *id = json_string_value(json_object_get(job, "job_id"));
        rd_kafka_headers_t *hdrs = NULL;
        if (id != NULL && sl_hmap_get(finished, id) != NULL && m->key_len > 0 && m->key_len < 64 &&
            rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
            char key[64];
            memcpy(key, m->key, m->key_len);
            key[m->key_len] = '\0';
            snprintf(replayed_id, cap, "%s", id);
            h_produce_headers(prod, "sluice.changelog", key, m->payload, m->len,
                              rd_kafka_headers_copy(hdrs));
            snprintf(forged_id, cap, "forged%s", id + 6);
            json_object_set_new(job, "job_id", json_string(forged_id));
            json_object_set_new(doc, "id", json_string(forged_id));
            json_object_set_new(doc, "seq", json_integer(sl_now_ms() * 1000 + 999999));
            char *text = json_dumps(doc, JSON_COMPACT);
            h_produce_headers(prod, "sluice.changelog", key, text, strlen(text),
                              rd_kafka_headers_copy(hdrs));
            free(text);
        }
        json_decref(doc);
        rd_kafka_message_destroy(m);
    }
    rd_kafka_flush(prod, 10000);
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
}

int main(void)
{
    sl_crypto_init();
    printf("e2e changelog: %d jobs; SIGKILL the scheduler and delete its database mid-run\n",
           JOBS);
    int sim_port = h_free_port();
    char *sim_cfg = NULL, *db = NULL;
    const char *cfg = write_configs(sim_port, &sim_cfg, &db);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);

    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(st.bootstrap, "sluice.results");
    for (int i = 0; i < JOBS; i++) {
        char idem[32], key[64];
        snprintf(idem, sizeof idem, "changelog-%05d", i);
        snprintf(key, sizeof key, "sk-e2e-changelog-key-%d", i % 3);
        h_request_fact(prod, idem, key, i, 100);
    }
    rd_kafka_flush(prod, 30000);

    h_results_t res;
    h_results_init(&res);
    int done = 0, killed = 0, done_at_kill = 0;
    int injected = 0;
    int64_t kill_us = 0;
    char replayed_id[128] = "", forged_id[128] = "";
    sl_hmap_t *twice = sl_hmap_new();
    char kept[4200];
    snprintf(kept, sizeof kept, "%s/killed.db", h_tmpdir());
    double deadline = sl_mono_ms() + 240000;
    while (done < JOBS && sl_mono_ms() < deadline) {
        if (!injected && done >= JOBS / 4) {
            inject(st.bootstrap, prod, res.seen, replayed_id, forged_id, sizeof replayed_id);
            injected = 1;
        }
        if (!killed && done >= JOBS / 3) {
            h_stop(st.sched, SIGKILL, 5000);
            kill_us = sl_now_ms() * 1000;
            done_at_kill = done;
            /* Kept aside only to count what the killed scheduler had dispatched. */
            const char *suffix[] = {"", "-wal", "-shm", ".lock"};
            for (int i = 0; i < 4; i++) {
                char from[4200], to[4300];
                snprintf(from, sizeof from, "%s%s", db, suffix[i]);
                snprintf(to, sizeof to, "%s%s", kept, suffix[i]);
                if (i < 2)
                    h_copy_file(from, to); /* a -wal that is not there is not copied */
                unlink(from);
            }
            printf("  scheduler killed at %d/%d results; its database deleted\n", done, JOBS);
            st.sched = h_spawn("sluice-scheduler", "scheduler", cfg, NULL);
            killed = 1;
        }
        json_t *r = NULL;
        if (!h_poll_json(cons, 200, &r))
            continue;
        const char *id = json_string_value(json_object_get(r, "job_id"));
        if (!h_results_take(&res, r) && id != NULL)
            sl_hmap_put(twice, id, (void *)1);
        done = res.done;
        json_decref(r);
    }
    json_t *stats = h_http_json(st.stats_url);
    long restored = -1, refused_records = -1;
    restore_figures(&restored, &refused_records);
    h_check(killed, "the scheduler was killed and its database deleted");
    h_check(done == JOBS, "no job lost: %d/%d have a result", done, JOBS);
    h_check(res.ok == JOBS, "every job succeeded (%d of %d)", res.ok, JOBS);
    h_check(res.conflicting == 0, "no job has conflicting results (%d)", res.conflicting);
    int records = 0, live_at_kill = 0;
    sl_hmap_t *ended = ended_jobs(st.bootstrap, kill_us, &records, &live_at_kill);
    /* Every job had been taken in long before the kill, so each one without a result was in the
     * changelog (a few more too: their result was out, its end record not yet written). */
    h_check(restored == live_at_kill && restored >= JOBS - done_at_kill - 100,
            "the new scheduler restored the jobs the changelog had unfinished at the kill (%ld of "
            "%d; about %d had no result then)",
            restored, live_at_kill, JOBS - done_at_kill);
    printf("  duplicate result deliveries (at-least-once, same status): %d\n", res.duplicates);
    h_check(replayed_id[0] != '\0' && forged_id[0] != '\0' && refused_records >= 2,
            "the replayed and the forged changelog record were refused (%ld records refused)",
            refused_records);
    h_check(sl_hmap_get(res.seen, forged_id) == NULL, "the forged job %s never ran", forged_id);
    h_check(sl_hmap_get(twice, replayed_id) == NULL,
            "the finished job whose record was replayed (%s) did not run again", replayed_id);
    int64_t refused = h_sim_total(stats, "refused");
    h_check(stats != NULL && refused == 0, "the simulator refused zero requests (%lld)",
            (long long)refused);
    sl_hmap_t *dispatched = dispatched_jobs(kept);
    count_t c = {ended, 0};
    sl_hmap_each(dispatched, count_not_ended, &c);
    /* A call made twice is either answered from the simulator's idempotency memory (replayed)
     * or, when the first was still running, admitted a second time. */
    int64_t replayed = h_sim_total(stats, "replayed") + h_sim_total(stats, "admitted") - JOBS;
    printf("  changelog: %d records; %zu jobs dispatched before the kill, %d of them without an "
           "end record\n",
           records, sl_hmap_len(dispatched), c.n);
    h_check(sl_hmap_len(dispatched) > 0 && records > JOBS,
            "the accounting saw the killed scheduler's dispatches and the changelog");
    h_check(stats != NULL && replayed <= c.n,
            "calls made twice (%lld) are only of jobs dispatched before the kill and not ended "
            "in the changelog (%d)",
            (long long)replayed, c.n);
    sl_hmap_free(ended);
    sl_hmap_free(dispatched);
    json_decref(stats);
    rd_kafka_destroy(prod);
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    int unclean = h_stack_down(&st);
    h_check(unclean == 0, "every process stopped cleanly on SIGTERM (%d did not)", unclean);
    int64_t open_jobs = h_sql_count(db, "SELECT COUNT(*) FROM jobs WHERE state <> 'done'");
    h_check(open_jobs == 0, "no job left unfinished in the new store (%lld)",
            (long long)open_jobs);
    h_results_free(&res);
    sl_hmap_free(twice);
    free(sim_cfg);
    free((char *)cfg);
    int rc = h_summary("changelog");
    h_cleanup(rc != 0);
    return rc;
}
