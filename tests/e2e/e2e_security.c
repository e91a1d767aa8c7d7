/* e2e_security - an attacker with kcat on the broker's loopback port writes forged, unsigned,
 * tampered, moved and replayed messages to every internal topic while real jobs run, over the
 * real stack.
 *
 * The run: a warm-up job on a fast deployment gives a genuine usage event to tamper with; then
 * three jobs on a slow one (4 s to first token; one streamed), so their attempts are leased
 * while the attacks go in:
 *   jobs:     a copy of a genuine job under a new id and key, unsigned; the same with a made-up
 *             signature; a genuine job with a byte changed under its own headers (its pair MAC);
 *             a genuine dispatch (the scheduler's signature) moved to the jobs topic; a genuine
 *             usage event (the dispatchers' pair MAC) moved there, as the dispatcher and as
 *             ingest; an unsigned cancel of another tenant's running job;
 *   usage:    an unsigned "succeeded" event for a leased attempt with the attacker's content
 *             and 1 + 1 tokens; the warm-up's genuine event re-aimed at that attempt under its
 *             own headers;
 *   dispatch: a genuine dispatch without its headers; the same under another key; a genuine
 *             usage event (the dispatcher's signature) moved to the dispatch topic;
 *   results:  an unsigned "succeeded" result for a running job.
 * Then, once every job is done, replays of genuine messages with their headers: the first
 * job's job message, the warm-up's usage event, and a genuine cancel.
 *
 * Asserts: every job ends with its own genuine result (not the attacker's content or usage,
 * not cancelled); the simulator was called once per genuine job; the store holds the genuine
 * jobs only; each refusal is counted in sluice_{scheduler,dispatcher}_messages_refused_total
 * by topic and reason, exactly; replays change no job, no result and no call; `sluice results`
 * refuses the forged result and says so; every message the daemons wrote (jobs, dispatches,
 * usage, stream chunks, results) verifies as its reader checks it: jobs and usage events carry
 * the pair MAC of their writer and the scheduler (which public keys alone cannot check; the test
 * checks them with the scheduler's secret key), the rest are signed and verify with the writer
 * role's public key. Messages with a MAC (32 raw bytes) are written again with librdkafka, as
 * kcat cannot write such a header.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "harness.h"
#include "kafka.h"
#include "sign.h"
#include "util.h"

static const char KEY_A[] = "sk-e2e-security-alpha";
static const char KEY_B[] = "sk-e2e-security-beta";
/* A topic's log keeps its first MAX_MSGS messages: the usage topic holds a copy of each
 * dispatcher's periodic heartbeat in every partition (16 here), a few hundred in a run. */
enum { SLOW_TTFT_MS = 4000, MAX_MSGS = 1024 };

static const char *write_configs(int sim_port, int ports[3], char **sim_cfg)
{
    const char *dir = h_tmpdir();
    char ha[65], hb[65];
    h_key_hash_hex(KEY_A, ha);
    h_key_hash_hex(KEY_B, hb);
    char sim[1024];
    snprintf(
        sim, sizeof sim,
        "{\"deployments\": ["
        "{\"name\": \"fast\", \"model\": \"gpt-4o-mini\", \"ttft_ms\": 10, \"ms_per_token\": 0,"
        " \"output_min\": 5, \"output_max\": 5},"
        "{\"name\": \"slow\", \"model\": \"gpt-4o-mini\", \"ttft_ms\": %d, \"ms_per_token\": 0,"
        " \"output_min\": 7, \"output_max\": 7}]}",
        SLOW_TTFT_MS);
    *sim_cfg = strdup(h_write("sim.json", sim));
    char *keyfile = strdup(h_write("provider.key", "any-bearer-token\n"));
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s/sluice.db\", \"metrics_listen\": \"127.0.0.1:%d\","
             "   \"admin_listen\": \"\"},"
             " \"ingest\": {\"metrics_listen\": \"127.0.0.1:%d\"},"
             " \"dispatcher\": {\"metrics_listen\": \"127.0.0.1:%d\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": ["
             "  {\"name\": \"fast\", \"base_url\": \"http://127.0.0.1:%d/fast/v1\","
             "   \"model\": \"gpt-4o-mini\", \"api_key_file\": \"%s\", \"timeout_ms\": 20000},"
             "  {\"name\": \"slow\", \"base_url\": \"http://127.0.0.1:%d/slow/v1\","
             "   \"model\": \"gpt-4o-mini\", \"api_key_file\": \"%s\", \"timeout_ms\": 20000}],"
             " \"routes\": [{\"name\": \"fast\", \"deployments\": [\"fast\"]},"
             "             {\"name\": \"slow\", \"deployments\": [\"slow\"]}],"
             " \"tenants\": [{\"name\": \"alpha\"}, {\"name\": \"beta\"}],"
             " \"keys\": [{\"id\": \"ka\", \"tenant\": \"alpha\", \"hash\": \"%s\"},"
             "          {\"id\": \"kb\", \"tenant\": \"beta\", \"hash\": \"%s\"}]}",
             dir, dir, ports[1], ports[0], ports[2], dir, dir, sim_port, keyfile, sim_port, keyfile,
             ha, hb);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

/* One message as read from a topic, with what is needed to write it again. */
typedef struct {
    char *key, *value;
    char sig[128], signer[32];
    int has_sig, has_mac;
    rd_kafka_headers_t *hdrs; /* a copy of all its headers */
    int32_t partition;
    sl_auth_t auth;     /* checked as its reader checks it (MACs as the scheduler) */
    sl_auth_t pub_auth; /* checked with the writer roles' public keys alone */
} msg_t;

typedef struct {
    const char *topic;
    rd_kafka_t *cons;
    msg_t m[MAX_MSGS];
    int n;
} topic_log_t;

static char *dup_n(const void *p, size_t n)
{
    char *c = malloc(n + 1);
    if (c == NULL)
        exit(2);
    if (n > 0)
        memcpy(c, p, n);
    c[n] = '\0';
    return c;
}

/* keyring checks as the readers do: signatures with public keys, and the pair MACs of jobs and
 * usage as the scheduler, with its secret key; pub_keyring holds public keys alone. */
static sl_keyring_t *keyring, *pub_keyring;
static const sl_config_t *cfg_loaded;

/* Reads what arrived on t (up to wait_ms for the first message). */
static void drain(topic_log_t *t, int wait_ms)
{
    rd_kafka_message_t *msg;
    int timeout = wait_ms;
    while ((msg = rd_kafka_consumer_poll(t->cons, timeout)) != NULL) {
        timeout = 0;
        if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR && t->n < MAX_MSGS) {
            msg_t *m = &t->m[t->n++];
            memset(m, 0, sizeof *m);
            m->key = dup_n(msg->key, msg->key_len);
            m->value = dup_n(msg->payload, msg->len);
            m->partition = msg->partition;
            const char *v = NULL;
            size_t len = 0;
            if (sl_kafka_header(msg, SL_SIG_HEADER, &v, &len) == SL_OK && len < sizeof m->sig) {
                memcpy(m->sig, v, len);
                m->has_sig = 1;
            }
            if (sl_kafka_header(msg, SL_SIGNER_HEADER, &v, &len) == SL_OK && len < sizeof m->signer)
                memcpy(m->signer, v, len);
            m->has_mac = sl_kafka_header(msg, SL_MAC_HEADER, &v, &len) == SL_OK;
            rd_kafka_headers_t *hdrs = NULL;
            if (rd_kafka_message_headers(msg, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR)
                m->hdrs = rd_kafka_headers_copy(hdrs);
            m->auth = sl_kafka_verify(keyring, sl_auth_writers(cfg_loaded, t->topic), msg);
            m->pub_auth = sl_kafka_verify(pub_keyring, sl_auth_writers(cfg_loaded, t->topic), msg);
        }
        rd_kafka_message_destroy(msg);
    }
}

/* The first genuine message (its signature verifies) on t whose value contains needle (and
 * needle2 when not NULL): the attacker's own messages are on the same topics. */
static msg_t *find(topic_log_t *t, const char *needle, const char *needle2)
{
    for (int i = 0; i < t->n; i++) {
        if (t->m[i].auth == SL_AUTH_OK && strstr(t->m[i].value, needle) != NULL &&
            (needle2 == NULL || strstr(t->m[i].value, needle2) != NULL))
            return &t->m[i];
    }
    return NULL;
}

/* How many genuine messages on t contain needle (and needle2). */
static int count(topic_log_t *t, const char *needle, const char *needle2)
{
    int n = 0;
    for (int i = 0; i < t->n; i++) {
        if (t->m[i].auth == SL_AUTH_OK && strstr(t->m[i].value, needle) != NULL &&
            (needle2 == NULL || strstr(t->m[i].value, needle2) != NULL))
            n++;
    }
    return n;
}

/* Waits up to wait_ms for a message on t containing needle (and needle2). */
static msg_t *wait_for(topic_log_t *t, const char *needle, const char *needle2, int wait_ms)
{
    double until = sl_mono_ms() + wait_ms;
    msg_t *m = NULL;
    while ((m = find(t, needle, needle2)) == NULL && sl_mono_ms() < until)
        drain(t, 100);
    return m;
}

/* The attacker: kcat -P with a fixed key and the given headers, the value from a file. */
static int kcat_produce(const char *bootstrap, const char *topic, const char *key,
                        const char *value, const char *sig, const char *signer)
{
    static int seq;
    char name[64];
    snprintf(name, sizeof name, "attack-%d.json", seq++);
    char *path = strdup(h_write(name, value));
    char cmd[8192];
    int n = snprintf(cmd, sizeof cmd, "/usr/bin/kcat -P -b '%s' -t '%s' -k '%s'", bootstrap, topic,
                     key);
    if (sig != NULL)
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " -H '%s=%s'", SL_SIG_HEADER, sig);
    if (signer != NULL)
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " -H '%s=%s'", SL_SIGNER_HEADER, signer);
    snprintf(cmd + n, sizeof cmd - (size_t)n, " '%s' 2>>'%s/kcat.log'", path, h_tmpdir());
    int rc = system(cmd);
    free(path);
    return rc;
}

/* The attacker again, for headers kcat cannot write (a MAC is 32 raw bytes): value to topic
 * under key with a copy of as's headers, the signer header replaced by signer when not NULL. */
static void resend(rd_kafka_t *prod, const char *topic, const char *key, const char *value,
                   const msg_t *as, const char *signer)
{
    rd_kafka_headers_t *hdrs =
        as->hdrs != NULL ? rd_kafka_headers_copy(as->hdrs) : rd_kafka_headers_new(2);
    if (signer != NULL) {
        rd_kafka_header_remove(hdrs, SL_SIGNER_HEADER);
        rd_kafka_header_add(hdrs, SL_SIGNER_HEADER, -1, signer, -1);
    }
    h_produce_headers(prod, topic, key, value, strlen(value), hdrs);
    rd_kafka_flush(prod, 10000);
}

/* Replaces the first from in s by to (malloc'd copy; s is not freed). */
static char *replace(const char *s, const char *from, const char *to)
{
    const char *p = strstr(s, from);
    if (p == NULL)
        return dup_n(s, strlen(s));
    size_t a = (size_t)(p - s), fl = strlen(from), tl = strlen(to), rest = strlen(p + fl);
    char *out = malloc(a + tl + rest + 1);
    if (out == NULL)
        exit(2);
    memcpy(out, s, a);
    memcpy(out + a, to, tl);
    memcpy(out + a + tl, p + fl, rest + 1);
    return out;
}

/* The value of a JSON string member of a message value (static buffer per call). */
static const char *member(const char *value, const char *name)
{
    static char out[4][256];
    static int k;
    char *buf = out[k++ % 4];
    buf[0] = '\0';
    json_t *doc = json_loads(value, 0, NULL);
    const char *s = json_string_value(json_object_get(doc, name));
    if (s != NULL)
        snprintf(buf, 256, "%s", s);
    json_decref(doc);
    return buf;
}

static long metric(const char *url, const char *series)
{
    char *text = h_http_text(url);
    if (text == NULL)
        return -1;
    char pat[512];
    snprintf(pat, sizeof pat, "\n%s ", series);
    const char *p = strstr(text, pat);
    long n = p != NULL ? atol(p + strlen(pat)) : 0;
    free(text);
    return n;
}

static void request(rd_kafka_t *prod, const char *idem, const char *api_key, const char *route,
                    int stream)
{
    char req[512];
    int n = snprintf(req, sizeof req,
                     "{\"idempotency_key\": \"%s\", \"api_key\": \"%s\", \"route\": \"%s\","
                     " \"request\": {\"messages\": [{\"role\": \"user\", \"content\": \"Say %s\"}],"
                     " \"max_tokens\": 50%s}}",
                     idem, api_key, route, idem, stream ? ", \"stream\": true" : "");
    h_produce(prod, "sluice.requests", idem, req, (size_t)n);
}

int main(void)
{
    sl_crypto_init();
    printf("e2e security: forged, unsigned, tampered, moved and replayed messages by kcat\n");
    int sim_port = h_free_port();
    int ports[3] = {h_free_port(), h_free_port(), h_free_port()}; /* ingest, sched, disp */
    char *sim_cfg = NULL;
    const char *cfg_path = write_configs(sim_port, ports, &sim_cfg);
    char err[512] = "";
    sl_config_t *cfg = NULL;
    if (sl_config_load(cfg_path, &cfg, err, sizeof err) != SL_OK) {
        fprintf(stderr, "config: %s\n", err);
        return 2;
    }
    cfg_loaded = cfg;
    h_stack_t st;
    h_stack_up(&st, cfg_path, sim_cfg, sim_port);
    char sched_url[64], disp_url[64];
    snprintf(sched_url, sizeof sched_url, "http://127.0.0.1:%d/metrics", ports[1]);
    snprintf(disp_url, sizeof disp_url, "http://127.0.0.1:%d/metrics", ports[2]);
    /* The test checks with public keys only, as any consumer would. */
    char ingest_pub[512];
    snprintf(ingest_pub, sizeof ingest_pub, "%s/ingest.pub", h_tmpdir());
    h_wait_file(ingest_pub, 20000);
    unsigned roles = SL_ROLE_BIT(SL_ROLE_INGEST) | SL_ROLE_BIT(SL_ROLE_SCHEDULER) |
                     SL_ROLE_BIT(SL_ROLE_DISPATCHER);
    char sched_key[512];
    snprintf(sched_key, sizeof sched_key, "%s/dispatch.key", h_tmpdir());
    /* The scheduler makes its key pair when it starts, which under the sanitizers can come
     * after ingest's (seen once in make test: the key was not there yet). */
    h_wait_file(sched_key, 20000);
    sl_signer_t *sched_signer = NULL;
    if (sl_auth_keyring(cfg, roles, &keyring, err, sizeof err) != SL_OK ||
        sl_auth_keyring(cfg, roles, &pub_keyring, err, sizeof err) != SL_OK) {
        fprintf(stderr, "keyring: %s\n", err);
        return 2;
    }
    if (sl_signer_load(sched_key, &sched_signer) != SL_OK) {
        fprintf(stderr, "cannot load the scheduler's key %s\n", sched_key);
        return 2;
    }
    sl_keyring_take_macs(keyring, sched_signer, NULL,
                         SL_ROLE_BIT(SL_ROLE_INGEST) | SL_ROLE_BIT(SL_ROLE_DISPATCHER));
    topic_log_t jobs = {
        "sluice.jobs", h_consumer_from_start(st.bootstrap, "sluice.jobs"), {{0}}, 0};
    topic_log_t jobs_b = {
        "sluice.jobs.batch", h_consumer_from_start(st.bootstrap, "sluice.jobs.batch"), {{0}}, 0};
    topic_log_t disp = {
        "sluice.dispatch", h_consumer_from_start(st.bootstrap, "sluice.dispatch"), {{0}}, 0};
    topic_log_t usage = {
        "sluice.usage", h_consumer_from_start(st.bootstrap, "sluice.usage"), {{0}}, 0};
    topic_log_t stream = {
        "sluice.stream", h_consumer_from_start(st.bootstrap, "sluice.stream"), {{0}}, 0};
    topic_log_t results = {
        "sluice.results", h_consumer_from_start(st.bootstrap, "sluice.results"), {{0}}, 0};
    rd_kafka_t *prod = h_producer(st.bootstrap);

    /* The warm-up: a genuine usage event to tamper with later. */
    request(prod, "sec-warm", KEY_A, "fast", 0);
    rd_kafka_flush(prod, 10000);
    msg_t *warm_usage = wait_for(&usage, "\"outcome\":\"ok\"", NULL, 20000);
    msg_t *warm_result = wait_for(&results, "sec-warm", "succeeded", 10000);
    h_check(warm_usage != NULL && warm_result != NULL, "the warm-up job ran (usage and result)");
    if (warm_usage == NULL || warm_result == NULL)
        goto out;

    /* The victims: leased for 4 s while the attacks go in. */
    request(prod, "sec-1", KEY_A, "slow", 0);
    request(prod, "sec-2", KEY_B, "slow", 0);
    request(prod, "sec-3", KEY_A, "slow", 1);
    rd_kafka_flush(prod, 10000);
    msg_t *d1 = wait_for(&disp, "sec-1", NULL, 10000);
    msg_t *d2 = wait_for(&disp, "sec-2", NULL, 10000);
    msg_t *j1 = wait_for(&jobs, "\"sec-1\"", NULL, 5000);
    h_check(d1 != NULL && d2 != NULL && j1 != NULL, "the victims' jobs were dispatched");
    if (d1 == NULL || d2 == NULL || j1 == NULL)
        goto out;
    char j1_id[64], j2_id[64], res1[128];
    snprintf(j1_id, sizeof j1_id, "%s", member(d1->value, "job_id"));
    snprintf(j2_id, sizeof j2_id, "%s", member(d2->value, "job_id"));
    snprintf(res1, sizeof res1, "%s", member(d1->value, "reservation_id"));
    double attack_start = sl_mono_ms();

    /* ---- sluice.results ---- (first: the CLI below stops at the first result of sec-1 it
     * accepts, so the forged one must come before the genuine one. Written last, it raced the
     * victim's call: the attacks take about as long, 3.9 - 4.0 s, as its time to first token.) */
    char *fr = replace(warm_result->value, member(warm_result->value, "job_id"), j1_id);
    char *fr2 = replace(fr, "sec-warm", "sec-1");
    char *forged_result = replace(fr2, "Simulated reply", "ATTACKER CONTENT");
    kcat_produce(st.bootstrap, "sluice.results", j1_id, forged_result, NULL, NULL);
    free(fr);
    free(fr2);
    free(forged_result);

    /* ---- sluice.jobs ---- */
    char *fake_job = replace(j1->value, j1_id, "forgedjob0000000000000000000000001");
    char *fake_job2 = replace(fake_job, "\"sec-1\"", "\"sec-forged\"");
    kcat_produce(st.bootstrap, "sluice.jobs", "alpha", fake_job2, NULL, NULL);
    kcat_produce(
        st.bootstrap, "sluice.jobs", "alpha", fake_job2,
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==",
        "ingest");
    char *tampered_job = replace(fake_job2, "forgedjob", "forgedjoc");
    resend(prod, "sluice.jobs", "alpha", tampered_job, j1, NULL);
    kcat_produce(st.bootstrap, "sluice.jobs", "alpha", d1->value, d1->sig, d1->signer);
    /* The dispatchers' MAC (the key they share with the scheduler) makes no job: a usage event
     * moved to the jobs topic, as the dispatcher and as ingest. */
    resend(prod, "sluice.jobs", "alpha", warm_usage->value, warm_usage, NULL);
    resend(prod, "sluice.jobs", "alpha", warm_usage->value, warm_usage, "ingest");
    char cancel[512];
    snprintf(cancel, sizeof cancel,
             "{\"v\":1,\"type\":\"cancel\",\"job_id\":\"%s\",\"idempotency_key\":\"sec-2\","
             "\"tenant\":\"beta\",\"requested_ms\":%lld}",
             j2_id, (long long)sl_now_ms());
    kcat_produce(st.bootstrap, "sluice.jobs", "beta", cancel, NULL, NULL);
    /* ---- sluice.jobs.batch (batch jobs and cancels): the forged job unsigned, and a genuine
     * job moved there with its MAC, which names the topic it was written to ---- */
    kcat_produce(st.bootstrap, "sluice.jobs.batch", "alpha", fake_job2, NULL, NULL);
    resend(prod, "sluice.jobs.batch", "alpha", j1->value, j1, NULL);
    free(fake_job);
    free(fake_job2);
    free(tampered_job);

    /* ---- sluice.usage ---- */
    char *u = replace(warm_usage->value, member(warm_usage->value, "job_id"), j1_id);
    char *u2 = replace(u, member(warm_usage->value, "reservation_id"), res1);
    char *forged_usage = replace(u2, "Simulated reply", "ATTACKER CONTENT");
    kcat_produce(st.bootstrap, "sluice.usage", j1_id, forged_usage, NULL, NULL);
    resend(prod, "sluice.usage", j1_id, u2, warm_usage, NULL);
    free(u);
    free(u2);
    free(forged_usage);

    /* ---- sluice.dispatch ---- */
    kcat_produce(st.bootstrap, "sluice.dispatch", d1->key, d1->value, NULL, NULL);
    kcat_produce(st.bootstrap, "sluice.dispatch", "another-key", d1->value, d1->sig, d1->signer);
    resend(prod, "sluice.dispatch", warm_usage->key, warm_usage->value, warm_usage, NULL);

    printf("  attacks written in %.0f ms, while the victims' calls ran\n",
           sl_mono_ms() - attack_start);

    /* ---- the genuine outcomes ---- */
    msg_t *r1 = wait_for(&results, j1_id, "\"status\":\"succeeded\"", 20000);
    msg_t *r2 = wait_for(&results, j2_id, "\"status\":", 20000);
    msg_t *r3 = wait_for(&results, "sec-3", "\"status\":", 20000);
    drain(&results, 500);
    h_check(r1 != NULL && r1->auth == SL_AUTH_OK && strstr(r1->value, "ATTACKER") == NULL &&
                strstr(r1->value, "Simulated reply from slow") != NULL,
            "the first job succeeded with the provider's answer, signed by the scheduler");
    h_check(r1 != NULL && strstr(r1->value, "\"completion_tokens\":7") != NULL,
            "its usage is the real one (7 output tokens), not the forged 1 + 1");
    h_check(r2 != NULL && strstr(r2->value, "\"status\":\"succeeded\"") != NULL,
            "the other tenant's job was not cancelled by the forged cancel (%s)",
            r2 != NULL ? member(r2->value, "status") : "no result");
    h_check(r3 != NULL && strstr(r3->value, "\"status\":\"succeeded\"") != NULL,
            "the streamed job succeeded");
    h_check(count(&results, "forgedjob", NULL) == 0 && count(&results, "sec-forged", NULL) == 0,
            "no result for the forged job");
    json_t *stats = h_http_json(st.stats_url);
    int64_t admitted = h_sim_total(stats, "admitted");
    json_decref(stats);
    h_check(admitted == 4, "the simulator was called once per genuine job (%lld of 4)",
            (long long)admitted);

    /* ---- refusals, each counted by topic and reason ---- */
    const struct {
        const char *url, *prefix, *topic, *reason;
        long want;
    } refusals[] = {
        {sched_url, "sluice_scheduler", "sluice.jobs", "unsigned", 2},
        {sched_url, "sluice_scheduler", "sluice.jobs", "bad_signature", 3},
        {sched_url, "sluice_scheduler", "sluice.jobs", "wrong_role", 2},
        {sched_url, "sluice_scheduler", "sluice.jobs.batch", "unsigned", 1},
        {sched_url, "sluice_scheduler", "sluice.jobs.batch", "bad_signature", 1},
        {sched_url, "sluice_scheduler", "sluice.usage", "unsigned", 1},
        {sched_url, "sluice_scheduler", "sluice.usage", "bad_signature", 1},
        {disp_url, "sluice_dispatcher", "sluice.dispatch", "unsigned", 1},
        {disp_url, "sluice_dispatcher", "sluice.dispatch", "bad_signature", 1},
        {disp_url, "sluice_dispatcher", "sluice.dispatch", "wrong_role", 1},
    };
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        char series[256];
        snprintf(series, sizeof series, "%s_messages_refused_total{topic=\"%s\",reason=\"%s\"}",
                 refusals[i].prefix, refusals[i].topic, refusals[i].reason);
        long got = metric(refusals[i].url, series);
        h_check(got == refusals[i].want, "%s = %ld (want %ld)", series, got, refusals[i].want);
    }

    /* ---- replays of genuine messages, headers and all ---- */
    int results_before = results.n;
    resend(prod, "sluice.jobs", j1->key, j1->value, j1, NULL);
    resend(prod, "sluice.usage", warm_usage->key, warm_usage->value, warm_usage, NULL);
    char cancel_req[256];
    int cn = snprintf(cancel_req, sizeof cancel_req, "{\"cancel\": \"sec-2\", \"api_key\": \"%s\"}",
                      KEY_B);
    h_produce(prod, "sluice.requests", "sec-2", cancel_req, (size_t)cn);
    rd_kafka_flush(prod, 10000);
    msg_t *genuine_cancel = wait_for(&jobs_b, "\"type\":\"cancel\"", "sec-2", 10000);
    if (genuine_cancel != NULL)
        resend(prod, "sluice.jobs.batch", genuine_cancel->key, genuine_cancel->value,
               genuine_cancel, NULL);
    h_check(genuine_cancel != NULL && genuine_cancel->auth == SL_AUTH_OK,
            "ingest wrote an authenticated cancel for the request");
    double until = sl_mono_ms() + 6000;
    while (sl_mono_ms() < until)
        drain(&results, 200);
    stats = h_http_json(st.stats_url);
    admitted = h_sim_total(stats, "admitted");
    json_decref(stats);
    h_check(admitted == 4, "replays made no provider call (%lld calls)", (long long)admitted);
    h_check(count(&results, j1_id, "\"status\":\"succeeded\"") >= 2 &&
                count(&results, j1_id, "ATTACKER") == 0,
            "the replayed job was answered with its stored result (%d results for it)",
            count(&results, j1_id, NULL));
    h_check(count(&results, j2_id, "cancelled") == 0,
            "the cancel and its replay cancelled nothing that had finished");
    long stale = metric(sched_url, "sluice_scheduler_usage_stale_total");
    h_check(stale >= 1, "the replayed usage event was counted stale and changed nothing (%ld)",
            stale);
    printf("  %d results after the replays\n", results.n - results_before);

    /* ---- every message the daemons wrote verifies with its writer's public key ---- */
    drain(&jobs, 200);
    drain(&jobs_b, 200);
    drain(&disp, 200);
    drain(&usage, 200);
    drain(&stream, 500);
    topic_log_t *all[] = {&jobs, &jobs_b, &disp, &usage, &stream, &results};
    for (size_t t = 0; t < sizeof all / sizeof all[0]; t++) {
        int ok = 0, total = 0;
        for (int i = 0; i < all[t]->n; i++) {
            /* The attacker's own messages are on these topics too: skip what kcat wrote. */
            if (strstr(all[t]->m[i].value, "ATTACKER") != NULL ||
                strstr(all[t]->m[i].value, "forgedjo") != NULL)
                continue;
            total++;
            ok += all[t]->m[i].auth == SL_AUTH_OK;
        }
        /* What the attacker wrote that is not marked: on jobs the moved dispatch, the
         * unsigned cancel and the usage event moved twice, on the batch jobs the moved job,
         * on dispatch its three, on usage the re-aimed event. */
        static const int attacks[] = {4, 1, 3, 1, 0, 0};
        h_check(total > 0 && ok == total - attacks[t],
                "%s: %d of %d messages verify as their reader checks them (%d attacks)",
                all[t]->topic, ok, total, attacks[t]);
    }
    /* Jobs and usage carry the pair MAC, no signature: only the scheduler (and their writer)
     * can check one; the rest verify with the writer's public key alone. */
    for (size_t t = 0; t < sizeof all / sizeof all[0]; t++) {
        int mac_topic = all[t] == &jobs || all[t] == &jobs_b || all[t] == &usage;
        int genuine = 0, as_planned = 0;
        for (int i = 0; i < all[t]->n; i++) {
            const msg_t *m = &all[t]->m[i];
            if (m->auth != SL_AUTH_OK)
                continue;
            genuine++;
            as_planned += mac_topic ? m->has_mac && !m->has_sig && m->pub_auth == SL_AUTH_UNSIGNED
                                    : m->has_sig && !m->has_mac && m->pub_auth == SL_AUTH_OK;
        }
        h_check(genuine > 0 && as_planned == genuine, "%s: %d of %d genuine messages %s",
                all[t]->topic, as_planned, genuine,
                mac_topic ? "carry a pair MAC that public keys alone cannot check"
                          : "are signed and verify with the writer's public key");
    }

    /* ---- the CLI refuses the forged result ---- */
    const char *args[] = {"results", "--timeout", "10", "sec-1", NULL};
    int rc = h_run("sluice", "cli-results", cfg_path, args, 30000);
    char log_path[4400];
    snprintf(log_path, sizeof log_path, "%s/cli-results.log", h_tmpdir());
    char *text = NULL;
    sl_read_file(log_path, 1 << 20, &text, NULL);
    h_check(rc == 0 && text != NULL && strstr(text, "refused") != NULL &&
                strstr(text, "ATTACKER") == NULL && strstr(text, "Simulated reply from slow"),
            "sluice results shows the genuine result and refuses the forged one (exit %d)", rc);
    free(text);
    char db[4400];
    snprintf(db, sizeof db, "%s/sluice.db", h_tmpdir());
    h_check(h_sql_count(db, "SELECT COUNT(*) FROM jobs") == 4 &&
                h_sql_count(db, "SELECT COUNT(*) FROM jobs WHERE job_id LIKE 'forged%'") == 0 &&
                h_sql_count(db, "SELECT COUNT(*) FROM jobs WHERE status = 'cancelled'") == 0,
            "the store holds the four genuine jobs only, none cancelled");

out:
    rd_kafka_destroy(prod);
    for (size_t t = 0; t < 6; t++) {
        topic_log_t *tl[] = {&jobs, &jobs_b, &disp, &usage, &stream, &results};
        sl_kafka_consumer_close(tl[t]->cons);
        for (int i = 0; i < tl[t]->n; i++) {
            free(tl[t]->m[i].key);
            free(tl[t]->m[i].value);
            if (tl[t]->m[i].hdrs != NULL)
                rd_kafka_headers_destroy(tl[t]->m[i].hdrs);
        }
    }
    int bad = h_stack_down(&st);
    h_check(bad == 0, "every process exited cleanly (%d did not)", bad);
    sl_keyring_free(keyring);
    sl_keyring_free(pub_keyring);
    sl_signer_free(sched_signer);
    sl_config_free(cfg);
    free(sim_cfg);
    free((char *)cfg_path);
    int status = h_summary("security");
    h_cleanup(status != 0);
    return status;
}
