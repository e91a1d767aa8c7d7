/* e2e_pipeline - the whole pipeline over real processes and TCP: 2,000 jobs from 3 tenants,
 * mixed with one of each kind of bad input, against two simulated deployments whose token limits
 * are the bottleneck (minutes shortened to 3 s). Asserts: every job has exactly one terminal
 * result, good jobs succeed, each bad input is rejected with its reason, the simulator refused
 * nothing, throughput after warm-up is >= 90 % of the binding limit, no reservation or job is
 * left open, and the daemons' /metrics pass promtool and carry the consumer lag (back to 0 once
 * everything is consumed) and the dispatcher's provider latency histograms (one observation per
 * call the simulator answered). Last, input lost on the broker is said: with the scheduler
 * stopped, 6 MB more on its jobs partition make the dev broker drop the messages up to the
 * scheduler's committed offset (it keeps about 5 MB a partition), and the restarted scheduler
 * must log that and count it in sluice_kafka_input_lost_total. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "hmap.h"
#include "sign.h"
#include "util.h"

enum { GOOD_JOBS = 2000, MINUTE_MS = 3000, TPM_A = 40000, TPM_B = 20000 };

/* The daemons' metrics URLs: free ports of this run, so that another stack on the machine (a
 * developer's, or a benchmark's on the default ports) is never scraped by mistake. */
static char ingest_url[64], sched_url[64], disp_url[64];

static const char *write_configs(int sim_port, char **sim_cfg, char **db)
{
    int pi = h_free_port(), ps = h_free_port(), pd = h_free_port();
    snprintf(ingest_url, sizeof ingest_url, "http://127.0.0.1:%d/metrics", pi);
    snprintf(sched_url, sizeof sched_url, "http://127.0.0.1:%d/metrics", ps);
    snprintf(disp_url, sizeof disp_url, "http://127.0.0.1:%d/metrics", pd);
    const char *dir = h_tmpdir();
    char h1[65], h2[65], h3[65];
    h_key_hash_hex("sk-e2e-tenant-one", h1);
    h_key_hash_hex("sk-e2e-tenant-two", h2);
    h_key_hash_hex("sk-e2e-tenant-three", h3);
    static char dbpath[512];
    snprintf(dbpath, sizeof dbpath, "%s/sluice.db", dir);
    *db = dbpath;
    char sim[2048];
    snprintf(sim, sizeof sim,
             "{\"minute_ms\": %d, \"deployments\": ["
             "{\"name\": \"sim-a\", \"model\": \"gpt-4o-mini\", \"rpm\": 60000, \"tpm\": %d,"
             " \"slices_per_minute\": 10, \"ttft_ms\": 20, \"ms_per_token\": 0.2,"
             " \"output_min\": 20, \"output_max\": 90, \"api_key\": \"e2e-provider-key\"},"
             "{\"name\": \"sim-b\", \"model\": \"gpt-4o-mini\", \"rpm\": 60000, \"tpm\": %d,"
             " \"slices_per_minute\": 10, \"ttft_ms\": 20, \"ms_per_token\": 0.2,"
             " \"output_min\": 20, \"output_max\": 90, \"api_key\": \"e2e-provider-key\"}]}",
             MINUTE_MS, TPM_A, TPM_B);
    *sim_cfg = strdup(h_write("sim.json", sim));
    char *keyfile = strdup(h_write("provider.key", "e2e-provider-key\n"));
    char cfg[8192];
    snprintf(cfg, sizeof cfg,
             "{\"minute_ms\": %d,"
             " \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"ingest\": {\"max_request_bytes\": 65536,"
             "   \"metrics_listen\": \"127.0.0.1:%d\"},"
             " \"dispatcher\": {\"metrics_listen\": \"127.0.0.1:%d\"},"
             " \"scheduler\": {\"db\": \"%s\", \"lease_ms\": 20000, \"max_attempts\": 5,"
             "   \"metrics_listen\": \"127.0.0.1:%d\", \"admin_listen\": \"\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": ["
             "  {\"name\": \"sim-a\", \"base_url\": \"http://127.0.0.1:%d/sim-a/v1\","
             "   \"model\": \"gpt-4o-mini\", \"api_key_file\": \"%s\","
             "   \"limits\": {\"rpm\": 60000, \"tpm\": %d}, \"slices_per_minute\": 10,"
             "   \"max_output_tokens\": 4096},"
             "  {\"name\": \"sim-b\", \"base_url\": \"http://127.0.0.1:%d/sim-b/v1\","
             "   \"model\": \"gpt-4o-mini\", \"api_key_file\": \"%s\","
             "   \"limits\": {\"rpm\": 60000, \"tpm\": %d}, \"slices_per_minute\": 10,"
             "   \"max_output_tokens\": 4096}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"sim-a\", \"sim-b\"],"
             "               \"default_max_tokens\": 100},"
             "             {\"name\": \"premium\", \"deployments\": [\"sim-a\"]}],"
             " \"tenants\": [{\"name\": \"t1\"}, {\"name\": \"t2\"},"
             "               {\"name\": \"t3\", \"routes\": [\"chat\"]}],"
             " \"keys\": [{\"id\": \"k1\", \"tenant\": \"t1\", \"hash\": \"%s\"},"
             "          {\"id\": \"k2\", \"tenant\": \"t2\", \"hash\": \"%s\"},"
             "          {\"id\": \"k3\", \"tenant\": \"t3\", \"hash\": \"%s\"}]}",
             MINUTE_MS, dir, pi, pd, dbpath, ps, dir, dir, sim_port, keyfile, TPM_A, sim_port,
             keyfile, TPM_B, h1, h2, h3);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

/* Stops the scheduler, pushes the messages it had read off the dev broker (6 MB of junk on the
 * partition of tenant t1's jobs, past the broker's ~5 MB), starts it again and checks that it
 * says its committed offset was gone. The junk that stays is refused as unsigned. */
static void lose_input(h_stack_t *st, rd_kafka_t *prod, const char *cfg)
{
    h_check(h_stop(st->sched, SIGTERM, 10000) == 0,
            "the scheduler stopped for the retention check");
    enum { JUNK = 100 * 1024, JUNK_MESSAGES = 60 };
    char *junk = malloc(JUNK);
    if (junk == NULL)
        exit(2);
    memset(junk, 'x', JUNK);
    for (int i = 0; i < JUNK_MESSAGES; i++)
        h_produce(prod, "sluice.jobs", "t1", junk, JUNK);
    free(junk);
    rd_kafka_flush(prod, 10000);
    st->sched = h_spawn("sluice-scheduler", "scheduler", cfg, NULL);
    double lost = 0;
    for (double until = h_wall_ms() + 20000; lost < 1 && h_wall_ms() < until;) {
        usleep(200 * 1000);
        char *text = h_http_text(sched_url);
        if (text != NULL)
            lost = h_metrics_sample(text, "sluice_kafka_input_lost_total{topic=\"sluice.jobs\"}");
        free(text);
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/scheduler.log", h_tmpdir());
    char *log = NULL;
    int said = sl_read_file(path, 64 << 20, &log, NULL) == SL_OK &&
               strstr(log, "input lost on the broker: sluice.jobs [") != NULL;
    free(log);
    h_check(lost == 1 && said,
            "jobs the broker deleted unread are counted (sluice_kafka_input_lost_total %g) and "
            "logged as an error (%s)",
            lost, said ? "yes" : "no");
}

/* The highest value of series seen on url so far (to show lag while work is queued). */
typedef struct {
    const char *url, *series;
    double max;
} watch_t;

static void watch(watch_t *w)
{
    char *text = h_http_text(w->url);
    double v = h_metrics_sample(text, w->series);
    if (v > w->max)
        w->max = v;
    free(text);
}

static const char *const tenant_keys[3] = {"sk-e2e-tenant-one", "sk-e2e-tenant-two",
                                           "sk-e2e-tenant-three"};

/* One bad input: the message text, the idempotency key its result carries (NULL when the
 * rejection cannot know it) and the reason expected. */
typedef struct {
    const char *idem;
    const char *reason;
    char *text;
} bad_t;

static int make_bad_inputs(bad_t *bad)
{
    int n = 0;
    bad[n++] = (bad_t){NULL, "malformed_json", strdup("{\"api_key\": \"sk-e2e-tenant-one\", ")};
    bad[n++] = (bad_t){"bad-schema", "schema_violation",
                       strdup("{\"idempotency_key\": \"bad-schema\", \"api_key\": "
                              "\"sk-e2e-tenant-one\", \"route\": \"chat\", \"tenant\": \"t2\", "
                              "\"request\": {\"messages\": [{\"role\": \"user\", \"content\": "
                              "\"hi\"}]}}")};
    bad[n++] = (bad_t){"bad-key", "unknown_api_key",
                       strdup("{\"idempotency_key\": \"bad-key\", \"api_key\": "
                              "\"sk-nobody-at-all\", \"route\": \"chat\", \"request\": "
                              "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}}")};
    bad[n++] = (bad_t){"bad-route", "unknown_route",
                       strdup("{\"idempotency_key\": \"bad-route\", \"api_key\": "
                              "\"sk-e2e-tenant-two\", \"route\": \"nope\", \"request\": "
                              "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}}")};
    bad[n++] = (bad_t){"bad-allow", "route_not_allowed",
                       strdup("{\"idempotency_key\": \"bad-allow\", \"api_key\": "
                              "\"sk-e2e-tenant-three\", \"route\": \"premium\", \"request\": "
                              "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}}")};
    bad[n++] = (bad_t){"bad-large", "request_too_large",
                       strdup("{\"idempotency_key\": \"bad-large\", \"api_key\": "
                              "\"sk-e2e-tenant-one\", \"route\": \"chat\", \"request\": "
                              "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], "
                              "\"max_tokens\": 50000}}")};
    size_t big = 70000;
    char *payload = malloc(big + 256);
    int off = snprintf(payload, 256,
                       "{\"idempotency_key\": \"bad-payload\", \"api_key\": "
                       "\"sk-e2e-tenant-two\", \"route\": \"chat\", \"request\": {\"messages\": "
                       "[{\"role\": \"user\", \"content\": \"");
    memset(payload + off, 'x', big);
    strcpy(payload + off + big, "\"}]}}");
    bad[n++] = (bad_t){NULL, "payload_too_large", payload};
    return n;
}

int main(void)
{
    sl_crypto_init();
    printf("e2e pipeline: %d jobs from 3 tenants + bad inputs, token limits binding\n", GOOD_JOBS);
    int sim_port = h_free_port();
    char *sim_cfg = NULL, *db = NULL;
    const char *cfg = write_configs(sim_port, &sim_cfg, &db);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);

    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(st.bootstrap, "sluice.results");
    bad_t bad[16];
    int nbad = make_bad_inputs(bad);
    for (int i = 0; i < GOOD_JOBS; i++) {
        char req[1024], idem[32];
        snprintf(idem, sizeof idem, "job-%05d", i);
        int n = snprintf(req, sizeof req,
                         "{\"idempotency_key\": \"%s\", \"api_key\": \"%s\", \"route\": \"chat\","
                         " \"metadata\": {\"n\": %d}, \"request\": {\"messages\": ["
                         "{\"role\": \"user\", \"content\": \"Question number %d: what is the "
                         "capital of a country whose name has %d letters?\"}],"
                         " \"max_tokens\": 100}}",
                         idem, tenant_keys[i % 3], i, i, 4 + i % 7);
        h_produce(prod, "sluice.requests", idem, req, (size_t)n);
        if (i % 300 == 150 && i / 300 < nbad) {
            bad_t *b = &bad[i / 300];
            h_produce(prod, "sluice.requests", b->idem, b->text, strlen(b->text));
        }
    }
    for (int i = GOOD_JOBS / 300 + 1; i < nbad; i++)
        h_produce(prod, "sluice.requests", bad[i].idem, bad[i].text, strlen(bad[i].text));
    rd_kafka_flush(prod, 30000);
    double t_submitted = sl_mono_ms();
    printf("  submitted %d good and %d bad requests\n", GOOD_JOBS, nbad);

    sl_hmap_t *seen = sl_hmap_new(); /* job id -> status string (strdup) */
    int good_done = 0, good_ok = 0, duplicates = 0, conflicting = 0, bad_found = 0;
    int bad_ok[16] = {0};
    json_t *s1 = NULL, *s2 = NULL;
    /* The daemons export their lag once a second; sampling while the jobs run shows that it
     * rises under load (not asserted: how high depends on timing). */
    watch_t lag_seen[] = {
        {ingest_url, "sluice_kafka_consumer_lag{topic=\"sluice.requests\"}", -1},
        {disp_url, "sluice_kafka_consumer_lag{topic=\"sluice.dispatch\"}", -1},
    };
    double next_watch = 0;
    double deadline = sl_mono_ms() + 180000;
    while ((good_done < GOOD_JOBS || bad_found < nbad) && sl_mono_ms() < deadline) {
        if (sl_mono_ms() >= next_watch) {
            for (size_t i = 0; i < sizeof lag_seen / sizeof lag_seen[0]; i++)
                watch(&lag_seen[i]);
            next_watch = sl_mono_ms() + 250;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(cons, 200);
        if (m == NULL)
            continue;
        if (m->err) {
            rd_kafka_message_destroy(m);
            continue;
        }
        json_t *r = json_loadb(m->payload, m->len, 0, NULL);
        rd_kafka_message_destroy(m);
        const char *id = json_string_value(json_object_get(r, "job_id"));
        const char *idem = json_string_value(json_object_get(r, "idempotency_key"));
        const char *status = json_string_value(json_object_get(r, "status"));
        const char *reason =
            json_string_value(json_object_get(json_object_get(r, "error"), "reason"));
        if (id == NULL || status == NULL) {
            json_decref(r);
            continue;
        }
        char *prev = sl_hmap_get(seen, id);
        if (prev != NULL) {
            duplicates++;
            if (strcmp(prev, status) != 0)
                conflicting++;
            json_decref(r);
            continue;
        }
        sl_hmap_put(seen, id, strdup(status));
        if (idem != NULL && strncmp(idem, "job-", 4) == 0) {
            good_done++;
            if (strcmp(status, "succeeded") == 0)
                good_ok++;
            else
                printf("  job %s: %s %s\n", idem, status, reason ? reason : "");
            if (good_done == GOOD_JOBS / 5)
                s1 = h_http_json(st.stats_url);
            if (good_done == GOOD_JOBS * 4 / 5)
                s2 = h_http_json(st.stats_url);
        } else {
            for (int i = 0; i < nbad; i++) {
                int match = bad[i].idem != NULL
                                ? (idem != NULL && strcmp(idem, bad[i].idem) == 0)
                                : (reason != NULL && strcmp(reason, bad[i].reason) == 0);
                if (match && !bad_ok[i]) {
                    bad_ok[i] = strcmp(status, "rejected") == 0 && reason != NULL &&
                                        strcmp(reason, bad[i].reason) == 0
                                    ? 1
                                    : -1;
                    bad_found++;
                }
            }
        }
        json_decref(r);
    }
    double elapsed_s = (sl_mono_ms() - t_submitted) / 1000.0;
    /* Linger briefly: a duplicate result would arrive now. */
    double linger = sl_mono_ms() + 1500;
    while (sl_mono_ms() < linger) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(cons, 100);
        if (m == NULL)
            continue;
        json_t *r = m->err ? NULL : json_loadb(m->payload, m->len, 0, NULL);
        const char *id = json_string_value(json_object_get(r, "job_id"));
        if (id != NULL && sl_hmap_get(seen, id) != NULL)
            duplicates++;
        json_decref(r);
        rd_kafka_message_destroy(m);
    }
    json_t *s3 = h_http_json(st.stats_url);
    /* Every daemon's /metrics parses for Prometheus and agrees with what was seen. */
    const struct {
        const char *daemon, *url, *expect;
    } scrapes[] = {
        {"ingest", ingest_url, "sluice_ingest_jobs_total 2000\n"},
        {"scheduler", sched_url, "sluice_scheduler_results_total{status=\"succeeded\"} 2000\n"},
        {"dispatcher", disp_url, "sluice_dispatcher_calls_total{deployment=\"sim-"},
    };
    usleep(1200 * 1000); /* the scheduler exports once a second, so do the lag gauges */
    char *texts[3] = {NULL, NULL, NULL};
    for (size_t i = 0; i < sizeof scrapes / sizeof scrapes[0]; i++) {
        char *text = h_http_text(scrapes[i].url);
        h_check(text != NULL && h_promtool_check(text) == 0 &&
                    strstr(text, scrapes[i].expect) != NULL,
                "%s serves /metrics that promtool accepts, with %.50s", scrapes[i].daemon,
                scrapes[i].expect);
        texts[i] = text;
    }
    const char *ingest_text = texts[0], *disp_text = texts[2];
    /* Consumer lag: present on the daemons' input topics, and 0 now that every request and
     * every dispatch has been consumed (a position or watermark misread would not be). */
    double lag_req = h_metrics_sample(ingest_text, lag_seen[0].series);
    double lag_disp = h_metrics_sample(disp_text, lag_seen[1].series);
    h_check(lag_req == 0, "ingest exports %s, 0 after the run (%g; up to %g seen during it)",
            lag_seen[0].series, lag_req, lag_seen[0].max);
    h_check(lag_disp == 0, "dispatcher exports %s, 0 after the run (%g; up to %g seen during it)",
            lag_seen[1].series, lag_disp, lag_seen[1].max);
    /* Provider latency: every call the simulator answered (admitted or refused) is observed
     * once per histogram, for each deployment. */
    double lat_n = 0, ttfb_n = 0;
    for (int d = 0; d < 2; d++) {
        char series[160];
        snprintf(series, sizeof series,
                 "sluice_dispatcher_provider_latency_seconds_count{deployment=\"sim-%c\"}",
                 'a' + d);
        double n = h_metrics_sample(disp_text, series);
        h_check(n > 0, "dispatcher exports %s > 0 (%g)", series, n);
        lat_n += n > 0 ? n : 0;
        snprintf(series, sizeof series,
                 "sluice_dispatcher_provider_ttfb_seconds_count{deployment=\"sim-%c\"}", 'a' + d);
        n = h_metrics_sample(disp_text, series);
        h_check(n > 0, "dispatcher exports %s > 0 (%g)", series, n);
        ttfb_n += n > 0 ? n : 0;
    }
    int64_t answered = h_sim_total(s3, "admitted") + h_sim_total(s3, "refused");
    h_check(lat_n == (double)answered && ttfb_n == (double)answered,
            "one latency and one TTFB observation per call the simulator answered (%g, %g, "
            "%lld)",
            lat_n, ttfb_n, (long long)answered);
    double lat_sum = h_metrics_sample(
        disp_text, "sluice_dispatcher_provider_latency_seconds_sum{deployment=\"sim-a\"}");
    double lat_le10 = h_metrics_sample(
        disp_text,
        "sluice_dispatcher_provider_latency_seconds_bucket{deployment=\"sim-a\",le=\"10\"}");
    double ttfb_sum = h_metrics_sample(
        disp_text, "sluice_dispatcher_provider_ttfb_seconds_sum{deployment=\"sim-a\"}");
    h_check(lat_sum > 0 && ttfb_sum > 0 && ttfb_sum <= lat_sum && lat_le10 > 0,
            "provider latency on sim-a is plausible (sum %.3f s, TTFB sum %.3f s, %g calls "
            "under 10 s)",
            lat_sum, ttfb_sum, lat_le10);
    /* The scheduler's decisions: its lag, queue wait and attempts per finished job by class,
     * admissions and provider answers by deployment. */
    const char *sched_text = texts[1];
    double lag_jobs =
        h_metrics_sample(sched_text, "sluice_kafka_consumer_lag{topic=\"sluice.jobs\"}");
    h_check(lag_jobs == 0, "scheduler exports its lag on sluice.jobs, 0 after the run (%g)",
            lag_jobs);
    double waits = h_metrics_sample(
        sched_text, "sluice_scheduler_queue_wait_seconds_count{class=\"standard\"}");
    double finished = h_metrics_sample(
        sched_text, "sluice_scheduler_job_attempts_count{class=\"standard\",status=\"succeeded\"}");
    double finished_n = h_metrics_sample(
        sched_text,
        "sluice_scheduler_jobs_finished_total{class=\"standard\",status=\"succeeded\"}");
    h_check(finished_n == finished, "jobs finished by class and status match the histogram (%g)",
            finished_n);
    h_check(waits >= GOOD_JOBS && finished >= GOOD_JOBS,
            "scheduler observed queue wait for every first dispatch (%g) and attempts for every "
            "success (%g)",
            waits, finished);
    double admissions = 0, answered_ok = 0;
    for (int d = 0; d < 2; d++) {
        char series[200];
        snprintf(series, sizeof series,
                 "sluice_scheduler_provider_responses_total{deployment=\"sim-%c\",outcome=\"ok\","
                 "status=\"200\"}",
                 'a' + d);
        double n = h_metrics_sample(sched_text, series);
        answered_ok += n > 0 ? n : 0;
    }
    const char *p = sched_text;
    while (p != NULL &&
           (p = strstr(p, "\nsluice_scheduler_reservations_admitted_total{")) != NULL) {
        p++;
        const char *sp = strchr(p, ' ');
        admissions += sp != NULL ? strtod(sp + 1, NULL) : 0;
    }
    h_check(answered_ok >= GOOD_JOBS && admissions >= answered_ok,
            "scheduler counts ok answers by deployment (%g) and admissions by tenant (%g)",
            answered_ok, admissions);
    /* Dispatches went out in batches under one signature each, and every one of them (and
     * every job and usage event with its pair MAC) passed its reader's check. */
    double dispatched = h_metrics_sample(sched_text, "sluice_scheduler_dispatched_total");
    double signatures = h_metrics_sample(sched_text, "sluice_scheduler_dispatch_signatures_total");
    h_check(dispatched >= GOOD_JOBS && signatures > 0 && signatures < dispatched,
            "dispatches shared signatures: %g dispatches under %g signatures", dispatched,
            signatures);
    const char *refusal_families[] = {"\nsluice_scheduler_messages_refused_total{",
                                      "\nsluice_dispatcher_messages_refused_total{"};
    int refusals = 0;
    for (int i = 0; i < 2; i++)
        refusals += texts[i + 1] == NULL || strstr(texts[i + 1], refusal_families[i]) != NULL;
    h_check(refusals == 0, "no message of the daemons refused by another (%d kinds)", refusals);
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        free(texts[i]);

    h_check(good_done == GOOD_JOBS, "every good job has a terminal result (%d/%d)", good_done,
            GOOD_JOBS);
    h_check(good_ok == GOOD_JOBS, "every good job succeeded (%d/%d)", good_ok, GOOD_JOBS);
    h_check(duplicates == 0 && conflicting == 0,
            "exactly one terminal result per job (duplicates %d, conflicting %d)", duplicates,
            conflicting);
    for (int i = 0; i < nbad; i++)
        h_check(bad_ok[i] == 1, "bad input rejected with reason %s", bad[i].reason);
    int64_t refused = h_sim_total(s3, "refused");
    int64_t admitted = h_sim_total(s3, "admitted");
    h_check(s3 != NULL && refused == 0,
            "the simulator refused zero requests (admitted %lld, "
            "refused %lld)",
            (long long)admitted, (long long)refused);
    h_check(admitted == GOOD_JOBS, "the simulator admitted each good job once (%lld)",
            (long long)admitted);
    double util = 0;
    if (s1 != NULL && s2 != NULL) {
        double dt = (double)(json_integer_value(json_object_get(s2, "now_ms")) -
                             json_integer_value(json_object_get(s1, "now_ms")));
        double tokens =
            (double)(h_sim_total(s2, "tokens_charged") - h_sim_total(s1, "tokens_charged"));
        util = tokens / ((double)(TPM_A + TPM_B) * dt / MINUTE_MS);
        printf("  steady state: %.0f tokens in %.0f ms of simulator time\n", tokens, dt);
    }
    h_check(util >= 0.90, "throughput after warm-up is %.1f %% of the binding limit (TPM)",
            util * 100);
    printf("  figures: %d jobs in %.1f s end to end (%.0f jobs/s incl. start-up)\n", GOOD_JOBS,
           elapsed_s, GOOD_JOBS / elapsed_s);

    lose_input(&st, prod, cfg);

    rd_kafka_destroy(prod);
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    int unclean = h_stack_down(&st);
    h_check(unclean == 0, "every process stopped cleanly on SIGTERM (%d did not)", unclean);
    int64_t open_res = h_sql_count(db, "SELECT COUNT(*) FROM reservations WHERE state = 'open'");
    int64_t open_jobs = h_sql_count(db, "SELECT COUNT(*) FROM jobs WHERE state <> 'done'");
    int64_t outbox = h_sql_count(db, "SELECT COUNT(*) FROM outbox");
    h_check(open_res == 0, "no reservation left open (%lld)", (long long)open_res);
    h_check(open_jobs == 0, "no job left unfinished in the store (%lld)", (long long)open_jobs);
    h_check(outbox == 0, "the results outbox is empty (%lld)", (long long)outbox);
    json_decref(s1);
    json_decref(s2);
    json_decref(s3);
    h_free_string_map(seen);
    for (int i = 0; i < nbad; i++)
        free(bad[i].text);
    free(sim_cfg);
    free((char *)cfg);
    int rc = h_summary("pipeline");
    h_cleanup(rc != 0);
    return rc;
}
