/* batch.c - the dispatcher's batch executor (see batch.h).
 */
#include "batch.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter.h"
#include "batchwire.h"
#include "buf.h"
#include "engine.h"
#include "hmap.h"
#include "jsonschema.h"
#include "log.h"
#include "msg_usage.h"
#include "ratelimit.h"
#include "util.h"

enum {
    QUEUE_MAX = 64,         /* ops waiting for the thread */
    OUT_MAX = 20000,        /* messages made and not drained yet: the thread waits */
    ANSWER_MAX = 256000000, /* bytes of one HTTP answer (a results file) */
    LIST_PAGES_MAX = 10,    /* pages of the provider's list searched for a lost batch */
    HEADERS_MAX = SL_ADAPTER_MAX_HEADERS + 3,
    CREATED_MAX = 4096 /* batches this process created, remembered by marker */
};

typedef struct {
    char *key, *value;
} out_msg_t;

struct sl_batchx {
    const sl_config_t *cfg;
    sl_schema_t *schema;
    char **auth; /* per deployment: its credential header line (batch twins only), or NULL */
    pthread_t thread;
    int started;
    pthread_mutex_t lock;
    pthread_cond_t wake, drained;
    int stop;
    char *queue[QUEUE_MAX];
    size_t queue_len[QUEUE_MAX];
    int qhead, qn;
    out_msg_t *out;
    size_t outcap;
    int nout;
    sl_batchx_stats_t st;
    /* The batches this process created (thread only): marker -> the provider's id (malloc'd),
     * the oldest forgotten first (ring of markers). A create repeated while the first was
     * queued here, or after the scheduler restarted, finds it here on every provider, also
     * where a provider batch carries no label (Anthropic). */
    sl_hmap_t *created;
    char *ring[CREATED_MAX];
    int ring_next;
};

/* Remembers that marker was created as the provider's batch id. */
static void remember(sl_batchx_t *bx, const char *marker, const char *id)
{
    char *v = strdup(id);
    if (v == NULL)
        return;
    free(sl_hmap_del(bx->created, marker));
    if (sl_hmap_put(bx->created, marker, v) != SL_OK) {
        free(v);
        return;
    }
    char *old = bx->ring[bx->ring_next];
    if (old != NULL) {
        free(sl_hmap_del(bx->created, old));
        free(old);
    }
    bx->ring[bx->ring_next] = strdup(marker);
    bx->ring_next = (bx->ring_next + 1) % CREATED_MAX;
}

/* ---- messages out --------------------------------------------------------------------------- */

/* Queues a message for the loop to produce; waits while too many are waiting. Takes value. */
static void put_out(sl_batchx_t *bx, const char *key, char *value)
{
    char *k = strdup(key);
    pthread_mutex_lock(&bx->lock);
    while (bx->nout >= OUT_MAX && !bx->stop)
        pthread_cond_wait(&bx->drained, &bx->lock);
    if (k == NULL || value == NULL ||
        sl_grow((void **)&bx->out, sizeof *bx->out, &bx->outcap, (size_t)bx->nout + 1, OUT_MAX) !=
            SL_OK) {
        pthread_mutex_unlock(&bx->lock);
        sl_error("out of memory queueing a batch message; the scheduler will ask again");
        free(k);
        free(value);
        return;
    }
    bx->out[bx->nout++] = (out_msg_t){k, value};
    pthread_mutex_unlock(&bx->lock);
}

int sl_batchx_drain(sl_batchx_t *bx, sl_batchx_produce_fn produce, void *arg)
{
    pthread_mutex_lock(&bx->lock);
    out_msg_t *msgs = bx->out;
    int n = bx->nout;
    bx->out = NULL;
    bx->outcap = 0;
    bx->nout = 0;
    pthread_cond_broadcast(&bx->drained);
    pthread_mutex_unlock(&bx->lock);
    for (int i = 0; i < n; i++) {
        produce(msgs[i].key, msgs[i].value, arg);
        free(msgs[i].key);
        free(msgs[i].value);
    }
    free(msgs);
    return n;
}

/* What one op is about, for its answers. */
typedef struct {
    sl_batchx_t *bx;
    const char *op, *batch_id, *tenant;
    int dep;
    sl_batch_target_t t;
    const sl_adapter_t *ad;
    json_t *jobs; /* the op's jobs array (may be NULL) */
} step_t;

/* The batch event answering the step: state and the fields given (NULL / -1: left out). */
static void answer(step_t *st, const char *state, const sl_batch_status_t *bs, const char *error,
                   int64_t retry_after_ms, json_t *missing, int64_t lines)
{
    json_t *ev =
        json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:I}", "v", 1, "kind", "batch", "batch_id",
                  st->batch_id, "deployment", st->bx->cfg->deployments[st->dep].name, "op", st->op,
                  "state", state, "sent_ms", (json_int_t)sl_now_ms());
    if (ev == NULL) {
        json_decref(missing);
        return;
    }
    if (bs != NULL && bs->id[0] != '\0') {
        json_object_set_new(ev, "provider_batch_id", json_string(bs->id));
        json_object_set_new(ev, "status", json_string(bs->status));
        json_t *c = json_object();
        if (bs->total >= 0)
            json_object_set_new(c, "total", json_integer(bs->total));
        if (bs->succeeded >= 0)
            json_object_set_new(c, "succeeded", json_integer(bs->succeeded));
        if (bs->failed >= 0)
            json_object_set_new(c, "failed", json_integer(bs->failed));
        if (bs->pending >= 0)
            json_object_set_new(c, "pending", json_integer(bs->pending));
        json_object_set_new(ev, "counts", c);
    }
    if (error != NULL) {
        char cut[512];
        snprintf(cut, sizeof cut, "%s", error);
        json_object_set_new(ev, "error", json_string(cut));
    }
    if (retry_after_ms >= 0)
        json_object_set_new(ev, "retry_after_ms", json_integer(retry_after_ms));
    if (missing != NULL)
        json_object_set_new(ev, "missing", missing);
    if (lines >= 0)
        json_object_set_new(ev, "lines", json_integer(lines));
    char *value = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    put_out(st->bx, st->tenant, value);
}

/* ---- HTTP ----------------------------------------------------------------------------------- */

typedef struct {
    long status;
    int transport; /* 0 = a complete exchange, 1 = transport failure, 2 = timeout */
    sl_buf_t body;
    sl_ratelimit_t rl;
    char error[256];
} http_answer_t;

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    http_answer_t *a = arg;
    return sl_buf_add(&a->body, data, size * n) == SL_OK ? size * n : 0;
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
    http_answer_t *a = arg;
    sl_ratelimit_header(&a->rl, data, size * n);
    return size * n;
}

/* Makes the call h of deployment dep (blocking). a->body holds the answer, NUL-terminated. */
static void http_call(sl_batchx_t *bx, int dep, const sl_batch_http_t *h, http_answer_t *a)
{
    memset(a, 0, sizeof *a);
    sl_buf_init(&a->body, ANSWER_MAX);
    sl_ratelimit_init(&a->rl);
    a->transport = 1;
    CURL *c = curl_easy_init();
    struct curl_slist *hs = NULL;
    curl_mime *mime = NULL;
    if (c == NULL) {
        snprintf(a->error, sizeof a->error, "out of memory");
        return;
    }
    if (bx->auth[dep] != NULL)
        hs = curl_slist_append(hs, bx->auth[dep]);
    for (int i = 0; i < h->nheaders; i++)
        hs = curl_slist_append(hs, h->headers[i]);
    curl_easy_setopt(c, CURLOPT_URL, h->url);
    if (h->upload != NULL) {
        mime = curl_mime_init(c);
        curl_mimepart *p = curl_mime_addpart(mime);
        curl_mime_name(p, "purpose");
        curl_mime_data(p, "batch", CURL_ZERO_TERMINATED);
        p = curl_mime_addpart(mime);
        curl_mime_name(p, "file");
        curl_mime_filename(p, h->upload_name != NULL ? h->upload_name : "batch.jsonl");
        curl_mime_type(p, "application/jsonl");
        curl_mime_data(p, h->upload, h->upload_len);
        curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
    } else if (strcmp(h->method, "POST") == 0) {
        hs = curl_slist_append(hs, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, h->body != NULL ? h->body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)(h->body != NULL ? h->body_len : 0));
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)bx->cfg->deployments[dep].timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode cc = curl_easy_perform(c);
    if (cc == CURLE_OK) {
        a->transport = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->status);
    } else {
        a->transport = cc == CURLE_OPERATION_TIMEDOUT ? 2 : 1;
        snprintf(a->error, sizeof a->error, "%s", curl_easy_strerror(cc));
    }
    curl_mime_free(mime);
    curl_slist_free_all(hs);
    curl_easy_cleanup(c);
}

static void http_answer_free(http_answer_t *a)
{
    sl_buf_free(&a->body);
}

static const char *body_text(const http_answer_t *a, size_t *len)
{
    *len = a->body.len;
    return a->body.ptr != NULL ? a->body.ptr : "";
}

/* The answer parsed as JSON, or NULL. */
static json_t *body_json(const http_answer_t *a)
{
    size_t len;
    const char *text = body_text(a, &len);
    return json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
}

/* An answer that is not a 2xx: refused (worth asking again later: 429, 5xx, the network) or
 * failed (the request itself is refused: 4xx). Answers the step; returns 1 when it did. */
static int answered_failure(step_t *st, const http_answer_t *a, const char *what)
{
    if (a->transport == 0 && a->status >= 200 && a->status < 300)
        return 0;
    json_t *body = body_json(a);
    sl_outcome_t o = sl_adapter_classify(st->ad, a->transport, a->status, body, &a->rl);
    int64_t retry = sl_adapter_retry_after_ms(st->ad, &a->rl, body);
    char error[400];
    const char *msg = json_string_value(json_object_get(json_object_get(body, "error"), "message"));
    snprintf(error, sizeof error, "%s: %s (HTTP %ld) %.200s", what, sl_outcome_name(o), a->status,
             a->transport != 0 ? a->error
             : msg != NULL     ? msg
                               : "");
    json_decref(body);
    int final = o == SL_OUTCOME_CLIENT_ERROR || o == SL_OUTCOME_AUTH_ERROR ||
                o == SL_OUTCOME_QUOTA_EXHAUSTED;
    /* A create the provider refuses for good fails the batch (its jobs run again, or fail on
     * their own); anything else is asked again. */
    answer(st, final && strcmp(st->op, "create") == 0 ? "failed" : "refused", NULL, error,
           retry >= 0 ? retry : -1, NULL, -1);
    return 1;
}

/* Makes call h and reads its answer as a batch object into *bs. Returns 1 with *bs filled, or
 * 0 after answering the step with the failure. */
static int call_status(step_t *st, const sl_batch_http_t *h, const char *what,
                       sl_batch_status_t *bs)
{
    http_answer_t a;
    http_call(st->bx, st->dep, h, &a);
    int ok = 0;
    if (!answered_failure(st, &a, what)) {
        json_t *doc = body_json(&a);
        if (doc != NULL && sl_batch_status_read(&st->t, doc, bs) == SL_OK)
            ok = 1;
        else
            answer(st, "refused", NULL, "the provider's answer is not a batch object", -1, NULL,
                   -1);
        json_decref(doc);
    }
    http_answer_free(&a);
    return ok;
}

/* The event of a status: running, ended or failed. */
static void answer_status(step_t *st, const sl_batch_status_t *bs)
{
    const char *state = bs->state == SL_BATCH_ENDED    ? "ended"
                        : bs->state == SL_BATCH_FAILED ? "failed"
                                                       : "running";
    answer(st, state, bs, bs->error[0] != '\0' ? bs->error : NULL, -1, NULL, -1);
}

/* ---- usage events of result lines ------------------------------------------------------------ */

typedef struct {
    step_t *st;
    uint8_t *seen; /* per op job */
    int64_t lines;
    int64_t now_ms;
} lines_t;

/* One result line: its job's usage event, as an online answer of the same kind would be. The
 * line's index is its job's position in the op's jobs (the reader was given them in that
 * order); seen keeps a job to one event across an OpenAI batch's two result files. */
static void on_line(void *arg, const sl_batch_line_t *line)
{
    lines_t *ls = arg;
    step_t *st = ls->st;
    size_t k = line->index;
    if (k >= json_array_size(st->jobs) || ls->seen[k])
        return;
    ls->seen[k] = 1;
    json_t *entry = json_array_get(st->jobs, k);
    const sl_deployment_cfg_t *dc = &st->bx->cfg->deployments[st->dep];
    sl_outcome_t outcome = line->outcome;
    json_t *response = NULL, *usage = NULL;
    if (outcome == SL_OUTCOME_OK) {
        response = sl_adapter_response(st->ad, line->body, dc->model);
        usage = sl_adapter_usage(st->ad, line->body);
        if (response == NULL)
            outcome = SL_OUTCOME_BAD_RESPONSE;
    }
    json_t *error = NULL;
    if (outcome != SL_OUTCOME_OK)
        error = line->error != NULL ? json_deep_copy(line->error)
                                    : sl_adapter_error(st->ad, NULL, sl_outcome_name(outcome),
                                                       "the provider batch gave no answer");
    json_t *rl = json_object();
    sl_msg_usage_t u = {.job_id = line->job_id,
                        .attempt = (int)json_integer_value(json_object_get(entry, "attempt")),
                        .reservation_id =
                            json_string_value(json_object_get(entry, "reservation_id")),
                        .deployment = dc->name,
                        .outcome = outcome,
                        .http_status = line->http_status,
                        .usage = usage,
                        .ratelimit = rl,
                        .retry_after_ms = -1,
                        .ttft_ms = 0,
                        .total_ms = 0,
                        .started_ms = ls->now_ms,
                        .finished_ms = ls->now_ms,
                        .response = outcome == SL_OUTCOME_OK ? response : NULL,
                        .error = outcome == SL_OUTCOME_OK ? NULL : error};
    json_t *js = sl_msg_usage_json(&u);
    char *value = js != NULL ? json_dumps(js, JSON_COMPACT) : NULL;
    json_decref(js);
    json_decref(rl);
    json_decref(response);
    json_decref(usage);
    json_decref(error);
    if (value == NULL) {
        sl_error("out of memory building the usage event of job %s", line->job_id);
        return;
    }
    put_out(st->bx, st->tenant, value);
    ls->lines++;
}

/* A request the provider's batch API cannot express: its job fails as a client error, as the
 * same request would online (the usage event goes out before the batch is created). */
static void on_refused(void *arg, size_t item, const char *reason)
{
    lines_t *ls = arg;
    const char *job_id =
        json_string_value(json_object_get(json_array_get(ls->st->jobs, item), "job_id"));
    if (job_id == NULL)
        return;
    json_t *error = sl_adapter_error(ls->st->ad, NULL, "client_error", reason);
    sl_batch_line_t line = {.job_id = job_id,
                            .index = item,
                            .outcome = SL_OUTCOME_CLIENT_ERROR,
                            .http_status = 0,
                            .body = NULL,
                            .error = error};
    on_line(ls, &line);
    json_decref(error);
}

/* ---- the steps ------------------------------------------------------------------------------- */

/* A create: first a batch already labelled with our id (a create repeated after its answer was
 * lost), else a new one. */
static void step_poll(step_t *st, const char *pid, int cancel);

static void step_create(step_t *st)
{
    sl_batch_http_t h = {0};
    const char *known = sl_hmap_get(st->bx->created, st->batch_id);
    if (known != NULL) {
        /* Created here already: its status, not a second batch. */
        sl_info("provider batch %s was created here as %s: not created again", st->batch_id, known);
        step_poll(st, known, 0);
        return;
    }
    char page[512] = "";
    for (int p = 0; p < LIST_PAGES_MAX; p++) {
        if (sl_batch_list_request(&st->t, page, &h) != SL_OK)
            break; /* no list that could find it (Anthropic) */
        http_answer_t a;
        http_call(st->bx, st->dep, &h, &a);
        sl_batch_http_clear(&h);
        if (answered_failure(st, &a, "listing batches")) {
            http_answer_free(&a);
            return;
        }
        json_t *doc = body_json(&a);
        http_answer_free(&a);
        sl_batch_status_t bs;
        int found = 0;
        char next[512] = "";
        sl_err_t rc = doc != NULL ? sl_batch_list_read(&st->t, doc, st->batch_id, &bs, &found, next,
                                                       sizeof next)
                                  : SL_EPARSE;
        json_decref(doc);
        if (rc != SL_OK)
            break;
        if (found) {
            sl_info("provider batch %s already exists as %s: not created again", st->batch_id,
                    bs.id);
            remember(st->bx, st->batch_id, bs.id);
            answer_status(st, &bs);
            return;
        }
        if (next[0] == '\0')
            break;
        snprintf(page, sizeof page, "%s", next);
    }
    size_t n = json_array_size(st->jobs);
    sl_batch_item_t *items = calloc(n + 1, sizeof *items);
    if (items == NULL) {
        answer(st, "refused", NULL, "out of memory", -1, NULL, -1);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(st->jobs, i);
        items[i].job_id = json_string_value(json_object_get(v, "job_id"));
        items[i].chat = json_object_get(v, "request");
    }
    int needs_second = 0;
    char err[256] = "";
    lines_t refused = {st, calloc(n + 1, 1), 0, sl_now_ms()};
    sl_err_t rc = refused.seen == NULL
                      ? SL_ENOMEM
                      : sl_batch_create_request(&st->t, st->batch_id, items, n, on_refused,
                                                &refused, &h, &needs_second, err, sizeof err);
    free(items);
    free(refused.seen);
    if (rc != SL_OK) {
        /* Nothing of it can go (SL_EINVAL), or more than the provider takes in one batch
         * (SL_ETOOBIG: the config's max_requests and max_bytes keep below it): its jobs run
         * again; anything else is asked again. */
        answer(st, rc == SL_EINVAL || rc == SL_ETOOBIG ? "failed" : "refused", NULL,
               err[0] ? err : sl_strerror(rc), -1, NULL, -1);
        return;
    }
    sl_batch_status_t bs;
    if (!needs_second) {
        if (call_status(st, &h, "creating the batch", &bs)) {
            remember(st->bx, st->batch_id, bs.id);
            answer_status(st, &bs);
        }
        sl_batch_http_clear(&h);
        return;
    }
    http_answer_t a;
    http_call(st->bx, st->dep, &h, &a);
    sl_batch_http_clear(&h);
    if (answered_failure(st, &a, "uploading the batch file")) {
        http_answer_free(&a);
        return;
    }
    json_t *file = body_json(&a);
    http_answer_free(&a);
    rc = file != NULL ? sl_batch_create_after_upload(&st->t, st->batch_id, file, &h) : SL_EPARSE;
    json_decref(file);
    if (rc != SL_OK) {
        answer(st, "refused", NULL, "the provider's answer to the upload names no file", -1, NULL,
               -1);
        return;
    }
    if (call_status(st, &h, "creating the batch", &bs)) {
        remember(st->bx, st->batch_id, bs.id);
        answer_status(st, &bs);
    }
    sl_batch_http_clear(&h);
}

static void step_poll(step_t *st, const char *pid, int cancel)
{
    sl_batch_http_t h = {0};
    sl_err_t rc = cancel ? sl_batch_cancel_request(&st->t, pid, &h)
                         : sl_batch_status_request(&st->t, pid, &h);
    if (rc != SL_OK) {
        answer(st, "failed", NULL, "the provider batch id cannot be asked for", -1, NULL, -1);
        return;
    }
    sl_batch_status_t bs;
    if (call_status(st, &h, cancel ? "cancelling the batch" : "asking the batch's status", &bs)) {
        if (cancel && bs.state == SL_BATCH_FAILED)
            bs.state = SL_BATCH_RUNNING; /* the next poll says how it ended */
        answer_status(st, &bs);
    }
    sl_batch_http_clear(&h);
}

/* A collect: the results of an ended batch, each line its job's usage event, then the batch
 * event naming the jobs that had none. */
static void step_collect(step_t *st, const char *pid)
{
    sl_batch_http_t h = {0};
    if (sl_batch_status_request(&st->t, pid, &h) != SL_OK) {
        answer(st, "failed", NULL, "the provider batch id cannot be asked for", -1, NULL, -1);
        return;
    }
    http_answer_t sa;
    http_call(st->bx, st->dep, &h, &sa);
    sl_batch_http_clear(&h);
    if (answered_failure(st, &sa, "asking the batch's status")) {
        http_answer_free(&sa);
        return;
    }
    json_t *doc = body_json(&sa);
    sl_batch_status_t bs;
    if (doc == NULL || sl_batch_status_read(&st->t, doc, &bs) != SL_OK ||
        bs.state == SL_BATCH_RUNNING) {
        json_decref(doc);
        http_answer_free(&sa);
        answer(st, "refused", NULL, "the batch has no results yet", -1, NULL, -1);
        return;
    }
    json_decref(doc);
    size_t n = json_array_size(st->jobs);
    const char **ids = calloc(n + 1, sizeof *ids);
    lines_t ls = {st, calloc(n + 1, 1), 0, sl_now_ms()};
    if (ids == NULL || ls.seen == NULL) {
        free(ids);
        free(ls.seen);
        http_answer_free(&sa);
        answer(st, "refused", NULL, "out of memory", -1, NULL, -1);
        return;
    }
    for (size_t i = 0; i < n; i++)
        ids[i] = json_string_value(json_object_get(json_array_get(st->jobs, i), "job_id"));
    size_t bad = 0;
    int ok = 1;
    if (bs.results_inline) {
        size_t len;
        const char *text = body_text(&sa, &len);
        ok = sl_batch_results_read(&st->t, text, len, ids, n, on_line, &ls, &bad) == SL_OK;
    } else {
        sl_batch_http_t calls[2] = {{0}, {0}};
        int ncalls = 0;
        ok = sl_batch_results_requests(&st->t, &bs, calls, &ncalls) == SL_OK;
        for (int c = 0; ok && c < ncalls; c++) {
            if (!sl_batch_url_same_origin(st->t.base_url, calls[c].url)) {
                sl_warn("provider batch %s: results at %s are not where its API is; not read",
                        st->batch_id, calls[c].url);
                continue;
            }
            http_answer_t ra;
            http_call(st->bx, st->dep, &calls[c], &ra);
            if (answered_failure(st, &ra, "reading the results")) {
                http_answer_free(&ra);
                ok = -1; /* answered */
                break;
            }
            size_t len;
            const char *text = body_text(&ra, &len);
            if (sl_batch_results_read(&st->t, text, len, ids, n, on_line, &ls, &bad) != SL_OK)
                ok = 0;
            http_answer_free(&ra);
        }
        for (int c = 0; c < 2; c++)
            sl_batch_http_clear(&calls[c]);
    }
    http_answer_free(&sa);
    if (ok == 1) {
        json_t *missing = json_array();
        for (size_t i = 0; missing != NULL && i < n; i++) {
            if (!ls.seen[i])
                json_array_append_new(missing, json_string(ids[i]));
        }
        if (bad > 0)
            sl_info("provider batch %s: %zu result line(s) could not be read or named no job "
                    "this collect asked for (a repeated collect asks only for the jobs still "
                    "waiting)",
                    st->batch_id, bad);
        answer(st, "collected", &bs, NULL, -1, missing, ls.lines);
        pthread_mutex_lock(&st->bx->lock);
        st->bx->st.lines += ls.lines;
        pthread_mutex_unlock(&st->bx->lock);
    } else if (ok == 0) {
        answer(st, "refused", NULL, "the results could not be read", -1, NULL, -1);
    }
    free(ids);
    free(ls.seen);
}

static void run_op(sl_batchx_t *bx, const char *text, size_t len)
{
    char why[512];
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
    if (doc == NULL || sl_schema_validate(bx->schema, doc, why, sizeof why) != SL_OK) {
        sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN, "invalid batch op ignored: %s",
                     doc == NULL ? "malformed JSON" : why);
        json_decref(doc);
        return;
    }
    step_t st = {.bx = bx,
                 .op = json_string_value(json_object_get(doc, "op")),
                 .batch_id = json_string_value(json_object_get(doc, "batch_id")),
                 .tenant = json_string_value(json_object_get(doc, "tenant")),
                 .jobs = json_object_get(doc, "jobs")};
    const char *dep_name = json_string_value(json_object_get(doc, "deployment"));
    const char *pid = json_string_value(json_object_get(doc, "provider_batch_id"));
    st.dep = sl_config_deployment(bx->cfg, dep_name);
    if (st.dep < 0 || !SL_IS_BATCH_DEPLOYMENT(bx->cfg, st.dep)) {
        sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN,
                     "batch op for %s ignored: no batch API of that name in this config", dep_name);
        json_decref(doc);
        return;
    }
    const sl_deployment_cfg_t *dc = &bx->cfg->deployments[st.dep];
    st.t = (sl_batch_target_t){.dep = dc, .base_url = dc->batch.base_url, .model = dc->batch.model};
    st.ad = sl_adapter_for(dc->api);
    int with_jobs = strcmp(st.op, "create") == 0 || strcmp(st.op, "collect") == 0;
    int complete = with_jobs ? st.jobs != NULL : pid != NULL;
    if (strcmp(st.op, "collect") == 0 && pid == NULL)
        complete = 0;
    for (size_t k = 0; complete && strcmp(st.op, "create") == 0 && k < json_array_size(st.jobs);
         k++)
        complete = json_is_object(json_object_get(json_array_get(st.jobs, k), "request"));
    if (!complete) {
        sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN, "batch op %s of %s ignored: incomplete", st.op,
                     st.batch_id);
        json_decref(doc);
        return;
    }
    if (strcmp(st.op, "create") == 0)
        step_create(&st);
    else if (strcmp(st.op, "collect") == 0)
        step_collect(&st, pid);
    else
        step_poll(&st, pid, strcmp(st.op, "cancel") == 0);
    json_decref(doc);
}

/* ---- the thread ------------------------------------------------------------------------------ */

static void *worker(void *arg)
{
    sl_batchx_t *bx = arg;
    pthread_mutex_lock(&bx->lock);
    while (!bx->stop) {
        if (bx->qn == 0) {
            pthread_cond_wait(&bx->wake, &bx->lock);
            continue;
        }
        char *op = bx->queue[bx->qhead];
        size_t len = bx->queue_len[bx->qhead];
        bx->qhead = (bx->qhead + 1) % QUEUE_MAX;
        bx->qn--;
        bx->st.ops++;
        pthread_mutex_unlock(&bx->lock);
        run_op(bx, op, len);
        free(op);
        pthread_mutex_lock(&bx->lock);
    }
    pthread_mutex_unlock(&bx->lock);
    return NULL;
}

int sl_batchx_is_op(const void *value, size_t len)
{
    static const char prefix[] = "{\"v\":1,\"op\":";
    return len >= sizeof prefix - 1 && memcmp(value, prefix, sizeof prefix - 1) == 0;
}

sl_err_t sl_batchx_submit(sl_batchx_t *bx, const void *value, size_t len)
{
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return SL_ENOMEM;
    memcpy(copy, value, len);
    copy[len] = '\0';
    pthread_mutex_lock(&bx->lock);
    if (bx->qn == QUEUE_MAX) {
        bx->st.dropped++;
        pthread_mutex_unlock(&bx->lock);
        free(copy);
        return SL_EBUSY;
    }
    int at = (bx->qhead + bx->qn) % QUEUE_MAX;
    bx->queue[at] = copy;
    bx->queue_len[at] = len;
    bx->qn++;
    pthread_cond_signal(&bx->wake);
    pthread_mutex_unlock(&bx->lock);
    return SL_OK;
}

void sl_batchx_stats(sl_batchx_t *bx, sl_batchx_stats_t *out)
{
    pthread_mutex_lock(&bx->lock);
    *out = bx->st;
    pthread_mutex_unlock(&bx->lock);
}

sl_err_t sl_batchx_new(const sl_config_t *cfg, sl_batchx_t **out, char *err, size_t errlen)
{
    *out = NULL;
    sl_batchx_t *bx = calloc(1, sizeof *bx);
    if (bx == NULL)
        return SL_ENOMEM;
    bx->cfg = cfg;
    pthread_mutex_init(&bx->lock, NULL);
    pthread_cond_init(&bx->wake, NULL);
    pthread_cond_init(&bx->drained, NULL);
    char rel[1024], path[1024];
    snprintf(rel, sizeof rel, "%s/batch-op.json", cfg->schema_dir);
    sl_resolve_path(rel, path, sizeof path);
    sl_err_t rc = sl_schema_load_file(path, &bx->schema, err, errlen);
    if (rc == SL_OK && (bx->auth = calloc((size_t)cfg->ndeployments + 1, sizeof *bx->auth)) == NULL)
        rc = SL_ENOMEM;
    if (rc == SL_OK && (bx->created = sl_hmap_new()) == NULL)
        rc = SL_ENOMEM;
    for (int d = 0; rc == SL_OK && d < cfg->ndeployments; d++) {
        if (!SL_IS_BATCH_DEPLOYMENT(cfg, d))
            continue;
        char *key = sl_engine_read_credential(&cfg->deployments[d]);
        if (key == NULL)
            continue; /* the online deployment warns about it */
        bx->auth[d] = sl_adapter_auth_header(sl_adapter_for(cfg->deployments[d].api), key);
        sodium_memzero(key, strlen(key));
        free(key);
    }
    if (rc == SL_OK && pthread_create(&bx->thread, NULL, worker, bx) != 0) {
        snprintf(err, errlen, "cannot start the batch thread");
        rc = SL_ENOMEM;
    }
    if (rc != SL_OK) {
        sl_batchx_free(bx);
        return rc;
    }
    bx->started = 1;
    *out = bx;
    return SL_OK;
}

void sl_batchx_free(sl_batchx_t *bx)
{
    if (bx == NULL)
        return;
    if (bx->started) {
        pthread_mutex_lock(&bx->lock);
        bx->stop = 1;
        pthread_cond_broadcast(&bx->wake);
        pthread_cond_broadcast(&bx->drained);
        pthread_mutex_unlock(&bx->lock);
        pthread_join(bx->thread, NULL);
    }
    for (int i = 0; i < bx->qn; i++)
        free(bx->queue[(bx->qhead + i) % QUEUE_MAX]);
    for (int i = 0; i < bx->nout; i++) {
        free(bx->out[i].key);
        free(bx->out[i].value);
    }
    free(bx->out);
    for (int d = 0; bx->auth != NULL && d < bx->cfg->ndeployments; d++) {
        if (bx->auth[d] != NULL) {
            sodium_memzero(bx->auth[d], strlen(bx->auth[d]));
            free(bx->auth[d]);
        }
    }
    free(bx->auth);
    for (int i = 0; i < CREATED_MAX; i++) {
        if (bx->ring[i] != NULL)
            free(sl_hmap_del(bx->created, bx->ring[i]));
        free(bx->ring[i]);
    }
    sl_hmap_free(bx->created);
    sl_schema_free(bx->schema);
    pthread_mutex_destroy(&bx->lock);
    pthread_cond_destroy(&bx->wake);
    pthread_cond_destroy(&bx->drained);
    free(bx);
}
