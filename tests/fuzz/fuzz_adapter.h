/* fuzz_adapter.h - the body of the three adapter targets (fuzz_openai.c, fuzz_anthropic.c,
 * fuzz_gemini.c): one provider API's response, error, header and stream parsers.
 *
 * Input, either
 *   - a raw HTTP response, as the fixtures in tests/fixtures/providers/ hold it ("HTTP/1.1 429
 *     ...", header lines, a blank line, the body): every header line goes to the rate-limit
 *     parser, and the body (when it is JSON) to classify, response, usage, error and the retry
 *     hint; a body that is a chat request ("messages") is also translated into a provider call;
 *   - or anything else, read as a stream body (SSE): fed whole and in pieces cut by its first
 *     byte, it must give the same chunks, each valid against schema/stream.json, and the same
 *     assembled answer.
 */
#ifndef SL_FUZZ_ADAPTER_H
#define SL_FUZZ_ADAPTER_H

#include <jansson.h>
#include <string.h>

#include "../../dispatcher/adapter.h"
#include "../../dispatcher/ratelimit.h"
#include "../../dispatcher/stream.h"
#include "../../dispatcher/timefmt.h"
#include "config.h"
#include "fuzz.h"
#include "jsonschema.h"
#include "util.h"

static sl_schema_t *stream_schema;

static void fuzz_adapter_init(void)
{
    char path[4096], err[512];
    fuzz_repo_path("schema/stream.json", path, sizeof path);
    FUZZ_CHECK(sl_schema_load_file(path, &stream_schema, err, sizeof err) == SL_OK);
}

static sl_deployment_cfg_t fuzz_deployment(sl_provider_t api)
{
    sl_deployment_cfg_t d;
    memset(&d, 0, sizeof d);
    d.name = "dep";
    d.api = api;
    d.provider = sl_provider_name(api);
    d.max_output_tokens = 8192;
    d.timeout_ms = 60000;
    d.api_version = "2024-10-21";
    d.base_url = "http://127.0.0.1:1/v1";
    d.model = "model-x";
    return d;
}

static void check_object_or_null(json_t *j)
{
    FUZZ_CHECK(j == NULL || json_is_object(j));
    json_decref(j);
}

static void fuzz_response(const sl_adapter_t *ad, sl_provider_t api, const char *text, size_t len)
{
    const char *end = NULL;
    for (size_t i = 0; i + 3 < len; i++) {
        if (memcmp(text + i, "\r\n\r\n", 4) == 0) {
            end = text + i;
            break;
        }
    }
    long status = 0;
    for (size_t i = 9; i < 12 && i < len && text[i] >= '0' && text[i] <= '9'; i++)
        status = status * 10 + (text[i] - '0');
    sl_ratelimit_t rl;
    sl_ratelimit_init(&rl);
    rl.now_ms = 1760433310000LL;
    const char *head_end = end != NULL ? end + 2 : text + len;
    for (const char *line = text; line < head_end;) {
        const char *nl = memchr(line, '\n', (size_t)(head_end - line));
        size_t n = nl != NULL ? (size_t)(nl - line) + 1 : (size_t)(head_end - line);
        sl_ratelimit_header(&rl, line, n);
        line += n;
    }
    const char *body_text = end != NULL ? end + 4 : text + len;
    json_t *body = json_loadb(body_text, len - (size_t)(body_text - text), 0, NULL);
    for (int transport = 0; transport <= 2; transport++) {
        sl_outcome_t o = sl_adapter_classify(ad, transport, status, body, &rl);
        FUZZ_CHECK((int)o >= 0 && o < SL_OUTCOME_COUNT_);
    }
    int64_t retry = sl_adapter_retry_after_ms(ad, &rl, body);
    FUZZ_CHECK(retry >= -1 && retry <= SL_TIMEFMT_MAX_MS);
    check_object_or_null(sl_adapter_response(ad, body, "model-x"));
    check_object_or_null(sl_adapter_usage(ad, body));
    sl_usage_t u;
    if (sl_adapter_usage_of(ad, body, &u))
        FUZZ_CHECK(u.input >= 0 && u.output >= 0 && u.cached >= 0 && u.reasoning >= 0);
    json_t *err = sl_adapter_error(ad, body, "server_error", NULL);
    FUZZ_CHECK(json_is_object(err));
    json_decref(err);
    const char *fr = json_string_value(json_object_get(body, "finish_reason"));
    if (fr != NULL)
        FUZZ_CHECK(sl_adapter_finish_reason(ad, fr, 0) != NULL);
    if (json_is_object(body) && json_object_get(body, "messages") != NULL) {
        sl_deployment_cfg_t d = fuzz_deployment(api);
        sl_adapter_request_t req;
        memset(&req, 0, sizeof req);
        char why[256];
        sl_err_t rc = sl_adapter_request(ad, &d, body, &req, why, sizeof why);
        if (rc == SL_OK) {
            /* What goes to the provider is JSON. */
            json_t *sent = json_loads(req.body, 0, NULL);
            FUZZ_CHECK(json_is_object(sent));
            json_decref(sent);
            FUZZ_CHECK(req.url != NULL);
        }
        sl_adapter_request_clear(&req);
    }
    json_decref(body);
}

/* The chunks of one stream run as one text (without their clock), and its answer. */
typedef struct {
    json_t *chunks;
} run_t;

static void collect(const json_t *chunk, void *arg)
{
    run_t *r = arg;
    char why[512];
    if (sl_schema_validate(stream_schema, chunk, why, sizeof why) != SL_OK) {
        char *text = json_dumps(chunk, JSON_COMPACT);
        fprintf(stderr, "chunk not valid against schema/stream.json: %s\n%s\n", why, text);
        free(text);
        abort();
    }
    json_t *c = json_deep_copy(chunk);
    FUZZ_CHECK(c != NULL);
    json_object_del(c, "ts_ms");
    json_array_append_new(r->chunks, c);
}

static char *stream_run(const sl_adapter_t *ad, const char *text, size_t len, size_t piece,
                        sl_outcome_t *outcome)
{
    run_t r = {json_array()};
    sl_stream_ids_t ids = {"job-1", 1, "res-1", "model-x", 40};
    sl_stream_t *st = NULL;
    FUZZ_CHECK(sl_stream_new(ad, &ids, collect, &r, &st) == SL_OK);
    sl_err_t rc = SL_OK;
    for (size_t at = 0; at < len && rc == SL_OK;) {
        size_t n = piece == 0 || piece > len - at ? len - at : piece;
        rc = sl_stream_feed(st, text + at, n);
        at += n;
    }
    *outcome = sl_stream_end(st, 0);
    FUZZ_CHECK(sl_stream_end(st, 1) == *outcome); /* idempotent */
    json_t *resp = sl_stream_response(st);
    json_t *usage = sl_stream_usage(st);
    /* Without the provider's, the id is random and created is the clock. */
    json_object_del(resp, "id");
    json_object_del(resp, "created");
    json_array_append_new(r.chunks, resp != NULL ? resp : json_null());
    json_array_append_new(r.chunks, usage != NULL ? usage : json_null());
    sl_stream_free(st);
    char *dump = json_dumps(r.chunks, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(r.chunks);
    FUZZ_CHECK(dump != NULL);
    return dump;
}

static int fuzz_adapter(sl_provider_t api, const uint8_t *data, size_t size)
{
    if (stream_schema == NULL)
        fuzz_adapter_init();
    const sl_adapter_t *ad = sl_adapter_for(api);
    FUZZ_CHECK(ad != NULL);
    const char *text = (const char *)data;
    if (size >= 5 && memcmp(text, "HTTP/", 5) == 0) {
        fuzz_response(ad, api, text, size);
        return 0;
    }
    if (size > (size_t)256 << 10)
        return 0;
    sl_outcome_t whole_outcome, cut_outcome;
    char *whole = stream_run(ad, text, size, 0, &whole_outcome);
    size_t piece = size > 0 ? (size_t)(data[0] % 13) + 1 : 1;
    char *cut = stream_run(ad, text, size, piece, &cut_outcome);
    if (whole_outcome != cut_outcome || strcmp(whole, cut) != 0) {
        fprintf(stderr, "stream differs when cut in %zu-byte pieces:\nwhole %s: %s\ncut %s: %s\n",
                piece, sl_outcome_name(whole_outcome), whole, sl_outcome_name(cut_outcome), cut);
        abort();
    }
    free(whole);
    free(cut);
    return 0;
}

#endif
