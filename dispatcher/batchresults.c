/* batchresults.c - reading the result lines of a provider batch (sl_batch_results_read,
 * batchwire.h; the formats are in docs/provider-batch.md).
 *
 * The idea to hold first: every line is classified exactly as an online answer of the same
 * status would be (sl_adapter_classify), a line that never ran is not_sent, and a line that
 * cannot be read, is too large or too deep, names no job of the batch or repeats one is counted
 * and skipped, never fatal. OpenAI, Azure and Anthropic answer JSONL in any order, matched by
 * custom id; Gemini answers inline, in the order of the input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter_impl.h"
#include "batchwire.h"
#include "batchwire_int.h"
#include "hmap.h"

/* A results line longer than this is counted bad without being parsed. */
#define MAX_LINE_BYTES ((size_t)16 << 20)
/* Gemini's results are the status answer itself; what sluice puts in one batch (at most 20 MB
 * in) cannot need more than this out. */
#define MAX_INLINE_BYTES ((size_t)256 << 20)

typedef struct {
    const sl_adapter_t *ad;
    const char *const *job_ids;
    size_t n;
    sl_hmap_t *index;    /* job id -> its first position in job_ids + 1 */
    unsigned char *seen; /* per position: a line was delivered */
    sl_batch_line_fn fn;
    void *arg;
    size_t bad;
} reader_t;

/* The position of job, a job of the batch without a line yet; -1 when it is none (unknown, or
 * already answered by an earlier line: only the first line of a job counts). */
static long claim(const reader_t *r, const char *job)
{
    if (job == NULL)
        return -1;
    uintptr_t v = (uintptr_t)sl_hmap_get(r->index, job);
    if (v == 0 || r->seen[v - 1])
        return -1;
    return (long)(v - 1);
}

/* Hands one line to the callback. error is taken (may be NULL only when ok: else SL_ENOMEM). */
static sl_err_t deliver(reader_t *r, long pos, sl_outcome_t outcome, long http_status,
                        const json_t *body, json_t *error)
{
    if (outcome != SL_OUTCOME_OK && error == NULL)
        return SL_ENOMEM;
    sl_batch_line_t line = {
        .job_id = r->job_ids[pos],
        .index = (size_t)pos,
        .outcome = outcome,
        .http_status = (int)http_status,
        .body = outcome == SL_OUTCOME_OK ? body : NULL,
        .error = outcome == SL_OUTCOME_OK ? NULL : error,
    };
    r->seen[pos] = 1;
    r->fn(r->arg, &line);
    json_decref(error);
    return SL_OK;
}

/* A request the provider answered, with HTTP status (or its equivalent) and body: classified
 * as the same answer online would be. is_error: the provider said it failed, so it is never
 * ok whatever the status. */
static sl_err_t answered(reader_t *r, long pos, long status, const json_t *body, int is_error)
{
    sl_outcome_t o = sl_adapter_classify(r->ad, 0, status, body, NULL);
    if (is_error && o == SL_OUTCOME_OK)
        o = SL_OUTCOME_BAD_RESPONSE;
    json_t *e = NULL;
    if (o != SL_OUTCOME_OK)
        e = sl_adapter_error(r->ad, body, sl_outcome_name(o),
                             status >= 200 && status < 300 ? "a batch answer sluice cannot read"
                                                           : NULL);
    return deliver(r, pos, o, status, body, e);
}

/* A request that never ran: not_sent, with {type: "not_sent", code, message}. */
static sl_err_t never_ran(reader_t *r, long pos, const char *code, const char *message)
{
    json_t *e = json_pack("{s:s, s:s?, s:s}", "type", sl_outcome_name(SL_OUTCOME_NOT_SENT), "code",
                          code, "message", message);
    return deliver(r, pos, SL_OUTCOME_NOT_SENT, 0, NULL, e);
}

/* One OpenAI/Azure output or error file line. SL_EPARSE: a bad line. */
static sl_err_t line_openai(reader_t *r, const json_t *j)
{
    const json_t *resp = json_object_get(j, "response");
    const json_t *lerr = json_object_get(j, "error");
    if (json_is_object(resp)) {
        const json_t *sc = json_object_get(resp, "status_code");
        if (!json_is_integer(sc) || json_integer_value(sc) < 100 || json_integer_value(sc) > 599)
            return SL_EPARSE;
        long pos = claim(r, bw_jstr(j, "custom_id"));
        if (pos < 0)
            return SL_EPARSE;
        return answered(r, pos, (long)json_integer_value(sc), json_object_get(resp, "body"), 0);
    }
    if (!json_is_object(lerr))
        return SL_EPARSE;
    /* No response: it never ran (batch_expired, batch_cancelled, or another code: whatever the
     * reason, the provider did not run it, so it can be sent again). */
    long pos = claim(r, bw_jstr(j, "custom_id"));
    if (pos < 0)
        return SL_EPARSE;
    const char *msg = bw_jstr(lerr, "message");
    return never_ran(r, pos, bw_jstr(lerr, "code"),
                     msg != NULL ? msg : "the provider did not run the request");
}

/* The HTTP status an online answer with this Anthropic error type carries. */
static long anthropic_status(const char *type)
{
    static const struct {
        const char *type;
        long status;
    } map[] = {
        {"invalid_request_error", 400}, {"authentication_error", 401},
        {"billing_error", 402},         {"permission_error", 403},
        {"not_found_error", 404},       {"request_too_large", 413},
        {"rate_limit_error", 429},      {"api_error", 500},
        {"timeout_error", 504},         {"overloaded_error", 529},
    };
    for (size_t i = 0; type != NULL && i < sizeof map / sizeof map[0]; i++) {
        if (strcmp(type, map[i].type) == 0)
            return map[i].status;
    }
    return 500; /* an error type sluice does not know: the provider's trouble */
}

/* One Anthropic results line. */
static sl_err_t line_anthropic(reader_t *r, const json_t *j)
{
    const json_t *result = json_object_get(j, "result");
    const char *type = bw_jstr(result, "type");
    if (type == NULL)
        return SL_EPARSE;
    if (strcmp(type, "succeeded") == 0) {
        const json_t *msg = json_object_get(result, "message");
        if (!json_is_object(msg))
            return SL_EPARSE;
        long pos = claim(r, bw_jstr(j, "custom_id"));
        return pos < 0 ? SL_EPARSE : answered(r, pos, 200, msg, 0);
    }
    if (strcmp(type, "errored") == 0) {
        /* result.error is an online error body, {"type":"error","error":{"type",...}}; a bare
         * inner error is taken too. */
        const json_t *env = json_object_get(result, "error");
        if (!json_is_object(env))
            return SL_EPARSE;
        json_t *body = json_is_object(json_object_get(env, "error"))
                           ? json_incref((json_t *)env)
                           : json_pack("{s:s, s:O}", "type", "error", "error", env);
        if (body == NULL)
            return SL_ENOMEM;
        long pos = claim(r, bw_jstr(j, "custom_id"));
        sl_err_t rc = SL_EPARSE;
        if (pos >= 0)
            rc = answered(r, pos, anthropic_status(bw_jstr(json_object_get(body, "error"), "type")),
                          body, 1);
        json_decref(body);
        return rc;
    }
    int canceled = strcmp(type, "canceled") == 0;
    if (canceled || strcmp(type, "expired") == 0) {
        long pos = claim(r, bw_jstr(j, "custom_id"));
        if (pos < 0)
            return SL_EPARSE;
        /* The codes OpenAI uses for the same, so a reader of usage events sees one word. */
        return canceled
                   ? never_ran(r, pos, "batch_cancelled",
                               "the batch was canceled before the request ran")
                   : never_ran(r, pos, "batch_expired", "the batch expired before the request ran");
    }
    return SL_EPARSE;
}

/* google.rpc.Code -> its name and the HTTP status Google maps it to. */
static const struct {
    json_int_t code;
    const char *status;
    long http;
} grpc_codes[] = {
    {1, "CANCELLED", 499},           {2, "UNKNOWN", 500},
    {3, "INVALID_ARGUMENT", 400},    {4, "DEADLINE_EXCEEDED", 504},
    {5, "NOT_FOUND", 404},           {6, "ALREADY_EXISTS", 409},
    {7, "PERMISSION_DENIED", 403},   {8, "RESOURCE_EXHAUSTED", 429},
    {9, "FAILED_PRECONDITION", 400}, {10, "ABORTED", 409},
    {11, "OUT_OF_RANGE", 400},       {12, "UNIMPLEMENTED", 501},
    {13, "INTERNAL", 500},           {14, "UNAVAILABLE", 503},
    {15, "DATA_LOSS", 500},          {16, "UNAUTHENTICATED", 401},
};

/* One Gemini inline error, {"code","message","status"}, classified as the online error body
 * {"error": it} would be. Its code is a google.rpc.Code (an inline entry is a google.rpc.Status)
 * or, as in online bodies, an HTTP status: both are read. CANCELLED is the one exception: the
 * request was cancelled with its batch (only sluice cancels its batches), so it never ran and
 * goes into a later batch, like OpenAI's batch_cancelled lines. */
static sl_err_t gemini_error(reader_t *r, long pos, const json_t *err)
{
    const json_t *code = json_object_get(err, "code");
    json_int_t c = json_is_integer(code) ? json_integer_value(code) : 0;
    long http = 500;
    const char *status = NULL;
    if (c >= 100 && c <= 599) {
        http = (long)c;
    } else {
        for (size_t i = 0; i < sizeof grpc_codes / sizeof grpc_codes[0]; i++) {
            if (grpc_codes[i].code == c) {
                http = grpc_codes[i].http;
                status = grpc_codes[i].status;
            }
        }
    }
    const char *given = json_string_value(json_object_get(err, "status"));
    if ((given != NULL ? given : status) != NULL &&
        strcmp(given != NULL ? given : status, "CANCELLED") == 0) {
        const char *msg = json_string_value(json_object_get(err, "message"));
        return never_ran(r, pos, "batch_cancelled",
                         msg != NULL ? msg : "the batch was cancelled before the request ran");
    }
    json_t *inner = json_copy((json_t *)err);
    if (inner != NULL && status != NULL && given == NULL)
        json_object_set_new(inner, "status", json_string(status));
    json_t *body = inner != NULL ? json_pack("{s:O}", "error", inner) : NULL;
    json_decref(inner);
    if (body == NULL)
        return SL_ENOMEM;
    sl_err_t rc = answered(r, pos, http, body, 1);
    json_decref(body);
    return rc;
}

/* Gemini: the status answer (an operation) whose response holds one entry per request in the
 * order of job_ids. */
static sl_err_t read_gemini(reader_t *r, const char *text, size_t len)
{
    json_t *doc = bw_parse_object(text, len, MAX_INLINE_BYTES);
    if (doc == NULL) {
        r->bad++;
        return SL_OK;
    }
    const json_t *resp = json_object_get(doc, "response");
    const json_t *entries =
        json_object_get(json_object_get(resp, "inlinedResponses"), "inlinedResponses");
    sl_err_t rc = SL_OK;
    if (resp != NULL && !json_is_array(entries)) {
        /* A response sluice cannot read (an empty batch leaves out the list: nothing to read). */
        if (json_object_get(resp, "inlinedResponses") != NULL)
            r->bad++;
        goto out;
    }
    size_t i;
    const json_t *e;
    json_array_foreach(entries, i, e)
    {
        sl_err_t lrc = SL_EPARSE;
        const json_t *meta = json_object_get(e, "metadata");
        const json_t *key = json_object_get(meta, "key");
        const json_t *ok = json_object_get(e, "response");
        const json_t *err = json_object_get(e, "error");
        long pos = -1;
        /* By position; an echoed key must agree (users report it is not always echoed). */
        if (i < r->n && r->job_ids[i] != NULL &&
            (key == NULL ||
             (json_is_string(key) && strcmp(json_string_value(key), r->job_ids[i]) == 0)) &&
            (json_is_object(ok) || json_is_object(err)))
            pos = claim(r, r->job_ids[i]);
        if (pos >= 0)
            lrc = json_is_object(ok) ? answered(r, pos, 200, ok, 0) : gemini_error(r, pos, err);
        if (lrc == SL_EPARSE)
            r->bad++;
        else if (lrc != SL_OK) {
            rc = lrc;
            break;
        }
    }
out:
    json_decref(doc);
    return rc;
}

/* OpenAI, Azure and Anthropic: JSONL, one request a line, in no order. */
static sl_err_t read_jsonl(reader_t *r, sl_provider_t api, const char *text, size_t len)
{
    const char *p = text;
    const char *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl != NULL ? nl : end;
        const char *next = nl != NULL ? nl + 1 : end;
        const char *s = p;
        while (s < stop && (*s == ' ' || *s == '\t' || *s == '\r'))
            s++;
        while (stop > s && (stop[-1] == ' ' || stop[-1] == '\t' || stop[-1] == '\r'))
            stop--;
        p = next;
        if (s == stop)
            continue; /* a blank line, e.g. the last one's newline */
        json_t *j = bw_parse_object(s, (size_t)(stop - s), MAX_LINE_BYTES);
        sl_err_t rc = SL_EPARSE;
        if (j != NULL)
            rc = api == SL_PROVIDER_ANTHROPIC ? line_anthropic(r, j) : line_openai(r, j);
        json_decref(j);
        if (rc == SL_EPARSE)
            r->bad++;
        else if (rc != SL_OK)
            return rc;
    }
    return SL_OK;
}

sl_err_t sl_batch_results_read(const sl_batch_target_t *t, const char *text, size_t len,
                               const char *const *job_ids, size_t n, sl_batch_line_fn fn, void *arg,
                               size_t *bad)
{
    if (bad != NULL)
        *bad = 0;
    if (t == NULL || t->dep == NULL || sl_adapter_for(t->dep->api) == NULL || fn == NULL ||
        (text == NULL && len > 0) || (job_ids == NULL && n > 0))
        return SL_EINVAL;
    reader_t r = {sl_adapter_for(t->dep->api), job_ids, n,   sl_hmap_new_borrowed(),
                  calloc(n > 0 ? n : 1, 1),    fn,      arg, 0};
    sl_err_t rc = r.index != NULL && r.seen != NULL ? SL_OK : SL_ENOMEM;
    /* A job listed twice keeps its first position. */
    for (size_t i = 0; i < n && rc == SL_OK; i++) {
        if (job_ids[i] != NULL && sl_hmap_get(r.index, job_ids[i]) == NULL)
            rc = sl_hmap_put(r.index, job_ids[i], (void *)(uintptr_t)(i + 1));
    }
    if (rc == SL_OK && len > 0)
        rc = t->dep->api == SL_PROVIDER_GEMINI ? read_gemini(&r, text, len)
                                               : read_jsonl(&r, t->dep->api, text, len);
    if (bad != NULL)
        *bad = r.bad;
    sl_hmap_free(r.index);
    free(r.seen);
    return rc;
}
