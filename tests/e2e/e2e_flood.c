/* e2e_flood - a flood of every kind of bad message, over the real stack, with good jobs in the
 * same streams: PER_KIND (60,000) messages of each of eleven kinds, produced straight to the
 * topics, and 200 good requests spread over them (plus 4 before the flood, to warm up).
 *
 *   sluice.requests  malformed JSON, schema-invalid requests, unknown API keys, oversized
 *                    bodies (each answered by ingest with a `rejected` result)
 *   sluice.jobs      malformed and schema-invalid job messages, and cancels of unknown jobs
 *                    (keyed by tenant like ingest's own, so they share the good jobs'
 *                    partition; each gets a nothing_to_cancel answer)
 *   sluice.dispatch  unsigned dispatches, and badly signed ones (not base64; the scheduler's
 *                    real signature of another body; a well-formed lease signed by another key)
 *   sluice.usage     malformed events, and valid events for unknown jobs (ok, 429, 500)
 *
 * Asserts, for ingest, scheduler and dispatcher:
 *   - the refusal counters of their metrics account for every bad message, exactly;
 *   - peak RSS growth over the flood stays under a bound set by the read-ahead limits
 *     (RSS_GROWTH_MAX_KB, see there), and RSS stops growing once the flood is under way (a
 *     memory that grew with the messages would keep growing over the later waves);
 *   - each log file stays under a bound that depends on the run's length, not on the flood
 *     (log_bytes_max);
 * and that every good job succeeded with its own correct result, every bad request got its
 * rejected result, and the provider was called for the good jobs only.
 *
 * The dev broker (librdkafka's mock cluster) keeps about 5 MB or 100,000 message sets per
 * partition and silently drops older data, consumed or not. So the flood goes in waves of at
 * most PER_WAVE_MAX messages of every kind (20 waves by default), interleaved, with GOOD / waves
 * good requests spread among them, and wave w starts only when every daemon's counters show
 * it took in all the waves before w - 1 and this test read the answers to them. A wave
 * of PER_WAVE_MAX puts about 0.6 MB on a sluice.requests partition, 1.1 MB on the jobs
 * partition the cancels share with the good jobs, and 1.3 MB of results on a sluice.results
 * partition; two waves unread stay under the broker's limit, so a good job lost would be
 * sluice's doing, not the broker's.
 *
 * Under the sanitizer build (SLUICE_BIN ending in bin-asan) the volume is a tenth, and RSS is
 * printed but not checked (see the note after RSS_LATE_GROWTH_MAX_KB). E2E_FLOOD_PER_KIND
 * sets another volume: E2E_FLOOD_PER_KIND=300000 is the volume the flood was specified with
 * (40 waves, about 160 s on two cores, most of it the scheduler checking signatures); CI runs it
 * after `make test`, which runs the default.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "kafka.h"
#include "sign.h"
#include "util.h"

enum {
    PER_KIND = 60000,
    PER_WAVE_MAX = 7500, /* of each kind (the sizes above) */
    WAVES_MIN = 8,
    GOOD = 200,
    WARMUP = 4,
    MAX_REQUEST_BYTES = 512,
    POOL = 64, /* signed dispatch bodies, cycled */
    WAVE_WAIT_MS = 120000,
};

/* The longest a good job may take from its request to its result while the flood runs: 1.8 s
 * on average and 2.9 s at most on a quiet machine; 250 s when the dispatcher fell behind. */
enum { GOOD_LATENCY_MAX_MS = 30000 };

/* Peak RSS growth allowed over the flood, per daemon. Each reads through librdkafka with
 * read-ahead bounded per partition: 2 MB (sl_intake_consumer_props) on each of its 32
 * partitions for ingest (two requests topics) and the scheduler (jobs and usage), and 64 MB
 * (librdkafka's queued.max.messages.kbytes, one queue) for the dispatcher. A daemon that kept
 * something of each bad message would need more than this long before the flood ends
 * (480,000 requests at ingest). */
#define RSS_GROWTH_MAX_KB (96L * 1024)
/* RSS growth allowed from the end of the first quarter of the waves to the end of the flood.
 * RSS keeps the high-water mark of the read-ahead and of the allocator's arenas, which the
 * first waves mostly reach; what the later waves add must stay small. Anything kept per
 * message, even a map entry (a key and a node, 50 bytes or more), would grow the scheduler by
 * 20 MB over those waves (its 440,000 messages). */
#define RSS_LATE_GROWTH_MAX_KB (16L * 1024)
/* Under ASan, RSS measures ASan itself: its quarantine of freed memory (256 MB by default)
 * and the shadow of it grew the daemons by 250 - 420 MB over a tenth of the flood. So the RSS
 * checks run in the normal build only; under ASan, LeakSanitizer checks leaks at exit. */

typedef enum {
    K_REQ_MALFORMED,
    K_REQ_SCHEMA,
    K_REQ_UNKNOWN_KEY,
    K_REQ_OVERSIZED,
    K_JOB_MALFORMED,
    K_JOB_SCHEMA,
    K_CANCEL_UNKNOWN,
    K_DISPATCH_UNSIGNED,
    K_DISPATCH_BADSIG,
    K_USAGE_MALFORMED,
    K_USAGE_UNKNOWN,
    KINDS
} kind_t;

static const char *const kind_topic[KINDS] = {
    "sluice.requests", "sluice.requests", "sluice.requests", "sluice.requests",
    "sluice.jobs",     "sluice.jobs",     "sluice.jobs",     "sluice.dispatch",
    "sluice.dispatch", "sluice.usage",    "sluice.usage"};

/* The reasons ingest answers the four bad request kinds with, in kind order. */
static const char *const req_reason[4] = {"malformed_json", "schema_violation", "unknown_api_key",
                                          "payload_too_large"};

static const char GOOD_KEY[] = "sk-e2e-flood-good";

typedef struct {
    int ingest, sched, disp, admin;
} ports_t;

static const char *write_configs(const ports_t *p, int sim_port, char **sim_cfg)
{
    const char *dir = h_tmpdir();
    char hk[65];
    h_key_hash_hex(GOOD_KEY, hk);
    *sim_cfg = strdup(h_write("sim.json", "{\"deployments\": [{\"name\": \"sim\", \"rpm\": 100000,"
                                          " \"api_key\": \"e2e-provider-key\"}]}"));
    char *keyfile = strdup(h_write("provider.key", "e2e-provider-key\n"));
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"ingest\": {\"max_request_bytes\": %d, \"metrics_listen\": \"127.0.0.1:%d\"},"
             " \"scheduler\": {\"db\": \"%s/sluice.db\", \"admin_listen\": \"127.0.0.1:%d\","
             "                 \"metrics_listen\": \"127.0.0.1:%d\"},"
             " \"dispatcher\": {\"metrics_listen\": \"127.0.0.1:%d\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": [{\"name\": \"sim\", \"model\": \"m\", \"api_key_file\": \"%s\","
             "   \"base_url\": \"http://127.0.0.1:%d/sim/v1\", \"limits\": {\"rpm\": 100000}}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"sim\"]}],"
             " \"tenants\": [{\"name\": \"t1\"}],"
             " \"keys\": [{\"id\": \"k1\", \"tenant\": \"t1\", \"hash\": \"%s\"}]}",
             dir, MAX_REQUEST_BYTES, p->ingest, dir, p->admin, p->sched, p->disp, dir, dir, keyfile,
             sim_port, hk);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}

/* ---- producing ---- */

/* A producer that batches (the harness's sends each message at once, too slow for millions). */
static rd_kafka_t *flood_producer(const char *bootstrap)
{
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    const char *props[] = {"bootstrap.servers",
                           bootstrap,
                           "linger.ms",
                           "20",
                           "queue.buffering.max.messages",
                           "500000",
                           "batch.num.messages",
                           "100000",
                           "batch.size",
                           "4000000",
                           NULL};
    for (int i = 0; props[i] != NULL; i += 2) {
        if (rd_kafka_conf_set(conf, props[i], props[i + 1], err, sizeof err) != RD_KAFKA_CONF_OK) {
            fprintf(stderr, "producer: %s\n", err);
            exit(2);
        }
    }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (rk == NULL) {
        fprintf(stderr, "producer: %s\n", err);
        exit(2);
    }
    return rk;
}

/* Produces value (copied) to topic, with a sluice-sig header when sig is not NULL, or signed
 * by as (role) as the daemon of that role signs when as is not NULL; waits while the queue is
 * full. */
static void produce(rd_kafka_t *p, const char *topic, const char *key, const char *value,
                    size_t len, const char *sig, const sl_signer_t *as, sl_role_t role)
{
    rd_kafka_headers_t *hdrs = NULL;
    if (sig != NULL || as != NULL) {
        hdrs = rd_kafka_headers_new(2);
        if (as != NULL)
            sl_kafka_sign_headers(hdrs, as, role, topic, key, key ? strlen(key) : 0, value, len);
        else
            rd_kafka_header_add(hdrs, "sluice-sig", -1, sig, (ssize_t)strlen(sig));
    }
    h_produce_headers(p, topic, key, value, len, hdrs);
}

/* The ingest and dispatcher secret keys the daemons made in the test's folder: the bad jobs,
 * cancels and usage events are signed with them, so they get past the signature check and it
 * is the parsing and matching behind it that the flood exercises (e2e_security floods with
 * unsigned and forged ones). */
static sl_signer_t *role_signer(const char *name)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s.key", h_tmpdir(), name);
    sl_signer_t *s = NULL;
    if (!h_wait_file(path, 20000) || sl_signer_load(path, &s) != SL_OK) {
        fprintf(stderr, "cannot load %s\n", path);
        exit(2);
    }
    return s;
}

/* Signed dispatch bodies: each well-formed, for a job nobody submitted. real[j] is the
 * scheduler's own signature of body[j]; fake[j] another key's signature of it. */
typedef struct {
    char body[POOL][512];
    char real[POOL][SL_SIG_B64_LEN];
    char fake[POOL][SL_SIG_B64_LEN];
} sig_pool_t;

static void sig_pool_init(sig_pool_t *sp)
{
    char secret[4400], pub[4400], fake_secret[4400], fake_pub[4400];
    snprintf(secret, sizeof secret, "%s/dispatch.key", h_tmpdir());
    snprintf(pub, sizeof pub, "%s/dispatch.pub", h_tmpdir());
    snprintf(fake_secret, sizeof fake_secret, "%s/impostor.key", h_tmpdir());
    snprintf(fake_pub, sizeof fake_pub, "%s/impostor.pub", h_tmpdir());
    sl_signer_t *real = NULL, *fake = NULL;
    if (!h_wait_file(pub, 20000) || sl_signer_load(secret, &real) != SL_OK ||
        sl_sign_keygen(fake_secret, fake_pub) != SL_OK ||
        sl_signer_load(fake_secret, &fake) != SL_OK) {
        fprintf(stderr, "cannot load or make the signing keys\n");
        exit(2);
    }
    int64_t now = sl_now_ms();
    for (int j = 0; j < POOL; j++) {
        int n = snprintf(sp->body[j], sizeof sp->body[j],
                         "{\"v\":1,\"job_id\":\"forged-%d\",\"attempt\":1,\"reservation_id\":"
                         "\"res-forged-%d\",\"lease_expires_ms\":%lld,\"deployment\":\"sim\","
                         "\"idempotency_key\":\"forged-%d\",\"request\":{\"messages\":[{\"role\":"
                         "\"user\",\"content\":\"forged\"}],\"max_tokens\":16},\"issued_ms\":%lld}",
                         j, j, (long long)(now + 3600000), j, (long long)now);
        sl_signer_sign(real, sp->body[j], (size_t)n, sp->real[j]);
        sl_signer_sign(fake, sp->body[j], (size_t)n, sp->fake[j]);
    }
    sl_signer_free(real);
    sl_signer_free(fake);
}

/* Writes bad message i of kind k into buf; sets *key and *sig (NULL: none). Returns its
 * length. Each kind cycles through a few shapes. */
static int make_bad(kind_t k, long i, const sig_pool_t *sp, char *buf, size_t cap, char *key,
                    size_t keycap, const char **sig)
{
    int n = 0;
    int v = (int)(i % 4);
    *sig = NULL;
    snprintf(key, keycap, "bad-%d-%ld", (int)k, i);
    switch (k) {
    case K_REQ_MALFORMED: {
        static const char *const shape[4] = {"{\"api_key\": \"%s\", \"route", "not json %ld", "",
                                             "\xff\xfe{%ld"};
        if (v == 0)
            n = snprintf(buf, cap, shape[0], GOOD_KEY);
        else if (v == 2)
            n = 0; /* an empty value */
        else
            n = snprintf(buf, cap, shape[v], i);
        break;
    }
    case K_REQ_SCHEMA:
        if (v == 0)
            n = snprintf(buf, cap,
                         "{\"api_key\":\"%s\",\"route\":\"chat\",\"bogus\":%ld,\"request\":"
                         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}}",
                         GOOD_KEY, i);
        else if (v == 1)
            n = snprintf(buf, cap,
                         "{\"api_key\":\"%s\",\"route\":\"chat\","
                         "\"idempotency_key\":\"schema-%ld\"}",
                         GOOD_KEY, i);
        else if (v == 2)
            n = snprintf(buf, cap,
                         "{\"api_key\":\"%s\",\"route\":\"chat\",\"request\":"
                         "{\"messages\":\"%ld\"}}",
                         GOOD_KEY, i);
        else
            n = snprintf(buf, cap,
                         "{\"api_key\":\"%s\",\"route\":%ld,\"request\":"
                         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}}",
                         GOOD_KEY, i);
        break;
    case K_REQ_UNKNOWN_KEY:
        n = snprintf(buf, cap,
                     "{\"idempotency_key\":\"unknown-%ld\",\"api_key\":\"sk-nobody-%ld\","
                     "\"route\":\"chat\",\"request\":{\"messages\":[{\"role\":\"user\","
                     "\"content\":\"hello\"}],\"max_tokens\":16}}",
                     i, i);
        break;
    case K_REQ_OVERSIZED: {
        /* Valid but for its size, with the good key: the size check comes first. */
        char filler[MAX_REQUEST_BYTES];
        memset(filler, 'a', sizeof filler - 1);
        filler[sizeof filler - 1] = '\0';
        n = snprintf(buf, cap,
                     "{\"idempotency_key\":\"big-%ld\",\"api_key\":\"%s\",\"route\":\"chat\","
                     "\"request\":{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}}",
                     i, GOOD_KEY, filler);
        break;
    }
    case K_JOB_MALFORMED:
        if (v == 0)
            n = snprintf(buf, cap, "{\"v\":1,\"job_id\":\"trunc-%ld\",\"tenant\":\"t1\"", i);
        else if (v == 1)
            n = snprintf(buf, cap, "job %ld", i);
        else if (v == 2)
            n = 0;
        else
            n = snprintf(buf, cap, "{\"v\":1,\"job_id\":\"x-%ld\",]", i);
        break;
    case K_JOB_SCHEMA:
        if (v == 0)
            n = snprintf(buf, cap, "{\"v\":1,\"job_id\":\"partial-%ld\"}", i);
        else if (v == 1)
            n = snprintf(buf, cap, "[%ld]", i);
        else if (v == 2)
            /* a cancel missing its idempotency key and tenant */
            n = snprintf(buf, cap, "{\"v\":1,\"type\":\"cancel\",\"job_id\":\"c-%ld\"}", i);
        else
            n = snprintf(buf, cap,
                         "{\"v\":1,\"job_id\":\"bad id %ld\",\"idempotency_key\":\"k\","
                         "\"tenant\":\"t1\",\"app\":\"a\",\"env\":\"e\",\"key_id\":\"k1\","
                         "\"route\":\"chat\",\"class\":\"urgent\",\"submitted_ms\":1,"
                         "\"deadline_ms\":2,\"estimate\":{\"input\":1,\"output\":1,\"total\":2},"
                         "\"request\":{\"messages\":[]}}",
                         i);
        break;
    case K_CANCEL_UNKNOWN:
        snprintf(key, keycap, "t1");
        n = snprintf(buf, cap,
                     "{\"v\":1,\"type\":\"cancel\",\"job_id\":\"nojob-%ld\","
                     "\"idempotency_key\":\"nokey-%ld\",\"tenant\":\"t1\",\"requested_ms\":1}",
                     i, i);
        break;
    case K_DISPATCH_UNSIGNED:
        if (v == 3)
            n = snprintf(buf, cap, "{\"v\":1,\"job_id\":\"forged-%ld\"", i);
        else
            n = snprintf(buf, cap, "%s", sp->body[i % POOL]);
        break;
    case K_DISPATCH_BADSIG: {
        int j = (int)(i % POOL);
        if (v == 0) {
            n = snprintf(buf, cap, "%s", sp->body[j]);
            *sig = "this is not base64!";
        } else if (v == 1) {
            n = snprintf(buf, cap, "%s", sp->body[(j + 1) % POOL]);
            *sig = sp->real[j]; /* the scheduler's signature, of another body */
        } else {
            n = snprintf(buf, cap, "%s", sp->body[j]);
            *sig = sp->fake[j];
        }
        break;
    }
    case K_USAGE_MALFORMED:
        if (v == 0)
            n = snprintf(buf, cap, "{\"v\":1,\"job_id\":\"u-%ld\"", i);
        else if (v == 1)
            n = snprintf(buf, cap, "{\"v\":1,\"job_id\":\"u-%ld\"}", i);
        else if (v == 2)
            n = snprintf(buf, cap,
                         "{\"v\":1,\"job_id\":\"u-%ld\",\"attempt\":1,\"reservation_id\":\"r\","
                         "\"deployment\":\"sim\",\"outcome\":\"bogus\",\"http_status\":200,"
                         "\"started_ms\":1,\"finished_ms\":2}",
                         i);
        else
            n = 0;
        break;
    case K_USAGE_UNKNOWN: {
        /* Valid events, even a 429 with a long Retry-After: for no lease, they change nothing
         * (the good jobs' deployment must not be paused by them). */
        static const char *const outcome[3] = {"ok", "rate_limited", "server_error"};
        static const int status[3] = {200, 429, 500};
        int o = (int)(i % 3);
        n = snprintf(buf, cap,
                     "{\"v\":1,\"job_id\":\"ghost-%ld\",\"attempt\":1,\"reservation_id\":"
                     "\"r-%ld\",\"deployment\":\"sim\",\"outcome\":\"%s\",\"http_status\":%d,"
                     "\"usage\":{\"input\":5,\"output\":7},\"retry_after_ms\":%d,"
                     "\"started_ms\":1,\"finished_ms\":2}",
                     i, i, outcome[o], status[o], o == 1 ? 600000 : 0);
        break;
    }
    default:
        break;
    }
    return n;
}

typedef struct {
    double produced_ms[WARMUP + GOOD];
    double finished_ms[WARMUP + GOOD];
    int status_ok[WARMUP + GOOD]; /* 1 succeeded and correct, -1 another status or wrong */
    char why[WARMUP + GOOD][160];
} good_t;

static void produce_good(rd_kafka_t *p, good_t *g, int n)
{
    char key[64], req[512];
    snprintf(key, sizeof key, "flood-good-%03d", n);
    int len = snprintf(req, sizeof req,
                       "{\"idempotency_key\":\"%s\",\"api_key\":\"%s\",\"route\":\"chat\","
                       "\"metadata\":{\"n\":%d},\"request\":{\"messages\":[{\"role\":\"user\","
                       "\"content\":\"Good request %d among the flood.\"}],\"max_tokens\":16}}",
                       key, GOOD_KEY, n, n);
    g->produced_ms[n] = h_wall_ms();
    produce(p, "sluice.requests", key, req, (size_t)len, NULL, NULL, SL_ROLE_INGEST);
}

/* ---- reading results ---- */

typedef struct {
    rd_kafka_t *cons;
    long answers[5]; /* rejected results by req_reason[], then nothing_to_cancel */
    long good_results, good_duplicates, other;
} results_t;

/* Checks one good job's result; returns 1 when it is right, else 0 with why. */
static int check_good(json_t *r, int n, char *why, size_t cap)
{
    const char *status = json_string_value(json_object_get(r, "status"));
    json_t *usage = json_object_get(r, "usage");
    json_int_t out = json_integer_value(json_object_get(usage, "output"));
    json_int_t in = json_integer_value(json_object_get(usage, "input"));
    json_t *msg = json_object_get(
        json_array_get(json_object_get(json_object_get(r, "response"), "choices"), 0), "message");
    const char *content = json_string_value(json_object_get(msg, "content"));
    char expect[128];
    snprintf(expect, sizeof expect, "Simulated reply from sim (%lld completion tokens).",
             (long long)out);
    json_int_t meta = json_integer_value(json_object_get(json_object_get(r, "metadata"), "n"));
    const char *tenant = json_string_value(json_object_get(r, "tenant"));
    const char *dep = json_string_value(json_object_get(r, "deployment"));
    if (status == NULL || strcmp(status, "succeeded") != 0)
        snprintf(why, cap, "status %s", status != NULL ? status : "(none)");
    else if (meta != n || tenant == NULL || strcmp(tenant, "t1") != 0)
        snprintf(why, cap, "metadata n %lld, tenant %s", (long long)meta, tenant ? tenant : "-");
    else if (dep == NULL || strcmp(dep, "sim") != 0 || in <= 0 || out <= 0 || out > 16)
        snprintf(why, cap, "deployment %s, usage in %lld out %lld", dep ? dep : "-", (long long)in,
                 (long long)out);
    else if (content == NULL || strcmp(content, expect) != 0)
        snprintf(why, cap, "content %.80s", content ? content : "(none)");
    else
        return 1;
    return 0;
}

static void take_result(results_t *rs, good_t *g, const rd_kafka_message_t *m)
{
    static const char *const answer[5] = {
        "\"reason\":\"malformed_json\"", "\"reason\":\"schema_violation\"",
        "\"reason\":\"unknown_api_key\"", "\"reason\":\"payload_too_large\"",
        "\"reason\":\"nothing_to_cancel\""};
    static const char good_mark[] = "\"idempotency_key\":\"flood-good-";
    if (memmem(m->payload, m->len, good_mark, sizeof good_mark - 1) == NULL) {
        for (int a = 0; a < 5; a++) {
            if (memmem(m->payload, m->len, answer[a], strlen(answer[a])) != NULL) {
                rs->answers[a]++;
                return;
            }
        }
        rs->other++;
        return;
    }
    json_t *r = json_loadb(m->payload, m->len, 0, NULL);
    const char *idem = json_string_value(json_object_get(r, "idempotency_key"));
    int n = idem != NULL ? atoi(idem + strlen("flood-good-")) : -1;
    if (n < 0 || n >= WARMUP + GOOD) {
        rs->other++;
    } else if (g->status_ok[n] != 0) {
        rs->good_duplicates++;
    } else {
        rs->good_results++;
        g->finished_ms[n] = h_wall_ms();
        g->status_ok[n] = check_good(r, n, g->why[n], sizeof g->why[n]) ? 1 : -1;
    }
    json_decref(r);
}

/* Reads what the results topic has now (up to max_ms). */
static void drain_results(results_t *rs, good_t *g, int max_ms)
{
    double until = sl_mono_ms() + max_ms;
    do {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rs->cons, 0);
        if (m == NULL)
            break;
        if (!m->err)
            take_result(rs, g, m);
        rd_kafka_message_destroy(m);
    } while (sl_mono_ms() < until);
}

/* Whether every good job's result and `bad` answers of each kind were read. */
static int all_read(const results_t *rs, long bad, long good)
{
    for (int a = 0; a < 5; a++) {
        if (rs->answers[a] < bad)
            return 0;
    }
    return rs->good_results >= good;
}

/* ---- the daemons' counters ---- */

typedef struct {
    long rejected[4]; /* ingest, by req_reason[] */
    long jobs;        /* ingest: requests turned into jobs */
    long jobs_invalid, usage_invalid, usage_stale, cancels_unmatched; /* scheduler */
    long forged, not_sent;                                            /* dispatcher */
} counters_t;

/* The value of a series of a /metrics text ("name" or "name{labels}"); 0 when absent (a
 * labelled counter appears at its first update). */
static long metric(const char *text, const char *series)
{
    char pat[256];
    snprintf(pat, sizeof pat, "\n%s ", series);
    const char *p = strstr(text, pat);
    return p != NULL ? atol(p + strlen(pat)) : 0;
}

/* Reads all three daemons' counters; 0 when one of them did not answer. */
static int read_counters(const ports_t *p, counters_t *c)
{
    char url[3][64];
    snprintf(url[0], sizeof url[0], "http://127.0.0.1:%d/metrics", p->ingest);
    snprintf(url[1], sizeof url[1], "http://127.0.0.1:%d/metrics", p->sched);
    snprintf(url[2], sizeof url[2], "http://127.0.0.1:%d/metrics", p->disp);
    char *text[3];
    int ok = 1;
    for (int i = 0; i < 3; i++) {
        text[i] = h_http_text(url[i]);
        ok &= text[i] != NULL;
    }
    if (ok) {
        for (int r = 0; r < 4; r++) {
            char series[128];
            snprintf(series, sizeof series, "sluice_ingest_rejected_total{reason=\"%s\"}",
                     req_reason[r]);
            c->rejected[r] = metric(text[0], series);
        }
        c->jobs = metric(text[0], "sluice_ingest_jobs_total");
        c->jobs_invalid = metric(text[1], "sluice_scheduler_jobs_invalid_total");
        c->usage_invalid = metric(text[1], "sluice_scheduler_usage_invalid_total");
        c->usage_stale = metric(text[1], "sluice_scheduler_usage_stale_total");
        c->cancels_unmatched = metric(text[1], "sluice_scheduler_cancels_unmatched_total");
        c->forged = metric(text[2], "sluice_dispatcher_refused_total{reason=\"forged\"}");
        c->not_sent = metric(
            text[2], "sluice_dispatcher_calls_total{deployment=\"sim\",outcome=\"not_sent\"}");
    }
    for (int i = 0; i < 3; i++)
        free(text[i]);
    return ok;
}

/* Whether the counters show every message of the first `bad` of each kind and `good` good
 * requests taken in. */
static int caught_up(const counters_t *c, long bad, long good)
{
    for (int r = 0; r < 4; r++) {
        if (c->rejected[r] < bad)
            return 0;
    }
    return c->jobs >= good && c->jobs_invalid >= 2 * bad && c->usage_invalid >= bad &&
           c->usage_stale >= bad && c->cancels_unmatched >= bad && c->forged >= 2 * bad;
}

/* Waits until the counters show the first `bad` of each kind and `good` good requests taken
 * in, and this test has read the answers to the first `bad` of each kind (the broker drops
 * results we leave unread as surely as requests the daemons leave unread: a CI run whose
 * producing loop outpaced its own reading lost 16,000 answers of each kind and 17 good
 * results); 0 after WAVE_WAIT_MS. */
static int wait_caught_up(const ports_t *p, results_t *rs, good_t *g, counters_t *c, long bad,
                          long good)
{
    double until = sl_mono_ms() + WAVE_WAIT_MS;
    while (sl_mono_ms() < until) {
        int answers_read = all_read(rs, bad, 0);
        if (answers_read && read_counters(p, c) && caught_up(c, bad, good))
            return 1;
        drain_results(rs, g, answers_read ? 20 : 200);
        if (answers_read)
            usleep(20 * 1000);
    }
    return 0;
}

/* ---- memory and logs ---- */

enum { D_INGEST, D_SCHED, D_DISP, DAEMONS };
static const char *const daemon_name[DAEMONS] = {"ingest", "scheduler", "dispatcher"};

static long log_bytes(const char *name)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s.log", h_tmpdir(), name);
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* A log's bound, for a run of elapsed_s seconds. The bad messages are logged at most once per
 * call site per 10 s (SL_LOG_REPEAT_MS) plus one summary when a burst ends, and each daemon
 * writes a stats line every 10 s: with at most 8 such sources a daemon, 2 lines each per 10 s
 * window, of at most 512 bytes, and 16 KB for starting, stopping and the good jobs. A line per
 * bad message would be hundreds of megabytes. */
static long log_bytes_max(double elapsed_s)
{
    long windows = (long)(elapsed_s / 10.0) + 2;
    return 16 * 1024 + windows * 8 * 2 * 512;
}

/* The number of waves for per_kind messages of each kind: the fewest (at least WAVES_MIN) that
 * divide GOOD, so every wave has as many good jobs, with at most PER_WAVE_MAX of each kind. */
static int flood_waves(long per_kind)
{
    for (int w = WAVES_MIN; w < GOOD; w++)
        if (GOOD % w == 0 && per_kind / w <= PER_WAVE_MAX)
            return w;
    return GOOD;
}

int main(void)
{
    sl_crypto_init();
    int asan = h_sanitizers();
    long per_kind = asan ? PER_KIND / 10 : PER_KIND;
    const char *env_n = getenv("E2E_FLOOD_PER_KIND");
    if (env_n != NULL && atol(env_n) >= GOOD)
        per_kind = atol(env_n);
    const int waves = flood_waves(per_kind);
    per_kind = per_kind / waves * waves;
    printf("e2e flood: %ld messages of each of %d bad kinds (%ld in all) in %d waves, %d good "
           "jobs among them%s\n",
           per_kind, KINDS, per_kind * KINDS, waves, GOOD,
           asan ? "; a tenth of the volume under the sanitizers" : "");

    ports_t ports = {h_free_port(), h_free_port(), h_free_port(), h_free_port()};
    int sim_port = h_free_port();
    char *sim_cfg = NULL;
    const char *cfg = write_configs(&ports, sim_port, &sim_cfg);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    pid_t pid[DAEMONS] = {st.ingest, st.sched, st.disp};
    counters_t c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < 300 && !read_counters(&ports, &c); i++)
        usleep(100 * 1000);

    static sig_pool_t pool;
    sig_pool_init(&pool);
    sl_signer_t *as_ingest = role_signer("ingest"), *as_dispatcher = role_signer("dispatcher");
    rd_kafka_t *prod = flood_producer(st.bootstrap);
    results_t rs;
    memset(&rs, 0, sizeof rs);
    rs.cons = h_consumer_from_start(st.bootstrap, "sluice.results");
    static good_t good;

    /* Warm-up: a few good jobs through every daemon, then the memory baseline. */
    for (int n = 0; n < WARMUP; n++)
        produce_good(prod, &good, n);
    rd_kafka_flush(prod, 10000);
    double until = sl_mono_ms() + 60000;
    long warm_done = 0;
    while (warm_done < WARMUP && sl_mono_ms() < until) {
        drain_results(&rs, &good, 200);
        usleep(20 * 1000);
        warm_done = rs.good_results;
    }
    h_check(warm_done == WARMUP, "the warm-up jobs finished before the flood (%ld/%d)", warm_done,
            WARMUP);
    long rss0[DAEMONS] = {0}, rss_early[DAEMONS] = {0}, rss_end[DAEMONS], hwm_end[DAEMONS];
    for (int d = 0; d < DAEMONS; d++)
        rss0[d] = h_rss_kb(pid[d]);

    long per_wave = per_kind / waves;
    int good_per_wave = GOOD / waves;
    long sent = 0, good_sent = WARMUP;
    int waves_done = 0, stuck = 0;
    double t0 = sl_mono_ms(), produce_ms = 0;
    char buf[2048], key[64];
    for (int w = 0; w <= waves && !stuck; w++) {
        /* Wave w goes out once the daemons took in every wave before w - 1 and we read their
         * answers: at most two waves are ever unread on any topic (the limit above is for
         * two), and the daemons never wait for us. */
        long bad_due = w >= 2 ? (long)(w - 1) * per_wave : 0;
        long good_due = w >= 2 ? WARMUP + (long)(w - 1) * good_per_wave : 0;
        if (w == waves) {
            bad_due = sent;
            good_due = good_sent;
        }
        if (!wait_caught_up(&ports, &rs, &good, &c, bad_due, good_due)) {
            h_check(0, "the daemons took in the first %ld of each kind within %d s", bad_due,
                    WAVE_WAIT_MS / 1000);
            stuck = 1;
            break;
        }
        waves_done = bad_due / per_wave;
        if (waves_done == waves / 4 && rss_early[0] == 0) {
            for (int d = 0; d < DAEMONS; d++)
                rss_early[d] = h_rss_kb(pid[d]);
        }
        if (w == waves)
            break;
        if (w > 0 && w % 10 == 0)
            printf("  wave %d/%d: %ld of each kind taken in after %.1f s\n", w, waves, bad_due,
                   (sl_mono_ms() - t0) / 1000.0);
        double tp = sl_mono_ms();
        for (long i = 0; i < per_wave; i++) {
            long seq = sent + i;
            for (int k = 0; k < KINDS; k++) {
                const char *sig = NULL;
                int len = make_bad((kind_t)k, seq, &pool, buf, sizeof buf, key, sizeof key, &sig);
                int on_jobs = strcmp(kind_topic[k], "sluice.jobs") == 0;
                int on_usage = strcmp(kind_topic[k], "sluice.usage") == 0;
                produce(prod, kind_topic[k], key, buf, (size_t)len, sig,
                        on_jobs    ? as_ingest
                        : on_usage ? as_dispatcher
                                   : NULL,
                        on_jobs ? SL_ROLE_INGEST : SL_ROLE_DISPATCHER);
            }
            if (i % (per_wave / good_per_wave) == per_wave / good_per_wave / 2)
                produce_good(prod, &good, (int)good_sent++);
            if (i % 1000 == 0) {
                rd_kafka_poll(prod, 0);
                drain_results(&rs, &good, 5);
            }
        }
        rd_kafka_flush(prod, 60000);
        produce_ms += sl_mono_ms() - tp;
        sent += per_wave;
    }
    double flood_s = (sl_mono_ms() - t0) / 1000.0;
    h_check(!stuck && waves_done == waves, "every wave was taken in (%d/%d)", waves_done, waves);

    /* The good jobs of the last wave may still be running, and the last answers on their way. */
    until = sl_mono_ms() + 60000;
    while (!all_read(&rs, sent, good_sent) && sl_mono_ms() < until) {
        drain_results(&rs, &good, 200);
        usleep(10 * 1000);
    }
    for (int d = 0; d < DAEMONS; d++) {
        rss_end[d] = h_rss_kb(pid[d]);
        hwm_end[d] = h_peak_rss_kb(pid[d]);
    }
    read_counters(&ports, &c);

    long total = sent * KINDS;
    printf("  CPU seconds: devkafka %.1f, this test %.1f\n", h_cpu_seconds(st.kafka),
           h_cpu_seconds(getpid()));
    printf("  flood: %ld bad messages and %ld good requests in %.1f s (%.0f messages/s taken "
           "in; producing took %.1f s)\n",
           total, good_sent, flood_s, (double)total / flood_s, produce_ms / 1000.0);

    /* Every bad message accounted for by the daemon that refused it. */
    for (int r = 0; r < 4; r++)
        h_check(c.rejected[r] == sent, "ingest rejected %ld of %ld requests as %s", c.rejected[r],
                sent, req_reason[r]);
    h_check(c.jobs == good_sent, "ingest made jobs of the %ld good requests only (%ld)", good_sent,
            c.jobs);
    h_check(c.jobs_invalid == 2 * sent, "the scheduler counted %ld of %ld invalid job messages",
            c.jobs_invalid, 2 * sent);
    h_check(c.cancels_unmatched == sent, "the scheduler counted %ld of %ld cancels of unknown jobs",
            c.cancels_unmatched, sent);
    h_check(c.usage_invalid == sent, "the scheduler counted %ld of %ld invalid usage events",
            c.usage_invalid, sent);
    h_check(c.usage_stale == sent, "the scheduler counted %ld of %ld usage events for no lease",
            c.usage_stale, sent);
    h_check(c.forged == 2 * sent,
            "the dispatcher refused %ld of %ld unsigned or badly signed "
            "dispatches as forged",
            c.forged, 2 * sent);

    /* Every bad request and cancel answered; every good job right. */
    for (int a = 0; a < 5; a++)
        h_check(rs.answers[a] >= sent, "%ld of %ld %s answers on the results topic", rs.answers[a],
                sent, a < 4 ? req_reason[a] : "nothing_to_cancel");
    int good_ok = 0;
    double lat_max = 0, lat_sum = 0;
    for (int n = 0; n < good_sent; n++) {
        if (good.status_ok[n] == 1) {
            good_ok++;
            double lat = good.finished_ms[n] - good.produced_ms[n];
            lat_sum += lat;
            lat_max = lat > lat_max ? lat : lat_max;
        } else if (good.status_ok[n] == -1) {
            printf("  good job %d: %s\n", n, good.why[n]);
        } else {
            printf("  good job %d: no result\n", n);
        }
    }
    h_check(good_ok == good_sent, "every good job succeeded with its own result (%d/%ld)", good_ok,
            good_sent);
    printf("  good jobs: produce to result %.0f ms on average, %.0f ms at most; %ld duplicate "
           "deliveries\n",
           good_ok ? lat_sum / good_ok : 0, lat_max, rs.good_duplicates);
    /* The flood must not hold the good jobs back for long: a dispatcher that took one batch per
     * wait of its loop, not all the queue held, kept them 250 s and sent each ~20 times. */
    h_check(lat_max <= GOOD_LATENCY_MAX_MS,
            "no good job waited more than %d ms from produce to result (%.0f ms at most)",
            GOOD_LATENCY_MAX_MS, lat_max);
    /* A genuine dispatch that waited behind the forged ones past its maximum age is refused
     * (not_sent) and the job dispatched again: slower, never lost. */
    printf("  genuine dispatches that went stale behind the flood (not_sent, sent again): %ld\n",
           c.not_sent);
    json_t *stats = h_http_json(st.stats_url);
    int64_t admitted = h_sim_total(stats, "admitted");
    json_decref(stats);
    h_check(admitted == good_sent, "the provider was called for the good jobs only (%lld of %ld)",
            (long long)admitted, good_sent);

    /* Memory. */
    long bound = RSS_GROWTH_MAX_KB;
    for (int d = 0; d < DAEMONS; d++) {
        printf("  %s: RSS %ld KiB before the flood, %ld after wave %d, %ld at the end; peak %ld; "
               "%.1f CPU s\n",
               daemon_name[d], rss0[d], rss_early[d], waves / 4, rss_end[d], hwm_end[d],
               h_cpu_seconds(pid[d]));
        if (!asan)
            h_check(rss0[d] > 0 && hwm_end[d] - rss0[d] <= bound,
                    "%s: peak RSS grew %ld KiB over the flood (at most %ld)", daemon_name[d],
                    hwm_end[d] - rss0[d], bound);
        if (!asan && waves_done == waves)
            h_check(rss_end[d] - rss_early[d] <= RSS_LATE_GROWTH_MAX_KB,
                    "%s: RSS grew %ld KiB over the last %d waves (at most %ld)", daemon_name[d],
                    rss_end[d] - rss_early[d], waves - waves / 4, RSS_LATE_GROWTH_MAX_KB);
    }

    rd_kafka_destroy(prod);
    rd_kafka_consumer_close(rs.cons);
    rd_kafka_destroy(rs.cons);
    int unclean = h_stack_down(&st);
    h_check(unclean == 0, "every process stopped cleanly on SIGTERM (%d did not)", unclean);

    /* Logs, whole (the summaries of held-back lines come out at the stop at the latest). */
    double run_s = (sl_mono_ms() - t0) / 1000.0;
    long log_max = log_bytes_max(run_s);
    for (int d = 0; d < DAEMONS; d++) {
        long bytes = log_bytes(daemon_name[d]);
        h_check(bytes > 0 && bytes <= log_max, "%s log: %ld bytes (at most %ld for %.0f s)",
                daemon_name[d], bytes, log_max, run_s);
    }
    free(sim_cfg);
    free((char *)cfg);
    sl_signer_free(as_ingest);
    sl_signer_free(as_dispatcher);
    int rc = h_summary("flood");
    h_cleanup(rc != 0);
    return rc;
}
