/* engine.c - concurrent provider calls on a libcurl multi handle (see engine.h).
 *
 * Each attempt (job id, attempt, reservation id) gets at most one answer from an engine: its
 * call, or one not_sent or client_error event. The attempts running are in `inflight`, those
 * answered in `answered` (the newest SL_ENGINE_REMEMBERED); a dispatch message for either is a
 * replay and is dropped before anything else is decided about it, staleness included. */
#include "engine.h"

#include <curl/curl.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "adapter.h"
#include "buf.h"
#include "capacity.h"
#include "estimate.h"
#include "hmap.h"
#include "jsonschema.h"
#include "log.h"
#include "msg_dispatch.h"
#include "ratelimit.h"
#include "seal.h"
#include "stream.h"
#include "util.h"

enum { MAX_RESPONSE_BYTES = 16 << 20, LEASE_GUARD_MS = 500, MAX_HELD = 1024 };

/* How late after its time a paced call may still leave: the loop's granularity. A paced call
 * is planned at the stale cutoff itself (sl_capacity_pace_ms), so the cutoff alone would refuse
 * it for any lateness at all. */
enum { PACED_LATE_MS = 10 };

/* "job:attempt:reservation": both ids are at most 64 characters (schema/dispatch.json). */
enum { ATTEMPT_KEY_LEN = 160 };

/* An answered attempt as remembered: a 128-bit hash of its key, in hex (the full key would
 * take four times the memory for the same protection), and when its dispatch was issued. */
enum { DIGEST_BYTES = 16, DIGEST_HEX = 2 * DIGEST_BYTES + 1 };
typedef struct {
    char digest[DIGEST_HEX];
    int64_t issued_ms;
} answered_t;

typedef struct {
    const sl_adapter_t *ad;
    char *auth_header; /* the provider's credential header line, or NULL */
    size_t key_at;     /* where the key starts in auth_header */
} dep_rt_t;

/* How a streamed request's answer is read: decided at its first body byte. */
typedef enum {
    BODY_UNDECIDED = 0,
    BODY_EVENTS, /* a 2xx text/event-stream: parsed as it arrives */
    BODY_WHOLE,  /* anything else (an error, or one JSON body): read whole, as unstreamed */
} body_mode_t;

typedef struct call {
    struct sl_engine *e;
    CURL *easy;
    struct curl_slist *headers;
    sl_adapter_request_t req;
    sl_buf_t resp; /* the whole body (BODY_WHOLE), capped below MAX_RESPONSE_BYTES */
    int too_big;
    sl_ratelimit_t rl;
    sl_stream_t *stream; /* a streamed request; NULL otherwise */
    body_mode_t mode;
    int event_stream; /* the response said content-type: text/event-stream */
    char job_id[65];
    char res_id[65];
    char inflight_key[ATTEMPT_KEY_LEN];
    int attempt;
    int deployment;
    int tenant;          /* the dispatch's tenant (index into the config), or -1 */
    char *tenant_name;   /* as the dispatch named it (NULL: not named): the key of its usage */
    int64_t issued_ms;   /* when the scheduler issued the dispatch */
    int64_t leave_by_ms; /* the request must leave by then (wall clock), or it is not sent */
    int late;            /* it had not left by leave_by_ms: stopped before any byte went out */
    int64_t started_ms;
    double started_mono_ms;
    double send_mono_ms; /* held until then (a paced dispatch), when > 0 */
    /* A streamed call, once started, is on the engine's list of streams, so that one that
     * goes silent can be cut before its overall timeout (see cut_idle_streams). */
    struct call *stream_prev, *stream_next;
    int on_stream_list;
    double last_byte_mono_ms; /* the provider's latest byte, header or body; 0 before any */
    int idle_cut;             /* cut for silence: it ends as a timeout */
    int announced;            /* named in a heartbeat already (sl_engine_each_attempt) */
} call_t;

struct sl_engine {
    const sl_config_t *cfg;
    sl_schema_t *schema;
    sl_engine_emit_fn emit;
    void *emit_arg;
    sl_engine_timing_fn timing;
    void *timing_arg;
    sl_engine_chunk_fn chunk;
    void *chunk_arg;
    sl_engine_outcome_fn outcome;
    void *outcome_arg;
    CURLM *multi;
    dep_rt_t *deps;
    sl_hmap_t *inflight; /* attempt key -> call, so a redelivered dispatch is not sent twice */
    int n_inflight;
    /* The attempts answered here, newest SL_ENGINE_REMEMBERED: a ring (oldest overwritten
     * first) and a set of its digests. forgotten_ms is the latest issued_ms of an attempt the
     * ring overwrote: a dispatch issued no later than that may be one of the forgotten. */
    answered_t *ring;
    size_t ring_next, ring_len;
    sl_hmap_t *answered;
    int64_t forgotten_ms;
    /* Paced calls not sent yet (also in inflight), at most MAX_HELD: a dispatch is held at
     * most SL_CAPACITY_PACE_MAX_MS, so few wait at once. */
    call_t *held[MAX_HELD];
    int nheld;
    call_t *streams; /* the streamed calls started, newest first */
    sl_engine_stats_t st;
};

/* Frees a secret after overwriting it. */
static void wipe_free(char *secret)
{
    if (secret == NULL)
        return;
    sodium_memzero(secret, strlen(secret));
    free(secret);
}

char *sl_engine_read_credential(const sl_deployment_cfg_t *d)
{
    if (d->api_key_env[0] != '\0') {
        const char *v = getenv(d->api_key_env);
        if (v != NULL && *v != '\0')
            return strdup(v);
    }
    if (d->api_key_file[0] != '\0') {
        char path[1024];
        char *text = NULL;
        sl_resolve_path(d->api_key_file, path, sizeof path);
        if (sl_read_file(path, 4096, &text, NULL) == SL_OK) {
            text[strcspn(text, "\r\n")] = '\0';
            return text;
        }
    }
    return NULL;
}

sl_err_t sl_engine_new(const sl_config_t *cfg, sl_engine_emit_fn emit, void *arg, sl_engine_t **out,
                       char *err, size_t errlen)
{
    *out = NULL;
    sl_engine_t *e = calloc(1, sizeof *e);
    if (e == NULL)
        return SL_ENOMEM;
    e->cfg = cfg;
    e->emit = emit;
    e->emit_arg = arg;
    char rel[1024], path[1024];
    snprintf(rel, sizeof rel, "%s/dispatch.json", cfg->schema_dir);
    sl_resolve_path(rel, path, sizeof path);
    sl_err_t rc = sl_schema_load_file(path, &e->schema, err, errlen);
    if (rc != SL_OK)
        goto fail;
    rc = SL_ENOMEM;
    e->multi = curl_multi_init();
    e->deps = calloc((size_t)cfg->ndeployments + 1, sizeof *e->deps);
    e->inflight = sl_hmap_new();
    e->answered = sl_hmap_new();
    e->ring = calloc(SL_ENGINE_REMEMBERED, sizeof *e->ring);
    e->forgotten_ms = INT64_MIN;
    if (e->multi == NULL || e->deps == NULL || e->inflight == NULL || e->answered == NULL ||
        e->ring == NULL)
        goto fail;
    curl_multi_setopt(e->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)cfg->max_in_flight);
    curl_multi_setopt(e->multi, CURLMOPT_MAXCONNECTS, (long)cfg->max_in_flight);
    for (int i = 0; i < cfg->ndeployments; i++) {
        const sl_deployment_cfg_t *d = &cfg->deployments[i];
        e->deps[i].ad = sl_adapter_for(d->api);
        if (e->deps[i].ad == NULL) {
            snprintf(err, errlen, "deployment %s: no adapter for its provider", d->name);
            rc = SL_ECONFIG;
            goto fail;
        }
        char *key = sl_engine_read_credential(d);
        if (key != NULL) {
            /* Only in the provider's own credential header: never in a URL or a body. */
            e->deps[i].auth_header = sl_adapter_auth_header(e->deps[i].ad, key);
            if (e->deps[i].auth_header != NULL)
                e->deps[i].key_at = strlen(e->deps[i].auth_header) - strlen(key);
            else
                sl_warn("deployment %s: its credential cannot be sent (a line break?)", d->name);
            wipe_free(key);
        } else {
            sl_warn("deployment %s has no credential (api_key_env/api_key_file)", d->name);
        }
    }
    *out = e;
    return SL_OK;
fail:
    sl_engine_free(e);
    return rc;
}

void sl_engine_on_timing(sl_engine_t *e, sl_engine_timing_fn fn, void *arg)
{
    e->timing = fn;
    e->timing_arg = arg;
}

void sl_engine_on_chunk(sl_engine_t *e, sl_engine_chunk_fn fn, void *arg)
{
    e->chunk = fn;
    e->chunk_arg = arg;
}

void sl_engine_on_outcome(sl_engine_t *e, sl_engine_outcome_fn fn, void *arg)
{
    e->outcome = fn;
    e->outcome_arg = arg;
}

/* Puts a started streamed call on the engine's list of streams. */
static void streams_link(sl_engine_t *e, call_t *c)
{
    c->stream_prev = NULL;
    c->stream_next = e->streams;
    if (e->streams != NULL)
        e->streams->stream_prev = c;
    e->streams = c;
    c->on_stream_list = 1;
}

/* Takes c off the list of streams; no-op when it is not on it. */
static void streams_unlink(call_t *c)
{
    if (!c->on_stream_list)
        return;
    if (c->stream_prev != NULL)
        c->stream_prev->stream_next = c->stream_next;
    else
        c->e->streams = c->stream_next;
    if (c->stream_next != NULL)
        c->stream_next->stream_prev = c->stream_prev;
    c->on_stream_list = 0;
}

static void call_free(call_t *c)
{
    if (c == NULL)
        return;
    free(c->tenant_name);
    streams_unlink(c);
    if (c->easy != NULL)
        curl_easy_cleanup(c->easy);
    curl_slist_free_all(c->headers);
    sl_adapter_request_clear(&c->req);
    sl_stream_free(c->stream);
    sl_buf_free(&c->resp);
    free(c);
}

static void free_call_entry(const char *key, void *value, void *arg)
{
    (void)key;
    sl_engine_t *e = arg;
    call_t *c = value;
    curl_multi_remove_handle(e->multi, c->easy);
    call_free(c);
}

void sl_engine_free(sl_engine_t *e)
{
    if (e == NULL)
        return;
    if (e->inflight != NULL) {
        sl_hmap_each(e->inflight, free_call_entry, e);
        sl_hmap_free(e->inflight);
    }
    sl_hmap_free(e->answered);
    free(e->ring);
    for (int i = 0; e->deps != NULL && i < e->cfg->ndeployments; i++)
        wipe_free(e->deps[i].auth_header);
    free(e->deps);
    if (e->multi != NULL)
        curl_multi_cleanup(e->multi);
    sl_schema_free(e->schema);
    free(e);
}

/* Overwrites every copy of the deployment's key in text with '*' (same length, in place). A
 * provider may quote the credential it refused in an error message; the key must not travel on
 * in a usage event or a chunk. */
static void scrub_key(const sl_engine_t *e, int d, char *text)
{
    const char *header = e->deps[d].auth_header;
    if (header == NULL)
        return;
    const char *key = header + e->deps[d].key_at;
    size_t klen = strlen(key);
    if (klen < 4)
        return;
    for (char *at = strstr(text, key); at != NULL; at = strstr(at + klen, key))
        memset(at, '*', klen);
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    call_t *c = arg;
    size_t n = size * nmemb;
    c->last_byte_mono_ms = sl_mono_ms();
    if (c->stream != NULL && c->mode == BODY_UNDECIDED) {
        long status = 0;
        curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
        c->mode = status >= 200 && status < 300 && c->event_stream ? BODY_EVENTS : BODY_WHOLE;
    }
    if (c->mode == BODY_EVENTS) {
        /* Parsed right here, so each chunk is published the moment its event arrived. A
         * failure (oversized, malformed) aborts the transfer; the stream then ends as
         * bad_response. */
        return sl_stream_feed(c->stream, data, n) == SL_OK ? n : 0;
    }
    sl_err_t rc = sl_buf_add(&c->resp, data, n);
    if (rc == SL_ETOOBIG)
        c->too_big = 1; /* aborts the transfer: a response this large is not one we can carry */
    if (rc != SL_OK)
        return 0;
    return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
    call_t *c = arg;
    size_t n = size * nmemb;
    c->last_byte_mono_ms = sl_mono_ms();
    /* One parser for every provider: each API's rate-limit and retry headers have their own
     * names (Gemini sends none), so the others' are simply absent. */
    sl_ratelimit_header(&c->rl, data, n);
    static const char ct[] = "content-type:";
    if (n > sizeof ct && strncasecmp(data, ct, sizeof ct - 1) == 0)
        c->event_stream = memmem(data, n, "text/event-stream", 17) != NULL;
    return n;
}

/* Hands a stream chunk to the chunk receiver. */
static void on_chunk(const json_t *chunk, void *arg)
{
    call_t *c = arg;
    sl_engine_t *e = c->e;
    e->st.chunks++;
    if (e->chunk == NULL)
        return;
    /* A tenant whose results are sealed gets its chunks sealed too: they carry the answer. A
     * chunk that cannot be sealed is not sent in the clear. */
    const uint8_t *pk = sl_config_seal_key(e->cfg, c->tenant);
    json_t *sealed = pk != NULL ? json_deep_copy(chunk) : NULL;
    if (pk != NULL && (sealed == NULL || sl_seal_chunk(sealed, pk) != SL_OK)) {
        sl_error("cannot seal a stream chunk for job %s; not sent", c->job_id);
        json_decref(sealed);
        return;
    }
    char *value = json_dumps(sealed != NULL ? sealed : chunk, JSON_COMPACT);
    json_decref(sealed);
    if (value == NULL) {
        sl_error("out of memory serialising a stream chunk for job %s", c->job_id);
        return;
    }
    scrub_key(e, c->deployment, value);
    e->chunk(sl_config_stream_topic(e->cfg, c->tenant), c->job_id, value, e->chunk_arg);
    free(value);
}

/* What one usage event says; the json_t members are owned by the event being built. */
typedef struct {
    const char *job_id;
    int attempt;
    const char *res_id;
    int deployment; /* index, or -1 (then deployment_name) */
    const char *deployment_name;
    sl_outcome_t outcome;
    long http_status;
    const sl_ratelimit_t *rl; /* may be NULL */
    int64_t retry_after_ms;   /* -1: none */
    json_t *usage;            /* may be NULL */
    json_t *response;         /* may be NULL; only kept for ok */
    json_t *error;            /* may be NULL; only kept when not ok */
    double ttft_ms, total_ms;
    int64_t started_ms, finished_ms;
    const char *tenant; /* the event's key when known: it goes to its tenant's partition, as
                         * the job did, so the scheduler shard that leased it hears it */
} usage_event_t;

/* Emits a usage event and releases the json_t members of ev. SL_ENOMEM (logged) when the event
 * could not be built: then nothing was emitted. */
static sl_err_t emit_usage(sl_engine_t *e, usage_event_t *ev)
{
    sl_err_t rc = SL_ENOMEM;
    json_t *rlj = json_object();
    if (rlj != NULL && ev->rl != NULL)
        sl_ratelimit_to_json(ev->rl, rlj);
    sl_msg_usage_t u = {.job_id = ev->job_id,
                        .attempt = ev->attempt,
                        .reservation_id = ev->res_id,
                        .deployment = ev->deployment_name,
                        .outcome = ev->outcome,
                        .http_status = (int)ev->http_status,
                        .usage = ev->usage,
                        .ratelimit = rlj,
                        .retry_after_ms = ev->retry_after_ms,
                        .ttft_ms = ev->ttft_ms,
                        .total_ms = ev->total_ms,
                        .started_ms = ev->started_ms,
                        .finished_ms = ev->finished_ms,
                        .response = ev->response,
                        .error = ev->error};
    json_t *js = rlj != NULL ? sl_msg_usage_json(&u) : NULL;
    json_decref(rlj);
    if (js == NULL) {
        sl_error("out of memory building a usage event for job %s", ev->job_id);
        goto out;
    }
    char *value = json_dumps(js, JSON_COMPACT);
    json_decref(js);
    if (value == NULL) {
        sl_error("out of memory serialising a usage event for job %s", ev->job_id);
        goto out;
    }
    if (ev->deployment >= 0)
        scrub_key(e, ev->deployment, value);
    e->emit(ev->tenant != NULL ? ev->tenant : ev->job_id, value, e->emit_arg);
    free(value);
    if (e->outcome != NULL)
        e->outcome(ev->deployment_name, sl_outcome_name(ev->outcome), e->outcome_arg);
    rc = SL_OK;
out:
    json_decref(ev->usage);
    json_decref(ev->response);
    json_decref(ev->error);
    return rc;
}

/* {type: outcome, code: null, message: detail} for failures no provider described. */
static json_t *plain_error(const char *type, const char *detail)
{
    json_t *err = json_pack("{s:s, s:s}", "type", type, "message", detail);
    if (err != NULL)
        json_object_set_new(err, "code", json_null());
    return err;
}

/* The answer of an attempt that made no call: the scheduler releases its reservation and
 * schedules the job again. */
static sl_err_t emit_not_sent(sl_engine_t *e, const char *tenant, const char *job_id, int attempt,
                              const char *res_id, const char *dep_name, const char *why,
                              int64_t now_ms)
{
    e->st.not_sent++;
    usage_event_t ev = {job_id, attempt,  res_id,
                        -1,     dep_name, SL_OUTCOME_NOT_SENT,
                        0,      NULL,     -1,
                        NULL,   NULL,     plain_error(sl_outcome_name(SL_OUTCOME_NOT_SENT), why),
                        0,      0,        now_ms,
                        now_ms, tenant};
    return emit_usage(e, &ev);
}

/* Appends line to *list. On failure *list is left as it was (curl_slist_append returns NULL
 * then, and assigning that would lose the lines already there). */
static sl_err_t add_header(struct curl_slist **list, const char *line)
{
    struct curl_slist *grown = curl_slist_append(*list, line);
    if (grown == NULL)
        return SL_ENOMEM;
    *list = grown;
    return SL_OK;
}

/* Builds c's header lines: the engine's own, the adapter's, then the credential. */
static sl_err_t call_headers(const sl_engine_t *e, call_t *c)
{
    /* The provider sees the job id as idempotency key: unique per tenant and job, unlike the
     * client's own key, which two tenants may both use. */
    char idem_header[128];
    snprintf(idem_header, sizeof idem_header, "Idempotency-Key: %s", c->job_id);
    sl_err_t rc = add_header(&c->headers, "Content-Type: application/json");
    if (rc == SL_OK)
        rc = add_header(&c->headers, idem_header);
    if (rc == SL_OK)
        rc = add_header(&c->headers, "Expect:");
    if (rc == SL_OK && c->req.stream)
        rc = add_header(&c->headers, "Accept: text/event-stream");
    for (int i = 0; rc == SL_OK && i < c->req.nheaders; i++)
        rc = add_header(&c->headers, c->req.headers[i]);
    const char *auth = e->deps[c->deployment].auth_header;
    if (rc == SL_OK && auth != NULL)
        rc = add_header(&c->headers, auth);
    return rc;
}

/* libcurl's last word before the request goes out on its connection: a call that waited past
 * its leave_by_ms (for the offset commit, the heartbeat, a connection, a loaded machine) is
 * stopped here, before any byte of it is sent. The stale cutoff at receipt alone let such a
 * call reach the provider later than the ledger's margin covers (e2e_recovery saw 429s on a
 * loaded machine). */
static int before_send(void *arg, char *remote_ip, char *local_ip, int remote_port, int local_port)
{
    (void)remote_ip;
    (void)local_ip;
    (void)remote_port;
    (void)local_port;
    call_t *c = arg;
    if (sl_now_ms() <= c->leave_by_ms)
        return CURL_PREREQFUNC_OK;
    c->late = 1;
    return CURL_PREREQFUNC_ABORT;
}

/* Creates c's easy handle, set up to send c's request within timeout_ms. */
static sl_err_t call_easy(call_t *c, long timeout_ms)
{
    c->easy = curl_easy_init();
    if (c->easy == NULL)
        return SL_ENOMEM;
    /* Of these options only the URL is copied by libcurl, so only it can fail. */
    CURLcode cc = curl_easy_setopt(c->easy, CURLOPT_URL, c->req.url);
    if (cc != CURLE_OK)
        return cc == CURLE_OUT_OF_MEMORY ? SL_ENOMEM : SL_EHTTP;
    curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, c->req.body);
    curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c->easy, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(c->easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c->easy, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(c->easy, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c->easy, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(c->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->easy, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(c->easy, CURLOPT_PRIVATE, c);
    curl_easy_setopt(c->easy, CURLOPT_PREREQFUNCTION, before_send);
    curl_easy_setopt(c->easy, CURLOPT_PREREQDATA, c);
    return SL_OK;
}

/* Hands a prepared call to libcurl. */
static sl_err_t start_call(sl_engine_t *e, call_t *c)
{
    c->started_ms = sl_now_ms();
    c->started_mono_ms = sl_mono_ms();
    CURLMcode mc = curl_multi_add_handle(e->multi, c->easy);
    if (mc != CURLM_OK)
        return mc == CURLM_OUT_OF_MEMORY ? SL_ENOMEM : SL_EHTTP;
    if (c->stream != NULL)
        streams_link(e, c);
    return SL_OK;
}

/* Starts the held calls whose time has come; returns the ms until the next one (-1: none). */
static int release_held(sl_engine_t *e)
{
    double now = sl_mono_ms(), next = -1;
    for (int i = 0; i < e->nheld;) {
        call_t *c = e->held[i];
        if (c->send_mono_ms > now) {
            double w = c->send_mono_ms - now;
            next = next < 0 || w < next ? w : next;
            i++;
            continue;
        }
        e->held[i] = e->held[--e->nheld];
        if (start_call(e, c) != SL_OK) {
            /* Nothing went out: the lease runs out and the scheduler sends the job again. */
            sl_logf(SL_LOG_WARN, "job", c->job_id, "paced call could not be started");
            sl_hmap_del(e->inflight, c->inflight_key);
            e->n_inflight--;
            call_free(c);
        }
    }
    return next < 0 ? -1 : (int)next + 1;
}

/* The digest of an attempt key, as hex. */
static void attempt_digest(const char *key, char hex[DIGEST_HEX])
{
    unsigned char raw[DIGEST_BYTES];
    crypto_generichash(raw, sizeof raw, (const unsigned char *)key, strlen(key), NULL, 0);
    sodium_bin2hex(hex, DIGEST_HEX, raw, sizeof raw);
}

/* Whether the attempt of key (its dispatch issued at issued_ms) was answered here, or may have
 * been: issued no later than an attempt already forgotten. */
static int answered_before(const sl_engine_t *e, const char *key, int64_t issued_ms)
{
    if (issued_ms <= e->forgotten_ms)
        return 1;
    char digest[DIGEST_HEX];
    attempt_digest(key, digest);
    return sl_hmap_get(e->answered, digest) != NULL;
}

/* Remembers that the attempt of key got its answer, forgetting the oldest when the ring is
 * full. SL_ENOMEM (logged) leaves it unremembered: a replay of it could then be answered
 * again, the same exposure as before this engine kept a memory. */
static void remember_answered(sl_engine_t *e, const char *key, int64_t issued_ms)
{
    answered_t *slot = &e->ring[e->ring_next];
    char digest[DIGEST_HEX];
    attempt_digest(key, digest);
    if (sl_hmap_get(e->answered, digest) != NULL)
        return;
    if (e->ring_len == SL_ENGINE_REMEMBERED) {
        sl_hmap_del(e->answered, slot->digest);
        if (slot->issued_ms > e->forgotten_ms)
            e->forgotten_ms = slot->issued_ms;
        e->ring_len--;
    }
    memcpy(slot->digest, digest, sizeof digest);
    slot->issued_ms = issued_ms;
    if (sl_hmap_put(e->answered, slot->digest, slot) != SL_OK) {
        sl_error("out of memory remembering an answered attempt; a replay of it goes unnoticed");
        return;
    }
    e->ring_len++;
    e->ring_next = (e->ring_next + 1) % SL_ENGINE_REMEMBERED;
}

int64_t sl_engine_dispatch_max_age_ms(const sl_config_t *cfg, int d)
{
    int64_t cutoff = sl_capacity_dispatch_max_age_ms(cfg, d);
    return cutoff < SL_ENGINE_DISPATCH_MAX_AGE_MS ? cutoff : SL_ENGINE_DISPATCH_MAX_AGE_MS;
}

sl_err_t sl_engine_submit(sl_engine_t *e, const void *value, size_t len, int64_t now_ms)
{
    sl_err_t rc = SL_OK;
    json_t *doc = NULL;
    call_t *c = NULL;
    const char *job_id = NULL;
    char why[256];
    doc = json_loadb(value, len, 0, NULL);
    if (doc == NULL || sl_schema_validate(e->schema, doc, why, sizeof why) != SL_OK) {
        e->st.malformed++;
        sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN, "dropped a malformed dispatch message: %s",
                     doc ? why : "malformed JSON");
        goto out;
    }
    sl_msg_dispatch_t msg;
    if (sl_msg_dispatch_read(doc, &msg) != SL_OK) {
        e->st.malformed++;
        sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN,
                     "dropped a malformed dispatch message: a required field is missing");
        goto out;
    }
    job_id = msg.job_id;
    const char *res_id = msg.reservation_id;
    const char *dep_name = msg.deployment;
    int attempt = msg.attempt;
    int64_t lease_expires = msg.lease_expires_ms;
    int64_t issued = msg.issued_ms;
    char key[ATTEMPT_KEY_LEN];
    snprintf(key, sizeof key, "%s:%d:%s", job_id, attempt, res_id);
    if (sl_hmap_get(e->inflight, key) != NULL || answered_before(e, key, issued)) {
        /* A redelivery, or a replay by someone who can write to the topic: this attempt has
         * its answer (or is getting it), and a second one would be a second call or a
         * not_sent the scheduler takes as "the call never happened". Checked before the
         * lease and the age, which only decide about attempts never tried. */
        e->st.replayed++;
        sl_logf(SL_LOG_DEBUG, "job", job_id, "dropped a replayed dispatch (attempt %d)", attempt);
        goto out;
    }
    int d = sl_config_deployment(e->cfg, dep_name);
    int64_t budget_ms = lease_expires - now_ms - LEASE_GUARD_MS;
    const char *why_not = NULL;
    if (d < 0)
        why_not = "unknown deployment";
    else if (budget_ms <= 0)
        why_not = "lease expired";
    else if (now_ms - issued > sl_engine_dispatch_max_age_ms(e->cfg, d))
        why_not = "stale dispatch: it waited too long before reaching a dispatcher";
    if (why_not != NULL) {
        /* The call must not happen after the scheduler stopped counting on it, nor so late
         * that it could join a burst the ledger did not plan. The scheduler releases the
         * reservation and schedules the job again. */
        rc = emit_not_sent(e, msg.tenant, job_id, attempt, res_id, dep_name, why_not, now_ms);
        if (rc == SL_OK)
            remember_answered(e, key, issued);
        goto out;
    }
    const sl_deployment_cfg_t *dc = &e->cfg->deployments[d];
    const sl_adapter_t *ad = e->deps[d].ad;
    c = calloc(1, sizeof *c);
    if (c == NULL) {
        rc = SL_ENOMEM;
        goto out;
    }
    c->e = e;
    sl_buf_init(&c->resp, MAX_RESPONSE_BYTES - 1);
    sl_ratelimit_init(&c->rl);
    snprintf(c->job_id, sizeof c->job_id, "%s", job_id);
    snprintf(c->res_id, sizeof c->res_id, "%s", res_id);
    snprintf(c->inflight_key, sizeof c->inflight_key, "%s", key);
    c->attempt = attempt;
    c->deployment = d;
    c->tenant = msg.tenant != NULL ? sl_config_tenant(e->cfg, msg.tenant) : -1;
    if (msg.tenant != NULL && (c->tenant_name = strdup(msg.tenant)) == NULL) {
        rc = SL_ENOMEM;
        goto out;
    }
    c->issued_ms = issued;
    /* The age bound holds when the request leaves, not only when it arrived (before_send). */
    c->leave_by_ms = issued + sl_engine_dispatch_max_age_ms(e->cfg, d);
    if (msg.send_at_ms > 0 && msg.send_at_ms + PACED_LATE_MS > c->leave_by_ms)
        c->leave_by_ms = msg.send_at_ms + PACED_LATE_MS;
    c->started_ms = now_ms;
    const json_t *request = msg.request;
    if (json_is_true(json_object_get(request, "stream"))) {
        /* A cut stream is charged what it consumed; when the provider never said how much
         * input that was, the same estimate ingest reserved is the best figure there is. */
        sl_stream_ids_t ids = {job_id, attempt, res_id, dc->model,
                               sl_estimate_input_tokens(request, dc->model)};
        rc = sl_stream_new(ad, &ids, on_chunk, c, &c->stream);
        if (rc != SL_OK)
            goto out;
    }
    rc = sl_adapter_request(ad, dc, request, &c->req, why, sizeof why);
    if (rc == SL_EINVAL) {
        /* No provider call can carry this request: a request error, charged nothing. */
        e->st.untranslatable++;
        sl_logf(SL_LOG_WARN, "job", c->job_id, "request not sent to %s: %s", dc->name, why);
        if (c->stream != NULL)
            sl_stream_end_whole(c->stream, NULL, NULL);
        sl_usage_t zero = {0, 0, 0, 0, 0};
        char message[320];
        snprintf(message, sizeof message, "the request cannot be sent to %s: %s",
                 sl_adapter_name(ad), why);
        usage_event_t ev = {c->job_id,
                            attempt,
                            c->res_id,
                            d,
                            dc->name,
                            SL_OUTCOME_CLIENT_ERROR,
                            0,
                            NULL,
                            -1,
                            sl_usage_json(&zero),
                            NULL,
                            plain_error("invalid_request", message),
                            0,
                            0,
                            now_ms,
                            now_ms,
                            c->tenant_name};
        rc = emit_usage(e, &ev);
        if (rc == SL_OK)
            remember_answered(e, key, issued);
        goto out;
    }
    if (rc == SL_OK)
        rc = call_headers(e, c);
    if (rc == SL_OK)
        rc = call_easy(c, (long)(budget_ms < dc->timeout_ms ? budget_ms : dc->timeout_ms));
    if (rc == SL_OK)
        rc = sl_hmap_put(e->inflight, c->inflight_key, c);
    if (rc != SL_OK)
        goto out;
    /* A paced dispatch waits for its time here (never longer than the pace: a later
     * send_at_ms would be no dispatch the scheduler makes). */
    int64_t hold = msg.send_at_ms - now_ms;
    if (hold > SL_CAPACITY_PACE_MAX_MS)
        hold = SL_CAPACITY_PACE_MAX_MS;
    if (hold > 0 && e->nheld < MAX_HELD) {
        c->send_mono_ms = sl_mono_ms() + (double)hold;
        e->held[e->nheld++] = c;
        e->n_inflight++;
        e->st.accepted++;
        c = NULL;
        goto out;
    }
    rc = start_call(e, c);
    if (rc != SL_OK) {
        sl_hmap_del(e->inflight, c->inflight_key);
        goto out;
    }
    e->n_inflight++;
    e->st.accepted++;
    c = NULL; /* the engine holds the call now */
out:
    if (rc != SL_OK)
        sl_logf(SL_LOG_DEBUG, "job", job_id != NULL ? job_id : "", "dispatch not taken: %s",
                sl_strerror(rc));
    call_free(c);
    json_decref(doc);
    return rc;
}

/* Reports the call's timing, measured from pretransfer (the request about to go out) so that
 * queueing for a connection and connection set-up are the network's, not the provider's. */
static void report_timing(sl_engine_t *e, call_t *c, long status)
{
    curl_off_t pre_us = 0, first_us = 0, total_us = 0;
    if (curl_easy_getinfo(c->easy, CURLINFO_PRETRANSFER_TIME_T, &pre_us) != CURLE_OK ||
        curl_easy_getinfo(c->easy, CURLINFO_STARTTRANSFER_TIME_T, &first_us) != CURLE_OK ||
        curl_easy_getinfo(c->easy, CURLINFO_TOTAL_TIME_T, &total_us) != CURLE_OK)
        return;
    sl_engine_timing_t t = {e->cfg->deployments[c->deployment].name, status,
                            (double)(total_us > pre_us ? total_us - pre_us : 0) / 1e6,
                            (double)(first_us > pre_us ? first_us - pre_us : 0) / 1e6};
    e->timing(&t, e->timing_arg);
}

static void finish_call(sl_engine_t *e, call_t *c, CURLcode result)
{
    if (c->late) {
        /* Stopped by before_send: nothing reached the provider, and no chunk went out. */
        char why[200];
        snprintf(why, sizeof why,
                 "stale dispatch: it had not left the dispatcher %lld ms after its admission",
                 (long long)(c->leave_by_ms - c->issued_ms));
        sl_logf(SL_LOG_DEBUG, "job", c->job_id, "call not sent: %s", why);
        emit_not_sent(e, c->tenant_name, c->job_id, c->attempt, c->res_id,
                      e->cfg->deployments[c->deployment].name, why, sl_now_ms());
        return;
    }
    const sl_deployment_cfg_t *dc = &e->cfg->deployments[c->deployment];
    const sl_adapter_t *ad = e->deps[c->deployment].ad;
    long status = 0;
    double ttft_s = 0, total_s = 0;
    curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(c->easy, CURLINFO_STARTTRANSFER_TIME, &ttft_s);
    curl_easy_getinfo(c->easy, CURLINFO_TOTAL_TIME, &total_s);
    if (e->timing != NULL && result == CURLE_OK && status > 0)
        report_timing(e, c, status);
    int transport = 0;
    const char *detail = NULL;
    char idle_detail[128];
    snprintf(idle_detail, sizeof idle_detail,
             "the provider sent nothing for %lld ms (the deployment's stream_idle_timeout_ms)",
             (long long)dc->stream_idle_timeout_ms);
    if (c->idle_cut) {
        /* libcurl's clock stopped where the call was taken from it; this one did not. */
        transport = 2;
        detail = idle_detail;
        total_s = (sl_mono_ms() - c->started_mono_ms) / 1000.0;
    } else if (result == CURLE_OPERATION_TIMEDOUT) {
        transport = 2;
        detail = "the provider call timed out";
    } else if (result != CURLE_OK) {
        transport = 1;
        detail = c->too_big ? "response larger than 16 MiB" : curl_easy_strerror(result);
    }
    usage_event_t ev = {c->job_id,
                        c->attempt,
                        c->res_id,
                        c->deployment,
                        dc->name,
                        SL_OUTCOME_OK,
                        status,
                        &c->rl,
                        -1,
                        NULL,
                        NULL,
                        NULL,
                        ttft_s * 1000.0,
                        total_s * 1000.0,
                        c->started_ms,
                        sl_now_ms(),
                        c->tenant_name};
    if (c->mode == BODY_EVENTS) {
        ev.outcome = sl_stream_end(c->stream, transport);
        const json_t *perr = sl_stream_error(c->stream);
        if (ev.outcome == SL_OUTCOME_BAD_RESPONSE)
            detail = "the stream was malformed, or larger than sluice carries";
        else if (c->idle_cut && perr == NULL && ev.outcome != SL_OUTCOME_OK)
            detail = idle_detail;
        else if (perr == NULL && ev.outcome != SL_OUTCOME_OK)
            detail = transport == 2   ? "the stream timed out before the provider finished it"
                     : transport == 1 ? "the stream was cut before the provider finished it"
                                      : "the stream ended before the provider's final event";
        /* Whatever was consumed is charged, complete or not. */
        ev.usage = sl_stream_usage(c->stream);
        if (ev.outcome == SL_OUTCOME_OK)
            ev.response = sl_stream_response(c->stream);
        else
            ev.error = sl_adapter_error(ad, perr, sl_outcome_name(ev.outcome), detail);
        ev.retry_after_ms = sl_adapter_retry_after_ms(ad, &c->rl, perr);
        double first = sl_stream_first_event_ms(c->stream);
        if (first > 0)
            ev.ttft_ms = first - c->started_mono_ms;
    } else {
        json_t *body = c->resp.ptr != NULL ? json_loadb(c->resp.ptr, c->resp.len, 0, NULL) : NULL;
        ev.outcome = c->too_big ? SL_OUTCOME_BAD_RESPONSE
                                : sl_adapter_classify(ad, transport, status, body, &c->rl);
        ev.usage = body != NULL ? sl_adapter_usage(ad, body) : NULL;
        if (ev.outcome == SL_OUTCOME_OK) {
            ev.response = sl_adapter_response(ad, body, dc->model);
            if (ev.response == NULL)
                ev.outcome = SL_OUTCOME_BAD_RESPONSE; /* usage without an answer */
        }
        if (ev.outcome != SL_OUTCOME_OK)
            ev.error = sl_adapter_error(ad, body, sl_outcome_name(ev.outcome), detail);
        ev.retry_after_ms = sl_adapter_retry_after_ms(ad, &c->rl, body);
        if (c->stream != NULL)
            sl_stream_end_whole(c->stream, ev.response, ev.usage);
        json_decref(body);
    }
    emit_usage(e, &ev);
    e->st.completed++;
}

/* Ends a call libcurl was running: its usage event (and last chunk), then forgets it. */
static void retire_call(sl_engine_t *e, call_t *c, CURLcode result)
{
    curl_multi_remove_handle(e->multi, c->easy);
    finish_call(e, c, result);
    /* Remembered whether or not its usage event could be built: the call happened. */
    remember_answered(e, c->inflight_key, c->issued_ms);
    sl_hmap_del(e->inflight, c->inflight_key);
    e->n_inflight--;
    call_free(c);
}

/* When streamed call c is idle too long (sl_mono_ms clock), or -1 when never: its
 * deployment's stream_idle_timeout_ms after the provider's latest byte. The clock starts at
 * the first byte of the response: how long a provider takes to begin answering (a long
 * prompt, a model that thinks first) is the overall timeout's business. */
static double idle_deadline_ms(const sl_engine_t *e, const call_t *c)
{
    int64_t idle_ms = e->cfg->deployments[c->deployment].stream_idle_timeout_ms;
    if (idle_ms <= 0 || c->last_byte_mono_ms <= 0)
        return -1;
    return c->last_byte_mono_ms + (double)idle_ms;
}

/* The ms until the next streamed call would be idle too long (-1: none). */
static int next_idle_ms(const sl_engine_t *e)
{
    double now = sl_mono_ms(), next = -1;
    for (const call_t *c = e->streams; c != NULL; c = c->stream_next) {
        double at = idle_deadline_ms(e, c);
        if (at < 0)
            continue;
        double w = at > now ? at - now : 0;
        next = next < 0 || w < next ? w : next;
    }
    return next < 0 ? -1 : (int)next + 1;
}

/* Cuts the streamed calls whose provider has been silent for their deployment's
 * stream_idle_timeout_ms: each ends as a timeout, exactly as if its overall timeout had run
 * out now, so its slot and its reservation do not wait for that. Called after
 * curl_multi_perform, so bytes that arrived in time have been read. */
static void cut_idle_streams(sl_engine_t *e)
{
    double now = sl_mono_ms();
    call_t *next = NULL;
    for (call_t *c = e->streams; c != NULL; c = next) {
        next = c->stream_next;
        double at = idle_deadline_ms(e, c);
        if (at < 0 || at > now)
            continue;
        c->idle_cut = 1;
        sl_logf(SL_LOG_DEBUG, "job", c->job_id, "stream cut: the provider went silent");
        retire_call(e, c, CURLE_OPERATION_TIMEDOUT);
    }
}

void sl_engine_run(sl_engine_t *e, int extra_fd, int timeout_ms)
{
    int next = release_held(e);
    if (next >= 0 && next < timeout_ms)
        timeout_ms = next;
    next = next_idle_ms(e);
    if (next >= 0 && next < timeout_ms)
        timeout_ms = next;
    struct curl_waitfd extra = {extra_fd, CURL_WAIT_POLLIN, 0};
    int numfds = 0;
    curl_multi_poll(e->multi, extra_fd >= 0 ? &extra : NULL, extra_fd >= 0 ? 1 : 0, timeout_ms,
                    &numfds);
    int running = 0;
    curl_multi_perform(e->multi, &running);
    CURLMsg *m;
    int left = 0;
    while ((m = curl_multi_info_read(e->multi, &left)) != NULL) {
        if (m->msg != CURLMSG_DONE)
            continue;
        call_t *c = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&c);
        retire_call(e, c, m->data.result);
    }
    cut_idle_streams(e);
}

typedef struct {
    int only_new;
    sl_engine_attempt_fn fn;
    void *arg;
    int n;
} each_t;

static void each_attempt(const char *key, void *value, void *arg)
{
    (void)key;
    each_t *x = arg;
    call_t *c = value;
    if (x->only_new && c->announced)
        return;
    c->announced = 1;
    x->fn(c->job_id, c->res_id, x->arg);
    x->n++;
}

int sl_engine_each_attempt(sl_engine_t *e, int only_new, sl_engine_attempt_fn fn, void *arg)
{
    each_t x = {only_new, fn, arg, 0};
    sl_hmap_each(e->inflight, each_attempt, &x);
    return x.n;
}

int sl_engine_in_flight(const sl_engine_t *e)
{
    return e->n_inflight;
}

void sl_engine_stats(const sl_engine_t *e, sl_engine_stats_t *out)
{
    *out = e->st;
}
