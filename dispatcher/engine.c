/* engine.c - concurrent provider calls on a libcurl multi handle (see engine.h). */
#include "engine.h"

#include <curl/curl.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "jsonschema.h"
#include "log.h"
#include "openai.h"
#include "util.h"

enum { MAX_RESPONSE_BYTES = 16 << 20, LEASE_GUARD_MS = 500 };

typedef struct {
    char *auth_header; /* "Authorization: Bearer ..." or NULL */
    char *url;
} dep_rt_t;

typedef struct call {
    CURL *easy;
    struct curl_slist *headers;
    char *body;
    char *resp;
    size_t resp_len, resp_cap;
    int too_big;
    sl_ratelimit_t rl;
    char job_id[65];
    char res_id[65];
    char inflight_key[96];
    int attempt;
    int deployment;
    int64_t started_ms;
} call_t;

struct sl_engine {
    const sl_config_t *cfg;
    const sl_verifier_t *verifier;
    sl_schema_t *schema;
    sl_engine_emit_fn emit;
    void *emit_arg;
    sl_engine_timing_fn timing;
    void *timing_arg;
    CURLM *multi;
    dep_rt_t *deps;
    sl_hmap_t *inflight; /* "job:attempt" -> call, so a redelivered dispatch is not sent twice */
    int n_inflight;
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

static char *read_credential(const sl_deployment_cfg_t *d)
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

sl_err_t sl_engine_new(const sl_config_t *cfg, const sl_verifier_t *verifier,
                       sl_engine_emit_fn emit, void *arg, sl_engine_t **out, char *err,
                       size_t errlen)
{
    *out = NULL;
    sl_engine_t *e = calloc(1, sizeof *e);
    if (e == NULL)
        return SL_ENOMEM;
    e->cfg = cfg;
    e->verifier = verifier;
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
    if (e->multi == NULL || e->deps == NULL || e->inflight == NULL)
        goto fail;
    curl_multi_setopt(e->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)cfg->max_in_flight);
    curl_multi_setopt(e->multi, CURLMOPT_MAXCONNECTS, (long)cfg->max_in_flight);
    for (int i = 0; i < cfg->ndeployments; i++) {
        const sl_deployment_cfg_t *d = &cfg->deployments[i];
        size_t n = strlen(d->base_url) + 32;
        e->deps[i].url = malloc(n);
        if (e->deps[i].url == NULL)
            goto fail;
        snprintf(e->deps[i].url, n, "%s/chat/completions", d->base_url);
        char *key = read_credential(d);
        if (key != NULL) {
            size_t hn = strlen(key) + 32;
            e->deps[i].auth_header = malloc(hn);
            if (e->deps[i].auth_header != NULL)
                snprintf(e->deps[i].auth_header, hn, "Authorization: Bearer %s", key);
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

static void call_free(call_t *c)
{
    if (c == NULL)
        return;
    if (c->easy != NULL)
        curl_easy_cleanup(c->easy);
    curl_slist_free_all(c->headers);
    free(c->body);
    free(c->resp);
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
    for (int i = 0; e->deps != NULL && i < e->cfg->ndeployments; i++) {
        free(e->deps[i].url);
        wipe_free(e->deps[i].auth_header);
    }
    free(e->deps);
    if (e->multi != NULL)
        curl_multi_cleanup(e->multi);
    sl_schema_free(e->schema);
    free(e);
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    call_t *c = arg;
    size_t n = size * nmemb;
    if (c->resp_len + n + 1 > MAX_RESPONSE_BYTES) {
        c->too_big = 1;
        return 0; /* aborts the transfer: a response this large is not one we can carry */
    }
    if (c->resp_len + n + 1 > c->resp_cap) {
        size_t ncap = c->resp_cap ? c->resp_cap : 4096;
        while (ncap < c->resp_len + n + 1)
            ncap *= 2;
        char *nr = realloc(c->resp, ncap);
        if (nr == NULL)
            return 0;
        c->resp = nr;
        c->resp_cap = ncap;
    }
    memcpy(c->resp + c->resp_len, data, n);
    c->resp_len += n;
    c->resp[c->resp_len] = '\0';
    return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
    call_t *c = arg;
    sl_openai_header(&c->rl, data, size * nmemb);
    return size * nmemb;
}

/* Emits a usage event. body (may be NULL) is the parsed provider response. */
static void emit_usage(sl_engine_t *e, const char *job_id, int attempt, const char *res_id,
                       const char *deployment, const char *outcome, long http_status,
                       const sl_ratelimit_t *rl, json_t *body, double ttft_ms, double total_ms,
                       int64_t started_ms, int64_t now_ms, const char *err_message)
{
    json_t *ev = json_pack("{s:i, s:s, s:i, s:s, s:s, s:s, s:i, s:I, s:I}", "v", 1, "job_id",
                           job_id, "attempt", attempt, "reservation_id", res_id, "deployment",
                           deployment, "outcome", outcome, "http_status", (int)http_status,
                           "started_ms", (json_int_t)started_ms, "finished_ms",
                           (json_int_t)now_ms);
    if (ev == NULL) {
        sl_error("out of memory building a usage event for job %s", job_id);
        return;
    }
    json_t *usage = body != NULL ? sl_openai_usage(body) : NULL;
    json_object_set_new(ev, "usage", usage != NULL ? usage : json_null());
    json_t *rlj = json_object();
    if (rl != NULL)
        sl_ratelimit_to_json(rl, rlj);
    json_object_set_new(ev, "ratelimit", rlj);
    json_object_set_new(ev, "retry_after_ms", rl != NULL && rl->retry_after_ms >= 0
                                                  ? json_integer(rl->retry_after_ms)
                                                  : json_null());
    json_object_set_new(ev, "latency",
                        json_pack("{s:f, s:f}", "ttft_ms", ttft_ms, "total_ms", total_ms));
    int ok = strcmp(outcome, "ok") == 0;
    json_object_set(ev, "response", ok && body != NULL ? body : json_null());
    if (!ok) {
        /* Keep the provider's own error text (never headers, never credentials). */
        json_t *perr = json_object_get(body, "error");
        const char *msg = json_string_value(json_object_get(perr, "message"));
        const char *type = json_string_value(json_object_get(perr, "type"));
        const char *code = json_string_value(json_object_get(perr, "code"));
        json_t *errj = json_pack("{s:s, s:s}", "type", type != NULL ? type : outcome, "message",
                                 msg != NULL ? msg : err_message != NULL ? err_message : outcome);
        json_object_set_new(errj, "code", code != NULL ? json_string(code) : json_null());
        json_object_set_new(ev, "error", errj);
    } else {
        json_object_set_new(ev, "error", json_null());
    }
    char *value = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (value == NULL) {
        sl_error("out of memory serialising a usage event for job %s", job_id);
        return;
    }
    e->emit(job_id, value, e->emit_arg);
    free(value);
}

void sl_engine_submit(sl_engine_t *e, const void *value, size_t len, const char *sig,
                      size_t sig_len, int64_t now_ms)
{
    if (e->verifier != NULL &&
        (sig == NULL || sl_verifier_check(e->verifier, value, len, sig, sig_len) != SL_OK)) {
        /* Not from the scheduler: nobody may bypass the ledger by writing to the topic. */
        e->st.forged++;
        sl_warn("dropped a dispatch message without a valid signature");
        return;
    }
    char why[256];
    json_t *doc = json_loadb(value, len, 0, NULL);
    if (doc == NULL || sl_schema_validate(e->schema, doc, why, sizeof why) != SL_OK) {
        e->st.malformed++;
        sl_warn("dropped a malformed dispatch message: %s", doc ? why : "malformed JSON");
        json_decref(doc);
        return;
    }
    const char *job_id = json_string_value(json_object_get(doc, "job_id"));
    const char *res_id = json_string_value(json_object_get(doc, "reservation_id"));
    const char *dep_name = json_string_value(json_object_get(doc, "deployment"));
    int attempt = (int)json_integer_value(json_object_get(doc, "attempt"));
    int64_t lease_expires = json_integer_value(json_object_get(doc, "lease_expires_ms"));
    int64_t issued = json_integer_value(json_object_get(doc, "issued_ms"));
    int d = sl_config_deployment(e->cfg, dep_name);
    int64_t budget_ms = lease_expires - now_ms - LEASE_GUARD_MS;
    const char *why_not = NULL;
    if (d < 0)
        why_not = "unknown deployment";
    else if (budget_ms <= 0)
        why_not = "lease expired";
    else if (now_ms - issued > sl_config_dispatch_max_age_ms(e->cfg, d))
        why_not = "stale dispatch: it waited too long before reaching a dispatcher";
    if (why_not != NULL) {
        /* The call must not happen after the scheduler stopped counting on it, nor so late
         * that it could join a burst the ledger did not plan. The scheduler releases the
         * reservation and schedules the job again. */
        e->st.not_sent++;
        emit_usage(e, job_id, attempt, res_id, dep_name, "not_sent", 0, NULL, NULL, 0, 0,
                   now_ms, now_ms, why_not);
        json_decref(doc);
        return;
    }
    char key[96];
    snprintf(key, sizeof key, "%s:%d", job_id, attempt);
    if (sl_hmap_get(e->inflight, key) != NULL) {
        json_decref(doc); /* a redelivery of a call already running here */
        return;
    }
    const sl_deployment_cfg_t *dc = &e->cfg->deployments[d];
    call_t *c = calloc(1, sizeof *c);
    if (c == NULL) {
        json_decref(doc);
        return;
    }
    sl_ratelimit_init(&c->rl);
    snprintf(c->job_id, sizeof c->job_id, "%s", job_id);
    snprintf(c->res_id, sizeof c->res_id, "%s", res_id);
    snprintf(c->inflight_key, sizeof c->inflight_key, "%s", key);
    c->attempt = attempt;
    c->deployment = d;
    c->started_ms = now_ms;
    /* The deployment's own model name goes to the provider, whatever the caller asked for:
     * the route decided where the job runs. */
    json_t *request = json_object_get(doc, "request");
    json_object_set_new(request, "model", json_string(dc->model));
    c->body = json_dumps(request, JSON_COMPACT);
    /* The provider sees the job id as idempotency key: unique per tenant and job, unlike the
     * client's own key, which two tenants may both use. */
    char idem_header[128];
    snprintf(idem_header, sizeof idem_header, "Idempotency-Key: %s", job_id);
    json_decref(doc);
    c->headers = curl_slist_append(NULL, "Content-Type: application/json");
    c->headers = curl_slist_append(c->headers, idem_header);
    c->headers = curl_slist_append(c->headers, "Expect:");
    if (e->deps[d].auth_header != NULL)
        c->headers = curl_slist_append(c->headers, e->deps[d].auth_header);
    c->easy = curl_easy_init();
    long timeout = (long)(budget_ms < dc->timeout_ms ? budget_ms : dc->timeout_ms);
    if (c->body == NULL || c->headers == NULL || c->easy == NULL ||
        sl_hmap_put(e->inflight, c->inflight_key, c) != SL_OK) {
        call_free(c);
        sl_error("out of memory starting a call for job %s", job_id);
        return;
    }
    curl_easy_setopt(c->easy, CURLOPT_URL, e->deps[d].url);
    curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, c->body);
    curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c->easy, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(c->easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c->easy, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(c->easy, CURLOPT_TIMEOUT_MS, timeout);
    curl_easy_setopt(c->easy, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(c->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->easy, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(c->easy, CURLOPT_PRIVATE, c);
    curl_multi_add_handle(e->multi, c->easy);
    e->n_inflight++;
    e->st.accepted++;
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
    long status = 0;
    double ttft_s = 0, total_s = 0;
    curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(c->easy, CURLINFO_STARTTRANSFER_TIME, &ttft_s);
    curl_easy_getinfo(c->easy, CURLINFO_TOTAL_TIME, &total_s);
    if (e->timing != NULL && result == CURLE_OK && status > 0)
        report_timing(e, c, status);
    int transport = 0;
    const char *detail = NULL;
    if (result == CURLE_OPERATION_TIMEDOUT) {
        transport = 2;
        detail = "the provider call timed out";
    } else if (result != CURLE_OK) {
        transport = 1;
        detail = c->too_big ? "response larger than 16 MiB" : curl_easy_strerror(result);
    }
    json_t *body = c->resp != NULL ? json_loadb(c->resp, c->resp_len, 0, NULL) : NULL;
    const char *outcome = c->too_big ? "bad_response" : sl_openai_classify(transport, status, body);
    /* OpenAI's x-should-retry: false overrides the status: e.g. a 429 "Request too large" can
     * never succeed by waiting, so it is a request error, not a capacity one. */
    if (c->rl.should_retry == 0 &&
        (strcmp(outcome, "rate_limited") == 0 || strcmp(outcome, "overloaded") == 0 ||
         strcmp(outcome, "server_error") == 0 || strcmp(outcome, "timeout") == 0))
        outcome = "client_error";
    emit_usage(e, c->job_id, c->attempt, c->res_id, e->cfg->deployments[c->deployment].name,
               outcome, status, &c->rl, body, ttft_s * 1000.0, total_s * 1000.0, c->started_ms,
               sl_now_ms(), detail);
    json_decref(body);
    e->st.completed++;
}

void sl_engine_run(sl_engine_t *e, int extra_fd, int timeout_ms)
{
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
        CURLcode result = m->data.result;
        curl_multi_remove_handle(e->multi, m->easy_handle);
        finish_call(e, c, result);
        sl_hmap_del(e->inflight, c->inflight_key);
        e->n_inflight--;
        call_free(c);
    }
}

int sl_engine_in_flight(const sl_engine_t *e)
{
    return e->n_inflight;
}

void sl_engine_stats(const sl_engine_t *e, sl_engine_stats_t *out)
{
    *out = e->st;
}
