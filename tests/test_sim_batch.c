/* test_sim_batch.c - the provider simulator's batch APIs (ops/sim/batch*.c): OpenAI and Azure
 * files and batches, Anthropic Message Batches, Gemini batchGenerateContent.
 *
 * Everything runs through sl_sim_handle with explicit times, so a batch's life (created, running,
 * ended at its turnaround) is driven by the clock without sleeping. The helpers below speak each
 * API the way sluice's dispatcher does (docs/provider-batch.md) and reduce its answers to one
 * neutral form: a status word and, per custom id, the line's outcome, so most behaviours are
 * asserted for all four APIs by one loop. Configs are written with single quotes; Q() turns them
 * into double quotes.
 */
#include <check.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ops/sim/batch_multipart.h"
#include "../ops/sim/sim.h"

/* ---- Helpers ---------------------------------------------------------------------------- */

static const char *Q(const char *text)
{
    static char buf[8192];
    ck_assert_uint_lt(strlen(text), sizeof buf);
    size_t i = 0;
    for (; text[i]; i++)
        buf[i] = text[i] == '\'' ? '"' : text[i];
    buf[i] = '\0';
    return buf;
}

static sl_sim_t *sim_from(const char *config_text)
{
    const char *text = Q(config_text);
    char err[256];
    sl_sim_config_t *cfg = NULL;
    sl_err_t rc = sl_sim_config_parse(text, strlen(text), &cfg, err, sizeof err);
    ck_assert_msg(rc == SL_OK, "config rejected: %s", err);
    sl_sim_t *sim = NULL;
    ck_assert_int_eq(sl_sim_new(cfg, 0, &sim), SL_OK);
    return sim;
}

static const char *config_error(const char *config_text)
{
    static char err[256];
    const char *text = Q(config_text);
    sl_sim_config_t *cfg = NULL;
    sl_err_t rc = sl_sim_config_parse(text, strlen(text), &cfg, err, sizeof err);
    ck_assert_msg(rc != SL_OK, "config accepted: %s", text);
    ck_assert_ptr_null(cfg);
    return err;
}

typedef enum { OPENAI, AZURE, ANTHROPIC, GEMINI, N_APIS } api_t;

static const char *const api_names[N_APIS] = {"openai", "azure", "anthropic", "gemini"};

/* Every API's deployment, named after it, with the given batch object. */
static sl_sim_t *sim_all(const char *batch, const char *extra_top)
{
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{%s'deployments':["
             "{'name':'openai','model':'gpt-4o-mini','api_key':'k','batch':%s},"
             "{'name':'azure','api':'azure','api_key':'k','batch':%s},"
             "{'name':'anthropic','api':'anthropic','api_key':'k','batch':%s},"
             "{'name':'gemini','api':'gemini','api_key':'k','batch':%s}]}",
             extra_top != NULL ? extra_top : "", batch, batch, batch, batch);
    return sim_from(cfg);
}

static const char *const *creds(api_t api)
{
    static const char *const openai[] = {"authorization", "Bearer k", NULL};
    static const char *const azure[] = {"api-key", "k", NULL};
    static const char *const anthropic[] = {
        "x-api-key", "k", "anthropic-version", "2023-06-01", "host", "sim.test:8089", NULL};
    static const char *const gemini[] = {"x-goog-api-key", "k", NULL};
    switch (api) {
    case OPENAI:
        return openai;
    case AZURE:
        return azure;
    case ANTHROPIC:
        return anthropic;
    default:
        return gemini;
    }
}

static const char *const azure_query[] = {"api-version", "2024-10-21", NULL};

static sl_sim_response_t *call_with(sl_sim_t *sim, const char *method, const char *path,
                                    const char *const *headers, const char *const *query,
                                    const char *body, size_t len, int64_t now_ms)
{
    sl_sim_request_t req = {
        .method = method,
        .path = path,
        .headers = headers,
        .query = query,
        .body = body,
        .body_len = len,
    };
    sl_sim_response_t *resp = NULL;
    ck_assert_int_eq(sl_sim_handle(sim, &req, now_ms, &resp), SL_OK);
    ck_assert_ptr_nonnull(resp);
    return resp;
}

/* A call with the API's credentials (and Azure's api-version). */
static sl_sim_response_t *call(sl_sim_t *sim, api_t api, const char *method, const char *path,
                               const char *body, int64_t now_ms)
{
    return call_with(sim, method, path, creds(api), api == AZURE ? azure_query : NULL, body,
                     body != NULL ? strlen(body) : 0, now_ms);
}

static json_t *body_json(const sl_sim_response_t *resp)
{
    size_t len = 0;
    const char *body = sl_sim_response_body(resp, &len);
    json_error_t jerr;
    json_t *js = json_loadb(body, len, 0, &jerr);
    ck_assert_msg(js != NULL, "body is not JSON (%s): %s", jerr.text, body);
    return js;
}

/* Checks the status and returns the body as JSON; frees resp. */
static json_t *expect(sl_sim_response_t *resp, int status)
{
    ck_assert_msg(sl_sim_response_status(resp) == status, "want %d, got %d: %s", status,
                  sl_sim_response_status(resp), sl_sim_response_body(resp, NULL));
    json_t *js = body_json(resp);
    sl_sim_response_free(resp);
    return js;
}

static const char *str_at(json_t *js, const char *path)
{
    /* path: keys separated by '.' */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *cur = js;
    for (char *save = NULL, *key = strtok_r(buf, ".", &save); key != NULL;
         key = strtok_r(NULL, ".", &save))
        cur = json_object_get(cur, key);
    return json_string_value(cur);
}

static long long stat_batch(sl_sim_t *sim, const char *dep, const char *field, int64_t now_ms)
{
    sl_sim_response_t *resp = call_with(sim, "GET", "/stats", NULL, NULL, NULL, 0, now_ms);
    json_t *js = expect(resp, 200);
    json_t *v = json_object_get(
        json_object_get(json_object_get(json_object_get(js, "deployments"), dep), "batch"), field);
    ck_assert_msg(json_is_integer(v), "stats %s.batch.%s is not an integer", dep, field);
    long long n = json_integer_value(v);
    json_decref(js);
    return n;
}

/* A multipart upload body with the given purpose (NULL = none) and file content. */
static char *multipart(const char *purpose, const char *content, size_t *len)
{
    size_t cap = strlen(content) + 512;
    char *body = malloc(cap);
    ck_assert_ptr_nonnull(body);
    size_t n = 0;
    n += (size_t)sprintf(body + n, "preamble to ignore\r\n");
    if (purpose != NULL)
        n += (size_t)sprintf(body + n,
                             "--XyZ\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\n"
                             "%s\r\n",
                             purpose);
    n += (size_t)sprintf(body + n,
                         "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; "
                         "filename=\"mark.jsonl\"\r\nContent-Type: application/jsonl\r\n\r\n%s"
                         "\r\n--XyZ--\r\n",
                         content);
    *len = n;
    return body;
}

static sl_sim_response_t *upload(sl_sim_t *sim, api_t api, const char *body, size_t len,
                                 const char *content_type, int64_t now_ms)
{
    const char *headers[8] = {NULL};
    size_t h = 0;
    for (const char *const *c = creds(api); *c != NULL; c++)
        headers[h++] = *c;
    if (content_type != NULL) {
        headers[h++] = "content-type";
        headers[h++] = content_type;
    }
    char path[64];
    snprintf(path, sizeof path, api == AZURE ? "/azure/openai/files" : "/openai/v1/files");
    return call_with(sim, "POST", path, headers, api == AZURE ? azure_query : NULL, body, len,
                     now_ms);
}

/* n lines of an OpenAI/Azure input file, custom ids PREFIX0.., each prompt 2 tokens. */
static char *jsonl(api_t api, const char *prefix, int n)
{
    size_t cap = (size_t)n * 256 + 1;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    size_t used = 0;
    text[0] = '\0';
    for (int i = 0; i < n; i++)
        used += (size_t)snprintf(text + used, cap - used,
                                 "{\"custom_id\":\"%s%d\",\"method\":\"POST\",\"url\":\"%s\","
                                 "\"body\":{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                                 "\"content\":\"abcdefgh\"}],\"max_tokens\":100}}\n",
                                 prefix, i,
                                 api == AZURE ? "/chat/completions" : "/v1/chat/completions");
    return text;
}

/* Uploads content and creates a batch from it with marker; returns the create answer. */
static sl_sim_response_t *openai_create_from(sl_sim_t *sim, api_t api, const char *content,
                                             const char *marker, int64_t now_ms)
{
    size_t len = 0;
    char *body = multipart("batch", content, &len);
    json_t *file =
        expect(upload(sim, api, body, len, "multipart/form-data; boundary=XyZ", now_ms), 200);
    free(body);
    ck_assert_str_eq(str_at(file, "object"), "file");
    ck_assert_str_eq(str_at(file, "purpose"), "batch");
    ck_assert_str_eq(str_at(file, "filename"), "mark.jsonl");
    ck_assert_int_eq(json_integer_value(json_object_get(file, "bytes")),
                     (long long)strlen(content));
    char create[512];
    snprintf(create, sizeof create,
             "{\"input_file_id\":\"%s\",\"endpoint\":\"%s\",\"completion_window\":\"24h\","
             "\"metadata\":{\"sluice_batch\":\"%s\"}}",
             str_at(file, "id"), api == AZURE ? "/chat/completions" : "/v1/chat/completions",
             marker);
    json_decref(file);
    return call(sim, api, "POST", api == AZURE ? "/azure/openai/batches" : "/openai/v1/batches",
                create, now_ms);
}

/* Creates a batch of n requests (custom ids PREFIX0..) with marker; returns the answer. */
static sl_sim_response_t *create(sl_sim_t *sim, api_t api, const char *prefix, int n,
                                 const char *marker, int64_t now_ms)
{
    if (api == OPENAI || api == AZURE) {
        char *content = jsonl(api, prefix, n);
        sl_sim_response_t *resp = openai_create_from(sim, api, content, marker, now_ms);
        free(content);
        return resp;
    }
    size_t cap = (size_t)n * 256 + 512;
    char *body = malloc(cap);
    ck_assert_ptr_nonnull(body);
    size_t used = 0;
    if (api == ANTHROPIC) {
        used += (size_t)snprintf(body, cap, "{\"requests\":[");
        for (int i = 0; i < n; i++)
            used += (size_t)snprintf(body + used, cap - used,
                                     "%s{\"custom_id\":\"%s%d\",\"params\":{\"model\":\"c\","
                                     "\"max_tokens\":100,\"messages\":[{\"role\":\"user\","
                                     "\"content\":\"abcdefgh\"}]}}",
                                     i ? "," : "", prefix, i);
        snprintf(body + used, cap - used, "]}");
    } else {
        used += (size_t)snprintf(body, cap,
                                 "{\"batch\":{\"display_name\":\"%s\",\"input_config\":{"
                                 "\"requests\":{\"requests\":[",
                                 marker);
        for (int i = 0; i < n; i++)
            used += (size_t)snprintf(
                body + used, cap - used,
                "%s{\"request\":{\"contents\":[{\"parts\":[{\"text\":\"abcdefgh\"}]}],"
                "\"generationConfig\":{\"maxOutputTokens\":100}},\"metadata\":{\"key\":\"%s%d\"}}",
                i ? "," : "", prefix, i);
        snprintf(body + used, cap - used, "]}}}}");
    }
    sl_sim_response_t *resp =
        call(sim, api, "POST",
             api == ANTHROPIC ? "/anthropic/v1/messages/batches"
                              : "/gemini/v1beta/models/gemini-2.0-flash:batchGenerateContent",
             body, now_ms);
    free(body);
    return resp;
}

/* The batch id in a create/status answer (Gemini: after "batches/"). */
static char *id_of(api_t api, json_t *batch)
{
    const char *id = api == GEMINI ? str_at(batch, "name") : str_at(batch, "id");
    ck_assert_ptr_nonnull(id);
    if (api == GEMINI) {
        ck_assert_msg(strncmp(id, "batches/", 8) == 0, "%s", id);
        id += 8;
    }
    return strdup(id);
}

/* Creates a batch that must be accepted; returns its id (free it). */
static char *create_ok(sl_sim_t *sim, api_t api, const char *prefix, int n, const char *marker,
                       int64_t now_ms)
{
    json_t *js = expect(create(sim, api, prefix, n, marker, now_ms), 200);
    char *id = id_of(api, js);
    json_decref(js);
    return id;
}

static void batch_path(api_t api, const char *id, const char *suffix, char *buf, size_t cap)
{
    switch (api) {
    case OPENAI:
        snprintf(buf, cap, "/openai/v1/batches/%s%s", id, suffix);
        break;
    case AZURE:
        snprintf(buf, cap, "/azure/openai/batches/%s%s", id, suffix);
        break;
    case ANTHROPIC:
        snprintf(buf, cap, "/anthropic/v1/messages/batches/%s%s", id, suffix);
        break;
    default:
        snprintf(buf, cap, "/gemini/v1beta/batches/%s%s", id,
                 strcmp(suffix, "/cancel") == 0 ? ":cancel" : suffix);
        break;
    }
}

static json_t *get_batch(sl_sim_t *sim, api_t api, const char *id, int64_t now_ms)
{
    char path[256];
    batch_path(api, id, "", path, sizeof path);
    return expect(call(sim, api, "GET", path, NULL, now_ms), 200);
}

/* The status word: OpenAI's status, Anthropic's processing_status, Gemini's metadata.state. */
static char *status_of(api_t api, json_t *batch)
{
    const char *s = api == ANTHROPIC ? str_at(batch, "processing_status")
                    : api == GEMINI  ? str_at(batch, "metadata.state")
                                     : str_at(batch, "status");
    ck_assert_ptr_nonnull(s);
    return strdup(s);
}

static void assert_status(sl_sim_t *sim, api_t api, const char *id, int64_t now_ms,
                          const char *want)
{
    json_t *js = get_batch(sim, api, id, now_ms);
    char *got = status_of(api, js);
    ck_assert_msg(strcmp(got, want) == 0, "%s at t=%lld: want %s, got %s", api_names[api],
                  (long long)now_ms, want, got);
    free(got);
    json_decref(js);
}

/* Adds one outcome {"outcome":O,"status":N,"prompt":P,"completion":C} under custom_id. */
static void note(json_t *map, const char *custom_id, const char *outcome, int status,
                 json_t *prompt, json_t *completion)
{
    ck_assert_msg(json_object_get(map, custom_id) == NULL, "custom id %s twice", custom_id);
    json_object_set_new(map, custom_id,
                        json_pack("{s:s, s:i, s:I, s:I}", "outcome", outcome, "status", status,
                                  "prompt", (json_int_t)json_integer_value(prompt), "completion",
                                  (json_int_t)json_integer_value(completion)));
}

/* Reads OpenAI/Azure JSONL (an output or error file) into map. */
static void read_openai_file(sl_sim_t *sim, api_t api, const char *file_id, json_t *map,
                             int64_t now_ms)
{
    char path[256];
    snprintf(path, sizeof path,
             api == AZURE ? "/azure/openai/files/%s/content" : "/openai/v1/files/%s/content",
             file_id);
    sl_sim_response_t *resp = call(sim, api, "GET", path, NULL, now_ms);
    ck_assert_int_eq(sl_sim_response_status(resp), 200);
    size_t len = 0;
    const char *text = sl_sim_response_body(resp, &len);
    for (const char *p = text; p < text + len;) {
        const char *eol = memchr(p, '\n', (size_t)(text + len - p));
        ck_assert_ptr_nonnull(eol);
        json_t *line = json_loadb(p, (size_t)(eol - p), 0, NULL);
        ck_assert_msg(line != NULL, "not a JSON line: %.*s", (int)(eol - p), p);
        const char *custom_id = str_at(line, "custom_id");
        ck_assert_ptr_nonnull(custom_id);
        ck_assert(strncmp(str_at(line, "id"), "batch_req_", 10) == 0);
        json_t *response = json_object_get(line, "response");
        if (json_is_null(response)) {
            const char *code = str_at(line, "error.code");
            ck_assert_ptr_nonnull(code);
            note(map, custom_id,
                 strcmp(code, "batch_expired") == 0     ? "expired"
                 : strcmp(code, "batch_cancelled") == 0 ? "cancelled"
                                                        : code,
                 0, NULL, NULL);
        } else {
            ck_assert(json_is_null(json_object_get(line, "error")));
            int status = (int)json_integer_value(json_object_get(response, "status_code"));
            json_t *usage = json_object_get(json_object_get(response, "body"), "usage");
            if (status == 200)
                ck_assert_str_eq(str_at(response, "body.object"), "chat.completion");
            else
                ck_assert_ptr_nonnull(str_at(response, "body.error.message"));
            note(map, custom_id, status == 200 ? "ok" : "errored", status,
                 json_object_get(usage, "prompt_tokens"),
                 json_object_get(usage, "completion_tokens"));
        }
        json_decref(line);
        p = eol + 1;
    }
    sl_sim_response_free(resp);
}

/* Every line of an ended batch, by custom id, read the API's way. */
static json_t *results(sl_sim_t *sim, api_t api, const char *id, int64_t now_ms)
{
    json_t *map = json_object();
    json_t *batch = get_batch(sim, api, id, now_ms);
    if (api == OPENAI || api == AZURE) {
        const char *out = str_at(batch, "output_file_id");
        const char *err = str_at(batch, "error_file_id");
        if (out != NULL)
            read_openai_file(sim, api, out, map, now_ms);
        if (err != NULL)
            read_openai_file(sim, api, err, map, now_ms);
    } else if (api == ANTHROPIC) {
        const char *url = str_at(batch, "results_url");
        ck_assert_ptr_nonnull(url);
        const char *prefix = "http://sim.test:8089";
        ck_assert_msg(strncmp(url, prefix, strlen(prefix)) == 0, "results_url %s", url);
        sl_sim_response_t *resp = call(sim, api, "GET", url + strlen(prefix), NULL, now_ms);
        ck_assert_int_eq(sl_sim_response_status(resp), 200);
        size_t len = 0;
        const char *text = sl_sim_response_body(resp, &len);
        for (const char *p = text; p < text + len;) {
            const char *eol = memchr(p, '\n', (size_t)(text + len - p));
            ck_assert_ptr_nonnull(eol);
            json_t *line = json_loadb(p, (size_t)(eol - p), 0, NULL);
            ck_assert_ptr_nonnull(line);
            const char *type = str_at(line, "result.type");
            json_t *usage = json_object_get(
                json_object_get(json_object_get(line, "result"), "message"), "usage");
            const char *outcome = strcmp(type, "succeeded") == 0  ? "ok"
                                  : strcmp(type, "canceled") == 0 ? "cancelled"
                                                                  : type;
            int status = strcmp(type, "errored") != 0                                        ? 0
                         : strcmp(str_at(line, "result.error.error.type"), "api_error") == 0 ? 500
                                                                                             : 400;
            if (strcmp(type, "succeeded") == 0)
                ck_assert_str_eq(str_at(line, "result.message.type"), "message");
            note(map, str_at(line, "custom_id"), outcome, status,
                 json_object_get(usage, "input_tokens"), json_object_get(usage, "output_tokens"));
            json_decref(line);
            p = eol + 1;
        }
        sl_sim_response_free(resp);
    } else {
        json_t *entries =
            json_object_get(json_object_get(json_object_get(batch, "response"), "inlinedResponses"),
                            "inlinedResponses");
        size_t i;
        json_t *e;
        json_array_foreach(entries, i, e)
        {
            const char *key = str_at(e, "metadata.key");
            ck_assert_ptr_nonnull(key);
            /* In the order of the input: key g<i>. */
            char want[32];
            snprintf(want, sizeof want, "%zu", i);
            ck_assert_msg(strcmp(key + strlen(key) - strlen(want), want) == 0,
                          "entry %zu has key %s", i, key);
            json_t *usage = json_object_get(json_object_get(e, "response"), "usageMetadata");
            if (json_object_get(e, "response") != NULL) {
                note(map, key, "ok", 200, json_object_get(usage, "promptTokenCount"),
                     json_object_get(usage, "candidatesTokenCount"));
            } else {
                const char *status = str_at(e, "error.status");
                int code =
                    (int)json_integer_value(json_object_get(json_object_get(e, "error"), "code"));
                bool expired = strcmp(status, "DEADLINE_EXCEEDED") == 0;
                if (expired)
                    ck_assert_int_eq(code, 504);
                note(map, key, expired ? "expired" : "errored", expired ? 0 : code, NULL, NULL);
            }
        }
    }
    json_decref(batch);
    return map;
}

/* Counts the outcomes of a results map. */
static int count_outcome(json_t *map, const char *outcome)
{
    int n = 0;
    const char *key;
    json_t *v;
    json_object_foreach(map, key, v)
    {
        n += strcmp(str_at(v, "outcome"), outcome) == 0;
    }
    return n;
}

/* The words each API uses for the stages every test walks through. */
static const char *word(api_t api, const char *stage)
{
    static const char *const words[N_APIS][6] = {
        /* created, running, cancelling, completed, cancelled, expired-run */
        {"validating", "in_progress", "cancelling", "completed", "cancelled", "expired"},
        {"validating", "in_progress", "cancelling", "completed", "cancelled", "expired"},
        {"in_progress", "in_progress", "canceling", "ended", "ended", "ended"},
        {"BATCH_STATE_PENDING", "BATCH_STATE_RUNNING", "BATCH_STATE_CANCELLED",
         "BATCH_STATE_SUCCEEDED", "BATCH_STATE_CANCELLED", "BATCH_STATE_SUCCEEDED"},
    };
    static const char *const stages[6] = {"created",   "running",   "cancelling",
                                          "completed", "cancelled", "expired"};
    for (int i = 0; i < 6; i++) {
        if (strcmp(stage, stages[i]) == 0)
            return words[api][i];
    }
    ck_abort_msg("no stage %s", stage);
    return NULL;
}

/* ---- Lifecycle -------------------------------------------------------------------------- */

START_TEST(each_api_runs_a_batch_from_creation_to_results)
{
    sl_sim_t *sim = sim_all("{'turnaround_ms':1000}", NULL);
    for (int a = 0; a < N_APIS; a++) {
        api_t api = (api_t)a;
        json_t *created = expect(create(sim, api, "job-", 5, "mark-1", 100), 200);
        char *got = status_of(api, created);
        ck_assert_str_eq(got, word(api, "created"));
        free(got);
        char *id = id_of(api, created);
        json_decref(created);
        assert_status(sim, api, id, 101, word(api, "running"));
        assert_status(sim, api, id, 1099, word(api, "running"));
        ck_assert_int_eq(stat_batch(sim, api_names[a], "enqueued_tokens_now", 1099), 10);
        assert_status(sim, api, id, 1100, word(api, "completed"));
        json_t *map = results(sim, api, id, 1100);
        ck_assert_int_eq(json_object_size(map), 5);
        for (int i = 0; i < 5; i++) {
            char custom_id[16];
            snprintf(custom_id, sizeof custom_id, "job-%d", i);
            json_t *line = json_object_get(map, custom_id);
            ck_assert_msg(line != NULL, "%s: %s missing", api_names[a], custom_id);
            ck_assert_str_eq(str_at(line, "outcome"), "ok");
            /* "abcdefgh": 8 characters, 2 tokens; completion within 10..200, capped at 100. */
            ck_assert_int_eq(json_integer_value(json_object_get(line, "prompt")), 2);
            long long completion = json_integer_value(json_object_get(line, "completion"));
            ck_assert_msg(completion >= 10 && completion <= 100, "completion %lld", completion);
        }
        json_decref(map);
        ck_assert_int_eq(stat_batch(sim, api_names[a], "batches_created", 1100), 1);
        ck_assert_int_eq(stat_batch(sim, api_names[a], "lines", 1100), 5);
        ck_assert_int_eq(stat_batch(sim, api_names[a], "lines_succeeded", 1100), 5);
        ck_assert_int_eq(stat_batch(sim, api_names[a], "enqueued_tokens_now", 1100), 0);
        ck_assert_int_eq(stat_batch(sim, api_names[a], "enqueued_tokens_peak", 1100), 10);
        free(id);
    }
    sl_sim_free(sim);
}
END_TEST

START_TEST(openai_batch_object_has_the_documented_fields)
{
    sl_sim_t *sim = sim_all("{'turnaround_ms':1000}", NULL);
    json_t *b = expect(create(sim, OPENAI, "j", 2, "mark-x", 0), 200);
    ck_assert_str_eq(str_at(b, "object"), "batch");
    ck_assert_str_eq(str_at(b, "endpoint"), "/v1/chat/completions");
    ck_assert_str_eq(str_at(b, "completion_window"), "24h");
    ck_assert_str_eq(str_at(b, "metadata.sluice_batch"), "mark-x");
    ck_assert(json_is_null(json_object_get(b, "errors")));
    ck_assert(json_is_null(json_object_get(b, "output_file_id")));
    ck_assert(json_is_null(json_object_get(b, "in_progress_at")));
    ck_assert_int_eq(json_integer_value(json_object_get(b, "expires_at")) -
                         json_integer_value(json_object_get(b, "created_at")),
                     86400);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(b, "request_counts"), "total")), 2);
    char *id = id_of(OPENAI, b);
    ck_assert(strncmp(id, "batch_", 6) == 0);
    json_decref(b);
    json_t *done = get_batch(sim, OPENAI, id, 1000);
    ck_assert(json_is_integer(json_object_get(done, "completed_at")));
    ck_assert(json_is_null(json_object_get(done, "error_file_id")));
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(done, "request_counts"), "completed")),
        2);
    /* The output file is a file object of purpose batch_output. */
    char path[128];
    snprintf(path, sizeof path, "/openai/v1/files/%s", str_at(done, "output_file_id"));
    json_t *file = expect(call(sim, OPENAI, "GET", path, NULL, 1000), 200);
    ck_assert_str_eq(str_at(file, "purpose"), "batch_output");
    ck_assert_int_gt(json_integer_value(json_object_get(file, "bytes")), 100);
    json_decref(file);
    json_decref(done);
    free(id);
    sl_sim_free(sim);
}
END_TEST

START_TEST(azure_needs_api_version_and_its_own_line_url)
{
    sl_sim_t *sim = sim_all("{'turnaround_ms':10}", NULL);
    json_t *js =
        expect(call_with(sim, "GET", "/azure/openai/batches", creds(AZURE), NULL, NULL, 0, 0), 400);
    ck_assert_str_eq(str_at(js, "error.code"), "MissingApiVersionParameter");
    json_decref(js);
    /* OpenAI's url in an Azure file: the batch fails validation. */
    char *content = jsonl(OPENAI, "a", 2);
    js = expect(openai_create_from(sim, AZURE, content, "m", 0), 200);
    free(content);
    char *id = id_of(AZURE, js);
    json_decref(js);
    js = get_batch(sim, AZURE, id, 1);
    ck_assert_str_eq(str_at(js, "status"), "failed");
    json_t *first = json_array_get(json_object_get(json_object_get(js, "errors"), "data"), 0);
    ck_assert_str_eq(str_at(first, "code"), "invalid_url");
    ck_assert_int_eq(json_integer_value(json_object_get(first, "line")), 1);
    json_decref(js);
    free(id);
    ck_assert_int_eq(stat_batch(sim, "azure", "lines", 1), 0);
    sl_sim_free(sim);
}
END_TEST

START_TEST(openai_file_rules_fail_the_batch_with_a_code_and_line)
{
    sl_sim_t *sim = sim_all("{}", NULL);
    const char *cases[][2] = {
        {"{'custom_id':'a','method':'POST','url':'/v1/chat/completions','body':{'model':'m1',"
         "'messages':[{'role':'user','content':'x'}]}}\n{'custom_id':'b','method':'POST','url':"
         "'/v1/chat/completions','body':{'model':'m2','messages':[{'role':'user','content':'x'}]}}"
         "\n",
         "mixed_models"},
        {"{'custom_id':'a','method':'POST','url':'/v1/chat/completions','body':{'model':'m1',"
         "'messages':[{'role':'user','content':'x'}]}}\n{'custom_id':'a','method':'POST','url':"
         "'/v1/chat/completions','body':{'model':'m1','messages':[{'role':'user','content':'x'}]}}"
         "\n",
         "duplicate_custom_id"},
        {"{'custom_id':'a','method':'GET','url':'/v1/chat/completions','body':{'model':'m1'}}\n"
         "{'custom_id':'b','method':'POST','url':'/v1/chat/completions','body':{'model':'m1'}}\n",
         "invalid_method"},
        {"not json\n{'custom_id':'b','method':'POST','url':'/v1/chat/completions','body':{'model':"
         "'m1'}}\n",
         "invalid_json_line"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *content = strdup(Q(cases[i][0]));
        json_t *js = expect(openai_create_from(sim, OPENAI, content, "m", (int64_t)i * 10), 200);
        free(content);
        char *id = id_of(OPENAI, js);
        json_decref(js);
        js = get_batch(sim, OPENAI, id, (int64_t)i * 10 + 1);
        ck_assert_str_eq(str_at(js, "status"), "failed");
        json_t *first = json_array_get(json_object_get(json_object_get(js, "errors"), "data"), 0);
        ck_assert_str_eq(str_at(first, "code"), cases[i][1]);
        /* mixed_models and duplicate_custom_id are found on the second line, the others on
         * the first. */
        ck_assert_int_eq(json_integer_value(json_object_get(first, "line")), i < 2 ? 2 : 1);
        ck_assert(json_is_integer(json_object_get(js, "failed_at")));
        json_decref(js);
        free(id);
    }
    ck_assert_int_eq(stat_batch(sim, "openai", "batches_created", 100), 4);
    ck_assert_int_eq(stat_batch(sim, "openai", "lines", 100), 0);
    ck_assert_int_eq(stat_batch(sim, "openai", "enqueued_tokens_peak", 100), 0);
    sl_sim_free(sim);
}
END_TEST

START_TEST(openai_more_than_50000_lines_fail_too_many_lines)
{
    sl_sim_t *sim = sim_all("{}", NULL);
    /* Cheap lines: each one breaks a rule too, but the line count is reported first. */
    size_t n = 50001;
    char *content = malloc(n * 3 + 1);
    ck_assert_ptr_nonnull(content);
    for (size_t i = 0; i < n; i++)
        memcpy(content + i * 3, "{}\n", 3);
    content[n * 3] = '\0';
    json_t *js = expect(openai_create_from(sim, OPENAI, content, "m", 0), 200);
    free(content);
    char *id = id_of(OPENAI, js);
    json_decref(js);
    js = get_batch(sim, OPENAI, id, 1);
    ck_assert_str_eq(str_at(js, "status"), "failed");
    json_t *data = json_object_get(json_object_get(js, "errors"), "data");
    ck_assert_str_eq(str_at(json_array_get(data, 0), "code"), "too_many_lines");
    ck_assert_uint_le(json_array_size(data), 10);
    json_decref(js);
    free(id);
    sl_sim_free(sim);
}
END_TEST

/* ---- Limits ----------------------------------------------------------------------------- */

START_TEST(enqueued_token_limit_refuses_past_it_and_releases_at_the_end)
{
    /* Each batch of 3 lines holds 6 tokens; the limit holds two of them. */
    sl_sim_t *sim = sim_all("{'turnaround_ms':1000,'enqueued_tokens':12}", NULL);
    for (int a = 0; a < N_APIS; a++) {
        api_t api = (api_t)a;
        const char *dep = api_names[a];
        char *first = create_ok(sim, api, "a", 3, "m1", 0);
        char *second = create_ok(sim, api, "b", 3, "m2", 10);
        ck_assert_int_eq(stat_batch(sim, dep, "enqueued_tokens_now", 10), 12);
        sl_sim_response_t *resp = create(sim, api, "c", 3, "m3", 20);
        if (api == OPENAI || api == AZURE) {
            /* Created, then failed with token_limit_exceeded; nothing enqueued. */
            json_t *js = expect(resp, 200);
            char *id = id_of(api, js);
            json_decref(js);
            js = get_batch(sim, api, id, 21);
            ck_assert_str_eq(str_at(js, "status"), "failed");
            ck_assert_str_eq(
                str_at(json_array_get(json_object_get(json_object_get(js, "errors"), "data"), 0),
                       "code"),
                "token_limit_exceeded");
            json_decref(js);
            free(id);
            ck_assert_int_eq(stat_batch(sim, dep, "creates_refused", 21), 0);
        } else {
            json_t *js = expect(resp, 429);
            if (api == ANTHROPIC)
                ck_assert_str_eq(str_at(js, "error.type"), "rate_limit_error");
            else
                ck_assert_str_eq(str_at(js, "error.status"), "RESOURCE_EXHAUSTED");
            json_decref(js);
            ck_assert_int_eq(stat_batch(sim, dep, "creates_refused", 21), 1);
        }
        ck_assert_int_eq(stat_batch(sim, dep, "failed_token_limit", 21), 1);
        ck_assert_int_eq(stat_batch(sim, dep, "enqueued_tokens_now", 21), 12);
        /* The first ends at 1000 and gives its tokens back: room for one more. */
        ck_assert_int_eq(stat_batch(sim, dep, "enqueued_tokens_now", 1000), 6);
        char *third = create_ok(sim, api, "c", 3, "m3", 1000);
        assert_status(sim, api, third, 1001, word(api, "running"));
        ck_assert_int_eq(stat_batch(sim, dep, "enqueued_tokens_now", 1001), 12);
        ck_assert_int_eq(stat_batch(sim, dep, "enqueued_tokens_peak", 1001), 12);
        ck_assert_int_eq(stat_batch(sim, dep, "enqueued_tokens_limit", 1001), 12);
        ck_assert_int_eq(stat_batch(sim, dep, "enqueued_tokens_now", 2000), 0);
        ck_assert_int_eq(stat_batch(sim, dep, "lines_succeeded", 2000), 9);
        free(first);
        free(second);
        free(third);
        /* Every batch of this API has ended: the next API starts from an empty queue. */
    }
    sl_sim_free(sim);
}
END_TEST

START_TEST(create_storm_gets_429_with_a_retry_after)
{
    sl_sim_t *sim = sim_all("{'turnaround_ms':10,'creates_per_minute':2}", "'minute_ms':60000,");
    for (int a = 0; a < N_APIS; a++) {
        api_t api = (api_t)a;
        const char *dep = api_names[a];
        free(create_ok(sim, api, "a", 1, "m", 0));
        free(create_ok(sim, api, "b", 1, "m", 5));
        sl_sim_response_t *resp = create(sim, api, "c", 1, "m", 10);
        ck_assert_int_eq(sl_sim_response_status(resp), 429);
        json_t *js = body_json(resp);
        /* The first creation leaves the minute at 60000: a wait of 59990 ms. */
        if (api == OPENAI || api == AZURE) {
            ck_assert_str_eq(sl_sim_response_header_get(resp, "retry-after-ms"), "59990");
            ck_assert_str_eq(sl_sim_response_header_get(resp, "retry-after"), "60");
            if (api == OPENAI)
                ck_assert_str_eq(str_at(js, "error.code"), "rate_limit_exceeded");
            else
                ck_assert_str_eq(str_at(js, "error.code"), "429");
        } else if (api == ANTHROPIC) {
            ck_assert_str_eq(sl_sim_response_header_get(resp, "retry-after"), "60");
            ck_assert_str_eq(str_at(js, "error.type"), "rate_limit_error");
        } else {
            ck_assert_str_eq(str_at(js, "error.status"), "RESOURCE_EXHAUSTED");
            json_t *details = json_object_get(json_object_get(js, "error"), "details");
            bool retry_info = false;
            size_t i;
            json_t *d;
            json_array_foreach(details, i, d)
            {
                if (str_at(d, "retryDelay") != NULL) {
                    ck_assert_str_eq(str_at(d, "retryDelay"), "59.99s");
                    retry_info = true;
                }
            }
            ck_assert(retry_info);
        }
        json_decref(js);
        sl_sim_response_free(resp);
        ck_assert_int_eq(stat_batch(sim, dep, "creates_refused", 10), 1);
        ck_assert_int_eq(stat_batch(sim, dep, "batches_created", 10), 2);
        /* Still refused just before the minute has passed, admitted at it. */
        resp = create(sim, api, "c", 1, "m", 59999);
        ck_assert_int_eq(sl_sim_response_status(resp), 429);
        sl_sim_response_free(resp);
        free(create_ok(sim, api, "c", 1, "m", 60000));
        ck_assert_int_eq(stat_batch(sim, dep, "creates_refused", 60000), 2);
    }
    sl_sim_free(sim);
}
END_TEST

START_TEST(max_batches_drops_the_oldest_ended_one_and_refuses_when_all_run)
{
    sl_sim_t *sim = sim_all("{'turnaround_ms':1000,'max_batches':2}", NULL);
    for (int a = 0; a < N_APIS; a++) {
        api_t api = (api_t)a;
        char *first = create_ok(sim, api, "a", 1, "m", 0);
        char *second = create_ok(sim, api, "b", 1, "m", 10);
        sl_sim_response_t *resp = create(sim, api, "c", 1, "m", 20);
        ck_assert_int_eq(sl_sim_response_status(resp), 429);
        sl_sim_response_free(resp);
        /* Once the first has ended it makes room, and is gone. */
        char *third = create_ok(sim, api, "c", 1, "m", 1000);
        char path[256];
        batch_path(api, first, "", path, sizeof path);
        json_decref(expect(call(sim, api, "GET", path, NULL, 1001), 404));
        assert_status(sim, api, second, 1009, word(api, "running"));
        assert_status(sim, api, second, 1010, word(api, "completed"));
        assert_status(sim, api, third, 1001, word(api, "running"));
        free(first);
        free(second);
        free(third);
    }
    sl_sim_free(sim);
}
END_TEST

START_TEST(batch_lines_do_not_charge_the_online_limits)
{
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'openai','rpm':1,'tpm':1000,"
                             "'batch':{'turnaround_ms':10}}]}");
    char *id = create_ok(sim, OPENAI, "a", 20, "m", 0);
    json_t *map = results(sim, OPENAI, id, 10);
    ck_assert_int_eq(count_outcome(map, "ok"), 20);
    json_decref(map);
    free(id);
    /* The one request per minute is still there for an online call. */
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":5}";
    sl_sim_response_t *resp = call(sim, OPENAI, "POST", "/openai/v1/chat/completions", body, 11);
    ck_assert_int_eq(sl_sim_response_status(resp), 200);
    sl_sim_finish(sim, resp);
    sl_sim_response_free(resp);
    resp = call_with(sim, "GET", "/stats", NULL, NULL, NULL, 0, 11);
    json_t *js = expect(resp, 200);
    json_t *dep = json_object_get(json_object_get(js, "deployments"), "openai");
    ck_assert_int_eq(json_integer_value(json_object_get(dep, "admitted")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(dep, "tokens_charged")), 5);
    ck_assert_uint_eq(json_array_size(json_object_get(dep, "arrivals")), 1);
    json_decref(js);
    sl_sim_free(sim);
}
END_TEST

/* ---- Line fates ------------------------------------------------------------------------- */

START_TEST(expired_and_errored_lines_follow_each_format_and_the_stats)
{
    sl_sim_t *sim =
        sim_all("{'turnaround_ms':100,'expire_share':0.3,'line_error_share':0.3}", "'seed':7,");
    for (int a = 0; a < N_APIS; a++) {
        api_t api = (api_t)a;
        const char *dep = api_names[a];
        char *id = create_ok(sim, api, "x", 60, "m", 0);
        assert_status(sim, api, id, 100, word(api, "expired"));
        json_t *map = results(sim, api, id, 100);
        ck_assert_int_eq(json_object_size(map), 60);
        int ok = count_outcome(map, "ok");
        int expired = count_outcome(map, "expired");
        int errored = count_outcome(map, "errored");
        ck_assert_int_eq(ok + expired + errored, 60);
        /* 30% expire; of the rest 30% fail: far from 0 and from all of them in 60 lines. */
        ck_assert_msg(expired >= 6 && expired <= 30, "%s: %d expired", dep, expired);
        ck_assert_msg(errored >= 4 && errored <= 25, "%s: %d errored", dep, errored);
        const char *key;
        json_t *v;
        json_object_foreach(map, key, v)
        {
            if (strcmp(str_at(v, "outcome"), "errored") == 0)
                ck_assert_int_eq(json_integer_value(json_object_get(v, "status")), 500);
        }
        ck_assert_int_eq(stat_batch(sim, dep, "lines_succeeded", 100), ok);
        ck_assert_int_eq(stat_batch(sim, dep, "lines_expired", 100), expired);
        ck_assert_int_eq(stat_batch(sim, dep, "lines_errored", 100), errored);
        if (api == ANTHROPIC) {
            json_t *b = get_batch(sim, api, id, 100);
            json_t *counts = json_object_get(b, "request_counts");
            ck_assert_int_eq(json_integer_value(json_object_get(counts, "expired")), expired);
            ck_assert_int_eq(json_integer_value(json_object_get(counts, "errored")), errored);
            ck_assert_int_eq(json_integer_value(json_object_get(counts, "succeeded")), ok);
            json_decref(b);
        }
        json_decref(map);
        free(id);
    }
    sl_sim_free(sim);
}
END_TEST

START_TEST(line_fates_are_reproducible_from_the_seed)
{
    char outcomes[2][64];
    for (int run = 0; run < 2; run++) {
        sl_sim_t *sim = sim_all("{'turnaround_ms':10,'expire_share':0.4}", "'seed':11,");
        char *id = create_ok(sim, ANTHROPIC, "r", 40, "m", 0);
        json_t *map = results(sim, ANTHROPIC, id, 10);
        for (int i = 0; i < 40; i++) {
            char key[16];
            snprintf(key, sizeof key, "r%d", i);
            outcomes[run][i] = str_at(json_object_get(map, key), "outcome")[0];
        }
        outcomes[run][40] = '\0';
        json_decref(map);
        free(id);
        sl_sim_free(sim);
    }
    ck_assert_str_eq(outcomes[0], outcomes[1]);
    ck_assert_ptr_nonnull(strchr(outcomes[0], 'e'));
    ck_assert_ptr_nonnull(strchr(outcomes[0], 'o'));
}
END_TEST

START_TEST(invalid_bodies_are_per_line_400s)
{
    sl_sim_t *sim = sim_all("{'turnaround_ms':10}", NULL);
    /* Anthropic: max_tokens is required; Gemini: contents must not be empty. */
    const char *anthropic = "{'requests':[{'custom_id':'ok1','params':{'model':'c','max_tokens':5,"
                            "'messages':[{'role':'user','content':'hi'}]}},{'custom_id':'bad1',"
                            "'params':{'model':'c','messages':[{'role':'user','content':'hi'}]}}]}";
    char *body = strdup(Q(anthropic));
    json_t *js =
        expect(call(sim, ANTHROPIC, "POST", "/anthropic/v1/messages/batches", body, 0), 200);
    free(body);
    char *id = id_of(ANTHROPIC, js);
    json_decref(js);
    json_t *map = results(sim, ANTHROPIC, id, 10);
    ck_assert_str_eq(str_at(json_object_get(map, "ok1"), "outcome"), "ok");
    ck_assert_str_eq(str_at(json_object_get(map, "bad1"), "outcome"), "errored");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(map, "bad1"), "status")),
                     400);
    json_decref(map);
    free(id);

    const char *gemini = "{'batch':{'display_name':'g','input_config':{'requests':{'requests':["
                         "{'request':{'contents':[]},'metadata':{'key':'bad0'}},"
                         "{'request':{'contents':[{'parts':[{'text':'hi'}]}]},"
                         "'metadata':{'key':'ok1'}}]}}}}";
    body = strdup(Q(gemini));
    js = expect(
        call(sim, GEMINI, "POST", "/gemini/v1beta/models/g1:batchGenerateContent", body, 20), 200);
    free(body);
    ck_assert_str_eq(str_at(js, "metadata.model"), "models/g1");
    id = id_of(GEMINI, js);
    json_decref(js);
    map = results(sim, GEMINI, id, 30);
    ck_assert_str_eq(str_at(json_object_get(map, "bad0"), "outcome"), "errored");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(map, "bad0"), "status")),
                     400);
    ck_assert_str_eq(str_at(json_object_get(map, "ok1"), "outcome"), "ok");
    json_decref(map);
    free(id);
    ck_assert_int_eq(stat_batch(sim, "anthropic", "lines_errored", 30), 1);
    ck_assert_int_eq(stat_batch(sim, "gemini", "lines_errored", 30), 1);
    sl_sim_free(sim);
}
END_TEST

START_TEST(lines_that_run_again_after_a_success_count_as_duplicates)
{
    sl_sim_t *sim = sim_all("{'turnaround_ms':10}", NULL);
    for (int a = 0; a < N_APIS; a++) {
        api_t api = (api_t)a;
        free(create_ok(sim, api, "d", 3, "m", 0));
        /* A second batch re-sends d0..d3: three ran before, d3 is new. */
        free(create_ok(sim, api, "d", 4, "m", 5));
        ck_assert_int_eq(stat_batch(sim, api_names[a], "lines_duplicate", 9), 0);
        ck_assert_int_eq(stat_batch(sim, api_names[a], "lines_duplicate", 15), 3);
        ck_assert_int_eq(stat_batch(sim, api_names[a], "lines_succeeded", 15), 7);
    }
    sl_sim_free(sim);
}
END_TEST

/* ---- Cancel ----------------------------------------------------------------------------- */

START_TEST(cancel_ends_a_running_batch_with_every_line_cancelled)
{
    sl_sim_t *sim = sim_all("{'turnaround_ms':1000}", NULL);
    for (int a = 0; a < N_APIS; a++) {
        api_t api = (api_t)a;
        const char *dep = api_names[a];
        char *id = create_ok(sim, api, "c", 4, "m", 0);
        ck_assert_int_eq(stat_batch(sim, dep, "enqueued_tokens_now", 5), 8);
        char path[256];
        batch_path(api, id, "/cancel", path, sizeof path);
        json_t *js = expect(call(sim, api, "POST", path, NULL, 10), 200);
        if (api == GEMINI) {
            ck_assert_uint_eq(json_object_size(js), 0);
        } else {
            char *got = status_of(api, js);
            ck_assert_str_eq(got, word(api, "cancelling"));
            free(got);
        }
        json_decref(js);
        assert_status(sim, api, id, 11, word(api, "cancelled"));
        ck_assert_int_eq(stat_batch(sim, dep, "enqueued_tokens_now", 11), 0);
        ck_assert_int_eq(stat_batch(sim, dep, "lines_cancelled", 11), 4);
        json_t *map = results(sim, api, id, 11);
        if (api == GEMINI) {
            /* No responses: the operation ended with the error CANCELLED. */
            ck_assert_uint_eq(json_object_size(map), 0);
            json_t *b = get_batch(sim, api, id, 12);
            ck_assert(json_is_true(json_object_get(b, "done")));
            ck_assert_int_eq(
                json_integer_value(json_object_get(json_object_get(b, "error"), "code")), 1);
            json_decref(b);
        } else {
            ck_assert_int_eq(count_outcome(map, "cancelled"), 4);
        }
        json_decref(map);
        /* It stays cancelled past its turnaround, and nothing succeeded. */
        assert_status(sim, api, id, 2000, word(api, "cancelled"));
        ck_assert_int_eq(stat_batch(sim, dep, "lines_succeeded", 2000), 0);
        free(id);
    }
    sl_sim_free(sim);
}
END_TEST

START_TEST(cancel_of_an_ended_batch_is_refused_and_unknown_ids_are_404)
{
    sl_sim_t *sim = sim_all("{'turnaround_ms':10}", NULL);
    for (int a = 0; a < N_APIS; a++) {
        api_t api = (api_t)a;
        char *id = create_ok(sim, api, "e", 1, "m", 0);
        char path[256];
        batch_path(api, id, "/cancel", path, sizeof path);
        json_t *js = expect(call(sim, api, "POST", path, NULL, 20), api == GEMINI ? 200 : 400);
        json_decref(js);
        assert_status(sim, api, id, 21, word(api, "completed"));
        batch_path(api, "nosuchbatch", "", path, sizeof path);
        js = expect(call(sim, api, "GET", path, NULL, 22), 404);
        if (api == ANTHROPIC)
            ck_assert_str_eq(str_at(js, "error.type"), "not_found_error");
        else if (api == GEMINI)
            ck_assert_str_eq(str_at(js, "error.status"), "NOT_FOUND");
        else
            ck_assert_ptr_nonnull(strstr(str_at(js, "error.message"), "nosuchbatch"));
        json_decref(js);
        free(id);
    }
    /* Anthropic's results are not there before the end. */
    char *id = create_ok(sim, ANTHROPIC, "r", 1, "m", 100);
    char path[256];
    batch_path(ANTHROPIC, id, "/results", path, sizeof path);
    json_decref(expect(call(sim, ANTHROPIC, "GET", path, NULL, 105), 400));
    free(id);
    sl_sim_free(sim);
}
END_TEST

/* ---- List ------------------------------------------------------------------------------- */

/* The marker of a listed batch: OpenAI metadata.sluice_batch, Gemini metadata.displayName. */
static const char *marker_of(api_t api, json_t *batch)
{
    return api == GEMINI ? str_at(batch, "metadata.displayName")
                         : str_at(batch, "metadata.sluice_batch");
}

START_TEST(list_pages_newest_first_and_finds_a_batch_by_its_marker)
{
    sl_sim_t *sim = sim_all("{'turnaround_ms':100}", NULL);
    api_t apis[] = {OPENAI, AZURE, ANTHROPIC, GEMINI};
    for (size_t k = 0; k < sizeof apis / sizeof apis[0]; k++) {
        api_t api = apis[k];
        char *ids[5];
        for (int i = 0; i < 5; i++) {
            char marker[24];
            snprintf(marker, sizeof marker, "mark-%d", i);
            ids[i] = create_ok(sim, api, "l", 1, marker, i * 10);
        }
        /* Walk the pages of 2 as the dispatcher does and find mark-1 on the third page... */
        const char *base = api == OPENAI      ? "/openai/v1/batches"
                           : api == AZURE     ? "/azure/openai/batches"
                           : api == ANTHROPIC ? "/anthropic/v1/messages/batches"
                                              : "/gemini/v1beta/batches";
        const char *size_arg = api == GEMINI ? "pageSize" : "limit";
        const char *after_arg = api == GEMINI      ? "pageToken"
                                : api == ANTHROPIC ? "after_id"
                                                   : "after";
        char cursor[128] = "";
        int seen = 0;
        int pages = 0;
        for (;;) {
            const char *query[8] = {size_arg, "2", NULL};
            size_t q = 2;
            if (cursor[0] != '\0') {
                query[q++] = after_arg;
                query[q++] = cursor;
            }
            if (api == AZURE) {
                query[q++] = "api-version";
                query[q++] = "2024-10-21";
            }
            query[q] = NULL;
            json_t *page =
                expect(call_with(sim, "GET", base, creds(api), query, NULL, 0, 200), 200);
            pages++;
            json_t *data = json_object_get(page, api == GEMINI ? "operations" : "data");
            ck_assert_uint_le(json_array_size(data), 2);
            size_t i;
            json_t *b;
            json_array_foreach(data, i, b)
            {
                /* Newest first: ids[4], ids[3], ... */
                char *id = id_of(api, b);
                ck_assert_str_eq(id, ids[4 - seen]);
                free(id);
                if (api != ANTHROPIC) {
                    char want[24];
                    snprintf(want, sizeof want, "mark-%d", 4 - seen);
                    ck_assert_str_eq(marker_of(api, b), want);
                }
                seen++;
            }
            const char *next = NULL;
            if (api == GEMINI) {
                next = str_at(page, "nextPageToken");
            } else if (json_is_true(json_object_get(page, "has_more"))) {
                next = str_at(page, "last_id");
                ck_assert_str_eq(str_at(page, "first_id"), ids[4 - seen + (int)i]);
            }
            snprintf(cursor, sizeof cursor, "%s", next != NULL ? next : "");
            json_decref(page);
            if (next == NULL)
                break;
            ck_assert_int_lt(pages, 5);
        }
        ck_assert_int_eq(seen, 5);
        ck_assert_int_eq(pages, 3);
        for (int i = 0; i < 5; i++)
            free(ids[i]);
    }
    sl_sim_free(sim);
}
END_TEST

/* ---- Uploads, credentials, config ------------------------------------------------------- */

START_TEST(malformed_uploads_get_openai_400s)
{
    sl_sim_t *sim = sim_all("{}", NULL);
    const char *content = "{'custom_id':'a'}\n";
    size_t len = 0;
    char *good = multipart("batch", content, &len);
    struct {
        const char *body;
        const char *content_type;
        const char *param; /* NULL: no param */
    } cases[] = {
        {good, "application/json", NULL},
        {good, "multipart/form-data", NULL},                 /* no boundary */
        {good, "multipart/form-data; boundary=Other", NULL}, /* not in the body */
        {"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nabc",
         "multipart/form-data; boundary=XyZ", NULL}, /* not terminated */
        {"--XyZ\r\nContent-Type: text/plain\r\n\r\nabc\r\n--XyZ--\r\n",
         "multipart/form-data; boundary=XyZ", NULL}, /* no Content-Disposition */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = cases[i].body == good ? len : strlen(cases[i].body);
        json_t *js = expect(upload(sim, OPENAI, cases[i].body, n, cases[i].content_type, 0), 400);
        ck_assert_str_eq(str_at(js, "error.type"), "invalid_request_error");
        ck_assert_ptr_nonnull(str_at(js, "error.message"));
        json_decref(js);
    }
    free(good);
    /* A missing purpose, a wrong one, a missing file: named in param. */
    char *no_purpose = multipart(NULL, content, &len);
    json_t *js =
        expect(upload(sim, OPENAI, no_purpose, len, "multipart/form-data; boundary=XyZ", 0), 400);
    ck_assert_str_eq(str_at(js, "error.param"), "purpose");
    json_decref(js);
    free(no_purpose);
    char *wrong = multipart("fine-tune", content, &len);
    js = expect(upload(sim, OPENAI, wrong, len, "multipart/form-data; boundary=\"XyZ\"", 0), 400);
    ck_assert_str_eq(str_at(js, "error.param"), "purpose");
    json_decref(js);
    free(wrong);
    const char *no_file = "--XyZ\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch"
                          "\r\n--XyZ--\r\n";
    js = expect(
        upload(sim, OPENAI, no_file, strlen(no_file), "multipart/form-data; boundary=XyZ", 0), 400);
    ck_assert_str_eq(str_at(js, "error.param"), "file");
    json_decref(js);
    ck_assert_int_eq(stat_batch(sim, "openai", "batches_created", 0), 0);
    sl_sim_free(sim);
}
END_TEST

START_TEST(multipart_reader_takes_any_bytes_between_boundaries)
{
    const char body[] = "ignored preamble\r\n"
                        "--b1\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n"
                        "--b1\r\nContent-Disposition: form-data; name=\"file\"; "
                        "filename=\"x \\\"q\\\".jsonl\"\r\nContent-Type: application/jsonl\r\n\r\n"
                        "line1\r\n--b\0line2\r\n--b1--\r\nepilogue";
    sl_sim_part_t parts[4];
    size_t n = 0;
    char err[128];
    ck_assert(sl_sim_multipart_parse("Multipart/Form-Data; charset=x; boundary=\"b1\"", body,
                                     sizeof body - 1, parts, 4, &n, err, sizeof err));
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(parts[0].name, "purpose");
    ck_assert(!parts[0].has_filename);
    ck_assert_uint_eq(parts[0].len, 5);
    ck_assert(memcmp(parts[0].data, "batch", 5) == 0);
    ck_assert_str_eq(parts[1].name, "file");
    ck_assert(parts[1].has_filename);
    ck_assert_str_eq(parts[1].filename, "x \"q\".jsonl");
    ck_assert_str_eq(parts[1].content_type, "application/jsonl");
    /* CR LF "--b" and a NUL inside the content are content, not a boundary. */
    ck_assert_uint_eq(parts[1].len, 16);
    ck_assert(memcmp(parts[1].data, "line1\r\n--b\0line2", 16) == 0);
    /* More parts than room: refused. */
    ck_assert(!sl_sim_multipart_parse("multipart/form-data; boundary=b1", body, sizeof body - 1,
                                      parts, 1, &n, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "more than 1 parts"));
}
END_TEST

START_TEST(wrong_credentials_are_refused_as_online)
{
    sl_sim_t *sim = sim_all("{}", NULL);
    static const char *const bad[N_APIS][5] = {
        {"authorization", "Bearer wrong", NULL},
        {"api-key", "wrong", NULL},
        {"x-api-key", "wrong", "anthropic-version", "2023-06-01", NULL},
        {"x-goog-api-key", "wrong", NULL},
    };
    static const char *const none[] = {NULL};
    const char *paths[N_APIS] = {"/openai/v1/batches", "/azure/openai/batches",
                                 "/anthropic/v1/messages/batches", "/gemini/v1beta/batches"};
    for (int a = 0; a < N_APIS; a++) {
        api_t api = (api_t)a;
        const char *const *query = api == AZURE ? azure_query : NULL;
        json_t *js = expect(call_with(sim, "GET", paths[a], bad[a], query, NULL, 0, 0),
                            api == GEMINI ? 400 : 401);
        if (api == ANTHROPIC)
            ck_assert_str_eq(str_at(js, "error.type"), "authentication_error");
        if (api == OPENAI)
            ck_assert_str_eq(str_at(js, "error.code"), "invalid_api_key");
        if (api == GEMINI)
            ck_assert_str_eq(str_at(js, "error.status"), "INVALID_ARGUMENT");
        json_decref(js);
        js = expect(call_with(sim, "GET", paths[a], none, query, NULL, 0, 0),
                    api == GEMINI ? 403 : 401);
        json_decref(js);
    }
    /* Anthropic also needs its version header. */
    static const char *const no_version[] = {"x-api-key", "k", NULL};
    json_t *js = expect(call_with(sim, "GET", paths[ANTHROPIC], no_version, NULL, NULL, 0, 0), 400);
    ck_assert_ptr_nonnull(strstr(str_at(js, "error.message"), "anthropic-version"));
    json_decref(js);
    /* A wrong method is the API's 405 (Gemini: 404), a foreign path the deployment's 404. */
    js = expect(call(sim, OPENAI, "DELETE", "/openai/v1/batches", NULL, 0), 405);
    json_decref(js);
    js = expect(call(sim, GEMINI, "POST", "/gemini/v1beta/batches", "{}", 0), 404);
    json_decref(js);
    js = expect(call(sim, ANTHROPIC, "POST", "/anthropic/v1/batches", "{}", 0), 404);
    json_decref(js);
    sl_sim_free(sim);
}
END_TEST

START_TEST(batch_config_is_strict)
{
    const char *err = config_error("{'deployments':[{'name':'a','batch':{'turnaround':5}}]}");
    ck_assert_msg(strstr(err, "deployments[0] (a).batch") != NULL &&
                      strstr(err, "unknown key \"turnaround\"") != NULL,
                  "%s", err);
    err = config_error("{'deployments':[{'name':'a','batch':{'expire_share':1.5}}]}");
    ck_assert_msg(strstr(err, "\"expire_share\" must be at most 1") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'a','batch':{'max_batches':0}}]}");
    ck_assert_msg(strstr(err, "\"max_batches\" must be between 1 and") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'a','batch':{'enqueued_tokens':-1}}]}");
    ck_assert_msg(strstr(err, "\"enqueued_tokens\" must not be negative") != NULL, "%s", err);
    err = config_error("{'deployments':[{'name':'a','batch':[]}]}");
    ck_assert_msg(strstr(err, "batch: must be an object") != NULL, "%s", err);
    /* Defaults: 5000 ms turnaround, no token limit. */
    sl_sim_t *sim = sim_from("{'deployments':[{'name':'openai'}]}");
    char *id = create_ok(sim, OPENAI, "d", 1, "m", 0);
    assert_status(sim, OPENAI, id, 4999, "in_progress");
    assert_status(sim, OPENAI, id, 5000, "completed");
    ck_assert_int_eq(stat_batch(sim, "openai", "enqueued_tokens_limit", 5000), 0);
    free(id);
    sl_sim_free(sim);
}
END_TEST

START_TEST(stats_reset_keeps_what_is_enqueued)
{
    sl_sim_t *sim = sim_all("{'turnaround_ms':1000}", NULL);
    char *id = create_ok(sim, GEMINI, "s", 2, "m", 0);
    json_decref(expect(call_with(sim, "POST", "/stats/reset", NULL, NULL, NULL, 0, 10), 200));
    ck_assert_int_eq(stat_batch(sim, "gemini", "batches_created", 10), 0);
    ck_assert_int_eq(stat_batch(sim, "gemini", "enqueued_tokens_now", 10), 4);
    ck_assert_int_eq(stat_batch(sim, "gemini", "enqueued_tokens_peak", 10), 4);
    ck_assert_int_eq(stat_batch(sim, "gemini", "enqueued_tokens_now", 1000), 0);
    ck_assert_int_eq(stat_batch(sim, "gemini", "lines_succeeded", 1000), 2);
    free(id);
    sl_sim_free(sim);
}
END_TEST

START_TEST(batch_paths_take_larger_bodies)
{
    sl_sim_t *sim = sim_all("{}", NULL);
    ck_assert_uint_eq(sl_sim_body_limit(sim, "/openai/v1/chat/completions"), 4u << 20);
    ck_assert_uint_eq(sl_sim_body_limit(sim, "/openai/v1/files"), (200u << 20) + (1u << 20));
    ck_assert_uint_eq(sl_sim_body_limit(sim, "/azure/openai/files"), (200u << 20) + (1u << 20));
    ck_assert_uint_eq(sl_sim_body_limit(sim, "/anthropic/v1/messages/batches"), 256u << 20);
    ck_assert_uint_eq(sl_sim_body_limit(sim, "/gemini/v1beta/models/g:batchGenerateContent"),
                      20u << 20);
    ck_assert_uint_eq(sl_sim_body_limit(sim, "/nosuch/v1/files"), 4u << 20);
    /* A body the HTTP layer dropped is a 413 (Gemini: 400). */
    sl_sim_request_t req = {.method = "POST",
                            .path = "/gemini/v1beta/models/g:batchGenerateContent",
                            .headers = creds(GEMINI),
                            .body_too_large = 1};
    sl_sim_response_t *resp = NULL;
    ck_assert_int_eq(sl_sim_handle(sim, &req, 0, &resp), SL_OK);
    ck_assert_int_eq(sl_sim_response_status(resp), 400);
    sl_sim_response_free(resp);
    req.path = "/openai/v1/files";
    req.headers = creds(OPENAI);
    ck_assert_int_eq(sl_sim_handle(sim, &req, 0, &resp), SL_OK);
    ck_assert_int_eq(sl_sim_response_status(resp), 413);
    sl_sim_response_free(resp);
    sl_sim_free(sim);
}
END_TEST

static Suite *batch_suite(void)
{
    Suite *s = suite_create("sim_batch");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, each_api_runs_a_batch_from_creation_to_results);
    tcase_add_test(tc, openai_batch_object_has_the_documented_fields);
    tcase_add_test(tc, azure_needs_api_version_and_its_own_line_url);
    tcase_add_test(tc, openai_file_rules_fail_the_batch_with_a_code_and_line);
    tcase_add_test(tc, openai_more_than_50000_lines_fail_too_many_lines);
    tcase_add_test(tc, enqueued_token_limit_refuses_past_it_and_releases_at_the_end);
    tcase_add_test(tc, create_storm_gets_429_with_a_retry_after);
    tcase_add_test(tc, max_batches_drops_the_oldest_ended_one_and_refuses_when_all_run);
    tcase_add_test(tc, batch_lines_do_not_charge_the_online_limits);
    tcase_add_test(tc, expired_and_errored_lines_follow_each_format_and_the_stats);
    tcase_add_test(tc, line_fates_are_reproducible_from_the_seed);
    tcase_add_test(tc, invalid_bodies_are_per_line_400s);
    tcase_add_test(tc, lines_that_run_again_after_a_success_count_as_duplicates);
    tcase_add_test(tc, cancel_ends_a_running_batch_with_every_line_cancelled);
    tcase_add_test(tc, cancel_of_an_ended_batch_is_refused_and_unknown_ids_are_404);
    tcase_add_test(tc, list_pages_newest_first_and_finds_a_batch_by_its_marker);
    tcase_add_test(tc, malformed_uploads_get_openai_400s);
    tcase_add_test(tc, multipart_reader_takes_any_bytes_between_boundaries);
    tcase_add_test(tc, wrong_credentials_are_refused_as_online);
    tcase_add_test(tc, batch_config_is_strict);
    tcase_add_test(tc, stats_reset_keeps_what_is_enqueued);
    tcase_add_test(tc, batch_paths_take_larger_bodies);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *runner = srunner_create(batch_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
