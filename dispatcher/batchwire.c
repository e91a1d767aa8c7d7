/* batchwire.c - the providers' batch APIs on the wire (batchwire.h; the formats are in
 * docs/provider-batch.md).
 *
 * The idea to hold first: nothing a provider answers is trusted. An id that goes back into a URL
 * is checked against a narrow alphabet first (an id can never add a path segment or a query),
 * and an answer is bounded in size and nesting before it is parsed. Request bodies come from the
 * online adapters, so a batch line says exactly what an online call would have said. Reading a
 * batch's result lines is batchresults.c.
 */
#include "batchwire.h"
#include "adapter_impl.h"
#include "batchwire_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "hmap.h"
#include "util.h"

/* An answer nested deeper than this is refused without being parsed: a chat answer is a few
 * levels deep, and jansson's own limit (2048) is far above what any answer needs while every
 * level costs stack in the code that walks it. */
#define MAX_DEPTH 256

/* The providers' limits on one batch (docs/provider-batch.md); 0 = none documented. */
#define OPENAI_MAX_LINES 50000
#define OPENAI_MAX_BYTES ((size_t)200 * 1000 * 1000)
#define ANTHROPIC_MAX_REQUESTS 100000
#define ANTHROPIC_MAX_BYTES ((size_t)256 * 1000 * 1000)
#define GEMINI_MAX_BYTES ((size_t)20 * 1000 * 1000)

#define ANTHROPIC_DEFAULT_VERSION "2023-06-01"
#define MAX_BASE_URL 2048
#define MAX_CURSOR 2048

/* ---- Small helpers ------------------------------------------------------------------------- */

const char *bw_jstr(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

static int ascii_alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* 1 when s is 1..maxlen characters of [A-Za-z0-9] and extra, without "..". */
static int word_ok(const char *s, size_t maxlen, const char *extra)
{
    if (s == NULL)
        return 0;
    size_t n = strlen(s);
    if (n == 0 || n > maxlen)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!ascii_alnum(c) && strchr(extra, c) == NULL)
            return 0;
    }
    return strstr(s, "..") == NULL;
}

/* MARKER: [a-z0-9-]{1,64} (docs/provider-batch.md). */
static int marker_ok(const char *s)
{
    if (s == NULL)
        return 0;
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            return 0;
    }
    return 1;
}

/* A job id: [A-Za-z0-9_-]{1,64}, which every provider takes as a custom id. */
static int job_id_ok(const char *s)
{
    return word_ok(s, 64, "_-");
}

/* An id a provider gave (a batch or a file) that sluice puts back into a URL path. OpenAI,
 * Azure and Anthropic ids are one path segment ("batch_…", "file-…", "msgbatch_…"); Gemini's
 * is "batches/" and one segment. Anything else is refused, not escaped: an id that needs
 * escaping is not one the provider hands out, and refusing keeps a hostile id from adding a
 * path segment ("/..", "/cancel"), a method (":cancel") or a query. */
static int id_ok(sl_provider_t api, const char *id)
{
    if (id == NULL)
        return 0;
    if (api == SL_PROVIDER_GEMINI)
        return strncmp(id, "batches/", 8) == 0 && word_ok(id + 8, 119, "_.-");
    return word_ok(id, 127, "_.-");
}

/* An absolute http(s) URL of printable ASCII, with a host, that fits a results slot. The scheme
 * is taken only as providers write it, in lowercase: a URL the executor follows with the
 * credential must not pass a check of its own ("https://" for TLS) by a spelling that does not
 * match it. */
static int http_url_ok(const char *url)
{
    if (url == NULL)
        return 0;
    size_t skip;
    if (strncmp(url, "https://", 8) == 0)
        skip = 8;
    else if (strncmp(url, "http://", 7) == 0)
        skip = 7;
    else
        return 0;
    size_t n = strlen(url);
    if (n <= skip || n >= sizeof(((sl_batch_status_t *)0)->results[0]))
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)url[i];
        if (c <= 0x20 || c >= 0x7f)
            return 0;
    }
    return url[skip] != '/' && url[skip] != '?' && url[skip] != '#';
}

/* Copies src into dst (cap bytes) only when it fits whole; 0 (dst "") when it does not. For
 * ids, markers and URLs, which a truncation would turn into other ones. */
static int copy_exact(char *dst, size_t cap, const char *src)
{
    size_t n = src != NULL ? strlen(src) : 0;
    if (src == NULL || n >= cap) {
        dst[0] = '\0';
        return 0;
    }
    memcpy(dst, src, n + 1);
    return 1;
}

/* Copies text for logs and the admin API into dst (cap bytes): control characters become
 * spaces, and a cut falls between UTF-8 characters (src is valid UTF-8: jansson checked it), so
 * the result is still valid text. */
static void copy_text(char *dst, size_t cap, const char *src)
{
    if (src == NULL) {
        dst[0] = '\0';
        return;
    }
    size_t n = strlen(src);
    if (n >= cap) {
        n = cap - 1;
        while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80)
            n--;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
    }
    dst[n] = '\0';
}

/* A count the provider reports: a non-negative integer, or (Gemini's int64) a string of one;
 * -1 when absent or not one. Capped far below overflow so counts can be added. */
static int64_t count_of(const json_t *obj, const char *key)
{
    const int64_t max = INT64_C(1000000000000000);
    const json_t *v = json_object_get(obj, key);
    if (json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        return x >= 0 && x <= max ? (int64_t)x : -1;
    }
    int64_t x;
    if (json_is_string(v) &&
        sl_parse_uint(json_string_value(v), json_string_length(v), max, &x) == 0)
        return x;
    return -1;
}

/* Whether text[0..len) nests arrays and objects at most max deep (strings skipped). */
static int depth_ok(const char *text, size_t len, int max)
{
    int depth = 0;
    int in_string = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '{' || c == '[') {
            if (++depth > max)
                return 0;
        } else if (c == '}' || c == ']') {
            depth--;
        }
    }
    return 1;
}

json_t *bw_parse_object(const char *text, size_t len, size_t max)
{
    if (len > max || !depth_ok(text, len, MAX_DEPTH))
        return NULL;
    json_t *j = json_loadb(text, len, 0, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* ---- Targets and URLs ---------------------------------------------------------------------- */

static const char *model_of(const sl_batch_target_t *t)
{
    return t->model != NULL && t->model[0] != '\0' ? t->model : t->dep->model;
}

static const char *anthropic_version(const sl_deployment_cfg_t *dep)
{
    return dep->api_version != NULL && dep->api_version[0] != '\0' ? dep->api_version
                                                                   : ANTHROPIC_DEFAULT_VERSION;
}

/* The deployment's adapter when t is complete enough to build requests from, else NULL: a base
 * URL, a model, and the version strings that go into a URL or a header made of safe
 * characters. */
static const sl_adapter_t *target_adapter(const sl_batch_target_t *t)
{
    if (t == NULL || t->dep == NULL || t->base_url == NULL || t->base_url[0] == '\0' ||
        strlen(t->base_url) > MAX_BASE_URL)
        return NULL;
    const char *model = model_of(t);
    if (model == NULL || model[0] == '\0')
        return NULL;
    if (t->dep->api == SL_PROVIDER_AZURE && !word_ok(t->dep->api_version, 64, "._-"))
        return NULL;
    if (t->dep->api == SL_PROVIDER_ANTHROPIC && !word_ok(anthropic_version(t->dep), 64, "._-"))
        return NULL;
    return sl_adapter_for(t->dep->api);
}

static int openai_like(sl_provider_t api)
{
    return api == SL_PROVIDER_OPENAI || api == SL_PROVIDER_AZURE;
}

/* The endpoint batch lines name: Azure's has no /v1. */
static const char *chat_endpoint(sl_provider_t api)
{
    return api == SL_PROVIDER_AZURE ? "/chat/completions" : "/v1/chat/completions";
}

/* BASE + path, then the query (without its '?'; "" for none), Azure's api-version first. NULL
 * when out of memory. */
static char *make_url(const sl_batch_target_t *t, const char *path, const char *query)
{
    const char *base = t->base_url;
    size_t n = strlen(base);
    while (n > 0 && base[n - 1] == '/')
        n--;
    if (t->dep->api == SL_PROVIDER_AZURE)
        return sl_strdupf("%.*s%s?api-version=%s%s%s", (int)n, base, path, t->dep->api_version,
                          query[0] != '\0' ? "&" : "", query);
    return sl_strdupf("%.*s%s%s%s", (int)n, base, path, query[0] != '\0' ? "?" : "", query);
}

/* s percent-encoded but for RFC 3986's unreserved characters: a cursor a provider gave may hold
 * anything, and must stay one query value. Caller frees; NULL when out of memory. */
static char *percent_encode(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *out = malloc(3 * n + 1);
    if (out == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (ascii_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
            out[k++] = (char)c;
        } else {
            out[k++] = '%';
            out[k++] = hex[c >> 4];
            out[k++] = hex[c & 15];
        }
    }
    out[k] = '\0';
    return out;
}

void sl_batch_http_clear(sl_batch_http_t *h)
{
    free(h->url);
    free(h->body);
    free(h->upload);
    free(h->upload_name);
    for (int i = 0; i < h->nheaders && i < SL_ADAPTER_MAX_HEADERS; i++)
        free(h->headers[i]);
    memset(h, 0, sizeof *h);
}

/* Fills the method, the URL (taken, may be NULL: then SL_ENOMEM) and the provider's extra
 * headers (Anthropic's anthropic-version, on every call). */
static sl_err_t http_start(const sl_batch_target_t *t, sl_batch_http_t *out, const char *method,
                           char *url)
{
    out->method = method;
    out->url = url;
    if (url == NULL)
        return SL_ENOMEM;
    if (t->dep->api == SL_PROVIDER_ANTHROPIC) {
        char *h = sl_strdupf("anthropic-version: %s", anthropic_version(t->dep));
        if (h == NULL)
            return SL_ENOMEM;
        out->headers[out->nheaders++] = h;
    }
    return SL_OK;
}

/* Sets a POST's JSON body (text taken; NULL: SL_ENOMEM). */
static sl_err_t http_body(sl_batch_http_t *out, char *text)
{
    if (text == NULL)
        return SL_ENOMEM;
    out->body = text;
    out->body_len = strlen(text);
    return SL_OK;
}

/* ---- Creating a batch ---------------------------------------------------------------------- */

/* One item as the provider's batch wants it, compact JSON in *line (caller frees): OpenAI and
 * Azure a JSONL line, Anthropic an element of "requests", Gemini one of the inline requests.
 * SL_EINVAL when the item cannot be expressed (why says so), SL_ENOMEM. */
static sl_err_t item_json(const sl_adapter_t *ad, const sl_deployment_cfg_t *dep,
                          const sl_batch_item_t *item, char **line, char *why, size_t whylen)
{
    *line = NULL;
    if (!job_id_ok(item->job_id)) {
        snprintf(why, whylen, "the job id is not 1 to 64 of [A-Za-z0-9_-]");
        return SL_EINVAL;
    }
    sl_adapter_request_t req;
    sl_err_t rc = sl_adapter_request(ad, dep, item->chat, &req, why, whylen);
    if (rc != SL_OK)
        return rc;
    /* The adapter's own output: failing to read it back can only be memory. */
    json_t *body = json_loads(req.body, 0, NULL);
    sl_adapter_request_clear(&req);
    if (!json_is_object(body)) {
        json_decref(body);
        return SL_ENOMEM;
    }
    /* A batch line is never streamed; the adapters add stream options when the caller asked. */
    json_object_del(body, "stream");
    json_object_del(body, "stream_options");
    json_t *obj = NULL;
    switch (dep->api) {
    case SL_PROVIDER_OPENAI:
    case SL_PROVIDER_AZURE:
        /* Azure's online body names no model (the URL does); a batch line must name the Global
         * Batch deployment. */
        if (json_object_set_new(body, "model", json_string(dep->model)) == 0)
            obj = json_pack("{s:s, s:s, s:s, s:O}", "custom_id", item->job_id, "method", "POST",
                            "url", chat_endpoint(dep->api), "body", body);
        break;
    case SL_PROVIDER_ANTHROPIC:
        if (json_object_set_new(body, "model", json_string(dep->model)) == 0)
            obj = json_pack("{s:s, s:O}", "custom_id", item->job_id, "params", body);
        break;
    default:
        obj = json_pack("{s:O, s:{s:s}}", "request", body, "metadata", "key", item->job_id);
        break;
    }
    json_decref(body);
    if (obj == NULL)
        return SL_ENOMEM;
    *line = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    return *line != NULL ? SL_OK : SL_ENOMEM;
}

sl_err_t sl_batch_create_request(const sl_batch_target_t *t, const char *marker,
                                 const sl_batch_item_t *items, size_t n,
                                 sl_batch_refused_fn refused, void *arg, sl_batch_http_t *first,
                                 int *needs_second, char *err, size_t errlen)
{
    memset(first, 0, sizeof *first);
    if (needs_second != NULL)
        *needs_second = 0;
    if (errlen > 0)
        err[0] = '\0';
    const sl_adapter_t *ad = target_adapter(t);
    if (ad == NULL) {
        snprintf(err, errlen, "the batch target lacks a base URL, a model or a valid api_version");
        return SL_EINVAL;
    }
    if (!marker_ok(marker)) {
        snprintf(err, errlen, "the batch marker is not 1 to 64 of [a-z0-9-]");
        return SL_EINVAL;
    }
    if (items == NULL || n == 0) {
        snprintf(err, errlen, "a batch of no items");
        return SL_EINVAL;
    }
    sl_provider_t api = t->dep->api;
    /* The online adapter builds each line for the batch's model, not the online one. */
    sl_deployment_cfg_t dep = *t->dep;
    dep.model = model_of(t);
    const char *gemini_model = dep.model;
    if (strncmp(gemini_model, "models/", 7) == 0)
        gemini_model += 7;
    if (api == SL_PROVIDER_GEMINI && !word_ok(gemini_model, 128, "._-")) {
        snprintf(err, errlen, "the model is not a name that can go into a URL");
        return SL_EINVAL;
    }
    size_t max_lines = api == SL_PROVIDER_ANTHROPIC ? ANTHROPIC_MAX_REQUESTS
                       : openai_like(api)           ? OPENAI_MAX_LINES
                                                    : 0;
    size_t max_bytes = api == SL_PROVIDER_ANTHROPIC ? ANTHROPIC_MAX_BYTES
                       : openai_like(api)           ? OPENAI_MAX_BYTES
                                                    : GEMINI_MAX_BYTES;
    sl_buf_t buf;
    sl_buf_init(&buf, max_bytes);
    sl_hmap_t *taken = sl_hmap_new_borrowed();
    sl_err_t rc = taken != NULL ? SL_OK : SL_ENOMEM;
    if (rc == SL_OK && api == SL_PROVIDER_ANTHROPIC)
        rc = sl_buf_adds(&buf, "{\"requests\":[");
    else if (rc == SL_OK && api == SL_PROVIDER_GEMINI)
        rc = sl_buf_addf(&buf,
                         "{\"batch\":{\"display_name\":\"%s\",\"input_config\":{\"requests\":"
                         "{\"requests\":[",
                         marker);
    size_t lines = 0;
    char why[256] = "";
    for (size_t i = 0; i < n && rc == SL_OK; i++) {
        char *line = NULL;
        sl_err_t irc;
        if (items[i].job_id != NULL && sl_hmap_get(taken, items[i].job_id) != NULL) {
            /* Results are matched by job id: two lines with one id could not be told apart. */
            snprintf(why, sizeof why, "the job id is already in this batch");
            irc = SL_EINVAL;
        } else {
            irc = item_json(ad, &dep, &items[i], &line, why, sizeof why);
        }
        if (irc == SL_EINVAL) {
            if (refused != NULL)
                refused(arg, i, why);
            continue;
        }
        if (irc != SL_OK) {
            rc = irc;
            break;
        }
        if (max_lines > 0 && lines == max_lines) {
            rc = SL_ETOOBIG;
        } else {
            if (!openai_like(api) && lines > 0)
                rc = sl_buf_adds(&buf, ",");
            if (rc == SL_OK)
                rc = sl_buf_adds(&buf, line);
            if (rc == SL_OK && openai_like(api))
                rc = sl_buf_adds(&buf, "\n");
            if (rc == SL_OK)
                rc = sl_hmap_put(taken, items[i].job_id, (void *)1);
        }
        free(line);
        lines++;
    }
    if (rc == SL_OK && lines == 0) {
        snprintf(err, errlen, "no item can be sent (the last refused: %s)", why);
        rc = SL_EINVAL;
    }
    if (rc == SL_OK && api == SL_PROVIDER_ANTHROPIC)
        rc = sl_buf_adds(&buf, "]}");
    else if (rc == SL_OK && api == SL_PROVIDER_GEMINI)
        rc = sl_buf_adds(&buf, "]}}}}");
    if (rc == SL_ETOOBIG)
        snprintf(err, errlen,
                 "the items are over %s's limit for one batch (%zu requests, %zu bytes): send "
                 "fewer",
                 sl_adapter_name(ad), max_lines, max_bytes);
    if (rc != SL_OK)
        goto out;
    size_t len = 0;
    char *text = sl_buf_take(&buf, &len);
    if (openai_like(api)) {
        first->upload = text;
        first->upload_len = len;
        first->upload_name = sl_strdupf("%s.jsonl", marker);
        rc = first->upload_name != NULL ? http_start(t, first, "POST", make_url(t, "/files", ""))
                                        : SL_ENOMEM;
        if (rc == SL_OK && needs_second != NULL)
            *needs_second = 1;
    } else {
        first->body = text;
        first->body_len = len;
        char *url = api == SL_PROVIDER_ANTHROPIC
                        ? make_url(t, "/messages/batches", "")
                        : sl_strdupf("/models/%s:batchGenerateContent", gemini_model);
        if (url != NULL && api == SL_PROVIDER_GEMINI) {
            char *path = url;
            url = make_url(t, path, "");
            free(path);
        }
        rc = http_start(t, first, "POST", url);
    }
    if (rc != SL_OK)
        sl_batch_http_clear(first);
out:
    sl_buf_free(&buf);
    sl_hmap_free(taken);
    return rc;
}

sl_err_t sl_batch_create_after_upload(const sl_batch_target_t *t, const char *marker,
                                      const json_t *upload_answer, sl_batch_http_t *out)
{
    memset(out, 0, sizeof *out);
    const sl_adapter_t *ad = target_adapter(t);
    if (ad == NULL || !openai_like(t->dep->api) || !marker_ok(marker))
        return SL_EINVAL;
    const char *file_id = bw_jstr(upload_answer, "id");
    if (!id_ok(t->dep->api, file_id))
        return SL_EPARSE;
    json_t *body = json_pack("{s:s, s:s, s:s, s:{s:s}}", "input_file_id", file_id, "endpoint",
                             chat_endpoint(t->dep->api), "completion_window", "24h", "metadata",
                             "sluice_batch", marker);
    sl_err_t rc = body != NULL ? http_body(out, json_dumps(body, JSON_COMPACT)) : SL_ENOMEM;
    json_decref(body);
    if (rc == SL_OK)
        rc = http_start(t, out, "POST", make_url(t, "/batches", ""));
    if (rc != SL_OK)
        sl_batch_http_clear(out);
    return rc;
}

/* ---- Reading a batch's state --------------------------------------------------------------- */

/* Why a batch failed: the provider's words, or a default when it gave none (a FAILED batch
 * always says why). */
static void set_failed(sl_batch_status_t *st, const char *why)
{
    st->state = SL_BATCH_FAILED;
    copy_text(st->error, sizeof st->error,
              why != NULL && why[0] != '\0' ? why : "the batch failed");
}

static void status_init(sl_batch_status_t *st)
{
    memset(st, 0, sizeof *st);
    st->state = SL_BATCH_RUNNING;
    st->total = st->succeeded = st->failed = st->pending = -1;
}

/* total - a - b when all are known and it is not negative, else -1. */
static int64_t rest_of(int64_t total, int64_t a, int64_t b)
{
    if (total < 0 || a < 0 || b < 0 || total - a - b < 0)
        return -1;
    return total - a - b;
}

static sl_err_t status_openai(sl_provider_t api, const json_t *a, sl_batch_status_t *st)
{
    const char *id = bw_jstr(a, "id");
    const char *status = bw_jstr(a, "status");
    if (status == NULL || !id_ok(api, id) || !copy_exact(st->id, sizeof st->id, id))
        return SL_EPARSE;
    copy_text(st->status, sizeof st->status, status);
    const char *marker = bw_jstr(json_object_get(a, "metadata"), "sluice_batch");
    if (marker_ok(marker))
        copy_exact(st->marker, sizeof st->marker, marker);
    const json_t *counts = json_object_get(a, "request_counts");
    st->total = count_of(counts, "total");
    st->succeeded = count_of(counts, "completed");
    st->failed = count_of(counts, "failed");
    st->pending = rest_of(st->total, st->succeeded, st->failed);
    /* A file id that could not go into a URL makes the batch unreadable rather than silently
     * without results (its jobs would be sent again). */
    static const char *const files[2] = {"output_file_id", "error_file_id"};
    for (int k = 0; k < 2; k++) {
        const char *f = bw_jstr(a, files[k]);
        if (f == NULL || f[0] == '\0')
            continue;
        if (!id_ok(api, f) || !copy_exact(st->results[k], sizeof st->results[k], f))
            return SL_EPARSE;
    }
    if (strcmp(status, "completed") == 0 || strcmp(status, "expired") == 0 ||
        strcmp(status, "cancelled") == 0) {
        /* expired and cancelled: what ran is in the output file, the rest in the error file
         * (batch_expired / batch_cancelled) or in neither (then missing: not_sent). */
        st->state = SL_BATCH_ENDED;
    } else if (strcmp(status, "failed") == 0) {
        const json_t *e0 = json_array_get(json_object_get(json_object_get(a, "errors"), "data"), 0);
        const char *why = bw_jstr(e0, "message");
        if (why == NULL || why[0] == '\0')
            why = bw_jstr(e0, "code");
        set_failed(st, why);
    }
    /* validating, in_progress, finalizing, cancelling, and a word sluice does not know: running
     * (polled again until the executor's own deadline). */
    return SL_OK;
}

static sl_err_t status_anthropic(const json_t *a, sl_batch_status_t *st)
{
    const char *id = bw_jstr(a, "id");
    const char *status = bw_jstr(a, "processing_status");
    if (status == NULL || !id_ok(SL_PROVIDER_ANTHROPIC, id) ||
        !copy_exact(st->id, sizeof st->id, id))
        return SL_EPARSE;
    copy_text(st->status, sizeof st->status, status);
    const json_t *counts = json_object_get(a, "request_counts");
    int64_t processing = count_of(counts, "processing");
    int64_t succeeded = count_of(counts, "succeeded");
    int64_t errored = count_of(counts, "errored");
    int64_t canceled = count_of(counts, "canceled");
    int64_t expired = count_of(counts, "expired");
    st->succeeded = succeeded;
    st->failed = errored;
    st->pending = processing;
    if (processing >= 0 && succeeded >= 0 && errored >= 0 && canceled >= 0 && expired >= 0)
        st->total = processing + succeeded + errored + canceled + expired;
    const json_t *url = json_object_get(a, "results_url");
    if (url != NULL && !json_is_null(url)) {
        if (!http_url_ok(json_string_value(url)))
            return SL_EPARSE;
        copy_exact(st->results[0], sizeof st->results[0], json_string_value(url));
    }
    /* "ended" without a results_url yet stays running: reading no results would send every job
     * again. */
    if (strcmp(status, "ended") == 0 && st->results[0][0] != '\0')
        st->state = SL_BATCH_ENDED;
    return SL_OK;
}

static sl_err_t status_gemini(const json_t *a, sl_batch_status_t *st)
{
    const char *id = bw_jstr(a, "name");
    const json_t *meta = json_object_get(a, "metadata");
    if (!json_is_object(meta) || !id_ok(SL_PROVIDER_GEMINI, id) ||
        !copy_exact(st->id, sizeof st->id, id))
        return SL_EPARSE;
    const char *state = bw_jstr(meta, "state");
    copy_text(st->status, sizeof st->status, state);
    const char *marker = bw_jstr(meta, "displayName");
    if (marker_ok(marker))
        copy_exact(st->marker, sizeof st->marker, marker);
    const json_t *stats = json_object_get(meta, "batchStats");
    st->total = count_of(stats, "requestCount");
    st->succeeded = count_of(stats, "successfulRequestCount");
    st->failed = count_of(stats, "failedRequestCount");
    st->pending = count_of(stats, "pendingRequestCount");
    int done = json_is_true(json_object_get(a, "done"));
    const json_t *op_error = json_object_get(a, "error");
    if (state == NULL)
        state = "";
    if (strcmp(state, "BATCH_STATE_FAILED") == 0 ||
        (done && json_is_object(op_error) && state[0] == '\0')) {
        set_failed(st, bw_jstr(op_error, "message"));
        if (st->status[0] == '\0')
            copy_text(st->status, sizeof st->status, "BATCH_STATE_FAILED");
    } else if (done && (strcmp(state, "BATCH_STATE_SUCCEEDED") == 0 ||
                        strcmp(state, "BATCH_STATE_CANCELLED") == 0 ||
                        strcmp(state, "BATCH_STATE_EXPIRED") == 0)) {
        /* The answer itself holds the lines (for a cancelled or expired batch, those that
         * ran); SUCCEEDED before done is still being written. */
        st->state = SL_BATCH_ENDED;
        st->results_inline = 1;
    }
    return SL_OK;
}

sl_err_t sl_batch_status_read(const sl_batch_target_t *t, const json_t *answer,
                              sl_batch_status_t *out)
{
    status_init(out);
    if (t == NULL || t->dep == NULL || !json_is_object(answer))
        return SL_EPARSE;
    sl_err_t rc;
    switch (t->dep->api) {
    case SL_PROVIDER_OPENAI:
    case SL_PROVIDER_AZURE:
        rc = status_openai(t->dep->api, answer, out);
        break;
    case SL_PROVIDER_ANTHROPIC:
        rc = status_anthropic(answer, out);
        break;
    case SL_PROVIDER_GEMINI:
        rc = status_gemini(answer, out);
        break;
    default:
        rc = SL_EPARSE;
        break;
    }
    if (rc != SL_OK)
        status_init(out);
    return rc;
}

/* The status (cancel: 1) call of batch id. */
static sl_err_t batch_call(const sl_batch_target_t *t, const char *id, int cancel,
                           sl_batch_http_t *out)
{
    memset(out, 0, sizeof *out);
    if (target_adapter(t) == NULL || !id_ok(t->dep->api, id))
        return SL_EINVAL;
    char *path;
    switch (t->dep->api) {
    case SL_PROVIDER_ANTHROPIC:
        path = sl_strdupf("/messages/batches/%s%s", id, cancel ? "/cancel" : "");
        break;
    case SL_PROVIDER_GEMINI:
        path = sl_strdupf("/%s%s", id, cancel ? ":cancel" : "");
        break;
    default:
        path = sl_strdupf("/batches/%s%s", id, cancel ? "/cancel" : "");
        break;
    }
    sl_err_t rc = path != NULL ? http_start(t, out, cancel ? "POST" : "GET", make_url(t, path, ""))
                               : SL_ENOMEM;
    free(path);
    /* A POST always carries a body: the cancel calls take an empty one. */
    if (rc == SL_OK && cancel)
        rc = http_body(out, strdup("{}"));
    if (rc != SL_OK)
        sl_batch_http_clear(out);
    return rc;
}

sl_err_t sl_batch_status_request(const sl_batch_target_t *t, const char *id, sl_batch_http_t *out)
{
    return batch_call(t, id, 0, out);
}

sl_err_t sl_batch_cancel_request(const sl_batch_target_t *t, const char *id, sl_batch_http_t *out)
{
    return batch_call(t, id, 1, out);
}

sl_err_t sl_batch_results_requests(const sl_batch_target_t *t, const sl_batch_status_t *st,
                                   sl_batch_http_t out[2], int *n)
{
    memset(out, 0, 2 * sizeof out[0]);
    *n = 0;
    if (target_adapter(t) == NULL || st == NULL)
        return SL_EINVAL;
    sl_provider_t api = t->dep->api;
    sl_err_t rc = SL_OK;
    if (openai_like(api)) {
        for (int k = 0; k < 2 && rc == SL_OK; k++) {
            const char *f = st->results[k];
            if (f[0] == '\0')
                continue;
            if (!id_ok(api, f)) {
                rc = SL_EINVAL;
                break;
            }
            char *path = sl_strdupf("/files/%s/content", f);
            rc = path != NULL ? http_start(t, &out[*n], "GET", make_url(t, path, "")) : SL_ENOMEM;
            free(path);
            (*n)++;
        }
    } else if (api == SL_PROVIDER_ANTHROPIC && st->results[0][0] != '\0') {
        /* Used as given; the executor follows it only to BASE's origin
         * (sl_batch_url_same_origin), so a batch object cannot send the credential elsewhere. */
        if (!http_url_ok(st->results[0]))
            rc = SL_EINVAL;
        else
            rc = http_start(t, &out[(*n)++], "GET", strdup(st->results[0]));
    }
    if (rc != SL_OK) {
        sl_batch_http_clear(&out[0]);
        sl_batch_http_clear(&out[1]);
        *n = 0;
    }
    return rc;
}

/* ---- Finding a batch by its marker --------------------------------------------------------- */

sl_err_t sl_batch_list_request(const sl_batch_target_t *t, const char *page, sl_batch_http_t *out)
{
    memset(out, 0, sizeof *out);
    if (target_adapter(t) == NULL)
        return SL_EINVAL;
    sl_provider_t api = t->dep->api;
    if (api == SL_PROVIDER_ANTHROPIC)
        return SL_ENOTFOUND;
    if (page == NULL)
        page = "";
    if (strlen(page) > MAX_CURSOR)
        return SL_EINVAL;
    char *cursor = percent_encode(page);
    if (cursor == NULL)
        return SL_ENOMEM;
    char *query;
    if (api == SL_PROVIDER_GEMINI)
        query = sl_strdupf("pageSize=100%s%s", cursor[0] != '\0' ? "&pageToken=" : "", cursor);
    else
        query = sl_strdupf("limit=100%s%s", cursor[0] != '\0' ? "&after=" : "", cursor);
    free(cursor);
    sl_err_t rc =
        query != NULL ? http_start(t, out, "GET", make_url(t, "/batches", query)) : SL_ENOMEM;
    free(query);
    if (rc != SL_OK)
        sl_batch_http_clear(out);
    return rc;
}

sl_err_t sl_batch_list_read(const sl_batch_target_t *t, const json_t *page_answer,
                            const char *marker, sl_batch_status_t *st, int *found, char *next,
                            size_t nextlen)
{
    *found = 0;
    if (nextlen > 0)
        next[0] = '\0';
    if (t == NULL || t->dep == NULL)
        return SL_EINVAL;
    sl_provider_t api = t->dep->api;
    if (api == SL_PROVIDER_ANTHROPIC)
        return SL_ENOTFOUND; /* its batches carry no label */
    if (!json_is_object(page_answer))
        return SL_EPARSE;
    const json_t *list;
    const char *cursor = NULL;
    if (api == SL_PROVIDER_GEMINI) {
        /* An empty page leaves out "operations" (proto3 omits empty fields), so any object
         * without an error is a page. */
        if (json_object_get(page_answer, "error") != NULL)
            return SL_EPARSE;
        list = json_object_get(page_answer, "operations");
        if (list != NULL && !json_is_array(list))
            return SL_EPARSE;
        cursor = bw_jstr(page_answer, "nextPageToken");
    } else {
        list = json_object_get(page_answer, "data");
        if (!json_is_array(list))
            return SL_EPARSE;
        if (json_is_true(json_object_get(page_answer, "has_more"))) {
            cursor = bw_jstr(page_answer, "last_id");
            if (cursor == NULL)
                cursor = bw_jstr(json_array_get(list, json_array_size(list) - 1), "id");
        }
    }
    if (marker_ok(marker)) {
        size_t i;
        const json_t *b;
        json_array_foreach(list, i, b)
        {
            const json_t *meta = json_object_get(b, "metadata");
            const char *label =
                bw_jstr(meta, api == SL_PROVIDER_GEMINI ? "displayName" : "sluice_batch");
            sl_batch_status_t one;
            /* An entry sluice could not act on (a hostile id) is as good as absent. */
            if (label != NULL && strcmp(label, marker) == 0 &&
                sl_batch_status_read(t, b, &one) == SL_OK) {
                *st = one;
                *found = 1;
                break;
            }
        }
    }
    if (cursor != NULL && cursor[0] != '\0') {
        /* A cursor is never cut (it would name another page). Once found, none is needed. */
        if (!copy_exact(next, nextlen, cursor)) {
            if (nextlen > 0)
                next[0] = '\0';
            return *found ? SL_OK : SL_EPARSE;
        }
    }
    return SL_OK;
}

/* ---- Origins ------------------------------------------------------------------------------- */

typedef struct {
    int https;
    const char *host;
    size_t hostlen;
    long port;
} origin_t;

/* The scheme, host and port of an http(s) URL; 0 when it is not one sluice would follow: no
 * host, user info ("https://good@evil"), a backslash, a percent sign or anything but printable
 * ASCII in the authority, or a bad port. */
static int origin_of(const char *url, origin_t *o)
{
    const char *a;
    if (strncasecmp(url, "https://", 8) == 0) {
        o->https = 1;
        o->port = 443;
        a = url + 8;
    } else if (strncasecmp(url, "http://", 7) == 0) {
        o->https = 0;
        o->port = 80;
        a = url + 7;
    } else {
        return 0;
    }
    size_t alen = strcspn(a, "/?#");
    if (alen == 0)
        return 0;
    for (size_t i = 0; i < alen; i++) {
        unsigned char c = (unsigned char)a[i];
        if (c <= 0x20 || c >= 0x7f || c == '@' || c == '\\' || c == '%')
            return 0;
    }
    const char *port = NULL;
    if (a[0] == '[') {
        const char *close = memchr(a, ']', alen);
        if (close == NULL)
            return 0;
        o->host = a;
        o->hostlen = (size_t)(close - a) + 1;
        if (o->hostlen < alen) {
            if (close[1] != ':')
                return 0;
            port = close + 2;
        }
    } else {
        const char *colon = memchr(a, ':', alen);
        o->host = a;
        o->hostlen = colon != NULL ? (size_t)(colon - a) : alen;
        if (colon != NULL)
            port = colon + 1;
    }
    if (o->hostlen == 0)
        return 0;
    if (port != NULL) {
        size_t plen = alen - (size_t)(port - a);
        int64_t p;
        if (plen > 0) {
            if (sl_parse_uint(port, plen, 65535, &p) != 0 || p == 0)
                return 0;
            o->port = (long)p;
        }
    }
    return 1;
}

int sl_batch_url_same_origin(const char *base, const char *url)
{
    origin_t b, u;
    if (base == NULL || url == NULL || !origin_of(base, &b) || !origin_of(url, &u))
        return 0;
    return b.https == u.https && b.port == u.port && b.hostlen == u.hostlen &&
           strncasecmp(b.host, u.host, b.hostlen) == 0;
}
