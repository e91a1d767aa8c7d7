/* batch.c - a deployment's batches and uploaded files, and the batch endpoints of each API (see
 * batch.h; the formats are docs/provider-batch.md's).
 *
 * A request goes: route, method, credential (the online endpoint's check), API version, body
 * size; then the handler of the endpoint. Inputs are read outside the lock (batch_input.c); the
 * lock is taken to settle the deployment's batches at now_ms, decide and record; an ended batch's
 * results are rendered outside the lock while a reference keeps it (batch_wire.c). Creation
 * allocates everything it needs before it changes anything, so SL_ENOMEM leaves the state as it
 * was.
 */
#include "batch.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "batch_internal.h"
#include "batch_multipart.h"
#include "log.h"
#include "request.h"
#include "respond.h"
#include "rng.h"

#define RESULTS_MAX ((size_t)1 << 30) /* a rendered answer: far above any real one */
#define ID_MAX 100                    /* characters of an id in a path */
#define METADATA_PAIRS_MAX 16         /* OpenAI's metadata limits */
#define METADATA_KEY_MAX 64
#define METADATA_VALUE_MAX 512

/* ---- Routes ----------------------------------------------------------------------------- */

typedef enum {
    R_FILES,         /* OpenAI/Azure POST files */
    R_FILE,          /* OpenAI/Azure GET files/ID */
    R_FILE_CONTENT,  /* OpenAI/Azure GET files/ID/content */
    R_BATCHES,       /* POST create (not Gemini), GET list */
    R_BATCH,         /* GET one */
    R_CANCEL,        /* POST cancel */
    R_RESULTS,       /* Anthropic GET results */
    R_GEMINI_CREATE, /* Gemini POST models/MODEL:batchGenerateContent */
} route_kind_t;

typedef struct {
    route_kind_t kind;
    char id[ID_MAX + 1]; /* the batch or file id, or Gemini's model */
} route_t;

static bool id_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
}

/* Reads an id at s (up to the first character outside id_char) into r->id; returns the rest,
 * or NULL when there is no id or it is too long. */
static const char *read_id(const char *s, route_t *r)
{
    size_t n = 0;
    while (id_char(s[n]))
        n++;
    if (n == 0 || n > ID_MAX)
        return NULL;
    memcpy(r->id, s, n);
    r->id[n] = '\0';
    return s + n;
}

static bool skip(const char **s, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(*s, prefix, n) != 0)
        return false;
    *s += n;
    return true;
}

/* Which batch endpoint rest is for api; false for none. */
static bool parse_route(sl_sim_api_t api, const char *rest, route_t *r)
{
    memset(r, 0, sizeof *r);
    const char *s = rest;
    switch (api) {
    case SL_SIM_API_OPENAI:
    case SL_SIM_API_AZURE:
        if (!skip(&s, api == SL_SIM_API_AZURE ? "/openai" : "/v1"))
            return false;
        if (skip(&s, "/files")) {
            if (*s == '\0') {
                r->kind = R_FILES;
                return true;
            }
            if (*s++ != '/' || (s = read_id(s, r)) == NULL)
                return false;
            r->kind = *s == '\0' ? R_FILE : R_FILE_CONTENT;
            return *s == '\0' || strcmp(s, "/content") == 0;
        }
        if (!skip(&s, "/batches"))
            return false;
        if (*s == '\0') {
            r->kind = R_BATCHES;
            return true;
        }
        if (*s++ != '/' || (s = read_id(s, r)) == NULL)
            return false;
        r->kind = *s == '\0' ? R_BATCH : R_CANCEL;
        return *s == '\0' || strcmp(s, "/cancel") == 0;
    case SL_SIM_API_ANTHROPIC:
        if (!skip(&s, "/v1/messages/batches"))
            return false;
        if (*s == '\0') {
            r->kind = R_BATCHES;
            return true;
        }
        if (*s++ != '/' || (s = read_id(s, r)) == NULL)
            return false;
        if (*s == '\0')
            r->kind = R_BATCH;
        else if (strcmp(s, "/cancel") == 0)
            r->kind = R_CANCEL;
        else if (strcmp(s, "/results") == 0)
            r->kind = R_RESULTS;
        else
            return false;
        return true;
    default:
        if (skip(&s, "/v1beta/models/")) {
            r->kind = R_GEMINI_CREATE;
            s = read_id(s, r);
            return s != NULL && strcmp(s, ":batchGenerateContent") == 0;
        }
        if (!skip(&s, "/v1beta/batches"))
            return false;
        if (*s == '\0') {
            r->kind = R_BATCHES;
            return true;
        }
        if (*s++ != '/' || (s = read_id(s, r)) == NULL)
            return false;
        r->kind = *s == '\0' ? R_BATCH : R_CANCEL;
        return *s == '\0' || strcmp(s, ":cancel") == 0;
    }
}

size_t sl_sim_batch_body_limit(sl_sim_api_t api, const char *rest)
{
    route_t r;
    if (!parse_route(api, rest, &r))
        return 0;
    switch (r.kind) {
    case R_FILES:
        /* The file's 200 MB and room for the multipart framing around it. */
        return SL_SIM_BATCH_OPENAI_MAX_FILE_BYTES + 1024u * 1024u;
    case R_BATCHES:
        return api == SL_SIM_API_ANTHROPIC ? SL_SIM_BATCH_ANTHROPIC_MAX_BYTES
                                           : SL_SIM_MAX_BODY_BYTES;
    case R_GEMINI_CREATE:
        return SL_SIM_BATCH_GEMINI_MAX_BYTES;
    default:
        return SL_SIM_MAX_BODY_BYTES;
    }
}

/* ---- State ------------------------------------------------------------------------------ */

static void batch_unref(sl_sim_batch_t *b)
{
    if (b == NULL || --b->refs > 0)
        return;
    sl_sim_batch_set_unref(b->set);
    free(b->fate);
    free(b->label);
    free(b);
}

static void file_free(sl_sim_batch_file_t *f)
{
    if (f == NULL)
        return;
    sl_sim_batch_set_unref(f->set);
    free(f);
}

sl_err_t sl_sim_batch_state_new(const sl_sim_dep_config_t *dc, uint64_t seed,
                                sl_sim_batch_state_t **out)
{
    *out = NULL;
    sl_sim_batch_state_t *st = calloc(1, sizeof *st);
    if (st == NULL)
        return SL_ENOMEM;
    st->cfg = &dc->batch;
    st->rng = seed;
    size_t max = (size_t)dc->batch.max_batches;
    st->list = calloc(max, sizeof *st->list);
    st->files = calloc(max, sizeof *st->files);
    if (dc->batch.creates_per_minute > 0)
        st->creates = calloc((size_t)dc->batch.creates_per_minute, sizeof *st->creates);
    if (st->list == NULL || st->files == NULL ||
        (dc->batch.creates_per_minute > 0 && st->creates == NULL)) {
        sl_sim_batch_state_free(st);
        return SL_ENOMEM;
    }
    *out = st;
    return SL_OK;
}

void sl_sim_batch_state_free(sl_sim_batch_state_t *st)
{
    if (st == NULL)
        return;
    for (size_t i = 0; i < st->n_batches; i++)
        batch_unref(st->list[i]);
    for (size_t i = 0; i < st->n_files; i++)
        file_free(st->files[i]);
    free(st->list);
    free(st->files);
    free(st->creates);
    sl_sim_idem_free(st->ran_ids);
    free(st);
}

/* Ids: random-looking, different per run (like the online answers' ids), unique per batch. */
static uint64_t id_bits(const sl_sim_t *sim, const sl_sim_deployment_t *dep, uint64_t serial,
                        uint64_t kind)
{
    const char *name = dep->cfg->name;
    return sl_sim_rng_mix64(sim->salt ^ sl_sim_rng_fnv1a(name, strlen(name)) ^
                            (serial * 0x9e3779b97f4a7c15ULL) ^ kind);
}

/* Ends b at at_ms: counts its lines, releases its tokens, names its result files. */
static void end_batch(sl_sim_t *sim, sl_sim_deployment_t *dep, sl_sim_batch_t *b, bool cancelled,
                      int64_t at_ms)
{
    sl_sim_batch_state_t *st = dep->batch;
    sl_sim_batch_counters_t *c = &dep->batch_count;
    size_t n = b->set->n;
    b->ended_ms = at_ms;
    c->enqueued_tokens_now -= b->tokens;
    if (cancelled) {
        b->status = SL_SIM_BATCH_CANCELLED;
        b->n_cancelled = (int64_t)n;
        c->lines_cancelled += (int64_t)n;
    } else {
        if (st->ran_ids == NULL &&
            sl_sim_idem_new(SL_SIM_BATCH_RAN_IDS_MAX, 1, &st->ran_ids) != SL_OK)
            sl_logf(SL_LOG_WARN, "deployment", dep->cfg->name,
                    "out of memory for the batch custom-id set: duplicates go uncounted");
        for (size_t i = 0; i < n; i++) {
            sl_sim_line_fate_t fate = (sl_sim_line_fate_t)b->fate[i];
            const char *id = sl_sim_batch_text(b->set, b->set->lines[i].id_off);
            bool ran = fate != SL_SIM_LINE_EXPIRED;
            if (fate == SL_SIM_LINE_OK)
                b->n_ok++;
            else if (fate == SL_SIM_LINE_EXPIRED)
                b->n_expired++;
            else
                b->n_errored++;
            if (!ran || id[0] == '\0' || st->ran_ids == NULL)
                continue;
            if (sl_sim_idem_get(st->ran_ids, id) != NULL)
                c->lines_duplicate++;
            static const unsigned char one = 1;
            if (fate == SL_SIM_LINE_OK && sl_sim_idem_put(st->ran_ids, id, &one) != SL_OK)
                sl_logf(SL_LOG_WARN, "deployment", dep->cfg->name,
                        "out of memory storing a batch custom id");
        }
        b->status = b->n_expired > 0 ? SL_SIM_BATCH_EXPIRED : SL_SIM_BATCH_COMPLETED;
        c->lines_succeeded += b->n_ok;
        c->lines_errored += b->n_errored;
        c->lines_expired += b->n_expired;
    }
    if (b->api == SL_SIM_API_OPENAI || b->api == SL_SIM_API_AZURE) {
        if (b->n_ok > 0)
            snprintf(b->output_file_id, sizeof b->output_file_id, "file-%016llx",
                     (unsigned long long)id_bits(sim, dep, b->serial, 2));
        if (b->n_ok < (int64_t)n)
            snprintf(b->error_file_id, sizeof b->error_file_id, "file-%016llx",
                     (unsigned long long)id_bits(sim, dep, b->serial, 3));
    }
}

void sl_sim_batch_settle(sl_sim_t *sim, sl_sim_deployment_t *dep, int64_t now_ms)
{
    sl_sim_batch_state_t *st = dep->batch;
    for (size_t i = 0; i < st->n_batches; i++) {
        sl_sim_batch_t *b = st->list[i];
        if (b->status != SL_SIM_BATCH_RUNNING)
            continue;
        /* A cancel takes effect at the first request after it: until then it is cancelling. */
        if (b->cancel_ms >= 0)
            end_batch(sim, dep, b, true, now_ms);
        else if (now_ms >= b->due_ms)
            end_batch(sim, dep, b, false, b->due_ms);
    }
}

static sl_sim_batch_t *find_batch(const sl_sim_batch_state_t *st, const char *id)
{
    for (size_t i = 0; i < st->n_batches; i++) {
        if (strcmp(st->list[i]->id, id) == 0)
            return st->list[i];
    }
    return NULL;
}

static sl_sim_batch_file_t *find_file(const sl_sim_batch_state_t *st, const char *id)
{
    for (size_t i = 0; i < st->n_files; i++) {
        if (strcmp(st->files[i]->id, id) == 0)
            return st->files[i];
    }
    return NULL;
}

/* The batch whose output (*errors = false) or error file is id. */
static sl_sim_batch_t *find_result_file(const sl_sim_batch_state_t *st, const char *id,
                                        bool *errors)
{
    for (size_t i = 0; i < st->n_batches; i++) {
        sl_sim_batch_t *b = st->list[i];
        if (b->output_file_id[0] != '\0' && strcmp(b->output_file_id, id) == 0) {
            *errors = false;
            return b;
        }
        if (b->error_file_id[0] != '\0' && strcmp(b->error_file_id, id) == 0) {
            *errors = true;
            return b;
        }
    }
    return NULL;
}

/* The wait until the create rate lets one more batch in: 0 = now. */
static int64_t storm_wait_ms(const sl_sim_batch_state_t *st, int64_t minute_ms, int64_t now_ms)
{
    size_t cap = (size_t)st->cfg->creates_per_minute;
    if (cap == 0 || st->creates_len < cap)
        return 0;
    int64_t oldest = st->creates[st->creates_next]; /* full: the next slot is the oldest */
    return now_ms - oldest < minute_ms ? oldest + minute_ms - now_ms : 0;
}

static void storm_note(sl_sim_batch_state_t *st, int64_t now_ms)
{
    size_t cap = (size_t)st->cfg->creates_per_minute;
    if (cap == 0)
        return;
    st->creates[st->creates_next] = now_ms;
    st->creates_next = (st->creates_next + 1) % cap;
    if (st->creates_len < cap)
        st->creates_len++;
}

/* The wait until the first running batch ends, or -1 when none runs. */
static int64_t first_end_wait_ms(const sl_sim_batch_state_t *st, int64_t now_ms)
{
    int64_t best = -1;
    for (size_t i = 0; i < st->n_batches; i++) {
        const sl_sim_batch_t *b = st->list[i];
        if (b->status == SL_SIM_BATCH_RUNNING && (best < 0 || b->due_ms - now_ms < best))
            best = b->due_ms - now_ms > 0 ? b->due_ms - now_ms : 0;
    }
    return best;
}

/* The index of the batch to drop to make room for one more, n_batches when there is room, or
 * -1 when every kept batch is still running. */
static long room_victim(const sl_sim_batch_state_t *st)
{
    if (st->n_batches < (size_t)st->cfg->max_batches)
        return (long)st->n_batches;
    for (size_t i = 0; i < st->n_batches; i++) {
        if (st->list[i]->status != SL_SIM_BATCH_RUNNING)
            return (long)i;
    }
    return -1;
}

static void drop_batch(sl_sim_batch_state_t *st, size_t i)
{
    batch_unref(st->list[i]);
    memmove(&st->list[i], &st->list[i + 1], (st->n_batches - i - 1) * sizeof *st->list);
    st->n_batches--;
}

/* ---- Answers ---------------------------------------------------------------------------- */

static const char *host_of(const sl_sim_t *sim, const sl_sim_request_t *req)
{
    const char *host = sl_sim_request_header(req, "host");
    size_t n = host != NULL ? strlen(host) : 0;
    bool ok = n > 0 && n < 256;
    for (size_t i = 0; ok && i < n; i++) {
        char c = host[i];
        ok = id_char(c) || c == ':' || c == '[' || c == ']';
    }
    if (ok)
        return host;
    return sim->host[0] != '\0' ? sim->host : "localhost";
}

/* Hands the text of b to resp as its body with status and content type. */
static sl_err_t answer_buf(sl_sim_response_t *resp, sl_buf_t *b, int status,
                           const char *content_type)
{
    char *text = sl_buf_take(b, NULL);
    if (text == NULL)
        text = strdup("");
    if (text == NULL)
        return SL_ENOMEM;
    sl_sim_respond_take_body(resp, text);
    resp->status = status;
    sl_sim_respond_set_header(resp, "content-type", content_type);
    return SL_OK;
}

/* Maps a rendering failure to what sl_sim_handle returns: too big is a 500, not a crash. */
static sl_err_t answer_rendered(sl_sim_response_t *resp, sl_buf_t *b, sl_err_t rc, int status,
                                const char *content_type)
{
    if (rc == SL_ETOOBIG) {
        sl_buf_free(b);
        sl_sim_respond_openai_error(resp, 500, "server_error", NULL, NULL,
                                    "The answer is larger than the simulator renders.");
        return SL_OK;
    }
    if (rc != SL_OK) {
        sl_buf_free(b);
        return rc;
    }
    return answer_buf(resp, b, status, content_type);
}

static void fail_invalid(sl_sim_response_t *resp, sl_sim_api_t api, const char *param,
                         const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* A 400 in the API's shape. */
static void fail_invalid(sl_sim_response_t *resp, sl_sim_api_t api, const char *param,
                         const char *code, const char *fmt, ...)
{
    sl_sim_error_t err;
    memset(&err, 0, sizeof err);
    err.kind = SL_SIM_ERR_INVALID;
    err.param = param;
    err.code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err.message, sizeof err.message, fmt, ap);
    va_end(ap);
    sl_sim_respond_error(resp, api, &err);
}

static void not_found(sl_sim_response_t *resp, sl_sim_api_t api, const char *what, const char *id)
{
    sl_sim_error_t err;
    if (api == SL_SIM_API_GEMINI)
        sl_sim_respond_describe(&err, SL_SIM_ERR_NOT_FOUND, "Requested entity was not found.");
    else if (api == SL_SIM_API_ANTHROPIC)
        sl_sim_respond_describe(&err, SL_SIM_ERR_NOT_FOUND, "%s %s not found", what, id);
    else
        sl_sim_respond_describe(&err, SL_SIM_ERR_NOT_FOUND, "No such %s object: %s", what, id);
    if (api == SL_SIM_API_OPENAI || api == SL_SIM_API_AZURE)
        err.param = "id";
    sl_sim_respond_error(resp, api, &err);
}

/* A 429 for a create in the API's shape: msg says why; wait_ms < 0 announces no wait. */
static void refuse_create(sl_sim_deployment_t *dep, const sl_sim_request_t *req,
                          sl_sim_response_t *resp, const char *quota_id, int64_t quota_value,
                          int64_t wait_ms, const char *msg)
{
    const sl_sim_dep_config_t *dc = dep->cfg;
    sl_sim_error_t err;
    int64_t secs = wait_ms > 0 ? (wait_ms + 999) / 1000 : 0;
    switch (dc->api) {
    case SL_SIM_API_OPENAI:
        sl_sim_respond_describe(&err, SL_SIM_ERR_RATE_LIMIT, "%s", msg);
        err.type = "requests";
        err.code = "rate_limit_exceeded";
        break;
    case SL_SIM_API_AZURE:
        sl_sim_respond_describe(&err, SL_SIM_ERR_RATE_LIMIT,
                                "Requests to the Batch_Create Operation under Azure OpenAI API "
                                "version %.32s have exceeded the batch limits of your resource: "
                                "%s Please retry after %lld seconds.",
                                sl_sim_request_azure_version(req), msg, (long long)secs);
        err.azure_code = "429";
        break;
    case SL_SIM_API_ANTHROPIC:
        sl_sim_respond_describe(&err, SL_SIM_ERR_RATE_LIMIT, "%s", msg);
        break;
    default:
        sl_sim_respond_describe(&err, SL_SIM_ERR_RATE_LIMIT, "%s", msg);
        err.quota_id = quota_id;
        err.quota_metric = "generativelanguage.googleapis.com/batch_requests";
        err.quota_value = quota_value;
        err.retry_info = wait_ms >= 0;
        err.retry_delay_ms = wait_ms;
        break;
    }
    sl_sim_respond_error(resp, dc->api, &err);
    if (wait_ms >= 0)
        sl_sim_respond_retry_headers(resp, dep, wait_ms);
    dep->batch_count.creates_refused++;
}

/* ---- Creation --------------------------------------------------------------------------- */

/* What a create asks for, once its body is read. */
typedef struct {
    sl_sim_batch_set_t *set; /* borrowed */
    const char *input_file_id;
    const char *endpoint;
    char *label; /* taken on success */
    const char *model;
} create_t;

/* Decides a create under the lock: the create rate, room, the enqueued-token limit; then makes
 * the batch and draws its lines. *out gets the new batch (referenced by the list) or NULL when
 * resp holds a refusal. Returns SL_ENOMEM with nothing changed. */
static sl_err_t create_batch(sl_sim_t *sim, sl_sim_deployment_t *dep, const sl_sim_request_t *req,
                             create_t *c, int64_t now_ms, sl_sim_response_t *resp,
                             sl_sim_batch_t **out)
{
    *out = NULL;
    sl_sim_batch_state_t *st = dep->batch;
    const sl_sim_batch_config_t *bc = st->cfg;
    sl_sim_api_t api = dep->cfg->api;
    char msg[512];
    int64_t wait_ms = storm_wait_ms(st, sim->cfg->minute_ms, now_ms);
    if (wait_ms > 0) {
        snprintf(msg, sizeof msg,
                 "Rate limit reached for batch creation in organization " SL_SIM_ORGANIZATION
                 ": at most %lld batches may be created per minute. Please try again in "
                 "%lld ms.",
                 (long long)bc->creates_per_minute, (long long)wait_ms);
        refuse_create(dep, req, resp, "BatchCreateRequestsPerMinutePerProject",
                      bc->creates_per_minute, wait_ms, msg);
        return SL_OK;
    }
    long victim = room_victim(st);
    if (victim < 0) {
        snprintf(msg, sizeof msg,
                 "Too many batches in progress: the simulator keeps at most %lld (max_batches) "
                 "and none of them has ended.",
                 (long long)bc->max_batches);
        refuse_create(dep, req, resp, "BatchesInProgressPerProject", bc->max_batches,
                      first_end_wait_ms(st, now_ms), msg);
        return SL_OK;
    }
    sl_sim_batch_set_t *set = c->set;
    bool over = bc->enqueued_tokens > 0 &&
                dep->batch_count.enqueued_tokens_now + set->tokens > bc->enqueued_tokens;
    bool openai = api == SL_SIM_API_OPENAI || api == SL_SIM_API_AZURE;
    if (over && !openai) {
        snprintf(msg, sizeof msg,
                 "This batch would exceed the enqueued-token limit of %lld tokens for your "
                 "organization (" SL_SIM_ORGANIZATION
                 "): %lld are already enqueued and it holds %lld.",
                 (long long)bc->enqueued_tokens, (long long)dep->batch_count.enqueued_tokens_now,
                 (long long)set->tokens);
        refuse_create(dep, req, resp, "BatchEnqueuedTokensPerModel", bc->enqueued_tokens,
                      first_end_wait_ms(st, now_ms), msg);
        dep->batch_count.failed_token_limit++;
        return SL_OK;
    }
    bool fails = openai && (set->n_problems > 0 || over);
    sl_sim_batch_t *b = calloc(1, sizeof *b);
    uint8_t *fate = fails ? NULL : malloc(set->n > 0 ? set->n : 1);
    if (b == NULL || (!fails && fate == NULL)) {
        free(b);
        free(fate);
        return SL_ENOMEM;
    }
    /* Nothing fails from here on. */
    if ((size_t)victim < st->n_batches)
        drop_batch(st, (size_t)victim);
    b->refs = 1;
    b->serial = ++st->serial;
    b->api = api;
    b->set = set;
    set->refs++;
    b->fate = fate;
    b->label = c->label;
    c->label = NULL;
    b->created_ms = now_ms;
    b->due_ms = now_ms + bc->turnaround_ms;
    b->cancel_ms = -1;
    b->ended_ms = -1;
    unsigned long long bits = (unsigned long long)id_bits(sim, dep, b->serial, 1);
    if (openai)
        snprintf(b->id, sizeof b->id, "batch_%016llx", bits);
    else if (api == SL_SIM_API_ANTHROPIC)
        snprintf(b->id, sizeof b->id, "msgbatch_%016llx", bits);
    else
        snprintf(b->id, sizeof b->id, "%016llx", bits);
    snprintf(b->input_file_id, sizeof b->input_file_id, "%s",
             c->input_file_id != NULL ? c->input_file_id : "");
    snprintf(b->endpoint, sizeof b->endpoint, "%s", c->endpoint != NULL ? c->endpoint : "");
    snprintf(b->model, sizeof b->model, "%s", c->model != NULL ? c->model : "");
    sl_sim_batch_counters_t *count = &dep->batch_count;
    if (fails) {
        b->status = SL_SIM_BATCH_FAILED;
        b->ended_ms = now_ms;
        if (set->n_problems > 0) {
            b->problems = set->problems;
            b->n_problems = set->n_problems;
        } else {
            snprintf(b->failure.code, sizeof b->failure.code, "token_limit_exceeded");
            snprintf(b->failure.message, sizeof b->failure.message,
                     "Enqueued token limit reached for %s in organization " SL_SIM_ORGANIZATION
                     ". Limit: %lld enqueued tokens. Please try again once some in_progress "
                     "batches have been completed.",
                     dep->cfg->model, (long long)bc->enqueued_tokens);
            b->problems = &b->failure;
            b->n_problems = 1;
            count->failed_token_limit++;
        }
    } else {
        /* Two draws per line, used or not, so a line's fate depends only on the seed and on
         * the lines before it. */
        for (size_t i = 0; i < set->n; i++) {
            double expire = sl_sim_rng_next(&st->rng);
            double error = sl_sim_rng_next(&st->rng);
            if (set->lines[i].error_off != SL_SIM_BATCH_NO_TEXT)
                fate[i] = SL_SIM_LINE_INVALID;
            else if (expire < bc->expire_share)
                fate[i] = SL_SIM_LINE_EXPIRED;
            else if (error < bc->line_error_share)
                fate[i] = SL_SIM_LINE_SERVER_ERROR;
            else
                fate[i] = SL_SIM_LINE_OK;
        }
        b->tokens = set->tokens;
        count->lines += (int64_t)set->n;
        count->enqueued_tokens_now += set->tokens;
        if (count->enqueued_tokens_now > count->enqueued_tokens_peak)
            count->enqueued_tokens_peak = count->enqueued_tokens_now;
    }
    storm_note(st, now_ms);
    count->batches_created++;
    st->list[st->n_batches++] = b;
    *out = b;
    return SL_OK;
}

/* ---- Handlers --------------------------------------------------------------------------- */

typedef struct {
    sl_sim_t *sim;
    sl_sim_deployment_t *dep;
    const sl_sim_request_t *req;
    int64_t now_ms;
    sl_sim_response_t *resp;
    sl_sim_batch_view_t view;
} ctx_t;

/* Renders b as the answer. An ended batch never changes, so it is rendered outside the lock
 * with a reference; a running one (small: no results) under it. Called with the lock held;
 * returns with it released. */
static sl_err_t answer_batch_unlock(ctx_t *x, sl_sim_batch_t *b, bool results, bool errors,
                                    const char *content_type)
{
    sl_buf_t out;
    sl_buf_init(&out, RESULTS_MAX);
    bool outside = b->status != SL_SIM_BATCH_RUNNING;
    if (outside) {
        b->refs++;
        pthread_mutex_unlock(&x->sim->lock);
    }
    sl_err_t rc = results ? sl_sim_batch_wire_results(&x->view, b, errors, &out)
                          : sl_sim_batch_wire_object(&x->view, b, &out);
    if (outside) {
        pthread_mutex_lock(&x->sim->lock);
        batch_unref(b);
    }
    pthread_mutex_unlock(&x->sim->lock);
    return answer_rendered(x->resp, &out, rc, 200, content_type);
}

/* An answer of literal text under the lock, released after. */
static sl_err_t answer_text_unlock(ctx_t *x, const char *text)
{
    pthread_mutex_unlock(&x->sim->lock);
    sl_sim_respond_set_body(x->resp, "%s", text);
    x->resp->status = 200;
    return SL_OK;
}

/* OpenAI and Azure: POST files (multipart: purpose=batch, file). */
static sl_err_t upload_file(ctx_t *x)
{
    sl_sim_api_t api = x->dep->cfg->api;
    sl_sim_part_t parts[SL_SIM_MULTIPART_MAX_PARTS];
    size_t n = 0;
    char why[256];
    if (!sl_sim_multipart_parse(sl_sim_request_header(x->req, "content-type"), x->req->body,
                                x->req->body_len, parts, SL_SIM_MULTIPART_MAX_PARTS, &n, why,
                                sizeof why)) {
        fail_invalid(x->resp, api, NULL, "invalid_multipart", "%s", why);
        return SL_OK;
    }
    const sl_sim_part_t *purpose = NULL;
    const sl_sim_part_t *file = NULL;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(parts[i].name, "purpose") == 0 && purpose == NULL)
            purpose = &parts[i];
        else if (strcmp(parts[i].name, "file") == 0 && file == NULL)
            file = &parts[i];
    }
    if (purpose == NULL) {
        fail_invalid(x->resp, api, "purpose", "missing_required_parameter",
                     "Missing required parameter: 'purpose'.");
        return SL_OK;
    }
    if (purpose->len != 5 || memcmp(purpose->data, "batch", 5) != 0) {
        fail_invalid(x->resp, api, "purpose", "invalid_value",
                     "Invalid value for 'purpose': the simulator takes files of purpose 'batch' "
                     "only.");
        return SL_OK;
    }
    if (file == NULL || !file->has_filename) {
        fail_invalid(x->resp, api, "file", "missing_required_parameter",
                     "Missing required parameter: 'file'.");
        return SL_OK;
    }
    if (file->len > SL_SIM_BATCH_OPENAI_MAX_FILE_BYTES) {
        fail_invalid(x->resp, api, "file", "file_too_large",
                     "The file is %zu bytes; a batch input file may have at most %u.", file->len,
                     SL_SIM_BATCH_OPENAI_MAX_FILE_BYTES);
        return SL_OK;
    }
    sl_sim_batch_set_t *set = NULL;
    sl_sim_batch_file_t *f = calloc(1, sizeof *f);
    if (f == NULL || sl_sim_batch_read_jsonl(x->dep->cfg, file->data, file->len, &set) != SL_OK) {
        free(f);
        return SL_ENOMEM;
    }
    f->set = set;
    f->bytes = file->len;
    sl_sim_wire_escape(f->filename, sizeof f->filename, file->filename);
    f->created_s = sl_sim_batch_unix_s(x->sim, x->now_ms);
    sl_buf_t out;
    sl_buf_init(&out, RESULTS_MAX);
    pthread_mutex_lock(&x->sim->lock);
    sl_sim_batch_state_t *st = x->dep->batch;
    sl_sim_batch_settle(x->sim, x->dep, x->now_ms);
    snprintf(f->id, sizeof f->id, "file-%016llx",
             (unsigned long long)id_bits(x->sim, x->dep, ++st->serial, 4));
    if (st->n_files == (size_t)st->cfg->max_batches) {
        file_free(st->files[0]);
        memmove(&st->files[0], &st->files[1], (st->n_files - 1) * sizeof *st->files);
        st->n_files--;
    }
    st->files[st->n_files++] = f;
    sl_err_t rc = sl_sim_batch_wire_file(f->id, f->bytes, f->created_s, f->filename, "batch", &out);
    pthread_mutex_unlock(&x->sim->lock);
    return answer_rendered(x->resp, &out, rc, 200, "application/json");
}

/* OpenAI and Azure: GET files/ID and files/ID/content. */
static sl_err_t get_file(ctx_t *x, const char *id, bool content)
{
    sl_sim_api_t api = x->dep->cfg->api;
    pthread_mutex_lock(&x->sim->lock);
    sl_sim_batch_state_t *st = x->dep->batch;
    sl_sim_batch_settle(x->sim, x->dep, x->now_ms);
    sl_sim_batch_file_t *f = find_file(st, id);
    if (f != NULL) {
        sl_buf_t out;
        sl_buf_init(&out, RESULTS_MAX);
        sl_err_t rc = SL_OK;
        if (content)
            /* Input lines are read at upload and their text is not kept. */
            fail_invalid(x->resp, api, NULL, NULL,
                         "Not allowed to download files of purpose: batch.");
        else
            rc = sl_sim_batch_wire_file(f->id, f->bytes, f->created_s, f->filename, "batch", &out);
        pthread_mutex_unlock(&x->sim->lock);
        if (content) {
            sl_buf_free(&out);
            return SL_OK;
        }
        return answer_rendered(x->resp, &out, rc, 200, "application/json");
    }
    bool errors = false;
    sl_sim_batch_t *b = find_result_file(st, id, &errors);
    if (b == NULL) {
        pthread_mutex_unlock(&x->sim->lock);
        not_found(x->resp, api, "File", id);
        return SL_OK;
    }
    if (content)
        return answer_batch_unlock(x, b, true, errors, "application/octet-stream");
    /* The file object: its size is its rendering's. */
    int64_t created_s = sl_sim_batch_unix_s(x->sim, b->ended_ms);
    sl_err_t rc = answer_batch_unlock(x, b, true, errors, "application/json");
    if (rc != SL_OK || x->resp->status != 200)
        return rc;
    size_t bytes = x->resp->body_len;
    char name[64];
    snprintf(name, sizeof name, "%s_%s.jsonl", b->id, errors ? "error" : "output");
    sl_buf_t out;
    sl_buf_init(&out, RESULTS_MAX);
    rc = sl_sim_batch_wire_file(id, bytes, created_s, name, "batch_output", &out);
    return answer_rendered(x->resp, &out, rc, 200, "application/json");
}

/* Reads OpenAI's metadata: null or an object of up to 16 string pairs; *out its compact JSON. */
static bool read_metadata(json_t *meta, char **out)
{
    *out = NULL;
    if (meta == NULL || json_is_null(meta))
        return true;
    if (!json_is_object(meta) || json_object_size(meta) > METADATA_PAIRS_MAX)
        return false;
    const char *key;
    json_t *val;
    json_object_foreach(meta, key, val)
    {
        if (strlen(key) > METADATA_KEY_MAX || !json_is_string(val) ||
            json_string_length(val) > METADATA_VALUE_MAX)
            return false;
    }
    *out = json_dumps(meta, JSON_COMPACT);
    return *out != NULL;
}

/* OpenAI and Azure: POST batches. */
static sl_err_t create_openai(ctx_t *x)
{
    sl_sim_api_t api = x->dep->cfg->api;
    json_t *root =
        x->req->body_len > 0 ? json_loadb(x->req->body, x->req->body_len, 0, NULL) : NULL;
    sl_err_t rc = SL_OK;
    create_t c = {0};
    if (!json_is_object(root)) {
        fail_invalid(x->resp, api, NULL, NULL,
                     "We could not parse the JSON body of your request. (HINT: This likely "
                     "means you aren't using your HTTP library correctly. The OpenAI API expects "
                     "a JSON payload, but what was sent was not valid JSON.)");
        goto out;
    }
    json_t *file_id = json_object_get(root, "input_file_id");
    json_t *endpoint = json_object_get(root, "endpoint");
    json_t *window = json_object_get(root, "completion_window");
    const char *ep = json_string_value(endpoint);
    bool endpoint_ok =
        ep != NULL && (strcmp(ep, "/v1/chat/completions") == 0 ||
                       (api == SL_SIM_API_AZURE && strcmp(ep, "/chat/completions") == 0));
    if (!json_is_string(file_id) || json_string_length(file_id) > ID_MAX) {
        fail_invalid(x->resp, api, "input_file_id", "missing_required_parameter",
                     "Missing required parameter: 'input_file_id'.");
        goto out;
    }
    if (!endpoint_ok) {
        fail_invalid(x->resp, api, "endpoint", "invalid_value",
                     "Invalid value for 'endpoint': the simulator supports '%s' only.",
                     api == SL_SIM_API_AZURE ? "/chat/completions" : "/v1/chat/completions");
        goto out;
    }
    if (!json_is_string(window) || strcmp(json_string_value(window), "24h") != 0) {
        fail_invalid(x->resp, api, "completion_window", "invalid_value",
                     "Invalid value for 'completion_window': supported values are: '24h'.");
        goto out;
    }
    if (!read_metadata(json_object_get(root, "metadata"), &c.label)) {
        fail_invalid(x->resp, api, "metadata", "invalid_value",
                     "Invalid 'metadata': expected an object of at most 16 string values "
                     "(keys up to 64 characters, values up to 512).");
        goto out;
    }
    c.input_file_id = json_string_value(file_id);
    c.endpoint = ep;
    pthread_mutex_lock(&x->sim->lock);
    sl_sim_batch_settle(x->sim, x->dep, x->now_ms);
    sl_sim_batch_file_t *f = find_file(x->dep->batch, c.input_file_id);
    if (f == NULL) {
        pthread_mutex_unlock(&x->sim->lock);
        not_found(x->resp, api, "File", c.input_file_id);
        goto out;
    }
    c.set = f->set;
    sl_sim_batch_t *b = NULL;
    rc = create_batch(x->sim, x->dep, x->req, &c, x->now_ms, x->resp, &b);
    if (rc != SL_OK || b == NULL) {
        pthread_mutex_unlock(&x->sim->lock);
        goto out;
    }
    rc = answer_batch_unlock(x, b, false, false, "application/json");
out:
    free(c.label);
    json_decref(root);
    return rc;
}

/* Anthropic: POST messages/batches. Gemini: POST models/MODEL:batchGenerateContent. */
static sl_err_t create_inline(ctx_t *x, const char *model)
{
    const sl_sim_dep_config_t *dc = x->dep->cfg;
    sl_sim_error_t err;
    sl_sim_batch_set_t *set = NULL;
    char display[512 * 6 + 1];
    sl_err_t rc = dc->api == SL_SIM_API_ANTHROPIC
                      ? sl_sim_batch_read_anthropic(dc, x->req->body, x->req->body_len, &set, &err)
                      : sl_sim_batch_read_gemini(dc, x->req->body, x->req->body_len, &set, display,
                                                 sizeof display, &err);
    if (rc == SL_EINVAL) {
        sl_sim_respond_error(x->resp, dc->api, &err);
        return SL_OK;
    }
    if (rc != SL_OK)
        return rc;
    create_t c = {.set = set, .model = model};
    if (dc->api == SL_SIM_API_GEMINI) {
        c.label = strdup(display);
        if (c.label == NULL) {
            sl_sim_batch_set_unref(set);
            return SL_ENOMEM;
        }
    }
    pthread_mutex_lock(&x->sim->lock);
    sl_sim_batch_settle(x->sim, x->dep, x->now_ms);
    sl_sim_batch_t *b = NULL;
    rc = create_batch(x->sim, x->dep, x->req, &c, x->now_ms, x->resp, &b);
    sl_sim_batch_set_unref(set); /* the batch holds its own reference */
    free(c.label);
    if (rc != SL_OK || b == NULL) {
        pthread_mutex_unlock(&x->sim->lock);
        return rc;
    }
    return answer_batch_unlock(x, b, false, false, "application/json");
}

/* GET one batch (Gemini: with its inline responses once done). */
static sl_err_t get_batch(ctx_t *x, const char *id)
{
    pthread_mutex_lock(&x->sim->lock);
    sl_sim_batch_settle(x->sim, x->dep, x->now_ms);
    sl_sim_batch_t *b = find_batch(x->dep->batch, id);
    if (b == NULL) {
        pthread_mutex_unlock(&x->sim->lock);
        not_found(x->resp, x->dep->cfg->api, "Batch", id);
        return SL_OK;
    }
    return answer_batch_unlock(x, b, false, false, "application/json");
}

/* Anthropic: GET messages/batches/ID/results. */
static sl_err_t get_results(ctx_t *x, const char *id)
{
    pthread_mutex_lock(&x->sim->lock);
    sl_sim_batch_settle(x->sim, x->dep, x->now_ms);
    sl_sim_batch_t *b = find_batch(x->dep->batch, id);
    if (b == NULL || b->status == SL_SIM_BATCH_RUNNING) {
        pthread_mutex_unlock(&x->sim->lock);
        if (b == NULL)
            not_found(x->resp, SL_SIM_API_ANTHROPIC, "Batch", id);
        else
            fail_invalid(x->resp, SL_SIM_API_ANTHROPIC, NULL, NULL,
                         "Batch %s is still processing: its results are available once it has "
                         "ended.",
                         id);
        return SL_OK;
    }
    return answer_batch_unlock(x, b, true, false, "application/binary");
}

/* POST cancel. */
static sl_err_t cancel_batch(ctx_t *x, const char *id)
{
    sl_sim_api_t api = x->dep->cfg->api;
    pthread_mutex_lock(&x->sim->lock);
    sl_sim_batch_settle(x->sim, x->dep, x->now_ms);
    sl_sim_batch_t *b = find_batch(x->dep->batch, id);
    if (b == NULL) {
        pthread_mutex_unlock(&x->sim->lock);
        not_found(x->resp, api, "Batch", id);
        return SL_OK;
    }
    if (api == SL_SIM_API_GEMINI) {
        /* Gemini has no cancelling state: the operation is cancelled at once. */
        if (b->status == SL_SIM_BATCH_RUNNING) {
            b->cancel_ms = x->now_ms;
            end_batch(x->sim, x->dep, b, true, x->now_ms);
        }
        return answer_text_unlock(x, "{}");
    }
    if (b->status == SL_SIM_BATCH_RUNNING) {
        if (b->cancel_ms < 0)
            b->cancel_ms = x->now_ms;
    } else if (b->status != SL_SIM_BATCH_CANCELLED) {
        pthread_mutex_unlock(&x->sim->lock);
        if (api == SL_SIM_API_ANTHROPIC)
            fail_invalid(x->resp, api, NULL, NULL,
                         "Batch %s has already ended and can no longer be canceled.", id);
        else
            fail_invalid(x->resp, api, NULL, NULL,
                         "Cannot cancel a batch that has already ended (status: %s).",
                         b->status == SL_SIM_BATCH_FAILED ? "failed" : "completed");
        return SL_OK;
    }
    return answer_batch_unlock(x, b, false, false, "application/json");
}

/* Reads an optional list size argument: def when absent, false when not in 1..max. */
static bool read_limit(const sl_sim_request_t *req, const char *name, long def, long max, long *out)
{
    const char *v = sl_sim_request_query(req, name);
    *out = def;
    if (v == NULL)
        return true;
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (end == v || *end != '\0' || n < 1 || n > max)
        return false;
    *out = n;
    return true;
}

/* GET batches: newest first, a page after the given id. */
static sl_err_t list_batches(ctx_t *x)
{
    sl_sim_api_t api = x->dep->cfg->api;
    const char *size_arg = api == SL_SIM_API_GEMINI ? "pageSize" : "limit";
    const char *after_arg = api == SL_SIM_API_GEMINI      ? "pageToken"
                            : api == SL_SIM_API_ANTHROPIC ? "after_id"
                                                          : "after";
    long max = api == SL_SIM_API_ANTHROPIC ? 1000 : api == SL_SIM_API_GEMINI ? 1000 : 100;
    long limit = 0;
    if (!read_limit(x->req, size_arg, api == SL_SIM_API_GEMINI ? 50 : 20, max, &limit)) {
        fail_invalid(x->resp, api, size_arg, "invalid_value",
                     "Invalid '%s': expected an integer between 1 and %ld.", size_arg, max);
        return SL_OK;
    }
    const char *after = sl_sim_request_query(x->req, after_arg);
    if (after != NULL && after[0] == '\0')
        after = NULL;
    sl_buf_t out;
    sl_buf_init(&out, RESULTS_MAX);
    pthread_mutex_lock(&x->sim->lock);
    sl_sim_batch_state_t *st = x->dep->batch;
    sl_sim_batch_settle(x->sim, x->dep, x->now_ms);
    /* Newest first: index n-1 down to 0; a page starts after the `after` batch. */
    long start = (long)st->n_batches - 1;
    if (after != NULL) {
        start = -1; /* an unknown cursor is an empty page */
        for (long i = (long)st->n_batches - 1; i >= 0; i--) {
            if (strcmp(st->list[i]->id, after) == 0)
                start = i - 1;
        }
    }
    long stop = start - limit + 1 < 0 ? 0 : start - limit + 1;
    bool more = stop > 0;
    sl_err_t rc = sl_buf_adds(&out, api == SL_SIM_API_GEMINI ? "{\"operations\":[" : "{\"data\":[");
    for (long i = start; rc == SL_OK && i >= stop; i--) {
        if (i != start)
            rc = sl_buf_adds(&out, ",");
        if (rc == SL_OK)
            rc = sl_sim_batch_wire_object(&x->view, st->list[i], &out);
    }
    if (rc == SL_OK && api == SL_SIM_API_GEMINI) {
        if (more && start >= 0)
            rc = sl_buf_addf(&out, "],\"nextPageToken\":\"%s\"}", st->list[stop]->id);
        else
            rc = sl_buf_adds(&out, "]}");
    } else if (rc == SL_OK) {
        char first[64] = "null";
        char last[64] = "null";
        if (start >= 0) {
            snprintf(first, sizeof first, "\"%s\"", st->list[start]->id);
            snprintf(last, sizeof last, "\"%s\"", st->list[stop]->id);
        }
        rc = sl_buf_addf(&out, "],%s\"first_id\":%s,\"last_id\":%s,\"has_more\":%s}",
                         api == SL_SIM_API_ANTHROPIC ? "" : "\"object\":\"list\",", first, last,
                         more && start >= 0 ? "true" : "false");
    }
    pthread_mutex_unlock(&x->sim->lock);
    return answer_rendered(x->resp, &out, rc, 200, "application/json");
}

/* ---- Entry point ------------------------------------------------------------------------ */

static bool method_allowed(sl_sim_api_t api, route_kind_t kind, const char *method,
                           const char **allow)
{
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    bool post = strcmp(method, "POST") == 0;
    switch (kind) {
    case R_BATCHES:
        *allow = api == SL_SIM_API_GEMINI ? "GET" : "GET, POST";
        return get || (post && api != SL_SIM_API_GEMINI);
    case R_FILES:
    case R_CANCEL:
    case R_GEMINI_CREATE:
        *allow = "POST";
        return post;
    default:
        *allow = "GET";
        return get;
    }
}

sl_err_t sl_sim_batch_handle(sl_sim_t *sim, sl_sim_deployment_t *dep, const sl_sim_request_t *req,
                             const char *rest, int64_t now_ms, sl_sim_response_t *resp,
                             bool *handled)
{
    *handled = false;
    const sl_sim_dep_config_t *dc = dep->cfg;
    route_t r;
    if (!parse_route(dc->api, rest, &r))
        return SL_OK;
    *handled = true;
    sl_sim_error_t err;
    const char *allow = NULL;
    if (!method_allowed(dc->api, r.kind, req->method, &allow)) {
        char method[32];
        char path[160];
        snprintf(method, sizeof method, "%s", req->method);
        snprintf(path, sizeof path, "%s", req->path);
        sl_sim_respond_describe(&err, SL_SIM_ERR_METHOD, "Invalid method for URL (%s %s).", method,
                                path);
        sl_sim_respond_error(resp, dc->api, &err);
        if (dc->api != SL_SIM_API_GEMINI)
            sl_sim_respond_add_header(resp, "allow", "%s", allow);
        return SL_OK;
    }
    if (!sl_sim_request_authorize(dc, req, &err)) {
        sl_sim_respond_error(resp, dc->api, &err);
        return SL_OK;
    }
    if (!sl_sim_request_versioned(dc, req, &err)) {
        sl_sim_respond_error(resp, dc->api, &err);
        return SL_OK;
    }
    size_t limit = sl_sim_batch_body_limit(dc->api, rest);
    if (req->body_too_large || req->body_len > limit) {
        sl_sim_respond_describe(&err, SL_SIM_ERR_TOO_LARGE,
                                "Request body too large: the limit is %zu bytes.", limit);
        err.code = "request_too_large";
        sl_sim_respond_error(resp, dc->api, &err);
        return SL_OK;
    }
    ctx_t x = {
        .sim = sim,
        .dep = dep,
        .req = req,
        .now_ms = now_ms,
        .resp = resp,
        .view = {.sim = sim, .dc = dc, .now_ms = now_ms, .host = host_of(sim, req)},
    };
    bool post = strcmp(req->method, "POST") == 0;
    switch (r.kind) {
    case R_FILES:
        return upload_file(&x);
    case R_FILE:
        return get_file(&x, r.id, false);
    case R_FILE_CONTENT:
        return get_file(&x, r.id, true);
    case R_BATCHES:
        if (!post)
            return list_batches(&x);
        return dc->api == SL_SIM_API_ANTHROPIC ? create_inline(&x, NULL) : create_openai(&x);
    case R_BATCH:
        return get_batch(&x, r.id);
    case R_CANCEL:
        return cancel_batch(&x, r.id);
    case R_RESULTS:
        return get_results(&x, r.id);
    case R_GEMINI_CREATE:
        return create_inline(&x, r.id);
    }
    return SL_OK;
}
