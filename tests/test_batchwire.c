/* test_batchwire.c - behaviour of the batch APIs' wire layer (dispatcher/batchwire.h).
 *
 * The providers' answers live in tests/fixtures/batch/<provider>/, written by hand from the
 * formats in docs/provider-batch.md (see the README there). Requests are checked field by field
 * after parsing them back: what a provider reads is the JSON, not our key order or spacing.
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"
#include "../common/config.h"
#include "../common/msg_usage.h"
#include "../common/util.h"
#include "../dispatcher/adapter.h"
#include "../dispatcher/batchwire.h"

#define FIXTURES "tests/fixtures/batch/"
#define MARKER "sl-b-000042"

/* ---- Helpers ------------------------------------------------------------------------------ */

typedef struct {
    sl_deployment_cfg_t dep;
    sl_batch_target_t t;
} target_t;

/* A deployment whose online model differs from the batch model, so a test can tell which one a
 * request names. */
static target_t target(sl_provider_t api)
{
    target_t x;
    memset(&x, 0, sizeof x);
    x.dep.name = "dep";
    x.dep.api = api;
    x.dep.provider = sl_provider_name(api);
    x.dep.max_output_tokens = 8192;
    x.dep.timeout_ms = 60000;
    x.dep.api_version = "";
    x.dep.model = "online-model";
    switch (api) {
    case SL_PROVIDER_OPENAI:
        x.dep.base_url = "https://api.openai.com/v1";
        x.t.base_url = "https://api.openai.com/v1";
        x.t.model = "gpt-4o-mini";
        break;
    case SL_PROVIDER_AZURE:
        x.dep.base_url = "https://res.openai.azure.com/openai/deployments/gpt4o";
        x.dep.api_version = "2024-10-21";
        x.t.base_url = "https://res.openai.azure.com/openai";
        x.t.model = "gpt4o-batch";
        break;
    case SL_PROVIDER_ANTHROPIC:
        x.dep.base_url = "https://api.anthropic.com/v1";
        x.dep.api_version = "2023-06-01";
        x.t.base_url = "https://api.anthropic.com/v1";
        x.t.model = "claude-sonnet-4-5";
        break;
    default:
        x.dep.base_url = "https://generativelanguage.googleapis.com/v1beta";
        x.t.base_url = "https://generativelanguage.googleapis.com/v1beta";
        x.t.model = "gemini-2.5-flash";
        break;
    }
    return x;
}

/* t points into x: call after x has its final address. */
static const sl_batch_target_t *tgt(target_t *x)
{
    x->t.dep = &x->dep;
    return &x->t;
}

static json_t *parse(const char *text)
{
    json_error_t jerr;
    json_t *j = json_loads(text, 0, &jerr);
    ck_assert_msg(j != NULL, "bad JSON: %s", jerr.text);
    return j;
}

static char *read_fixture(const char *name, size_t *len)
{
    char path[256];
    snprintf(path, sizeof path, FIXTURES "%s", name);
    char *text = NULL;
    ck_assert_msg(sl_read_file(path, 1 << 20, &text, len) == SL_OK, "cannot read %s", path);
    return text;
}

static json_t *fixture_json(const char *name)
{
    size_t len = 0;
    char *text = read_fixture(name, &len);
    json_t *j = parse(text);
    free(text);
    return j;
}

static const char *jstr(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    ck_assert_msg(s != NULL, "no string \"%s\"", key);
    return s;
}

static const char *CHATS[] = {
    "{\"model\":\"caller-model\",\"messages\":[{\"role\":\"user\",\"content\":\"Name three "
    "rivers.\"}],\"max_tokens\":100}",
    "{\"model\":\"caller-model\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
    "\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\","
    "\"content\":\"Two seas?\"}],\"temperature\":0.5}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"One mountain.\"}]}",
};
#define NCHATS 3

typedef struct {
    json_t *chat[8];
    sl_batch_item_t item[8];
    size_t n;
} items_t;

static void items_add(items_t *it, const char *job, const char *chat)
{
    it->chat[it->n] = parse(chat);
    it->item[it->n].job_id = job;
    it->item[it->n].chat = it->chat[it->n];
    it->n++;
}

static void items_std(items_t *it)
{
    static const char *jobs[] = {"job-1", "job-2", "job-3"};
    memset(it, 0, sizeof *it);
    for (int i = 0; i < NCHATS; i++)
        items_add(it, jobs[i], CHATS[i]);
}

static void items_free(items_t *it)
{
    for (size_t i = 0; i < it->n; i++)
        json_decref(it->chat[i]);
    memset(it, 0, sizeof *it);
}

typedef struct {
    int n;
    size_t item[8];
    char reason[8][256];
} refusals_t;

static void on_refused(void *arg, size_t item, const char *reason)
{
    refusals_t *r = arg;
    ck_assert_int_lt(r->n, 8);
    r->item[r->n] = item;
    snprintf(r->reason[r->n], sizeof r->reason[0], "%s", reason);
    r->n++;
}

/* The lines a results reader handed over, by job: {outcome, http, body, error} (copies). */
static void on_line(void *arg, const sl_batch_line_t *line)
{
    json_t *lines = arg;
    ck_assert_ptr_null(json_object_get(lines, line->job_id)); /* once per job */
    if (line->outcome == SL_OUTCOME_OK) {
        ck_assert_ptr_nonnull(line->body);
        ck_assert_ptr_null(line->error);
    } else {
        ck_assert_ptr_null(line->body);
        ck_assert(json_is_object(line->error));
        /* The usage event's error object: type and message strings, code a string or null. */
        ck_assert(json_is_string(json_object_get(line->error, "type")));
        ck_assert(json_is_string(json_object_get(line->error, "message")));
        const json_t *code = json_object_get(line->error, "code");
        ck_assert(json_is_string(code) || json_is_null(code));
    }
    json_object_set_new(
        lines, line->job_id,
        json_pack("{s:s, s:i, s:I, s:o, s:o}", "outcome", sl_outcome_name(line->outcome), "http",
                  line->http_status, "index", (json_int_t)line->index, "body",
                  line->body != NULL ? json_deep_copy(line->body) : json_null(), "error",
                  line->error != NULL ? json_deep_copy(line->error) : json_null()));
}

/* Reads a results fixture for job_ids; returns the lines by job, *bad the bad count. */
static json_t *read_results(sl_provider_t api, const char *fixture, const char *const *jobs,
                            size_t n, size_t *bad)
{
    target_t x = target(api);
    size_t len = 0;
    char *text = read_fixture(fixture, &len);
    json_t *lines = json_object();
    ck_assert_int_eq(sl_batch_results_read(tgt(&x), text, len, jobs, n, on_line, lines, bad),
                     SL_OK);
    free(text);
    /* each line names its job's position among the jobs given */
    for (size_t i = 0; i < n; i++) {
        json_t *got = json_object_get(lines, jobs[i]);
        if (got != NULL)
            ck_assert_int_eq(json_integer_value(json_object_get(got, "index")), (json_int_t)i);
    }
    return lines;
}

/* Checks one line: outcome, HTTP status, and the error's type / code (NULL: not checked; "" for
 * code: null). */
static void expect_line(const json_t *lines, const char *job, const char *outcome, int http,
                        const char *etype, const char *ecode)
{
    const json_t *l = json_object_get(lines, job);
    ck_assert_msg(l != NULL, "no line for %s", job);
    ck_assert_msg(strcmp(jstr(l, "outcome"), outcome) == 0, "%s: outcome %s, expected %s", job,
                  jstr(l, "outcome"), outcome);
    ck_assert_int_eq(json_integer_value(json_object_get(l, "http")), http);
    const json_t *err = json_object_get(l, "error");
    if (etype != NULL)
        ck_assert_str_eq(jstr(err, "type"), etype);
    if (ecode != NULL && ecode[0] == '\0')
        ck_assert(json_is_null(json_object_get(err, "code")));
    else if (ecode != NULL)
        ck_assert_str_eq(jstr(err, "code"), ecode);
}

static int header_count(const sl_batch_http_t *h, const char *line)
{
    int n = 0;
    for (int i = 0; i < h->nheaders; i++)
        n += strcmp(h->headers[i], line) == 0;
    return n;
}

/* ---- Creating ----------------------------------------------------------------------------- */

static void check_openai_upload(sl_provider_t api, const char *url, const char *line_url)
{
    target_t x = target(api);
    items_t it;
    items_std(&it);
    sl_batch_http_t h;
    int second = -1;
    char err[256] = "x";
    refusals_t ref = {0};
    ck_assert_int_eq(sl_batch_create_request(tgt(&x), MARKER, it.item, it.n, on_refused, &ref, &h,
                                             &second, err, sizeof err),
                     SL_OK);
    ck_assert_int_eq(ref.n, 0);
    ck_assert_str_eq(err, "");
    ck_assert_int_eq(second, 1);
    ck_assert_str_eq(h.method, "POST");
    ck_assert_str_eq(h.url, url);
    ck_assert_ptr_null(h.body);
    ck_assert_int_eq(h.nheaders, 0);
    ck_assert_str_eq(h.upload_name, MARKER ".jsonl");
    ck_assert_ptr_nonnull(h.upload);
    ck_assert_uint_eq(strlen(h.upload), h.upload_len);
    ck_assert_int_eq(h.upload[h.upload_len - 1], '\n');
    /* One line per item, in order, each a whole request. */
    char *copy = strdup(h.upload);
    char *save = NULL;
    size_t i = 0;
    for (char *line = strtok_r(copy, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save), i++) {
        ck_assert_uint_lt(i, it.n);
        json_t *l = parse(line);
        ck_assert_uint_eq(json_object_size(l), 4);
        ck_assert_str_eq(jstr(l, "custom_id"), it.item[i].job_id);
        ck_assert_str_eq(jstr(l, "method"), "POST");
        ck_assert_str_eq(jstr(l, "url"), line_url);
        const json_t *body = json_object_get(l, "body");
        ck_assert_str_eq(jstr(body, "model"), x.t.model);
        ck_assert_ptr_null(json_object_get(body, "stream"));
        ck_assert_ptr_null(json_object_get(body, "stream_options"));
        ck_assert(
            json_equal(json_object_get(body, "messages"), json_object_get(it.chat[i], "messages")));
        json_decref(l);
    }
    ck_assert_uint_eq(i, it.n);
    json_t *l1 = json_loads(strstr(h.upload, "\n") + 1, JSON_DISABLE_EOF_CHECK, NULL);
    ck_assert(json_real_value(json_object_get(json_object_get(l1, "body"), "temperature")) == 0.5);
    json_decref(l1);
    free(copy);
    sl_batch_http_clear(&h);
    ck_assert_ptr_null(h.upload);
    items_free(&it);
}

START_TEST(openai_create_uploads_one_jsonl_line_per_item_for_the_batch_model)
{
    check_openai_upload(SL_PROVIDER_OPENAI, "https://api.openai.com/v1/files",
                        "/v1/chat/completions");
}
END_TEST

START_TEST(azure_create_names_the_global_batch_deployment_and_api_version)
{
    check_openai_upload(SL_PROVIDER_AZURE,
                        "https://res.openai.azure.com/openai/files?api-version=2024-10-21",
                        "/chat/completions");
}
END_TEST

START_TEST(create_after_upload_names_the_file_window_and_marker)
{
    static const struct {
        sl_provider_t api;
        const char *fixture, *url, *endpoint;
    } cases[] = {
        {SL_PROVIDER_OPENAI, "openai/upload.json", "https://api.openai.com/v1/batches",
         "/v1/chat/completions"},
        {SL_PROVIDER_AZURE, "azure/upload.json",
         "https://res.openai.azure.com/openai/batches?api-version=2024-10-21", "/chat/completions"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        target_t x = target(cases[i].api);
        json_t *up = fixture_json(cases[i].fixture);
        sl_batch_http_t h;
        ck_assert_int_eq(sl_batch_create_after_upload(tgt(&x), MARKER, up, &h), SL_OK);
        ck_assert_str_eq(h.method, "POST");
        ck_assert_str_eq(h.url, cases[i].url);
        ck_assert_ptr_null(h.upload);
        ck_assert_uint_eq(strlen(h.body), h.body_len);
        json_t *b = parse(h.body);
        ck_assert_uint_eq(json_object_size(b), 4);
        ck_assert_str_eq(jstr(b, "input_file_id"), "file-In9Pq2Rs7Tu1Vw");
        ck_assert_str_eq(jstr(b, "endpoint"), cases[i].endpoint);
        ck_assert_str_eq(jstr(b, "completion_window"), "24h");
        ck_assert_str_eq(jstr(json_object_get(b, "metadata"), "sluice_batch"), MARKER);
        json_decref(b);
        sl_batch_http_clear(&h);
        /* An answer without a usable file id. */
        json_t *bad = parse("{\"object\":\"file\"}");
        ck_assert_int_eq(sl_batch_create_after_upload(tgt(&x), MARKER, bad, &h), SL_EPARSE);
        ck_assert_ptr_null(h.url);
        json_decref(bad);
        bad = parse("{\"id\":\"../batches/x\"}");
        ck_assert_int_eq(sl_batch_create_after_upload(tgt(&x), MARKER, bad, &h), SL_EPARSE);
        json_decref(bad);
        ck_assert_int_eq(sl_batch_create_after_upload(tgt(&x), "Bad Marker", up, &h), SL_EINVAL);
        json_decref(up);
    }
    target_t a = target(SL_PROVIDER_ANTHROPIC);
    json_t *up = fixture_json("openai/upload.json");
    sl_batch_http_t h;
    ck_assert_int_eq(sl_batch_create_after_upload(tgt(&a), MARKER, up, &h), SL_EINVAL);
    json_decref(up);
}
END_TEST

START_TEST(anthropic_create_sends_params_with_the_model_and_the_version_header)
{
    target_t x = target(SL_PROVIDER_ANTHROPIC);
    items_t it;
    items_std(&it);
    sl_batch_http_t h;
    int second = -1;
    char err[256];
    ck_assert_int_eq(sl_batch_create_request(tgt(&x), MARKER, it.item, it.n, NULL, NULL, &h,
                                             &second, err, sizeof err),
                     SL_OK);
    ck_assert_int_eq(second, 0);
    ck_assert_str_eq(h.method, "POST");
    ck_assert_str_eq(h.url, "https://api.anthropic.com/v1/messages/batches");
    ck_assert_int_eq(h.nheaders, 1);
    ck_assert_str_eq(h.headers[0], "anthropic-version: 2023-06-01");
    ck_assert_ptr_null(h.upload);
    ck_assert_uint_eq(strlen(h.body), h.body_len);
    json_t *b = parse(h.body);
    ck_assert_uint_eq(json_object_size(b), 1);
    const json_t *reqs = json_object_get(b, "requests");
    ck_assert_uint_eq(json_array_size(reqs), 3);
    for (size_t i = 0; i < 3; i++) {
        const json_t *r = json_array_get(reqs, i);
        ck_assert_uint_eq(json_object_size(r), 2);
        ck_assert_str_eq(jstr(r, "custom_id"), it.item[i].job_id);
        const json_t *p = json_object_get(r, "params");
        ck_assert_str_eq(jstr(p, "model"), "claude-sonnet-4-5");
        ck_assert_ptr_null(json_object_get(p, "stream"));
        ck_assert(json_integer_value(json_object_get(p, "max_tokens")) > 0);
        ck_assert(json_is_array(json_object_get(p, "messages")));
    }
    /* The system message went to "system", as online. */
    const json_t *p1 = json_object_get(json_array_get(reqs, 1), "params");
    ck_assert_ptr_nonnull(json_object_get(p1, "system"));
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(json_array_get(reqs, 0), "params"), "max_tokens")),
                     100);
    json_decref(b);
    sl_batch_http_clear(&h);
    /* No version configured: the default one. */
    x.dep.api_version = NULL;
    ck_assert_int_eq(sl_batch_create_request(tgt(&x), MARKER, it.item, 1, NULL, NULL, &h, &second,
                                             err, sizeof err),
                     SL_OK);
    ck_assert_str_eq(h.headers[0], "anthropic-version: 2023-06-01");
    sl_batch_http_clear(&h);
    x.dep.api_version = "2024-01-01";
    ck_assert_int_eq(sl_batch_create_request(tgt(&x), MARKER, it.item, 1, NULL, NULL, &h, &second,
                                             err, sizeof err),
                     SL_OK);
    ck_assert_str_eq(h.headers[0], "anthropic-version: 2024-01-01");
    sl_batch_http_clear(&h);
    /* A version that could inject a header line is refused. */
    x.dep.api_version = "2023-06-01\r\nx-evil: 1";
    ck_assert_int_eq(sl_batch_create_request(tgt(&x), MARKER, it.item, 1, NULL, NULL, &h, &second,
                                             err, sizeof err),
                     SL_EINVAL);
    ck_assert_ptr_null(h.body);
    items_free(&it);
}
END_TEST

START_TEST(gemini_create_sends_inline_requests_keyed_by_job_with_the_model_in_the_url)
{
    target_t x = target(SL_PROVIDER_GEMINI);
    items_t it;
    items_std(&it);
    sl_batch_http_t h;
    int second = -1;
    char err[256];
    for (int prefixed = 0; prefixed < 2; prefixed++) {
        x.t.model = prefixed ? "models/gemini-2.5-flash" : "gemini-2.5-flash";
        ck_assert_int_eq(sl_batch_create_request(tgt(&x), MARKER, it.item, it.n, NULL, NULL, &h,
                                                 &second, err, sizeof err),
                         SL_OK);
        ck_assert_int_eq(second, 0);
        ck_assert_str_eq(h.method, "POST");
        ck_assert_str_eq(h.url, "https://generativelanguage.googleapis.com/v1beta/models/"
                                "gemini-2.5-flash:batchGenerateContent");
        ck_assert_int_eq(h.nheaders, 0);
        json_t *b = parse(h.body);
        const json_t *batch = json_object_get(b, "batch");
        ck_assert_str_eq(jstr(batch, "display_name"), MARKER);
        const json_t *reqs = json_object_get(
            json_object_get(json_object_get(batch, "input_config"), "requests"), "requests");
        ck_assert_uint_eq(json_array_size(reqs), 3);
        for (size_t i = 0; i < 3; i++) {
            const json_t *r = json_array_get(reqs, i);
            ck_assert_str_eq(jstr(json_object_get(r, "metadata"), "key"), it.item[i].job_id);
            const json_t *req = json_object_get(r, "request");
            ck_assert(json_is_array(json_object_get(req, "contents")));
            ck_assert_ptr_null(json_object_get(req, "model"));
            ck_assert_ptr_null(json_object_get(req, "stream"));
        }
        ck_assert_ptr_nonnull(json_object_get(json_object_get(json_array_get(reqs, 1), "request"),
                                              "systemInstruction"));
        json_decref(b);
        sl_batch_http_clear(&h);
    }
    /* A model that cannot go into a URL path. */
    x.t.model = "gemini/../../files";
    ck_assert_int_eq(sl_batch_create_request(tgt(&x), MARKER, it.item, it.n, NULL, NULL, &h,
                                             &second, err, sizeof err),
                     SL_EINVAL);
    ck_assert_str_ne(err, "");
    items_free(&it);
}
END_TEST

START_TEST(items_the_api_cannot_express_are_refused_and_the_rest_go)
{
    target_t x = target(SL_PROVIDER_ANTHROPIC);
    items_t it;
    memset(&it, 0, sizeof it);
    items_add(&it, "job-1", CHATS[0]);
    /* Anthropic has no audio parts: its adapter refuses this one. */
    items_add(&it, "job-2",
              "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\","
              "\"input_audio\":{\"data\":\"AAAA\",\"format\":\"wav\"}}]}]}");
    items_add(&it, "job/../3", CHATS[0]); /* not a job id */
    items_add(&it, "job-1", CHATS[2]);    /* a second item of job-1 */
    items_add(&it, "job-5", "{\"prompt\":\"no messages\"}");
    items_add(&it, "job-6", CHATS[2]);
    refusals_t ref = {0};
    sl_batch_http_t h;
    int second = -1;
    char err[256];
    ck_assert_int_eq(sl_batch_create_request(tgt(&x), MARKER, it.item, it.n, on_refused, &ref, &h,
                                             &second, err, sizeof err),
                     SL_OK);
    ck_assert_int_eq(ref.n, 4);
    ck_assert_uint_eq(ref.item[0], 1);
    ck_assert_msg(strstr(ref.reason[0], "input_audio") != NULL, "reason: %s", ref.reason[0]);
    ck_assert_uint_eq(ref.item[1], 2);
    ck_assert_msg(strstr(ref.reason[1], "job id") != NULL, "reason: %s", ref.reason[1]);
    ck_assert_uint_eq(ref.item[2], 3);
    ck_assert_msg(strstr(ref.reason[2], "already") != NULL, "reason: %s", ref.reason[2]);
    ck_assert_uint_eq(ref.item[3], 4);
    ck_assert_msg(strstr(ref.reason[3], "messages") != NULL, "reason: %s", ref.reason[3]);
    json_t *b = parse(h.body);
    const json_t *reqs = json_object_get(b, "requests");
    ck_assert_uint_eq(json_array_size(reqs), 2);
    ck_assert_str_eq(jstr(json_array_get(reqs, 0), "custom_id"), "job-1");
    ck_assert_str_eq(jstr(json_array_get(reqs, 1), "custom_id"), "job-6");
    json_decref(b);
    sl_batch_http_clear(&h);
    /* Nothing left to send: SL_EINVAL with a reason, and nothing built. */
    memset(&ref, 0, sizeof ref);
    ck_assert_int_eq(sl_batch_create_request(tgt(&x), MARKER, it.item + 1, 1, on_refused, &ref, &h,
                                             &second, err, sizeof err),
                     SL_EINVAL);
    ck_assert_int_eq(ref.n, 1);
    ck_assert_msg(strstr(err, "input_audio") != NULL, "err: %s", err);
    ck_assert_ptr_null(h.body);
    ck_assert_ptr_null(h.url);
    /* A marker outside [a-z0-9-]{1,64}, and no items. */
    ck_assert_int_eq(sl_batch_create_request(tgt(&x), "SL_B/../x", it.item, it.n, NULL, NULL, &h,
                                             &second, err, sizeof err),
                     SL_EINVAL);
    ck_assert_int_eq(sl_batch_create_request(tgt(&x), MARKER, it.item, 0, NULL, NULL, &h, &second,
                                             err, sizeof err),
                     SL_EINVAL);
    items_free(&it);
}
END_TEST

START_TEST(a_batch_over_the_provider_limit_is_too_big)
{
    /* Gemini takes 20 MB inline: three items of 8 MB do not fit. */
    target_t x = target(SL_PROVIDER_GEMINI);
    size_t big = 8u << 20;
    char *text = malloc(big + 1);
    memset(text, 'a', big);
    text[big] = '\0';
    json_t *chat = json_pack("{s:[{s:s, s:s}]}", "messages", "role", "user", "content", text);
    free(text);
    sl_batch_item_t items[3] = {{"job-1", chat}, {"job-2", chat}, {"job-3", chat}};
    sl_batch_http_t h;
    int second = -1;
    char err[256];
    ck_assert_int_eq(sl_batch_create_request(tgt(&x), MARKER, items, 3, NULL, NULL, &h, &second,
                                             err, sizeof err),
                     SL_ETOOBIG);
    ck_assert_msg(strstr(err, "limit") != NULL, "err: %s", err);
    ck_assert_ptr_null(h.body);
    ck_assert_int_eq(sl_batch_create_request(tgt(&x), MARKER, items, 2, NULL, NULL, &h, &second,
                                             err, sizeof err),
                     SL_OK);
    ck_assert_uint_gt(h.body_len, 16u << 20);
    sl_batch_http_clear(&h);
    json_decref(chat);
}
END_TEST

/* ---- Status ------------------------------------------------------------------------------- */

typedef struct {
    sl_provider_t api;
    const char *fixture;
    sl_batch_state_t state;
    const char *status;
    int64_t total, succeeded, failed, pending;
    const char *results0, *results1;
    int inline_;
    const char *error; /* a substring of it; "" = none */
    const char *marker;
} status_case_t;

#define ANTHROPIC_RESULTS                                                                          \
    "https://api.anthropic.com/v1/messages/batches/msgbatch_013Zva2CMHLNnXjNJJKqJ2EF/results"

static const status_case_t status_cases[] = {
    {SL_PROVIDER_OPENAI, "openai/status_validating.json", SL_BATCH_RUNNING, "validating", 0, 0, 0,
     0, "", "", 0, "", MARKER},
    {SL_PROVIDER_OPENAI, "openai/status_in_progress.json", SL_BATCH_RUNNING, "in_progress", 4, 1, 1,
     2, "", "", 0, "", MARKER},
    {SL_PROVIDER_OPENAI, "openai/status_finalizing.json", SL_BATCH_RUNNING, "finalizing", 4, 3, 1,
     0, "", "", 0, "", MARKER},
    {SL_PROVIDER_OPENAI, "openai/status_completed.json", SL_BATCH_ENDED, "completed", 4, 3, 1, 0,
     "file-Out3Xy8Za1Bc", "file-Err5De2Fg6Hi", 0, "", MARKER},
    {SL_PROVIDER_OPENAI, "openai/status_failed.json", SL_BATCH_FAILED, "failed", 0, 0, 0, 0, "", "",
     0, "Enqueued token limit reached", MARKER},
    {SL_PROVIDER_OPENAI, "openai/status_expired.json", SL_BATCH_ENDED, "expired", 4, 2, 2, 0,
     "file-Out3Xy8Za1Bc", "file-Err5De2Fg6Hi", 0, "", MARKER},
    {SL_PROVIDER_OPENAI, "openai/status_cancelling.json", SL_BATCH_RUNNING, "cancelling", 4, 0, 0,
     4, "", "", 0, "", MARKER},
    {SL_PROVIDER_OPENAI, "openai/status_cancelled.json", SL_BATCH_ENDED, "cancelled", 4, 0, 4, 0,
     "", "file-Err5De2Fg6Hi", 0, "", MARKER},
    {SL_PROVIDER_AZURE, "azure/status_completed.json", SL_BATCH_ENDED, "completed", 4, 3, 1, 0,
     "file-Out3Xy8Za1Bc", "file-Err5De2Fg6Hi", 0, "", MARKER},
    {SL_PROVIDER_AZURE, "azure/status_failed.json", SL_BATCH_FAILED, "failed", 0, 0, 0, 0, "", "",
     0, "Enqueued token limit", MARKER},
    {SL_PROVIDER_AZURE, "azure/status_in_progress.json", SL_BATCH_RUNNING, "in_progress", 4, 1, 1,
     2, "", "", 0, "", MARKER},
    {SL_PROVIDER_ANTHROPIC, "anthropic/status_in_progress.json", SL_BATCH_RUNNING, "in_progress", 9,
     2, 1, 6, "", "", 0, "", ""},
    {SL_PROVIDER_ANTHROPIC, "anthropic/status_canceling.json", SL_BATCH_RUNNING, "canceling", 4, 0,
     0, 4, "", "", 0, "", ""},
    {SL_PROVIDER_ANTHROPIC, "anthropic/status_ended.json", SL_BATCH_ENDED, "ended", 10, 3, 5, 0,
     ANTHROPIC_RESULTS, "", 0, "", ""},
    {SL_PROVIDER_GEMINI, "gemini/create.json", SL_BATCH_RUNNING, "BATCH_STATE_PENDING", 4, -1, -1,
     4, "", "", 0, "", MARKER},
    {SL_PROVIDER_GEMINI, "gemini/status_running.json", SL_BATCH_RUNNING, "BATCH_STATE_RUNNING", 4,
     1, -1, 3, "", "", 0, "", MARKER},
    {SL_PROVIDER_GEMINI, "gemini/status_succeeded.json", SL_BATCH_ENDED, "BATCH_STATE_SUCCEEDED", 4,
     2, 2, -1, "", "", 1, "", MARKER},
    {SL_PROVIDER_GEMINI, "gemini/status_failed.json", SL_BATCH_FAILED, "BATCH_STATE_FAILED", 4, -1,
     -1, 4, "", "", 0, "request 2 has no contents", MARKER},
    /* Counts as strings or numbers alike. */
    {SL_PROVIDER_GEMINI, "gemini/status_cancelled.json", SL_BATCH_ENDED, "BATCH_STATE_CANCELLED", 4,
     1, -1, 3, "", "", 1, "", MARKER},
    {SL_PROVIDER_GEMINI, "gemini/status_expired.json", SL_BATCH_ENDED, "BATCH_STATE_EXPIRED", 4, -1,
     -1, 4, "", "", 1, "", MARKER},
};

START_TEST(every_provider_state_is_read)
{
    const status_case_t *c = &status_cases[_i];
    target_t x = target(c->api);
    json_t *a = fixture_json(c->fixture);
    sl_batch_status_t st;
    ck_assert_int_eq(sl_batch_status_read(tgt(&x), a, &st), SL_OK);
    ck_assert_msg(st.state == c->state, "%s: state %d", c->fixture, (int)st.state);
    ck_assert_str_eq(st.status, c->status);
    ck_assert_msg(st.total == c->total && st.succeeded == c->succeeded && st.failed == c->failed &&
                      st.pending == c->pending,
                  "%s: counts %lld %lld %lld %lld", c->fixture, (long long)st.total,
                  (long long)st.succeeded, (long long)st.failed, (long long)st.pending);
    ck_assert_str_eq(st.results[0], c->results0);
    ck_assert_str_eq(st.results[1], c->results1);
    ck_assert_int_eq(st.results_inline, c->inline_);
    ck_assert_str_eq(st.marker, c->marker);
    if (c->error[0] == '\0')
        ck_assert_str_eq(st.error, "");
    else
        ck_assert_msg(strstr(st.error, c->error) != NULL, "%s: error %s", c->fixture, st.error);
    const char *id = c->api == SL_PROVIDER_ANTHROPIC ? "msgbatch_013Zva2CMHLNnXjNJJKqJ2EF"
                     : c->api == SL_PROVIDER_GEMINI  ? "batches/123abc456def"
                                                     : "batch_67a1b2c3d4e5f6";
    ck_assert_str_eq(st.id, id);
    json_decref(a);
}
END_TEST

START_TEST(what_is_not_a_batch_object_is_a_parse_error)
{
    static const struct {
        sl_provider_t api;
        const char *json;
    } cases[] = {
        {SL_PROVIDER_OPENAI, "{}"},
        {SL_PROVIDER_OPENAI, "{\"error\":{\"message\":\"No such batch\"}}"},
        {SL_PROVIDER_OPENAI, "{\"id\":\"batch_1\"}"},
        {SL_PROVIDER_OPENAI, "{\"id\":42,\"status\":\"completed\"}"},
        {SL_PROVIDER_OPENAI, "{\"id\":\"../files\",\"status\":\"completed\"}"},
        {SL_PROVIDER_OPENAI,
         "{\"id\":\"batch_1\",\"status\":\"completed\",\"output_file_id\":\"file-1/../../x\"}"},
        {SL_PROVIDER_AZURE,
         "{\"id\":\"batch_1\",\"status\":\"completed\",\"error_file_id\":\"file 1?x\"}"},
        {SL_PROVIDER_ANTHROPIC, "{\"id\":\"msgbatch_1\"}"},
        {SL_PROVIDER_ANTHROPIC, "{\"id\":\"msgbatch_1\",\"processing_status\":\"ended\","
                                "\"results_url\":\"file:///etc/passwd\"}"},
        {SL_PROVIDER_ANTHROPIC, "{\"id\":\"msgbatch_1\",\"processing_status\":\"ended\","
                                "\"results_url\":\"https://api.anthropic.com/r\\r\\nx: y\"}"},
        {SL_PROVIDER_ANTHROPIC, "{\"id\":\"msgbatch_1\",\"processing_status\":\"ended\","
                                "\"results_url\":42}"},
        {SL_PROVIDER_GEMINI, "{}"}, /* the cancel answer */
        {SL_PROVIDER_GEMINI, "{\"name\":\"batches/1\"}"},
        {SL_PROVIDER_GEMINI, "{\"name\":\"files/1\",\"metadata\":{\"state\":\"x\"}}"},
        {SL_PROVIDER_GEMINI, "{\"name\":\"batches/1:cancel\",\"metadata\":{}}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        target_t x = target(cases[i].api);
        json_t *a = parse(cases[i].json);
        sl_batch_status_t st;
        ck_assert_msg(sl_batch_status_read(tgt(&x), a, &st) == SL_EPARSE, "read: %s",
                      cases[i].json);
        ck_assert_str_eq(st.id, "");
        json_decref(a);
    }
    target_t x = target(SL_PROVIDER_OPENAI);
    json_t *arr = parse("[1]");
    sl_batch_status_t st;
    ck_assert_int_eq(sl_batch_status_read(tgt(&x), arr, &st), SL_EPARSE);
    ck_assert_int_eq(sl_batch_status_read(tgt(&x), NULL, &st), SL_EPARSE);
    json_decref(arr);
}
END_TEST

/* Found by fuzz_batchwire (after 917,369 executions): a results_url spelt "Https://" was taken,
 * and handed to the executor in a spelling its own "https://" checks would not recognise. The
 * input, base64: ewogICJpZCI6ICJtc2diWGpOSkpLcUoyRUYiLAogICJ0eXBlIjogIm1lc3NhZ2VfY2giLAogICJw
 * cm9jZXNzaW5nX3N0YXR1cyI6ICI6MDAiLAogICJjKHRlZF9hdCI6IG51bGwsCiAgICJyZXN1bHRzX3VybCI6ICJIdHRw
 * czovL2FwaS5hbnRocm9waWMuY3N1Y2NlZWRvbS92MC9tZXNzYUpLcUoxRUYvcmVzdWx0cyIKfQo= */
START_TEST(results_url_scheme_is_taken_only_in_lowercase)
{
    target_t a = target(SL_PROVIDER_ANTHROPIC);
    json_t *j = parse("{\n  \"id\": \"msgbXjNJJKqJ2EF\",\n  \"type\": \"message_ch\",\n"
                      "  \"processing_status\": \":00\",\n  \"c(ted_at\": null,\n"
                      "   \"results_url\": \"Https://api.anthropic.csucceedom/v0/messaJKqJ1EF/"
                      "results\"\n}\n");
    sl_batch_status_t st;
    ck_assert_int_eq(sl_batch_status_read(tgt(&a), j, &st), SL_EPARSE);
    ck_assert_str_eq(st.results[0], "");
    json_decref(j);
    static const char *const spellings[] = {"HTTPS://api.anthropic.com/v1/r",
                                            "hTTp://api.anthropic.com/v1/r"};
    for (size_t i = 0; i < 2; i++) {
        json_t *b = json_pack("{s:s, s:s, s:s}", "id", "msgbatch_1", "processing_status", "ended",
                              "results_url", spellings[i]);
        ck_assert_int_eq(sl_batch_status_read(tgt(&a), b, &st), SL_EPARSE);
        json_decref(b);
    }
    sl_batch_http_t out[2];
    int n = -1;
    memset(&st, 0, sizeof st);
    snprintf(st.results[0], sizeof st.results[0], "Https://api.anthropic.com/v1/r");
    ck_assert_int_eq(sl_batch_results_requests(tgt(&a), &st, out, &n), SL_EINVAL);
    ck_assert_int_eq(n, 0);
    snprintf(st.results[0], sizeof st.results[0], "http://127.0.0.1:9000/v1/r");
    ck_assert_int_eq(sl_batch_results_requests(tgt(&a), &st, out, &n), SL_OK);
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(out[0].url, "http://127.0.0.1:9000/v1/r");
    sl_batch_http_clear(&out[0]);
}
END_TEST

START_TEST(anthropic_ended_without_results_url_and_unknown_words_keep_polling)
{
    target_t a = target(SL_PROVIDER_ANTHROPIC);
    json_t *j =
        parse("{\"id\":\"msgbatch_1\",\"processing_status\":\"ended\",\"results_url\":null}");
    sl_batch_status_t st;
    ck_assert_int_eq(sl_batch_status_read(tgt(&a), j, &st), SL_OK);
    ck_assert_int_eq(st.state, SL_BATCH_RUNNING);
    ck_assert_int_eq(st.total, -1);
    json_decref(j);
    target_t o = target(SL_PROVIDER_OPENAI);
    j = parse("{\"id\":\"batch_1\",\"status\":\"rebalancing_\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9"
              "\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\n\"}");
    ck_assert_int_eq(sl_batch_status_read(tgt(&o), j, &st), SL_OK);
    ck_assert_int_eq(st.state, SL_BATCH_RUNNING);
    /* Cut for its slot between characters, without control characters: still valid text. */
    ck_assert_uint_lt(strlen(st.status), sizeof st.status);
    json_t *s = json_string(st.status);
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_null(strchr(st.status, '\n'));
    json_decref(s);
    json_decref(j);
    /* Gemini SUCCEEDED before done: still being written. */
    target_t g = target(SL_PROVIDER_GEMINI);
    j = parse("{\"name\":\"batches/1\",\"metadata\":{\"state\":\"BATCH_STATE_SUCCEEDED\"},"
              "\"done\":false}");
    ck_assert_int_eq(sl_batch_status_read(tgt(&g), j, &st), SL_OK);
    ck_assert_int_eq(st.state, SL_BATCH_RUNNING);
    ck_assert_int_eq(st.results_inline, 0);
    json_decref(j);
}
END_TEST

/* ---- Calls by id -------------------------------------------------------------------------- */

START_TEST(status_cancel_and_results_calls_name_the_id)
{
    static const struct {
        sl_provider_t api;
        const char *id, *status_url, *cancel_url;
    } cases[] = {
        {SL_PROVIDER_OPENAI, "batch_abc", "https://api.openai.com/v1/batches/batch_abc",
         "https://api.openai.com/v1/batches/batch_abc/cancel"},
        {SL_PROVIDER_AZURE, "batch_abc",
         "https://res.openai.azure.com/openai/batches/batch_abc?api-version=2024-10-21",
         "https://res.openai.azure.com/openai/batches/batch_abc/cancel?api-version=2024-10-21"},
        {SL_PROVIDER_ANTHROPIC, "msgbatch_01",
         "https://api.anthropic.com/v1/messages/batches/msgbatch_01",
         "https://api.anthropic.com/v1/messages/batches/msgbatch_01/cancel"},
        {SL_PROVIDER_GEMINI, "batches/123",
         "https://generativelanguage.googleapis.com/v1beta/batches/123",
         "https://generativelanguage.googleapis.com/v1beta/batches/123:cancel"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        target_t x = target(cases[i].api);
        int anthropic = cases[i].api == SL_PROVIDER_ANTHROPIC;
        sl_batch_http_t h;
        ck_assert_int_eq(sl_batch_status_request(tgt(&x), cases[i].id, &h), SL_OK);
        ck_assert_str_eq(h.method, "GET");
        ck_assert_str_eq(h.url, cases[i].status_url);
        ck_assert_ptr_null(h.body);
        ck_assert_int_eq(h.nheaders, anthropic);
        if (anthropic)
            ck_assert_int_eq(header_count(&h, "anthropic-version: 2023-06-01"), 1);
        sl_batch_http_clear(&h);
        ck_assert_int_eq(sl_batch_cancel_request(tgt(&x), cases[i].id, &h), SL_OK);
        ck_assert_str_eq(h.method, "POST");
        ck_assert_str_eq(h.url, cases[i].cancel_url);
        ck_assert_str_eq(h.body, "{}");
        ck_assert_uint_eq(h.body_len, 2);
        ck_assert_int_eq(h.nheaders, anthropic);
        sl_batch_http_clear(&h);
    }
}
END_TEST

START_TEST(hostile_ids_are_refused)
{
    static const char *any[] = {"",
                                "../files",
                                "batch_1/../../files",
                                "batch_1/cancel",
                                "batch_1?limit=1",
                                "batch_1#x",
                                "batch 1",
                                "batch_1\r\nx-evil: 1",
                                "batch%2F..",
                                "..",
                                "batch_1:cancel",
                                "https://evil.example/x",
                                "batch_\xc3\xa9"};
    static const char *gemini[] = {
        "batches/", "batches/../files", "batches/1/../../x", "batches/1:cancel",
        "files/1",  "batches/1?x=1",    "batches//1",        "123"};
    for (int api = 0; api < SL_PROVIDER_COUNT; api++) {
        target_t x = target((sl_provider_t)api);
        for (size_t i = 0; i < sizeof any / sizeof any[0]; i++) {
            sl_batch_http_t h;
            ck_assert_msg(sl_batch_status_request(tgt(&x), any[i], &h) == SL_EINVAL, "status of %s",
                          any[i]);
            ck_assert_ptr_null(h.url);
            ck_assert_msg(sl_batch_cancel_request(tgt(&x), any[i], &h) == SL_EINVAL, "cancel of %s",
                          any[i]);
            ck_assert_ptr_null(h.url);
        }
        ck_assert_int_eq(sl_batch_status_request(tgt(&x), NULL, &(sl_batch_http_t){0}), SL_EINVAL);
    }
    target_t g = target(SL_PROVIDER_GEMINI);
    for (size_t i = 0; i < sizeof gemini / sizeof gemini[0]; i++) {
        sl_batch_http_t h;
        ck_assert_msg(sl_batch_status_request(tgt(&g), gemini[i], &h) == SL_EINVAL, "status of %s",
                      gemini[i]);
        ck_assert_msg(sl_batch_cancel_request(tgt(&g), gemini[i], &h) == SL_EINVAL, "cancel of %s",
                      gemini[i]);
    }
    /* A Gemini-shaped id is no id for the others (it would add a path segment). */
    target_t o = target(SL_PROVIDER_OPENAI);
    sl_batch_http_t h;
    ck_assert_int_eq(sl_batch_status_request(tgt(&o), "batches/123", &h), SL_EINVAL);
    /* Results locations that were not read from a provider's answer are checked again. */
    sl_batch_status_t st;
    memset(&st, 0, sizeof st);
    snprintf(st.results[0], sizeof st.results[0], "file-1/../../batches");
    sl_batch_http_t out[2];
    int n = -1;
    ck_assert_int_eq(sl_batch_results_requests(tgt(&o), &st, out, &n), SL_EINVAL);
    ck_assert_int_eq(n, 0);
    ck_assert_ptr_null(out[0].url);
    target_t a = target(SL_PROVIDER_ANTHROPIC);
    snprintf(st.results[0], sizeof st.results[0], "ftp://api.anthropic.com/results");
    ck_assert_int_eq(sl_batch_results_requests(tgt(&a), &st, out, &n), SL_EINVAL);
    ck_assert_int_eq(n, 0);
}
END_TEST

START_TEST(results_calls_follow_the_status)
{
    sl_batch_http_t out[2];
    int n = -1;
    sl_batch_status_t st;
    /* OpenAI / Azure: one GET per file. */
    static const struct {
        sl_provider_t api;
        const char *fixture, *out_url, *err_url;
    } files[] = {
        {SL_PROVIDER_OPENAI, "openai/status_completed.json",
         "https://api.openai.com/v1/files/file-Out3Xy8Za1Bc/content",
         "https://api.openai.com/v1/files/file-Err5De2Fg6Hi/content"},
        {SL_PROVIDER_AZURE, "azure/status_completed.json",
         "https://res.openai.azure.com/openai/files/file-Out3Xy8Za1Bc/"
         "content?api-version=2024-10-21",
         "https://res.openai.azure.com/openai/files/file-Err5De2Fg6Hi/"
         "content?api-version=2024-10-21"},
    };
    for (size_t i = 0; i < 2; i++) {
        target_t x = target(files[i].api);
        json_t *a = fixture_json(files[i].fixture);
        ck_assert_int_eq(sl_batch_status_read(tgt(&x), a, &st), SL_OK);
        ck_assert_int_eq(sl_batch_results_requests(tgt(&x), &st, out, &n), SL_OK);
        ck_assert_int_eq(n, 2);
        ck_assert_str_eq(out[0].method, "GET");
        ck_assert_str_eq(out[0].url, files[i].out_url);
        ck_assert_str_eq(out[1].url, files[i].err_url);
        ck_assert_ptr_null(out[0].body);
        sl_batch_http_clear(&out[0]);
        sl_batch_http_clear(&out[1]);
        json_decref(a);
    }
    /* Only the error file: one call. */
    target_t o = target(SL_PROVIDER_OPENAI);
    json_t *a = fixture_json("openai/status_cancelled.json");
    ck_assert_int_eq(sl_batch_status_read(tgt(&o), a, &st), SL_OK);
    ck_assert_int_eq(sl_batch_results_requests(tgt(&o), &st, out, &n), SL_OK);
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(out[0].url, "https://api.openai.com/v1/files/file-Err5De2Fg6Hi/content");
    sl_batch_http_clear(&out[0]);
    json_decref(a);
    /* Anthropic: the results_url as given, with the version header. */
    target_t an = target(SL_PROVIDER_ANTHROPIC);
    a = fixture_json("anthropic/status_ended.json");
    ck_assert_int_eq(sl_batch_status_read(tgt(&an), a, &st), SL_OK);
    ck_assert_int_eq(sl_batch_results_requests(tgt(&an), &st, out, &n), SL_OK);
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(out[0].method, "GET");
    ck_assert_str_eq(out[0].url, ANTHROPIC_RESULTS);
    ck_assert_int_eq(header_count(&out[0], "anthropic-version: 2023-06-01"), 1);
    ck_assert(sl_batch_url_same_origin(an.t.base_url, out[0].url));
    sl_batch_http_clear(&out[0]);
    json_decref(a);
    /* Gemini: inline, no call. */
    target_t g = target(SL_PROVIDER_GEMINI);
    a = fixture_json("gemini/status_succeeded.json");
    ck_assert_int_eq(sl_batch_status_read(tgt(&g), a, &st), SL_OK);
    ck_assert_int_eq(sl_batch_results_requests(tgt(&g), &st, out, &n), SL_OK);
    ck_assert_int_eq(n, 0);
    json_decref(a);
}
END_TEST

/* ---- Lists -------------------------------------------------------------------------------- */

START_TEST(list_calls_page_with_an_escaped_cursor)
{
    static const struct {
        sl_provider_t api;
        const char *page, *url;
    } cases[] = {
        {SL_PROVIDER_OPENAI, "", "https://api.openai.com/v1/batches?limit=100"},
        {SL_PROVIDER_OPENAI, "batch_ccc333",
         "https://api.openai.com/v1/batches?limit=100&after=batch_ccc333"},
        {SL_PROVIDER_OPENAI, "b&limit=1/../x",
         "https://api.openai.com/v1/batches?limit=100&after=b%26limit%3D1%2F..%2Fx"},
        {SL_PROVIDER_AZURE, "",
         "https://res.openai.azure.com/openai/batches?api-version=2024-10-21&limit=100"},
        {SL_PROVIDER_AZURE, "batch_ccc333",
         "https://res.openai.azure.com/openai/batches?api-version=2024-10-21&limit=100&after="
         "batch_ccc333"},
        {SL_PROVIDER_GEMINI, "",
         "https://generativelanguage.googleapis.com/v1beta/batches?pageSize=100"},
        {SL_PROVIDER_GEMINI, "CgwI+/8hZ2VtaW5pEgQ==",
         "https://generativelanguage.googleapis.com/v1beta/batches?pageSize=100&pageToken="
         "CgwI%2B%2F8hZ2VtaW5pEgQ%3D%3D"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        target_t x = target(cases[i].api);
        sl_batch_http_t h;
        ck_assert_int_eq(sl_batch_list_request(tgt(&x), cases[i].page, &h), SL_OK);
        ck_assert_str_eq(h.method, "GET");
        ck_assert_str_eq(h.url, cases[i].url);
        ck_assert_ptr_null(h.body);
        sl_batch_http_clear(&h);
    }
    target_t a = target(SL_PROVIDER_ANTHROPIC);
    sl_batch_http_t h;
    ck_assert_int_eq(sl_batch_list_request(tgt(&a), "", &h), SL_ENOTFOUND);
    ck_assert_ptr_null(h.url);
}
END_TEST

START_TEST(list_pages_find_the_marker_or_give_the_next_cursor)
{
    static const struct {
        sl_provider_t api;
        const char *page1, *page2, *cursor, *id;
    } cases[] = {
        {SL_PROVIDER_OPENAI, "openai/list_page1.json", "openai/list_page2.json", "batch_ccc333",
         "batch_ddd444"},
        {SL_PROVIDER_AZURE, "azure/list_page1.json", "azure/list_page2.json", "batch_ccc333",
         "batch_ddd444"},
        {SL_PROVIDER_GEMINI, "gemini/list_page1.json", "gemini/list_page2.json",
         "CgwI+/8hZ2VtaW5pEgQ==", "batches/123abc456def"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        target_t x = target(cases[i].api);
        json_t *p1 = fixture_json(cases[i].page1);
        json_t *p2 = fixture_json(cases[i].page2);
        sl_batch_status_t st;
        memset(&st, 0, sizeof st);
        int found = -1;
        char next[256] = "x";
        ck_assert_int_eq(sl_batch_list_read(tgt(&x), p1, MARKER, &st, &found, next, sizeof next),
                         SL_OK);
        ck_assert_int_eq(found, 0);
        ck_assert_str_eq(next, cases[i].cursor);
        ck_assert_str_eq(st.id, "");
        /* A cursor is never cut: without room for it the page cannot be read. */
        char small[8];
        ck_assert_int_eq(sl_batch_list_read(tgt(&x), p1, MARKER, &st, &found, small, sizeof small),
                         SL_EPARSE);
        ck_assert_str_eq(small, "");
        ck_assert_int_eq(sl_batch_list_read(tgt(&x), p2, MARKER, &st, &found, next, sizeof next),
                         SL_OK);
        ck_assert_int_eq(found, 1);
        ck_assert_str_eq(next, "");
        ck_assert_str_eq(st.id, cases[i].id);
        ck_assert_str_eq(st.marker, MARKER);
        ck_assert_int_eq(st.state, SL_BATCH_RUNNING);
        /* The other labels on page 1 are found by their own marker. */
        ck_assert_int_eq(
            sl_batch_list_read(tgt(&x), p1, "sl-b-000044", &st, &found, next, sizeof next), SL_OK);
        ck_assert_int_eq(found, 1);
        ck_assert_int_eq(st.state, SL_BATCH_ENDED);
        ck_assert_int_eq(
            sl_batch_list_read(tgt(&x), p2, "sl-b-999999", &st, &found, next, sizeof next), SL_OK);
        ck_assert_int_eq(found, 0);
        json_decref(p1);
        json_decref(p2);
        /* Not a list. */
        json_t *e = parse("{\"error\":{\"code\":401,\"message\":\"no\"}}");
        ck_assert_int_eq(sl_batch_list_read(tgt(&x), e, MARKER, &st, &found, next, sizeof next),
                         SL_EPARSE);
        json_decref(e);
        e = parse("[]");
        ck_assert_int_eq(sl_batch_list_read(tgt(&x), e, MARKER, &st, &found, next, sizeof next),
                         SL_EPARSE);
        json_decref(e);
    }
    /* OpenAI: has_more without last_id takes the last entry's id; an empty page ends. */
    target_t o = target(SL_PROVIDER_OPENAI);
    json_t *p = parse("{\"object\":\"list\",\"data\":[{\"id\":\"batch_z9\",\"status\":\"failed\"}],"
                      "\"has_more\":true}");
    sl_batch_status_t st;
    int found;
    char next[64];
    ck_assert_int_eq(sl_batch_list_read(tgt(&o), p, MARKER, &st, &found, next, sizeof next), SL_OK);
    ck_assert_str_eq(next, "batch_z9");
    json_decref(p);
    p = parse("{\"object\":\"list\",\"data\":[],\"has_more\":true}");
    ck_assert_int_eq(sl_batch_list_read(tgt(&o), p, MARKER, &st, &found, next, sizeof next), SL_OK);
    ck_assert_str_eq(next, "");
    ck_assert_int_eq(found, 0);
    json_decref(p);
    /* An entry with our label but a hostile id is as good as absent. */
    p = parse("{\"data\":[{\"id\":\"../x\",\"status\":\"completed\",\"metadata\":{\"sluice_batch\":"
              "\"" MARKER "\"}}],\"has_more\":false}");
    ck_assert_int_eq(sl_batch_list_read(tgt(&o), p, MARKER, &st, &found, next, sizeof next), SL_OK);
    ck_assert_int_eq(found, 0);
    json_decref(p);
    /* Gemini: an empty page leaves "operations" out. */
    target_t g = target(SL_PROVIDER_GEMINI);
    p = parse("{}");
    ck_assert_int_eq(sl_batch_list_read(tgt(&g), p, MARKER, &st, &found, next, sizeof next), SL_OK);
    ck_assert_int_eq(found, 0);
    ck_assert_str_eq(next, "");
    json_decref(p);
    /* Anthropic batches carry no label. */
    target_t a = target(SL_PROVIDER_ANTHROPIC);
    p = fixture_json("anthropic/list_page.json");
    ck_assert_int_eq(sl_batch_list_read(tgt(&a), p, MARKER, &st, &found, next, sizeof next),
                     SL_ENOTFOUND);
    ck_assert_int_eq(found, 0);
    json_decref(p);
}
END_TEST

/* ---- Results ------------------------------------------------------------------------------ */

START_TEST(openai_results_are_classified_as_online_answers)
{
    static const char *jobs[] = {"job-1", "job-2", "job-3", "job-4",
                                 "job-5", "job-6", "job-7", "job-8"};
    size_t bad = 99;
    json_t *lines = read_results(SL_PROVIDER_OPENAI, "openai/results_output.jsonl", jobs, 8, &bad);
    /* Not JSON, job-9 (not in the batch), the second line of job-1. */
    ck_assert_uint_eq(bad, 3);
    ck_assert_uint_eq(json_object_size(lines), 5);
    expect_line(lines, "job-1", "ok", 200, NULL, NULL);
    const json_t *body = json_object_get(json_object_get(lines, "job-1"), "body");
    ck_assert_str_eq(jstr(body, "id"), "chatcmpl-job-1"); /* the first line, not the repeat */
    ck_assert(json_is_null(json_object_get(json_object_get(lines, "job-1"), "error")));
    /* The body reads as an online answer would. */
    sl_usage_t u;
    ck_assert(sl_adapter_usage_of(sl_adapter_for(SL_PROVIDER_OPENAI), body, &u));
    ck_assert_int_eq(u.input, 100);
    ck_assert_int_eq(u.cached, 64);
    expect_line(lines, "job-2", "client_error", 400, "invalid_request_error",
                "context_length_exceeded");
    expect_line(lines, "job-3", "ok", 200, NULL, NULL);
    expect_line(lines, "job-4", "rate_limited", 429, "requests", "rate_limit_exceeded");
    expect_line(lines, "job-5", "server_error", 500, "server_error", "");
    ck_assert(json_is_null(json_object_get(json_object_get(lines, "job-2"), "body")));
    json_decref(lines);
    /* The error file: requests that never ran. */
    lines = read_results(SL_PROVIDER_OPENAI, "openai/results_errors.jsonl", jobs, 8, &bad);
    ck_assert_uint_eq(bad, 1); /* job-8: neither response nor error */
    ck_assert_uint_eq(json_object_size(lines), 2);
    expect_line(lines, "job-6", "not_sent", 0, "not_sent", "batch_expired");
    expect_line(lines, "job-7", "not_sent", 0, "not_sent", "batch_cancelled");
    ck_assert_msg(strstr(jstr(json_object_get(json_object_get(lines, "job-6"), "error"), "message"),
                         "completion window") != NULL,
                  "the provider's message is kept");
    json_decref(lines);
}
END_TEST

START_TEST(azure_results_are_classified_as_online_answers)
{
    static const char *jobs[] = {"job-1", "job-2", "job-3"};
    size_t bad = 99;
    json_t *lines = read_results(SL_PROVIDER_AZURE, "azure/results_output.jsonl", jobs, 3, &bad);
    ck_assert_uint_eq(bad, 0);
    expect_line(lines, "job-1", "ok", 200, NULL, NULL);
    expect_line(lines, "job-2", "client_error", 400, "client_error", "content_filter");
    expect_line(lines, "job-3", "not_sent", 0, "not_sent", "batch_expired");
    json_decref(lines);
}
END_TEST

START_TEST(anthropic_results_map_every_result_type)
{
    static const char *jobs[] = {"job-a1", "job-a2", "job-a3", "job-a4", "job-a5",
                                 "job-a6", "job-a7", "job-a8", "job-a9", "job-a10"};
    size_t bad = 99;
    json_t *lines = read_results(SL_PROVIDER_ANTHROPIC, "anthropic/results.jsonl", jobs, 10, &bad);
    /* The repeat of job-a1, job-zz, an unknown result type, and a line that is no object. */
    ck_assert_uint_eq(bad, 4);
    ck_assert_uint_eq(json_object_size(lines), 9);
    expect_line(lines, "job-a1", "ok", 200, NULL, NULL);
    ck_assert_str_eq(jstr(json_object_get(json_object_get(lines, "job-a1"), "body"), "id"),
                     "msg_1");
    expect_line(lines, "job-a2", "client_error", 400, "invalid_request_error", "");
    expect_line(lines, "job-a3", "rate_limited", 429, "rate_limit_error", NULL);
    expect_line(lines, "job-a4", "overloaded", 529, "overloaded_error", NULL);
    expect_line(lines, "job-a5", "server_error", 500, "api_error", NULL);
    expect_line(lines, "job-a6", "auth_error", 401, "authentication_error", NULL);
    expect_line(lines, "job-a7", "auth_error", 403, "permission_error", NULL);
    expect_line(lines, "job-a8", "not_sent", 0, "not_sent", "batch_cancelled");
    expect_line(lines, "job-a9", "not_sent", 0, "not_sent", "batch_expired");
    ck_assert_ptr_null(json_object_get(lines, "job-a10"));
    ck_assert_str_eq(jstr(json_object_get(json_object_get(lines, "job-a2"), "error"), "message"),
                     "max_tokens: 100000 > 64000, which is the maximum allowed");
    json_decref(lines);
}
END_TEST

START_TEST(gemini_inline_results_are_matched_by_position)
{
    static const char *jobs[] = {"job-g1", "job-g2", "job-g3", "job-g4"};
    size_t bad = 99;
    json_t *lines = read_results(SL_PROVIDER_GEMINI, "gemini/status_succeeded.json", jobs, 4, &bad);
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(json_object_size(lines), 4);
    expect_line(lines, "job-g1", "ok", 200, NULL, NULL);
    const json_t *body = json_object_get(json_object_get(lines, "job-g1"), "body");
    ck_assert_str_eq(jstr(body, "responseId"), "resp-1");
    /* A google.rpc.Code 3 reads as the online INVALID_ARGUMENT (HTTP 400). */
    expect_line(lines, "job-g2", "client_error", 400, "INVALID_ARGUMENT", "");
    /* No metadata echoed: by position alone. */
    expect_line(lines, "job-g3", "ok", 200, NULL, NULL);
    ck_assert_str_eq(jstr(json_object_get(json_object_get(lines, "job-g3"), "body"), "responseId"),
                     "resp-3");
    expect_line(lines, "job-g4", "rate_limited", 429, "RESOURCE_EXHAUSTED", "");
    json_decref(lines);
    /* Fewer jobs than entries: the extra entries are bad. */
    lines = read_results(SL_PROVIDER_GEMINI, "gemini/status_succeeded.json", jobs, 2, &bad);
    ck_assert_uint_eq(bad, 2);
    ck_assert_uint_eq(json_object_size(lines), 2);
    json_decref(lines);
    /* A cancelled batch holds the lines that ran. */
    lines = read_results(SL_PROVIDER_GEMINI, "gemini/status_cancelled.json", jobs, 4, &bad);
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(json_object_size(lines), 1);
    expect_line(lines, "job-g1", "ok", 200, NULL, NULL);
    json_decref(lines);
    /* An expired one with no response: nothing, and nothing bad. */
    lines = read_results(SL_PROVIDER_GEMINI, "gemini/status_expired.json", jobs, 4, &bad);
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(json_object_size(lines), 0);
    json_decref(lines);
}
END_TEST

START_TEST(gemini_entry_whose_key_is_another_job_is_bad)
{
    static const char *jobs[] = {"job-g1", "job-g2"};
    size_t bad = 99;
    json_t *lines =
        read_results(SL_PROVIDER_GEMINI, "gemini/status_key_mismatch.json", jobs, 2, &bad);
    ck_assert_uint_eq(bad, 1);
    ck_assert_uint_eq(json_object_size(lines), 1);
    ck_assert_ptr_null(json_object_get(lines, "job-g1"));
    expect_line(lines, "job-g2", "ok", 200, NULL, NULL);
    ck_assert_str_eq(jstr(json_object_get(json_object_get(lines, "job-g2"), "body"), "responseId"),
                     "resp-2");
    json_decref(lines);
    /* A job listed twice: its second entry is a repeat. */
    static const char *twice[] = {"job-g1", "job-g1"};
    static const char two[] =
        "{\"name\":\"batches/1\",\"done\":true,\"response\":{\"inlinedResponses\":{"
        "\"inlinedResponses\":[{\"response\":{\"usageMetadata\":{},\"responseId\":\"r1\"}},"
        "{\"response\":{\"usageMetadata\":{},\"responseId\":\"r2\"}}]}}}";
    target_t g = target(SL_PROVIDER_GEMINI);
    lines = json_object();
    ck_assert_int_eq(
        sl_batch_results_read(tgt(&g), two, sizeof two - 1, twice, 2, on_line, lines, &bad), SL_OK);
    ck_assert_uint_eq(bad, 1);
    ck_assert_uint_eq(json_object_size(lines), 1);
    ck_assert_str_eq(jstr(json_object_get(json_object_get(lines, "job-g1"), "body"), "responseId"),
                     "r1");
    json_decref(lines);
}
END_TEST

START_TEST(gemini_error_codes_read_as_online_statuses_and_cancelled_never_ran)
{
    static const char *jobs[] = {"job-1", "job-2", "job-3", "job-4", "job-5"};
    static const char doc[] =
        "{\"name\":\"batches/1\",\"done\":true,\"response\":{\"inlinedResponses\":{"
        "\"inlinedResponses\":["
        "{\"error\":{\"code\":1,\"message\":\"The operation was cancelled.\"}},"
        "{\"error\":{\"code\":499,\"status\":\"CANCELLED\",\"message\":\"cancelled\"}},"
        "{\"error\":{\"code\":14,\"message\":\"The service is currently unavailable.\"}},"
        "{\"error\":{\"code\":77,\"message\":\"?\"}},"
        "{\"error\":{\"code\":16,\"message\":\"no credential\"}}]}}}";
    target_t g = target(SL_PROVIDER_GEMINI);
    json_t *lines = json_object();
    size_t bad = 99;
    ck_assert_int_eq(
        sl_batch_results_read(tgt(&g), doc, sizeof doc - 1, jobs, 5, on_line, lines, &bad), SL_OK);
    ck_assert_uint_eq(bad, 0);
    expect_line(lines, "job-1", "not_sent", 0, "not_sent", "batch_cancelled");
    expect_line(lines, "job-2", "not_sent", 0, "not_sent", "batch_cancelled");
    expect_line(lines, "job-3", "overloaded", 503, "UNAVAILABLE", "");
    expect_line(lines, "job-4", "server_error", 500, "server_error", "");
    expect_line(lines, "job-5", "auth_error", 401, "UNAUTHENTICATED", "");
    json_decref(lines);
}
END_TEST

/* Feeds text as the results of a batch of job-1 and job-2. */
static json_t *feed(sl_provider_t api, const char *text, size_t len, size_t *bad)
{
    static const char *jobs[] = {"job-1", "job-2"};
    target_t x = target(api);
    json_t *lines = json_object();
    ck_assert_int_eq(sl_batch_results_read(tgt(&x), text, len, jobs, 2, on_line, lines, bad),
                     SL_OK);
    return lines;
}

#define OA_OK(job)                                                                                 \
    "{\"custom_id\":\"" job "\",\"response\":{\"status_code\":200,\"body\":{\"choices\":[],"       \
    "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}}}"

START_TEST(garbage_lines_are_counted_and_skipped)
{
    size_t bad = 99;
    /* CRLF line ends, blank lines, a last line without its newline. */
    const char crlf[] = "\r\n" OA_OK("job-1") "\r\n\r\n  \t\n" OA_OK("job-2");
    json_t *lines = feed(SL_PROVIDER_OPENAI, crlf, sizeof crlf - 1, &bad);
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(json_object_size(lines), 2);
    json_decref(lines);
    /* A NUL byte inside a line, a line of a number, status codes out of range, a response that
     * is not an object, and no custom_id. */
    const char junk[] =
        "{\"custom_id\":\"job-1\",\0\"response\":null}\n"
        "42\n"
        "{\"custom_id\":\"job-1\",\"response\":{\"status_code\":99999}}\n"
        "{\"custom_id\":\"job-1\",\"response\":{\"status_code\":-200}}\n"
        "{\"custom_id\":\"job-1\",\"response\":[200]}\n"
        "{\"response\":{\"status_code\":200,\"body\":{}}}\n"
        "{\"custom_id\":17,\"error\":{\"code\":\"batch_expired\"}}\n" OA_OK("job-2") "\n";
    lines = feed(SL_PROVIDER_OPENAI, junk, sizeof junk - 1, &bad);
    ck_assert_uint_eq(bad, 7);
    ck_assert_uint_eq(json_object_size(lines), 1);
    expect_line(lines, "job-2", "ok", 200, NULL, NULL);
    json_decref(lines);
    /* A success without usage is what it would be online: an answer sluice cannot read. */
    const char nousage[] = "{\"custom_id\":\"job-1\",\"response\":{\"status_code\":200,\"body\":"
                           "{\"choices\":[]}}}\n";
    lines = feed(SL_PROVIDER_OPENAI, nousage, sizeof nousage - 1, &bad);
    ck_assert_uint_eq(bad, 0);
    expect_line(lines, "job-1", "bad_response", 200, "bad_response", "");
    json_decref(lines);
    /* Nothing at all. */
    lines = feed(SL_PROVIDER_ANTHROPIC, "", 0, &bad);
    ck_assert_uint_eq(bad, 0);
    ck_assert_uint_eq(json_object_size(lines), 0);
    json_decref(lines);
    lines = feed(SL_PROVIDER_GEMINI, "not json", 8, &bad);
    ck_assert_uint_eq(bad, 1);
    json_decref(lines);
    const char *seven = "{\"response\":{\"inlinedResponses\":7}}";
    lines = feed(SL_PROVIDER_GEMINI, seven, strlen(seven), &bad);
    ck_assert_uint_eq(bad, 1);
    json_decref(lines);
    /* bad may be NULL. */
    lines = feed(SL_PROVIDER_OPENAI, junk, sizeof junk - 1, NULL);
    ck_assert_uint_eq(json_object_size(lines), 1);
    json_decref(lines);
}
END_TEST

START_TEST(huge_and_deeply_nested_lines_are_bad_not_fatal)
{
    /* Nested 300 deep (under jansson's own limit, over ours). */
    sl_buf_t b;
    sl_buf_init(&b, 64 << 20);
    ck_assert_int_eq(sl_buf_adds(&b, "{\"custom_id\":\"job-1\",\"response\":{\"status_code\":200,"
                                     "\"body\":{\"usage\":{},\"x\":"),
                     SL_OK);
    for (int i = 0; i < 300; i++)
        ck_assert_int_eq(sl_buf_adds(&b, "["), SL_OK);
    for (int i = 0; i < 300; i++)
        ck_assert_int_eq(sl_buf_adds(&b, "]"), SL_OK);
    ck_assert_int_eq(sl_buf_adds(&b, "}}}\n" OA_OK("job-2") "\n"), SL_OK);
    size_t bad = 99;
    json_t *lines = feed(SL_PROVIDER_OPENAI, b.ptr, b.len, &bad);
    ck_assert_uint_eq(bad, 1);
    ck_assert_ptr_null(json_object_get(lines, "job-1"));
    expect_line(lines, "job-2", "ok", 200, NULL, NULL);
    json_decref(lines);
    /* Brackets inside strings do not count. */
    sl_buf_reset(&b);
    ck_assert_int_eq(sl_buf_adds(&b, "{\"custom_id\":\"job-1\",\"result\":{\"type\":\"succeeded\","
                                     "\"message\":{\"usage\":{},\"text\":\""),
                     SL_OK);
    for (int i = 0; i < 400; i++)
        ck_assert_int_eq(sl_buf_adds(&b, "[{\\\""), SL_OK);
    ck_assert_int_eq(sl_buf_adds(&b, "\"}}}\n"), SL_OK);
    lines = feed(SL_PROVIDER_ANTHROPIC, b.ptr, b.len, &bad);
    ck_assert_uint_eq(bad, 0);
    expect_line(lines, "job-1", "ok", 200, NULL, NULL);
    json_decref(lines);
    /* A line over 16 MB. */
    sl_buf_reset(&b);
    ck_assert_int_eq(sl_buf_adds(&b, "{\"custom_id\":\"job-1\",\"result\":{\"type\":\"expired\"},"
                                     "\"pad\":\""),
                     SL_OK);
    char *pad = malloc(1 << 20);
    memset(pad, 'p', 1 << 20);
    for (int i = 0; i < 17; i++)
        ck_assert_int_eq(sl_buf_add(&b, pad, 1 << 20), SL_OK);
    free(pad);
    ck_assert_int_eq(sl_buf_adds(&b, "\"}\n{\"custom_id\":\"job-2\",\"result\":{\"type\":"
                                     "\"expired\"}}"),
                     SL_OK);
    lines = feed(SL_PROVIDER_ANTHROPIC, b.ptr, b.len, &bad);
    ck_assert_uint_eq(bad, 1);
    ck_assert_ptr_null(json_object_get(lines, "job-1"));
    expect_line(lines, "job-2", "not_sent", 0, "not_sent", "batch_expired");
    json_decref(lines);
    sl_buf_free(&b);
}
END_TEST

/* ---- Origins ------------------------------------------------------------------------------ */

START_TEST(results_url_origin_must_be_the_base)
{
    const char *base = "https://api.anthropic.com/v1";
    static const char *same[] = {
        "https://api.anthropic.com/v1/messages/batches/msgbatch_1/results",
        "https://API.Anthropic.com/other",
        "https://api.anthropic.com:443/x",
        "HTTPS://api.anthropic.com",
        "https://api.anthropic.com?x=1",
    };
    static const char *other[] = {
        "http://api.anthropic.com/v1/x",
        "https://api.anthropic.com:8443/x",
        "https://api.anthropic.com.evil.example/x",
        "https://evil.example/api.anthropic.com/x",
        "https://api.anthropic.com@evil.example/x",
        "https://user:pw@api.anthropic.com/x",
        "https://evil.example\\@api.anthropic.com/x",
        "https://api.anthropic%2Ecom/x",
        "https://api.anthropic.com:99999/x",
        "https://api.anthropic.com:0/x",
        "https://api.anthropic.com:44a3/x",
        "ftp://api.anthropic.com/x",
        "//api.anthropic.com/x",
        "/v1/x",
        "https:///x",
        "https://",
        "",
        "https://api.anthropic.com\r\n.evil/x",
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        ck_assert_msg(sl_batch_url_same_origin(base, same[i]) == 1, "%s", same[i]);
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        ck_assert_msg(sl_batch_url_same_origin(base, other[i]) == 0, "%s", other[i]);
    ck_assert_int_eq(sl_batch_url_same_origin(NULL, base), 0);
    ck_assert_int_eq(sl_batch_url_same_origin(base, NULL), 0);
    /* An empty port is the default; IPv6 literals and explicit ports compare whole. */
    ck_assert_int_eq(sl_batch_url_same_origin("https://api.anthropic.com:/v1", base), 1);
    ck_assert_int_eq(sl_batch_url_same_origin("http://[::1]:8080/v1", "http://[::1]:8080/r"), 1);
    ck_assert_int_eq(sl_batch_url_same_origin("http://[::1]:8080/v1", "http://[::1]/r"), 0);
    ck_assert_int_eq(sl_batch_url_same_origin("http://[::1]:8080/v1", "http://[::2]:8080/r"), 0);
    ck_assert_int_eq(sl_batch_url_same_origin("http://127.0.0.1:9000/v1", "http://127.0.0.1:9000"),
                     1);
    ck_assert_int_eq(sl_batch_url_same_origin("http://127.0.0.1:9000/v1", "http://127.0.0.1/x"), 0);
}
END_TEST

START_TEST(clearing_an_empty_request_is_a_no_op)
{
    sl_batch_http_t h;
    memset(&h, 0, sizeof h);
    sl_batch_http_clear(&h);
    sl_batch_http_clear(&h);
    ck_assert_ptr_null(h.url);
    ck_assert_int_eq(h.nheaders, 0);
    /* And a target missing its pieces builds nothing. */
    target_t x = target(SL_PROVIDER_AZURE);
    x.dep.api_version = "";
    ck_assert_int_eq(sl_batch_status_request(tgt(&x), "batch_1", &h), SL_EINVAL);
    x.dep.api_version = "2024-10-21&x=1";
    ck_assert_int_eq(sl_batch_list_request(tgt(&x), "", &h), SL_EINVAL);
    target_t o = target(SL_PROVIDER_OPENAI);
    o.t.base_url = NULL;
    ck_assert_int_eq(sl_batch_status_request(tgt(&o), "batch_1", &h), SL_EINVAL);
    ck_assert_ptr_null(h.url);
}
END_TEST

static Suite *batchwire_suite(void)
{
    Suite *s = suite_create("batchwire");
    TCase *cr = tcase_create("create");
    tcase_set_timeout(cr, 60);
    tcase_add_test(cr, openai_create_uploads_one_jsonl_line_per_item_for_the_batch_model);
    tcase_add_test(cr, azure_create_names_the_global_batch_deployment_and_api_version);
    tcase_add_test(cr, create_after_upload_names_the_file_window_and_marker);
    tcase_add_test(cr, anthropic_create_sends_params_with_the_model_and_the_version_header);
    tcase_add_test(cr, gemini_create_sends_inline_requests_keyed_by_job_with_the_model_in_the_url);
    tcase_add_test(cr, items_the_api_cannot_express_are_refused_and_the_rest_go);
    tcase_add_test(cr, a_batch_over_the_provider_limit_is_too_big);
    suite_add_tcase(s, cr);
    TCase *st = tcase_create("status");
    tcase_add_loop_test(st, every_provider_state_is_read, 0,
                        (int)(sizeof status_cases / sizeof status_cases[0]));
    tcase_add_test(st, what_is_not_a_batch_object_is_a_parse_error);
    tcase_add_test(st, anthropic_ended_without_results_url_and_unknown_words_keep_polling);
    tcase_add_test(st, results_url_scheme_is_taken_only_in_lowercase);
    tcase_add_test(st, status_cancel_and_results_calls_name_the_id);
    tcase_add_test(st, hostile_ids_are_refused);
    tcase_add_test(st, results_calls_follow_the_status);
    tcase_add_test(st, list_calls_page_with_an_escaped_cursor);
    tcase_add_test(st, list_pages_find_the_marker_or_give_the_next_cursor);
    suite_add_tcase(s, st);
    TCase *rs = tcase_create("results");
    tcase_set_timeout(rs, 60);
    tcase_add_test(rs, openai_results_are_classified_as_online_answers);
    tcase_add_test(rs, azure_results_are_classified_as_online_answers);
    tcase_add_test(rs, anthropic_results_map_every_result_type);
    tcase_add_test(rs, gemini_inline_results_are_matched_by_position);
    tcase_add_test(rs, gemini_entry_whose_key_is_another_job_is_bad);
    tcase_add_test(rs, gemini_error_codes_read_as_online_statuses_and_cancelled_never_ran);
    tcase_add_test(rs, garbage_lines_are_counted_and_skipped);
    tcase_add_test(rs, huge_and_deeply_nested_lines_are_bad_not_fatal);
    tcase_add_test(rs, results_url_origin_must_be_the_base);
    tcase_add_test(rs, clearing_an_empty_request_is_a_no_op);
    suite_add_tcase(s, rs);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(batchwire_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
