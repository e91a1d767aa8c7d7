/* test_adapters.c - behaviour of the provider adapters (dispatcher/adapter.h), the SSE parser
 * (dispatcher/sse.h) and streamed answers (dispatcher/stream.h).
 *
 * Recorded responses live in tests/fixtures/providers/<provider>/: *.http are raw HTTP/1.1
 * responses (status line, CRLF header lines, blank line, body), replayed one header line at a
 * time as libcurl hands them over; *.sse are streamed bodies exactly as sent on the wire (Gemini's
 * with CRLF line ends). They follow each provider's documented formats (docs/providers.md).
 *
 * Streams are fed whole, in 7-byte pieces and byte by byte: the chunks that come out must not
 * depend on how the network cut the bytes.
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/config.h"
#include "../common/jsonschema.h"
#include "../common/msg_usage.h"
#include "../common/util.h"
#include "../dispatcher/adapter.h"
#include "../dispatcher/ratelimit.h"
#include "../dispatcher/sse.h"
#include "../dispatcher/stream.h"
#include "../dispatcher/timefmt.h"

#define FIXTURES "tests/fixtures/providers/"
/* 2025-10-14T09:15:10Z: the Date of the Anthropic fixtures, for their reset headers. */
#define FIXTURE_NOW_MS 1760433310000LL

static sl_schema_t *stream_schema;

/* ---- Helpers ------------------------------------------------------------------------------ */

static const sl_adapter_t *adapter(sl_provider_t api)
{
    const sl_adapter_t *ad = sl_adapter_for(api);
    ck_assert_ptr_nonnull(ad);
    return ad;
}

static sl_deployment_cfg_t deployment(sl_provider_t api)
{
    sl_deployment_cfg_t d;
    memset(&d, 0, sizeof d);
    d.name = "dep";
    d.api = api;
    d.provider = sl_provider_name(api);
    d.max_output_tokens = 8192;
    d.timeout_ms = 60000;
    d.api_version = "";
    switch (api) {
    case SL_PROVIDER_OPENAI:
        d.base_url = "https://api.openai.com/v1";
        d.model = "gpt-4o-mini";
        break;
    case SL_PROVIDER_AZURE:
        d.base_url = "https://res.openai.azure.com/openai/deployments/gpt4o/";
        d.model = "gpt-4o";
        d.api_version = "2024-10-21";
        break;
    case SL_PROVIDER_ANTHROPIC:
        d.base_url = "https://api.anthropic.com/v1";
        d.model = "claude-sonnet-4-5";
        d.api_version = "2023-06-01";
        break;
    default:
        d.base_url = "https://generativelanguage.googleapis.com/v1beta";
        d.model = "gemini-2.5-flash";
        break;
    }
    return d;
}

static json_t *parse(const char *text)
{
    json_error_t jerr;
    json_t *j = json_loads(text, 0, &jerr);
    ck_assert_msg(j != NULL, "bad JSON in test: %s", jerr.text);
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

typedef struct {
    long status;
    sl_ratelimit_t rl;
    json_t *body;
} recorded_t;

/* Replays a recorded response: every header line goes to sl_ratelimit_header (the engine's one
 * header parser for every provider), with a fixed clock. */
static recorded_t replay(const char *name)
{
    size_t len = 0;
    char *text = read_fixture(name, &len);
    recorded_t r;
    sl_ratelimit_init(&r.rl);
    r.rl.now_ms = FIXTURE_NOW_MS;
    ck_assert_msg(sscanf(text, "HTTP/1.1 %ld", &r.status) == 1, "%s: no status line", name);
    char *end = strstr(text, "\r\n\r\n");
    ck_assert_msg(end != NULL, "%s: no end of headers", name);
    for (char *line = text; line < end + 2;) {
        char *eol = strstr(line, "\r\n");
        size_t n = (size_t)(eol + 2 - line);
        sl_ratelimit_header(&r.rl, line, n);
        line += n;
    }
    const char *body = end + 4;
    r.body = json_loadb(body, len - (size_t)(body - text), 0, NULL);
    free(text);
    return r;
}

/* sl_adapter_classify and sl_stream_end answer with an sl_outcome_t; the tests compare its
 * name, the string that goes on the wire. */
static const char *classify(const sl_adapter_t *ad, int transport_error, long http_status,
                            const json_t *body, const sl_ratelimit_t *rl)
{
    return sl_outcome_name(sl_adapter_classify(ad, transport_error, http_status, body, rl));
}

static const char *stream_end(sl_stream_t *st, int transport_error)
{
    return sl_outcome_name(sl_stream_end(st, transport_error));
}

static int64_t jint(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    ck_assert_msg(json_is_integer(v), "\"%s\" is missing or not an integer", key);
    return (int64_t)json_integer_value(v);
}

static const char *jstr(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    ck_assert_msg(s != NULL, "\"%s\" is missing or not a string", key);
    return s;
}

static void expect_usage(const json_t *u, int64_t input, int64_t output, int64_t cached,
                         int64_t reasoning, int64_t total)
{
    ck_assert_ptr_nonnull(u);
    ck_assert_uint_eq(json_object_size(u), 5);
    ck_assert_int_eq(jint(u, "input"), input);
    ck_assert_int_eq(jint(u, "output"), output);
    ck_assert_int_eq(jint(u, "cached"), cached);
    ck_assert_int_eq(jint(u, "reasoning"), reasoning);
    ck_assert_int_eq(jint(u, "total"), total);
}

/* Builds the request of chat for api; returns its parsed body, fills *req (caller clears). */
static json_t *build(sl_provider_t api, const char *chat_text, sl_adapter_request_t *req)
{
    sl_deployment_cfg_t d = deployment(api);
    json_t *chat = parse(chat_text);
    char err[256] = "";
    sl_err_t rc = sl_adapter_request(adapter(api), &d, chat, req, err, sizeof err);
    ck_assert_msg(rc == SL_OK, "%s request: %s (%s)", sl_adapter_name(adapter(api)),
                  sl_strerror(rc), err);
    json_decref(chat);
    ck_assert_ptr_nonnull(req->url);
    return parse(req->body);
}

static int has_header(const sl_adapter_request_t *req, const char *line)
{
    for (int i = 0; i < req->nheaders; i++) {
        if (strcmp(req->headers[i], line) == 0)
            return 1;
    }
    return 0;
}

/* A conversation with every role, parallel tool calls and their results, an image. */
static const char conversation[] =
    "{\"model\":\"whatever-the-caller-said\",\"messages\":["
    "{\"role\":\"system\",\"content\":\"You are terse.\"},"
    "{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"Answer in French.\"}]},"
    "{\"role\":\"user\",\"content\":\"Weather in Paris and Rome?\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":["
    "{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
    "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}},"
    "{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
    "\"arguments\":\"{\\\"city\\\":\\\"Rome\\\"}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"18C, sunny\"},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call_2\",\"content\":\"{\\\"temp_c\\\":24}\"},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Which is warmer?\"},"
    "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,iVBORw0KGgo=\"}}]}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
    "\"description\":\"Current weather\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"],\"additionalProperties\":false}}}],"
    "\"tool_choice\":\"required\",\"max_completion_tokens\":300,\"temperature\":1.5,"
    "\"top_p\":0.9,\"stop\":\"END\",\"stream\":true,\"user\":\"u-42\"}";

/* ---- Requests ----------------------------------------------------------------------------- */

START_TEST(openai_request_sends_the_deployment_model_and_asks_for_stream_usage)
{
    sl_adapter_request_t req;
    json_t *body = build(SL_PROVIDER_OPENAI, conversation, &req);
    ck_assert_str_eq(req.url, "https://api.openai.com/v1/chat/completions");
    ck_assert_int_eq(req.stream, 1);
    ck_assert_int_eq(req.nheaders, 0);
    ck_assert_str_eq(jstr(body, "model"), "gpt-4o-mini");
    ck_assert(
        json_is_true(json_object_get(json_object_get(body, "stream_options"), "include_usage")));
    /* Everything else goes out as the caller wrote it. */
    json_t *chat = parse(conversation);
    ck_assert(json_equal(json_object_get(body, "messages"), json_object_get(chat, "messages")));
    ck_assert(json_equal(json_object_get(body, "tools"), json_object_get(chat, "tools")));
    ck_assert_int_eq(jint(body, "max_completion_tokens"), 300);
    json_decref(chat);
    json_decref(body);
    sl_adapter_request_clear(&req);

    /* Not streamed: no stream_options (OpenAI refuses them without stream: true). */
    body = build(SL_PROVIDER_OPENAI,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":false,"
                 "\"stream_options\":{\"include_usage\":true}}",
                 &req);
    ck_assert_int_eq(req.stream, 0);
    ck_assert_ptr_null(json_object_get(body, "stream_options"));
    ck_assert_str_eq(jstr(body, "model"), "gpt-4o-mini");
    json_decref(body);
    sl_adapter_request_clear(&req);
}
END_TEST

START_TEST(azure_request_names_api_version_and_no_model)
{
    sl_adapter_request_t req;
    json_t *body = build(SL_PROVIDER_AZURE, conversation, &req);
    /* base_url's trailing slash is not doubled. */
    ck_assert_str_eq(req.url, "https://res.openai.azure.com/openai/deployments/gpt4o/chat/"
                              "completions?api-version=2024-10-21");
    ck_assert_ptr_null(json_object_get(body, "model"));
    ck_assert(
        json_is_true(json_object_get(json_object_get(body, "stream_options"), "include_usage")));
    ck_assert_uint_eq(json_array_size(json_object_get(body, "messages")), 7);
    json_decref(body);
    sl_adapter_request_clear(&req);
}
END_TEST

START_TEST(anthropic_request_maps_system_tools_and_tool_results)
{
    sl_adapter_request_t req;
    json_t *body = build(SL_PROVIDER_ANTHROPIC, conversation, &req);
    ck_assert_str_eq(req.url, "https://api.anthropic.com/v1/messages");
    ck_assert(has_header(&req, "anthropic-version: 2023-06-01"));
    ck_assert_int_eq(req.stream, 1);
    ck_assert(json_is_true(json_object_get(body, "stream")));
    ck_assert_str_eq(jstr(body, "model"), "claude-sonnet-4-5");
    /* System and developer messages: the top-level system prompt, in order. */
    json_t *system = json_object_get(body, "system");
    ck_assert_uint_eq(json_array_size(system), 2);
    ck_assert_str_eq(jstr(json_array_get(system, 0), "text"), "You are terse.");
    ck_assert_str_eq(jstr(json_array_get(system, 1), "text"), "Answer in French.");
    json_t *msgs = json_object_get(body, "messages");
    ck_assert_uint_eq(json_array_size(msgs), 3);
    json_t *user = json_array_get(msgs, 0);
    ck_assert_str_eq(jstr(user, "role"), "user");
    ck_assert_str_eq(jstr(json_array_get(json_object_get(user, "content"), 0), "text"),
                     "Weather in Paris and Rome?");
    /* Tool calls: tool_use blocks with their arguments as JSON objects. */
    json_t *asst = json_array_get(msgs, 1);
    ck_assert_str_eq(jstr(asst, "role"), "assistant");
    json_t *blocks = json_object_get(asst, "content");
    ck_assert_uint_eq(json_array_size(blocks), 2);
    json_t *tu = json_array_get(blocks, 1);
    ck_assert_str_eq(jstr(tu, "type"), "tool_use");
    ck_assert_str_eq(jstr(tu, "id"), "call_2");
    ck_assert_str_eq(jstr(tu, "name"), "get_weather");
    ck_assert_str_eq(jstr(json_object_get(tu, "input"), "city"), "Rome");
    /* Both tool results and the next user message: one user turn, results first. */
    json_t *results = json_array_get(msgs, 2);
    ck_assert_str_eq(jstr(results, "role"), "user");
    blocks = json_object_get(results, "content");
    ck_assert_uint_eq(json_array_size(blocks), 4);
    ck_assert_str_eq(jstr(json_array_get(blocks, 0), "type"), "tool_result");
    ck_assert_str_eq(jstr(json_array_get(blocks, 0), "tool_use_id"), "call_1");
    ck_assert_str_eq(jstr(json_array_get(blocks, 0), "content"), "18C, sunny");
    ck_assert_str_eq(jstr(json_array_get(blocks, 1), "tool_use_id"), "call_2");
    ck_assert_str_eq(jstr(json_array_get(blocks, 2), "text"), "Which is warmer?");
    json_t *image = json_array_get(blocks, 3);
    ck_assert_str_eq(jstr(image, "type"), "image");
    ck_assert_str_eq(jstr(json_object_get(image, "source"), "type"), "base64");
    ck_assert_str_eq(jstr(json_object_get(image, "source"), "media_type"), "image/png");
    ck_assert_str_eq(jstr(json_object_get(image, "source"), "data"), "iVBORw0KGgo=");
    /* Tools, tool_choice, limits and sampling. */
    json_t *tool = json_array_get(json_object_get(body, "tools"), 0);
    ck_assert_str_eq(jstr(tool, "name"), "get_weather");
    ck_assert_str_eq(jstr(tool, "description"), "Current weather");
    ck_assert_str_eq(jstr(json_object_get(tool, "input_schema"), "type"), "object");
    ck_assert_ptr_nonnull(json_object_get(
        json_object_get(json_object_get(tool, "input_schema"), "properties"), "city"));
    ck_assert_str_eq(jstr(json_object_get(body, "tool_choice"), "type"), "any");
    ck_assert_int_eq(jint(body, "max_tokens"), 300);
    ck_assert(json_real_value(json_object_get(body, "temperature")) == 1.0); /* 0..1 there */
    ck_assert(json_real_value(json_object_get(body, "top_p")) == 0.9);
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(body, "stop_sequences"), 0)),
                     "END");
    ck_assert_str_eq(jstr(json_object_get(body, "metadata"), "user_id"), "u-42");
    ck_assert_ptr_null(json_object_get(body, "tool_calls"));
    ck_assert_ptr_null(json_object_get(body, "max_completion_tokens"));
    json_decref(body);
    sl_adapter_request_clear(&req);
}
END_TEST

START_TEST(anthropic_request_always_has_max_tokens_and_one_system_string)
{
    sl_adapter_request_t req;
    json_t *body = build(SL_PROVIDER_ANTHROPIC,
                         "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                         "{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":64,"
                         "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}},"
                         "\"parallel_tool_calls\":false,\"tools\":[{\"type\":\"function\","
                         "\"function\":{\"name\":\"f\"}}]}",
                         &req);
    ck_assert_str_eq(jstr(body, "system"), "Be brief.");
    ck_assert_int_eq(jint(body, "max_tokens"), 64);
    ck_assert_int_eq(req.stream, 0);
    ck_assert_ptr_null(json_object_get(body, "stream"));
    json_t *tc = json_object_get(body, "tool_choice");
    ck_assert_str_eq(jstr(tc, "type"), "tool");
    ck_assert_str_eq(jstr(tc, "name"), "f");
    ck_assert(json_is_true(json_object_get(tc, "disable_parallel_tool_use")));
    /* A tool without parameters still gets the input_schema the API requires. */
    json_t *schema =
        json_object_get(json_array_get(json_object_get(body, "tools"), 0), "input_schema");
    ck_assert_str_eq(jstr(schema, "type"), "object");
    json_decref(body);
    sl_adapter_request_clear(&req);

    /* No max_tokens at all: the deployment's ceiling. */
    body = build(SL_PROVIDER_ANTHROPIC, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
                 &req);
    ck_assert_int_eq(jint(body, "max_tokens"), 8192);
    ck_assert_ptr_null(json_object_get(body, "system"));
    json_decref(body);
    sl_adapter_request_clear(&req);
}
END_TEST

START_TEST(requests_the_api_cannot_express_are_refused)
{
    static const struct {
        sl_provider_t api;
        const char *chat;
        const char *why; /* a word of the reason */
    } cases[] = {
        {SL_PROVIDER_ANTHROPIC,
         "{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":"
         "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"not json\"}}]}]}",
         "arguments"},
        {SL_PROVIDER_ANTHROPIC, "{\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}",
         "tool_call_id"},
        {SL_PROVIDER_ANTHROPIC,
         "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\"}]}]}",
         "input_audio"},
        {SL_PROVIDER_GEMINI,
         "{\"messages\":[{\"role\":\"tool\",\"tool_call_id\":\"nobody\",\"content\":\"x\"}]}",
         "unknown"},
        {SL_PROVIDER_GEMINI,
         "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":"
         "{\"url\":\"https://example.com/a.png\"}}]}]}",
         "data: URLs"},
        {SL_PROVIDER_OPENAI, "{\"prompt\":\"no messages\"}", "messages"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_deployment_cfg_t d = deployment(cases[i].api);
        json_t *chat = parse(cases[i].chat);
        sl_adapter_request_t req;
        char err[256] = "";
        ck_assert_int_eq(sl_adapter_request(adapter(cases[i].api), &d, chat, &req, err, sizeof err),
                         SL_EINVAL);
        ck_assert_msg(strstr(err, cases[i].why) != NULL, "case %zu: reason \"%s\"", i, err);
        ck_assert_ptr_null(req.url);
        ck_assert_ptr_null(req.body);
        json_decref(chat);
    }
}
END_TEST

START_TEST(gemini_request_builds_contents_system_instruction_and_generation_config)
{
    sl_adapter_request_t req;
    json_t *body = build(SL_PROVIDER_GEMINI, conversation, &req);
    ck_assert_str_eq(req.url, "https://generativelanguage.googleapis.com/v1beta/models/"
                              "gemini-2.5-flash:streamGenerateContent?alt=sse");
    ck_assert_int_eq(req.stream, 1);
    ck_assert_ptr_null(json_object_get(body, "model"));
    ck_assert_ptr_null(json_object_get(body, "stream"));
    ck_assert_ptr_null(json_object_get(body, "messages"));
    json_t *sys = json_object_get(json_object_get(body, "systemInstruction"), "parts");
    ck_assert_uint_eq(json_array_size(sys), 2);
    ck_assert_str_eq(jstr(json_array_get(sys, 0), "text"), "You are terse.");
    ck_assert_str_eq(jstr(json_array_get(sys, 1), "text"), "Answer in French.");
    json_t *contents = json_object_get(body, "contents");
    ck_assert_uint_eq(json_array_size(contents), 3);
    ck_assert_str_eq(jstr(json_array_get(contents, 0), "role"), "user");
    json_t *model = json_array_get(contents, 1);
    ck_assert_str_eq(jstr(model, "role"), "model");
    json_t *fc =
        json_object_get(json_array_get(json_object_get(model, "parts"), 0), "functionCall");
    ck_assert_str_eq(jstr(fc, "name"), "get_weather");
    ck_assert_str_eq(jstr(json_object_get(fc, "args"), "city"), "Paris");
    /* Function results name the function (found through the call id), in one user turn. */
    json_t *answers = json_array_get(contents, 2);
    ck_assert_str_eq(jstr(answers, "role"), "user");
    json_t *parts = json_object_get(answers, "parts");
    ck_assert_uint_eq(json_array_size(parts), 4);
    json_t *fr0 = json_object_get(json_array_get(parts, 0), "functionResponse");
    ck_assert_str_eq(jstr(fr0, "name"), "get_weather");
    ck_assert_str_eq(jstr(json_object_get(fr0, "response"), "content"), "18C, sunny");
    json_t *fr1 = json_object_get(json_array_get(parts, 1), "functionResponse");
    ck_assert_int_eq(jint(json_object_get(fr1, "response"), "temp_c"), 24); /* JSON: as is */
    ck_assert_str_eq(jstr(json_array_get(parts, 2), "text"), "Which is warmer?");
    json_t *inline_data = json_object_get(json_array_get(parts, 3), "inlineData");
    ck_assert_str_eq(jstr(inline_data, "mimeType"), "image/png");
    ck_assert_str_eq(jstr(inline_data, "data"), "iVBORw0KGgo=");
    json_t *gc = json_object_get(body, "generationConfig");
    ck_assert_int_eq(jint(gc, "maxOutputTokens"), 300);
    ck_assert(json_real_value(json_object_get(gc, "temperature")) == 1.5);
    ck_assert(json_real_value(json_object_get(gc, "topP")) == 0.9);
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(gc, "stopSequences"), 0)),
                     "END");
    json_t *decl = json_array_get(
        json_object_get(json_array_get(json_object_get(body, "tools"), 0), "functionDeclarations"),
        0);
    ck_assert_str_eq(jstr(decl, "name"), "get_weather");
    ck_assert_str_eq(jstr(decl, "description"), "Current weather");
    json_t *params = json_object_get(decl, "parameters");
    ck_assert_str_eq(jstr(params, "type"), "object");
    ck_assert_ptr_null(json_object_get(params, "additionalProperties")); /* Gemini refuses it */
    ck_assert_str_eq(
        jstr(json_object_get(json_object_get(body, "toolConfig"), "functionCallingConfig"), "mode"),
        "ANY");
    json_decref(body);
    sl_adapter_request_clear(&req);
}
END_TEST

START_TEST(gemini_request_maps_response_format_to_a_response_schema)
{
    sl_adapter_request_t req;
    json_t *body = build(
        SL_PROVIDER_GEMINI,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Describe a cat.\"}],\"max_tokens\":50,"
        "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"cat\","
        "\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":{"
        "\"name\":{\"type\":[\"string\",\"null\"]},\"tags\":{\"type\":\"array\",\"items\":{"
        "\"type\":\"string\",\"const\":\"x\"}}},\"required\":[\"name\"],"
        "\"additionalProperties\":false,\"$schema\":\"x\"}}}}",
        &req);
    ck_assert_str_eq(req.url, "https://generativelanguage.googleapis.com/v1beta/models/"
                              "gemini-2.5-flash:generateContent");
    ck_assert_int_eq(req.stream, 0);
    json_t *gc = json_object_get(body, "generationConfig");
    ck_assert_int_eq(jint(gc, "maxOutputTokens"), 50);
    ck_assert_str_eq(jstr(gc, "responseMimeType"), "application/json");
    json_t *expected = parse(
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"nullable\":true},"
        "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"enum\":[\"x\"]}}},"
        "\"required\":[\"name\"]}");
    ck_assert_msg(json_equal(json_object_get(gc, "responseSchema"), expected), "got %s",
                  json_dumps(json_object_get(gc, "responseSchema"), JSON_COMPACT));
    json_decref(expected);
    ck_assert_ptr_null(json_object_get(body, "systemInstruction"));
    json_decref(body);
    sl_adapter_request_clear(&req);

    /* A model named as the API's resource ("models/...") is not doubled in the URL. */
    sl_deployment_cfg_t d = deployment(SL_PROVIDER_GEMINI);
    d.model = "models/gemini-2.5-pro";
    json_t *chat = parse("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
    char err[128];
    ck_assert_int_eq(
        sl_adapter_request(adapter(SL_PROVIDER_GEMINI), &d, chat, &req, err, sizeof err), SL_OK);
    ck_assert_str_eq(req.url, "https://generativelanguage.googleapis.com/v1beta/models/"
                              "gemini-2.5-pro:generateContent");
    ck_assert_ptr_null(strstr(req.body, "generationConfig")); /* nothing to configure */
    json_decref(chat);
    sl_adapter_request_clear(&req);
}
END_TEST

START_TEST(credential_goes_only_in_the_provider_header)
{
    static const struct {
        sl_provider_t api;
        const char *line;
    } cases[] = {
        {SL_PROVIDER_OPENAI, "Authorization: Bearer sk-secret-1"},
        {SL_PROVIDER_AZURE, "api-key: sk-secret-1"},
        {SL_PROVIDER_ANTHROPIC, "x-api-key: sk-secret-1"},
        {SL_PROVIDER_GEMINI, "x-goog-api-key: sk-secret-1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const sl_adapter_t *ad = adapter(cases[i].api);
        char *h = sl_adapter_auth_header(ad, "sk-secret-1");
        ck_assert_str_eq(h, cases[i].line);
        free(h);
        /* A key that could smuggle in another header is refused. */
        ck_assert_ptr_null(sl_adapter_auth_header(ad, "sk-1\r\nX-Evil: 1"));
        ck_assert_str_eq(sl_adapter_name(ad), sl_provider_name(cases[i].api));
    }
    ck_assert_ptr_null(sl_adapter_for(SL_PROVIDER_COUNT));
}
END_TEST

/* ---- Responses ---------------------------------------------------------------------------- */

typedef struct {
    const char *fixture;
    sl_provider_t api;
    const char *outcome;
    int64_t retry_after_ms;
    const char *type; /* the error object's; NULL for successes */
    const char *code; /* NULL: JSON null */
} case_t;

static const case_t cases[] = {
    {"openai/200_chat_completion.http", SL_PROVIDER_OPENAI, "ok", -1, NULL, NULL},
    {"openai/200_tool_call.http", SL_PROVIDER_OPENAI, "ok", -1, NULL, NULL},
    {"openai/429_rate_limit_retry_after.http", SL_PROVIDER_OPENAI, "rate_limited", 644, "tokens",
     "rate_limit_exceeded"},
    {"openai/429_rate_limit_no_hint.http", SL_PROVIDER_OPENAI, "rate_limited", -1, "tokens",
     "rate_limit_exceeded"},
    {"openai/429_request_too_large.http", SL_PROVIDER_OPENAI, "client_error", -1, "tokens",
     "rate_limit_exceeded"},
    {"openai/429_insufficient_quota.http", SL_PROVIDER_OPENAI, "quota_exhausted", -1,
     "insufficient_quota", "insufficient_quota"},
    {"openai/429_project_spend_limit.http", SL_PROVIDER_OPENAI, "quota_exhausted", -1,
     "insufficient_quota", "project_spend_limit_exceeded"},
    {"openai/503_overloaded.http", SL_PROVIDER_OPENAI, "overloaded", -1, "server_error", NULL},
    {"openai/500_server_error.http", SL_PROVIDER_OPENAI, "server_error", -1, "server_error", NULL},
    {"openai/400_invalid_request.http", SL_PROVIDER_OPENAI, "client_error", -1,
     "invalid_request_error", "invalid_value"},
    {"openai/401_invalid_api_key.http", SL_PROVIDER_OPENAI, "auth_error", -1,
     "invalid_request_error", "invalid_api_key"},
    {"azure/200_chat_completion.http", SL_PROVIDER_AZURE, "ok", -1, NULL, NULL},
    {"azure/429_rate_limit.http", SL_PROVIDER_AZURE, "rate_limited", 2000, "rate_limited", "429"},
    {"azure/429_no_hint.http", SL_PROVIDER_AZURE, "rate_limited", -1, "rate_limited", "429"},
    {"azure/401_access_denied.http", SL_PROVIDER_AZURE, "auth_error", -1, "auth_error", "401"},
    {"azure/400_content_filter.http", SL_PROVIDER_AZURE, "client_error", -1, "client_error",
     "content_filter"},
    {"azure/503_unavailable.http", SL_PROVIDER_AZURE, "overloaded", -1, "overloaded",
     "ServiceUnavailable"},
    {"anthropic/200_message.http", SL_PROVIDER_ANTHROPIC, "ok", -1, NULL, NULL},
    {"anthropic/200_tool_use.http", SL_PROVIDER_ANTHROPIC, "ok", -1, NULL, NULL},
    {"anthropic/429_rate_limit.http", SL_PROVIDER_ANTHROPIC, "rate_limited", 17000,
     "rate_limit_error", NULL},
    {"anthropic/429_acceleration_no_retry_after.http", SL_PROVIDER_ANTHROPIC, "rate_limited", -1,
     "rate_limit_error", NULL},
    {"anthropic/429_spend_limit.http", SL_PROVIDER_ANTHROPIC, "quota_exhausted", -1,
     "rate_limit_error", "enforced_spend_limit_reached"},
    {"anthropic/529_overloaded.http", SL_PROVIDER_ANTHROPIC, "overloaded", -1, "overloaded_error",
     NULL},
    {"anthropic/500_api_error.http", SL_PROVIDER_ANTHROPIC, "server_error", -1, "api_error", NULL},
    {"anthropic/400_invalid_request.http", SL_PROVIDER_ANTHROPIC, "client_error", -1,
     "invalid_request_error", NULL},
    {"anthropic/413_request_too_large.http", SL_PROVIDER_ANTHROPIC, "client_error", -1,
     "request_too_large", NULL},
    {"anthropic/401_authentication_error.http", SL_PROVIDER_ANTHROPIC, "auth_error", -1,
     "authentication_error", NULL},
    {"gemini/200_generate_content.http", SL_PROVIDER_GEMINI, "ok", -1, NULL, NULL},
    {"gemini/200_function_call.http", SL_PROVIDER_GEMINI, "ok", -1, NULL, NULL},
    {"gemini/429_per_minute.http", SL_PROVIDER_GEMINI, "rate_limited", 23000, "RESOURCE_EXHAUSTED",
     "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"},
    {"gemini/429_fractional_retry.http", SL_PROVIDER_GEMINI, "rate_limited", 1500,
     "RESOURCE_EXHAUSTED", "GenerateContentInputTokensPerModelPerMinute-FreeTier"},
    {"gemini/429_no_retry_info.http", SL_PROVIDER_GEMINI, "rate_limited", -1, "RESOURCE_EXHAUSTED",
     NULL},
    {"gemini/429_per_day.http", SL_PROVIDER_GEMINI, "quota_exhausted", 41000, "RESOURCE_EXHAUSTED",
     "GenerateRequestsPerDayPerProjectPerModel-FreeTier"},
    {"gemini/503_unavailable.http", SL_PROVIDER_GEMINI, "overloaded", -1, "UNAVAILABLE", NULL},
    {"gemini/500_internal.http", SL_PROVIDER_GEMINI, "server_error", -1, "INTERNAL", NULL},
    {"gemini/400_invalid_argument.http", SL_PROVIDER_GEMINI, "client_error", -1, "INVALID_ARGUMENT",
     NULL},
    {"gemini/400_api_key_invalid.http", SL_PROVIDER_GEMINI, "auth_error", -1, "INVALID_ARGUMENT",
     "API_KEY_INVALID"},
    {"gemini/403_permission_denied.http", SL_PROVIDER_GEMINI, "auth_error", -1, "PERMISSION_DENIED",
     NULL},
};

START_TEST(recorded_responses_are_classified_with_retry_hints_and_errors)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const case_t *k = &cases[i];
        const sl_adapter_t *ad = adapter(k->api);
        recorded_t r = replay(k->fixture);
        ck_assert_msg(r.body != NULL, "%s: body is not JSON", k->fixture);
        const char *got = classify(ad, 0, r.status, r.body, &r.rl);
        ck_assert_msg(strcmp(got, k->outcome) == 0, "%s classified %s, expected %s", k->fixture,
                      got, k->outcome);
        int64_t retry = sl_adapter_retry_after_ms(ad, &r.rl, r.body);
        ck_assert_msg(retry == k->retry_after_ms, "%s: retry_after_ms %lld, expected %lld",
                      k->fixture, (long long)retry, (long long)k->retry_after_ms);
        json_t *err = sl_adapter_error(ad, r.body, got, "detail");
        if (k->type != NULL) {
            ck_assert_msg(strcmp(jstr(err, "type"), k->type) == 0, "%s: error type %s", k->fixture,
                          jstr(err, "type"));
            ck_assert_msg(strlen(jstr(err, "message")) > 5, "%s: no provider message", k->fixture);
            json_t *code = json_object_get(err, "code");
            if (k->code == NULL)
                ck_assert_msg(json_is_null(code), "%s: code should be null", k->fixture);
            else
                ck_assert_msg(json_is_string(code) && strcmp(json_string_value(code), k->code) == 0,
                              "%s: code %s", k->fixture, json_string_value(code));
            /* Failures report no usage. */
            ck_assert_ptr_null(sl_adapter_usage(ad, r.body));
            ck_assert_ptr_null(sl_adapter_response(ad, r.body, "m"));
        } else {
            json_t *resp = sl_adapter_response(ad, r.body, "m");
            ck_assert_msg(resp != NULL, "%s: no canonical response", k->fixture);
            ck_assert_str_eq(jstr(resp, "object"), "chat.completion");
            json_decref(resp);
        }
        json_decref(err);
        json_decref(r.body);
    }
}
END_TEST

START_TEST(transport_failures_and_should_retry_win_over_status)
{
    for (int api = 0; api < SL_PROVIDER_COUNT; api++) {
        const sl_adapter_t *ad = adapter((sl_provider_t)api);
        ck_assert_str_eq(classify(ad, 2, 0, NULL, NULL), "timeout");
        ck_assert_str_eq(classify(ad, 1, 200, NULL, NULL), "transport");
        ck_assert_str_eq(classify(ad, 0, 200, NULL, NULL), "bad_response");
        ck_assert_str_eq(classify(ad, 0, 404, NULL, NULL), "client_error");
        ck_assert_str_eq(classify(ad, 0, 401, NULL, NULL), "auth_error");
        ck_assert_str_eq(classify(ad, 0, 503, NULL, NULL), "overloaded");
        ck_assert_str_eq(classify(ad, 0, 502, NULL, NULL), "server_error");
        ck_assert_str_eq(classify(ad, 0, 429, NULL, NULL), "rate_limited");
        sl_ratelimit_t rl;
        sl_ratelimit_init(&rl);
        rl.should_retry = 0;
        ck_assert_str_eq(classify(ad, 0, 429, NULL, &rl), "client_error");
        ck_assert_str_eq(classify(ad, 0, 401, NULL, &rl), "auth_error");
        /* With no body and no header, nobody said when to retry. */
        ck_assert_int_eq(sl_adapter_retry_after_ms(ad, NULL, NULL), -1);
        /* The header wins over a body hint. */
        rl.retry_after_ms = 5000;
        recorded_t r = replay("gemini/429_per_minute.http");
        ck_assert_int_eq(sl_adapter_retry_after_ms(ad, &rl, r.body), 5000);
        json_decref(r.body);
        /* Without a provider error object the error says what happened. */
        json_t *err = sl_adapter_error(ad, NULL, "timeout", "the provider call timed out");
        ck_assert_str_eq(jstr(err, "type"), "timeout");
        ck_assert_str_eq(jstr(err, "message"), "the provider call timed out");
        ck_assert(json_is_null(json_object_get(err, "code")));
        json_decref(err);
    }
    /* Anthropic's 529 is overload, with or without its body. */
    ck_assert_str_eq(classify(adapter(SL_PROVIDER_ANTHROPIC), 0, 529, NULL, NULL), "overloaded");
}
END_TEST

START_TEST(protobuf_durations_are_parsed)
{
    ck_assert_int_eq(sl_timefmt_proto_duration_ms("23s"), 23000);
    ck_assert_int_eq(sl_timefmt_proto_duration_ms("1.5s"), 1500);
    ck_assert_int_eq(sl_timefmt_proto_duration_ms("0.250s"), 250);
    ck_assert_int_eq(sl_timefmt_proto_duration_ms("0s"), 0);
    ck_assert_int_eq(sl_timefmt_proto_duration_ms("0.0001s"), 1); /* a lower bound: rounded up */
    ck_assert_int_eq(sl_timefmt_proto_duration_ms("0.0015s"), 2);
    ck_assert_int_eq(sl_timefmt_proto_duration_ms("s"), -1);
    ck_assert_int_eq(sl_timefmt_proto_duration_ms("23"), -1);
    ck_assert_int_eq(sl_timefmt_proto_duration_ms("-1s"), -1);
    ck_assert_int_eq(sl_timefmt_proto_duration_ms("1m"), -1);
    ck_assert_int_eq(sl_timefmt_proto_duration_ms("1.5ms"), -1);
    ck_assert_int_eq(sl_timefmt_proto_duration_ms(""), -1);
    ck_assert_int_eq(sl_timefmt_proto_duration_ms(NULL), -1);
}
END_TEST

START_TEST(protobuf_durations_out_of_range_are_rejected)
{
    ck_assert_int_eq(sl_timefmt_proto_duration_ms("1e30s"), -1);
    ck_assert_int_eq(sl_timefmt_proto_duration_ms("nans"), -1);
    ck_assert_int_eq(sl_timefmt_proto_duration_ms("infs"), -1);
    ck_assert_int_eq(sl_timefmt_proto_duration_ms("99999999999999999999s"), -1);
    ck_assert_int_eq(sl_timefmt_proto_duration_ms("1000000000s"), 1000000000000LL);
}
END_TEST

/* The usage event the dispatcher would publish for a response with these headers and body, read
 * back the way the scheduler reads it: what the scheduler would pause for. */
static int64_t hint_seen_by_scheduler(sl_provider_t api, const char *header_line,
                                      const char *body_text)
{
    const sl_adapter_t *ad = adapter(api);
    sl_ratelimit_t rl;
    sl_ratelimit_init(&rl);
    if (header_line != NULL)
        sl_ratelimit_header(&rl, header_line, strlen(header_line));
    json_t *body = body_text != NULL ? json_loads(body_text, 0, NULL) : NULL;
    sl_msg_usage_t u = {.job_id = "j",
                        .reservation_id = "r",
                        .deployment = "dep",
                        .outcome = SL_OUTCOME_RATE_LIMITED,
                        .http_status = 429,
                        .retry_after_ms = sl_adapter_retry_after_ms(ad, &rl, body)};
    json_t *doc = sl_msg_usage_json(&u);
    ck_assert_ptr_nonnull(doc);
    sl_msg_usage_t back;
    ck_assert_int_eq(sl_msg_usage_read(doc, &back, NULL), SL_OK);
    int64_t ms = back.retry_after_ms;
    json_decref(doc);
    json_decref(body);
    return ms;
}

/* Azure can answer a 429 with Retry-After: 86400; a day's pause for one answer would take the
 * deployment out of its pool. Every hint is capped at SL_RETRY_AFTER_MAX_MS (1 h) where the
 * scheduler reads it. */
START_TEST(retry_hints_are_capped_at_an_hour)
{
    ck_assert_int_eq(SL_RETRY_AFTER_MAX_MS, 3600000);
    ck_assert_int_eq(hint_seen_by_scheduler(SL_PROVIDER_AZURE, "retry-after: 86400\r\n", NULL),
                     SL_RETRY_AFTER_MAX_MS);
    ck_assert_int_eq(
        hint_seen_by_scheduler(SL_PROVIDER_AZURE, "retry-after-ms: 86400000\r\n", NULL),
        SL_RETRY_AFTER_MAX_MS);
    ck_assert_int_eq(hint_seen_by_scheduler(SL_PROVIDER_OPENAI, "retry-after: 3600\r\n", NULL),
                     3600000);
    ck_assert_int_eq(hint_seen_by_scheduler(SL_PROVIDER_OPENAI, "retry-after: 20\r\n", NULL),
                     20000);
    ck_assert_int_eq(
        hint_seen_by_scheduler(
            SL_PROVIDER_GEMINI, NULL,
            "{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":"
            "\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"86400s\"}]}}"),
        SL_RETRY_AFTER_MAX_MS);
    /* No hint stays no hint. */
    ck_assert_int_eq(hint_seen_by_scheduler(SL_PROVIDER_OPENAI, "retry-after: 1e30\r\n", NULL), -1);
}
END_TEST

START_TEST(anthropic_and_gemini_headers_fill_the_ratelimit_object)
{
    recorded_t r = replay("anthropic/200_message.http");
    json_t *rl = json_object();
    sl_ratelimit_to_json(&r.rl, rl);
    ck_assert_int_eq(jint(rl, "limit_input_tokens"), 400000);
    ck_assert_int_eq(jint(rl, "remaining_input_tokens"), 398000);
    ck_assert_int_eq(jint(rl, "reset_input_tokens_ms"), 1000);
    ck_assert_int_eq(jint(rl, "limit_output_tokens"), 80000);
    ck_assert_int_eq(jint(rl, "remaining_requests"), 3999);
    json_decref(rl);
    json_decref(r.body);
    /* Gemini sends no rate-limit headers at all. */
    r = replay("gemini/200_generate_content.http");
    rl = json_object();
    sl_ratelimit_to_json(&r.rl, rl);
    ck_assert_uint_eq(json_object_size(rl), 0);
    ck_assert_int_eq(r.rl.retry_after_ms, -1);
    json_decref(rl);
    json_decref(r.body);
}
END_TEST

START_TEST(openai_and_azure_usage_include_cached_and_reasoning)
{
    recorded_t r = replay("openai/200_chat_completion.http");
    json_t *u = sl_adapter_usage(adapter(SL_PROVIDER_OPENAI), r.body);
    expect_usage(u, 1234, 56, 1024, 12, 1290);
    json_decref(u);
    json_t *resp = sl_adapter_response(adapter(SL_PROVIDER_OPENAI), r.body, "m");
    ck_assert(json_equal(resp, r.body)); /* already canonical */
    json_decref(resp);
    json_decref(r.body);
    r = replay("azure/200_chat_completion.http");
    u = sl_adapter_usage(adapter(SL_PROVIDER_AZURE), r.body);
    expect_usage(u, 880, 11, 768, 0, 891);
    json_decref(u);
    json_decref(r.body);
}
END_TEST

START_TEST(anthropic_message_becomes_a_chat_completion)
{
    const sl_adapter_t *ad = adapter(SL_PROVIDER_ANTHROPIC);
    recorded_t r = replay("anthropic/200_message.http");
    /* Input counts every input token: 21 fresh + 188 written to the cache + 1024 read from it. */
    json_t *u = sl_adapter_usage(ad, r.body);
    expect_usage(u, 1233, 14, 1024, 0, 1247);
    json_decref(u);
    json_t *c = sl_adapter_response(ad, r.body, "fallback-model");
    ck_assert_str_eq(jstr(c, "id"), "msg_01XFDUDYJgAACzvnptvVoYEL");
    ck_assert_str_eq(jstr(c, "object"), "chat.completion");
    ck_assert_str_eq(jstr(c, "model"), "claude-sonnet-4-5-20250929");
    ck_assert_int_gt(jint(c, "created"), 0);
    json_t *choice = json_array_get(json_object_get(c, "choices"), 0);
    ck_assert_int_eq(jint(choice, "index"), 0);
    ck_assert_str_eq(jstr(choice, "finish_reason"), "stop");
    json_t *msg = json_object_get(choice, "message");
    ck_assert_str_eq(jstr(msg, "role"), "assistant");
    ck_assert_str_eq(jstr(msg, "content"), "The Danube, the Rhine and the Loire.");
    ck_assert_ptr_null(json_object_get(msg, "tool_calls"));
    json_t *cu = json_object_get(c, "usage");
    ck_assert_int_eq(jint(cu, "prompt_tokens"), 1233);
    ck_assert_int_eq(jint(cu, "completion_tokens"), 14);
    ck_assert_int_eq(jint(cu, "total_tokens"), 1247);
    ck_assert_int_eq(jint(json_object_get(cu, "prompt_tokens_details"), "cached_tokens"), 1024);
    json_decref(c);
    json_decref(r.body);

    r = replay("anthropic/200_tool_use.http");
    c = sl_adapter_response(ad, r.body, NULL);
    choice = json_array_get(json_object_get(c, "choices"), 0);
    ck_assert_str_eq(jstr(choice, "finish_reason"), "tool_calls");
    msg = json_object_get(choice, "message");
    ck_assert_str_eq(jstr(msg, "content"), "I'll check the weather in Paris.");
    json_t *tc = json_array_get(json_object_get(msg, "tool_calls"), 0);
    ck_assert_str_eq(jstr(tc, "id"), "toolu_01A09q90qw90lq917835lq9");
    ck_assert_str_eq(jstr(tc, "type"), "function");
    ck_assert_str_eq(jstr(json_object_get(tc, "function"), "name"), "get_weather");
    json_t *args = parse(jstr(json_object_get(tc, "function"), "arguments"));
    ck_assert_str_eq(jstr(args, "city"), "Paris");
    ck_assert_str_eq(jstr(args, "unit"), "celsius");
    json_decref(args);
    json_decref(c);
    json_decref(r.body);
}
END_TEST

START_TEST(gemini_response_becomes_a_chat_completion)
{
    const sl_adapter_t *ad = adapter(SL_PROVIDER_GEMINI);
    recorded_t r = replay("gemini/200_generate_content.http");
    /* Output includes the thinking tokens; input (promptTokenCount) includes the cached ones. */
    json_t *u = sl_adapter_usage(ad, r.body);
    expect_usage(u, 1520, 288, 1024, 240, 1808);
    json_decref(u);
    json_t *c = sl_adapter_response(ad, r.body, "gemini-fallback");
    ck_assert_str_eq(jstr(c, "id"), "mKcBaPnDLuOFz7IPq8PPwQc");
    ck_assert_str_eq(jstr(c, "model"), "gemini-2.5-flash");
    json_t *choice = json_array_get(json_object_get(c, "choices"), 0);
    ck_assert_str_eq(jstr(choice, "finish_reason"), "stop");
    /* Thought summaries are not the answer. */
    ck_assert_str_eq(jstr(json_object_get(choice, "message"), "content"),
                     "The Danube, the Rhine and the Loire.");
    json_t *cu = json_object_get(c, "usage");
    ck_assert_int_eq(jint(cu, "completion_tokens"), 288);
    ck_assert_int_eq(jint(json_object_get(cu, "completion_tokens_details"), "reasoning_tokens"),
                     240);
    json_decref(c);
    json_decref(r.body);

    r = replay("gemini/200_function_call.http");
    c = sl_adapter_response(ad, r.body, NULL);
    choice = json_array_get(json_object_get(c, "choices"), 0);
    /* Gemini says STOP after a function call; the canonical answer says tool_calls. */
    ck_assert_str_eq(jstr(choice, "finish_reason"), "tool_calls");
    json_t *msg = json_object_get(choice, "message");
    ck_assert(json_is_null(json_object_get(msg, "content")));
    json_t *tc = json_array_get(json_object_get(msg, "tool_calls"), 0);
    ck_assert_str_eq(jstr(tc, "id"), "call_0");
    ck_assert_str_eq(jstr(json_object_get(tc, "function"), "name"), "get_weather");
    json_t *args = parse(jstr(json_object_get(tc, "function"), "arguments"));
    ck_assert_str_eq(jstr(args, "city"), "Paris");
    json_decref(args);
    u = sl_adapter_usage(ad, r.body);
    expect_usage(u, 97, 21, 0, 0, 118);
    json_decref(u);
    json_decref(c);
    json_decref(r.body);
}
END_TEST

/* ---- SSE ---------------------------------------------------------------------------------- */

typedef struct {
    char names[16][32];
    char data[16][64];
    int n;
    sl_err_t fail_with; /* returned from the callback */
} events_t;

static sl_err_t collect_event(void *arg, const char *event, const char *data, size_t len)
{
    events_t *ev = arg;
    ck_assert_uint_eq(strlen(data), len);
    ck_assert_int_lt(ev->n, 16);
    snprintf(ev->names[ev->n], sizeof ev->names[0], "%s", event);
    snprintf(ev->data[ev->n], sizeof ev->data[0], "%s", data);
    ev->n++;
    return ev->fail_with;
}

static const char sse_edge_cases[] = "\xEF\xBB\xBF: a comment right after the BOM\r\n"
                                     "event: first\r\n"
                                     "data: a\r\n"
                                     "data:b\r\n"
                                     "\r\n"
                                     "id: 7\n"
                                     "retry: 100\n"
                                     "data:  two spaces\n"
                                     "\n"
                                     ":only a comment\n"
                                     "\n"
                                     "event: named-but-empty\n"
                                     "\n"
                                     "data\n"
                                     "\n"
                                     "data: cr\r\r"
                                     "data: never terminated";

START_TEST(sse_events_do_not_depend_on_how_the_bytes_were_cut)
{
    size_t len = sizeof sse_edge_cases - 1;
    const size_t pieces[] = {1, 2, 3, 7, 64, len};
    for (size_t p = 0; p < sizeof pieces / sizeof pieces[0]; p++) {
        sl_sse_t *sse = NULL;
        ck_assert_int_eq(sl_sse_new(1024, &sse), SL_OK);
        events_t ev = {.n = 0, .fail_with = SL_OK};
        for (size_t at = 0; at < len; at += pieces[p]) {
            size_t n = len - at < pieces[p] ? len - at : pieces[p];
            ck_assert_int_eq(sl_sse_feed(sse, sse_edge_cases + at, n, collect_event, &ev), SL_OK);
        }
        ck_assert_msg(ev.n == 4, "pieces of %zu: %d events", pieces[p], ev.n);
        ck_assert_str_eq(ev.names[0], "first");
        ck_assert_str_eq(ev.data[0], "a\nb"); /* data lines joined; one space stripped */
        ck_assert_str_eq(ev.names[1], "message");
        ck_assert_str_eq(ev.data[1], " two spaces");
        ck_assert_str_eq(ev.names[2], "message"); /* the unused name did not stick */
        ck_assert_str_eq(ev.data[2], "");
        ck_assert_str_eq(ev.data[3], "cr");
        sl_sse_free(sse);
    }
}
END_TEST

START_TEST(sse_memory_is_bounded)
{
    sl_sse_t *sse = NULL;
    events_t ev = {.n = 0, .fail_with = SL_OK};
    /* A line longer than the bound fails before its end arrives. */
    ck_assert_int_eq(sl_sse_new(16, &sse), SL_OK);
    ck_assert_int_eq(sl_sse_feed(sse, "data: 0123456789", 16, collect_event, &ev), SL_OK);
    ck_assert_int_eq(sl_sse_feed(sse, "X", 1, collect_event, &ev), SL_ETOOBIG);
    sl_sse_free(sse);
    /* So does an event whose data lines add up past it. */
    ck_assert_int_eq(sl_sse_new(16, &sse), SL_OK);
    const char *two = "data: 0123456789\ndata: 0123456789\n\n";
    ck_assert_int_eq(sl_sse_feed(sse, two, strlen(two), collect_event, &ev), SL_ETOOBIG);
    ck_assert_int_eq(ev.n, 0);
    sl_sse_free(sse);
    /* The callback can stop the parser. */
    ck_assert_int_eq(sl_sse_new(64, &sse), SL_OK);
    ev.fail_with = SL_EPARSE;
    ck_assert_int_eq(sl_sse_feed(sse, "data: x\n\ndata: y\n\n", 18, collect_event, &ev), SL_EPARSE);
    ck_assert_int_eq(ev.n, 1);
    sl_sse_free(sse);
    ck_assert_int_eq(sl_sse_new(0, &sse), SL_EINVAL);
    ck_assert_ptr_null(sse);
}
END_TEST

/* ---- Streams ------------------------------------------------------------------------------ */

#define MAX_CHUNKS 4096

typedef struct {
    json_t *chunk[MAX_CHUNKS];
    int n;
} chunks_t;

static void collect_chunk(const json_t *chunk, void *arg)
{
    chunks_t *cs = arg;
    char why[512] = "";
    ck_assert_msg(sl_schema_validate(stream_schema, chunk, why, sizeof why) == SL_OK,
                  "chunk does not match schema/stream.json: %s; %s", why,
                  json_dumps(chunk, JSON_COMPACT));
    ck_assert_int_lt(cs->n, MAX_CHUNKS);
    cs->chunk[cs->n++] = json_deep_copy(chunk);
}

static void chunks_clear(chunks_t *cs)
{
    for (int i = 0; i < cs->n; i++)
        json_decref(cs->chunk[i]);
    cs->n = 0;
}

static sl_stream_t *stream_new(sl_provider_t api, chunks_t *cs)
{
    sl_stream_ids_t ids = {"job-7", 2, "res-7-2", "dep-model", 40};
    sl_stream_t *st = NULL;
    ck_assert_int_eq(sl_stream_new(adapter(api), &ids, collect_chunk, cs, &st), SL_OK);
    return st;
}

/* Feeds text[0..len) in pieces of piece bytes; returns the first error. */
static sl_err_t feed(sl_stream_t *st, const char *text, size_t len, size_t piece)
{
    for (size_t at = 0; at < len; at += piece) {
        size_t n = len - at < piece ? len - at : piece;
        sl_err_t rc = sl_stream_feed(st, text + at, n);
        if (rc != SL_OK)
            return rc;
    }
    return SL_OK;
}

/* The chunks as text without their clock, for comparing runs. */
static char *chunks_text(const chunks_t *cs)
{
    json_t *arr = json_array();
    for (int i = 0; i < cs->n; i++) {
        json_t *c = json_deep_copy(cs->chunk[i]);
        json_object_del(c, "ts_ms");
        json_array_append_new(arr, c);
    }
    char *text = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    return text;
}

/* Checks what every stream's chunks share: identity, seq 0..n-1, one last chunk with done. */
static void expect_chunk_sequence(const chunks_t *cs)
{
    ck_assert_int_gt(cs->n, 0);
    for (int i = 0; i < cs->n; i++) {
        const json_t *c = cs->chunk[i];
        ck_assert_str_eq(jstr(c, "job_id"), "job-7");
        ck_assert_int_eq(jint(c, "attempt"), 2);
        ck_assert_str_eq(jstr(c, "reservation_id"), "res-7-2");
        ck_assert_int_eq(jint(c, "seq"), i);
        int last = i == cs->n - 1;
        ck_assert_int_eq(json_is_true(json_object_get(c, "done")), last);
        ck_assert_int_eq(json_is_object(json_object_get(c, "usage")), last);
    }
}

static char *joined_deltas(const chunks_t *cs)
{
    size_t len = 1;
    for (int i = 0; i < cs->n; i++)
        len += strlen(jstr(cs->chunk[i], "delta"));
    char *out = calloc(1, len);
    for (int i = 0; i < cs->n; i++)
        strcat(out, jstr(cs->chunk[i], "delta"));
    return out;
}

/* The arguments of tool call index joined over every chunk's deltas, as a client reassembling
 * the stream does. Caller frees. */
static char *joined_arguments(const chunks_t *cs, int index)
{
    size_t len = 1;
    char *out = calloc(1, len);
    for (int i = 0; i < cs->n; i++) {
        size_t k;
        const json_t *d;
        json_array_foreach(json_object_get(cs->chunk[i], "tool_calls"), k, d)
        {
            const char *args =
                json_string_value(json_object_get(json_object_get(d, "function"), "arguments"));
            if (jint(d, "index") != index || args == NULL)
                continue;
            len += strlen(args);
            out = realloc(out, len);
            strcat(out, args);
        }
    }
    return out;
}

typedef struct {
    sl_provider_t api;
    const char *fixture;
    const char *text; /* NULL: no content (tool calls only) */
    const char *finish;
    int nchunks;
    int64_t usage[5]; /* input, output, cached, reasoning, total */
    const char *tool; /* the first tool call's name, or NULL */
    const char *city; /* its "city" argument */
} stream_case_t;

static const stream_case_t stream_cases[] = {
    {SL_PROVIDER_OPENAI,
     "openai/stream.sse",
     "The Danube, the Rhine and the Loire.",
     "stop",
     9,
     {19, 10, 0, 0, 29},
     NULL,
     NULL},
    {SL_PROVIDER_OPENAI,
     "openai/stream_tool_call.sse",
     NULL,
     "tool_calls",
     6,
     {82, 18, 64, 0, 100},
     "get_weather",
     "Paris"},
    {SL_PROVIDER_AZURE,
     "azure/stream.sse",
     "Bonjour !",
     "stop",
     5,
     {880, 3, 768, 0, 883},
     NULL,
     NULL},
    {SL_PROVIDER_ANTHROPIC,
     "anthropic/stream.sse",
     "The Danube, the Rhine and the Loire.",
     "stop",
     6,
     {2125, 15, 2000, 0, 2140},
     NULL,
     NULL},
    {SL_PROVIDER_ANTHROPIC,
     "anthropic/stream_tool_use.sse",
     "I'll check the weather in Paris.",
     "tool_calls",
     7,
     {472, 67, 0, 0, 539},
     "get_weather",
     "Paris"},
    {SL_PROVIDER_GEMINI,
     "gemini/stream.sse",
     "The Danube, the Rhine and the Loire.",
     "stop",
     4,
     {12, 43, 8, 32, 55},
     NULL,
     NULL},
    {SL_PROVIDER_GEMINI,
     "gemini/stream_function_call.sse",
     NULL,
     "tool_calls",
     2,
     {97, 21, 0, 0, 118},
     "get_weather",
     "Paris"},
};

START_TEST(streams_translate_to_the_same_chunks_however_the_bytes_arrive)
{
    const stream_case_t *k = &stream_cases[_i];
    size_t len = 0;
    char *text = read_fixture(k->fixture, &len);
    char *reference = NULL;
    const size_t pieces[] = {len, 7, 1};
    for (size_t p = 0; p < sizeof pieces / sizeof pieces[0]; p++) {
        chunks_t cs = {.n = 0};
        sl_stream_t *st = stream_new(k->api, &cs);
        ck_assert_int_eq(feed(st, text, len, pieces[p]), SL_OK);
        ck_assert_str_eq(stream_end(st, 0), "ok");
        ck_assert_str_eq(stream_end(st, 1), "ok"); /* ending twice changes nothing */
        ck_assert_msg(cs.n == k->nchunks, "%s in pieces of %zu: %d chunks, expected %d", k->fixture,
                      pieces[p], cs.n, k->nchunks);
        expect_chunk_sequence(&cs);
        char *got = chunks_text(&cs);
        if (reference == NULL)
            reference = got;
        else {
            ck_assert_str_eq(got, reference);
            free(got);
        }
        /* The first chunk goes out for the provider's first event. */
        const json_t *last = cs.chunk[cs.n - 1];
        ck_assert_str_eq(jstr(last, "finish_reason"), k->finish);
        const json_t *lu = json_object_get(last, "usage");
        expect_usage(lu, k->usage[0], k->usage[1], k->usage[2], k->usage[3], k->usage[4]);
        char *deltas = joined_deltas(&cs);
        ck_assert_str_eq(deltas, k->text != NULL ? k->text : "");
        free(deltas);
        /* The assembled answer is the same one a non-streamed call gets. */
        json_t *resp = sl_stream_response(st);
        ck_assert_str_eq(jstr(resp, "object"), "chat.completion");
        json_t *choice = json_array_get(json_object_get(resp, "choices"), 0);
        ck_assert_str_eq(jstr(choice, "finish_reason"), k->finish);
        json_t *msg = json_object_get(choice, "message");
        if (k->text != NULL)
            ck_assert_str_eq(jstr(msg, "content"), k->text);
        else
            ck_assert(json_is_null(json_object_get(msg, "content")));
        if (k->tool != NULL) {
            json_t *tc = json_array_get(json_object_get(msg, "tool_calls"), 0);
            ck_assert_str_eq(jstr(json_object_get(tc, "function"), "name"), k->tool);
            json_t *args = parse(jstr(json_object_get(tc, "function"), "arguments"));
            ck_assert_str_eq(jstr(args, "city"), k->city);
            json_decref(args);
            ck_assert(strlen(jstr(tc, "id")) > 0);
            /* Some chunk opened the call with its id and name. */
            int opened = 0;
            for (int i = 0; i < cs.n; i++) {
                json_t *d = json_array_get(json_object_get(cs.chunk[i], "tool_calls"), 0);
                if (d != NULL && json_object_get(d, "id") != NULL)
                    opened += strcmp(jstr(json_object_get(d, "function"), "name"), k->tool) == 0;
            }
            ck_assert_int_eq(opened, 1);
        } else {
            ck_assert_ptr_null(json_object_get(msg, "tool_calls"));
        }
        json_t *cu = json_object_get(resp, "usage");
        ck_assert_int_eq(jint(cu, "prompt_tokens"), k->usage[0]);
        ck_assert_int_eq(jint(cu, "completion_tokens"), k->usage[1]);
        json_t *u = sl_stream_usage(st);
        ck_assert(json_equal(u, lu));
        json_decref(u);
        json_decref(resp);
        ck_assert_ptr_null(sl_stream_error(st));
        ck_assert_int_eq(sl_stream_chunks(st), cs.n);
        sl_stream_free(st);
        chunks_clear(&cs);
    }
    free(reference);
    free(text);
}
END_TEST

START_TEST(streamed_tool_call_without_arguments_has_an_empty_object)
{
    /* Anthropic streams a call that takes no arguments as one input_json_delta whose
     * partial_json is "": the arguments must still be JSON, "{}" as OpenAI sends them, both in
     * the assembled answer and in the chunks a client joins. */
    size_t len = 0;
    char *text = read_fixture("anthropic/stream_tool_use_no_args.sse", &len);
    const size_t pieces[] = {len, 7, 1};
    for (size_t p = 0; p < sizeof pieces / sizeof pieces[0]; p++) {
        chunks_t cs = {.n = 0};
        sl_stream_t *st = stream_new(SL_PROVIDER_ANTHROPIC, &cs);
        ck_assert_int_eq(feed(st, text, len, pieces[p]), SL_OK);
        ck_assert_str_eq(stream_end(st, 0), "ok");
        expect_chunk_sequence(&cs);
        char *args = joined_arguments(&cs, 0);
        ck_assert_str_eq(args, "{}");
        free(args);
        args = joined_arguments(&cs, 1);
        ck_assert_str_eq(args, "{\"city\": \"Paris\"}");
        free(args);
        json_t *resp = sl_stream_response(st);
        json_t *choice = json_array_get(json_object_get(resp, "choices"), 0);
        ck_assert_str_eq(jstr(choice, "finish_reason"), "tool_calls");
        json_t *calls = json_object_get(json_object_get(choice, "message"), "tool_calls");
        ck_assert_uint_eq(json_array_size(calls), 2);
        json_t *fn = json_object_get(json_array_get(calls, 0), "function");
        ck_assert_str_eq(jstr(fn, "name"), "get_time");
        ck_assert_str_eq(jstr(fn, "arguments"), "{}");
        fn = json_object_get(json_array_get(calls, 1), "function");
        ck_assert_str_eq(jstr(fn, "arguments"), "{\"city\": \"Paris\"}");
        json_decref(resp);
        sl_stream_free(st);
        chunks_clear(&cs);
    }
    free(text);
}
END_TEST

START_TEST(anthropic_tool_use_with_empty_input_has_empty_object_arguments)
{
    const sl_adapter_t *ad = adapter(SL_PROVIDER_ANTHROPIC);
    recorded_t r = replay("anthropic/200_tool_use_no_args.http");
    json_t *c = sl_adapter_response(ad, r.body, NULL);
    json_t *choice = json_array_get(json_object_get(c, "choices"), 0);
    ck_assert_str_eq(jstr(choice, "finish_reason"), "tool_calls");
    json_t *msg = json_object_get(choice, "message");
    ck_assert(json_is_null(json_object_get(msg, "content")));
    json_t *calls = json_object_get(msg, "tool_calls");
    ck_assert_uint_eq(json_array_size(calls), 2);
    json_t *fn = json_object_get(json_array_get(calls, 0), "function");
    ck_assert_str_eq(jstr(fn, "name"), "get_time");
    ck_assert_str_eq(jstr(fn, "arguments"), "{}");
    json_t *args = parse(jstr(json_object_get(json_array_get(calls, 1), "function"), "arguments"));
    ck_assert_str_eq(jstr(args, "city"), "Paris");
    json_decref(args);
    /* A stream request answered with this whole body: its one chunk says the same. */
    chunks_t cs = {.n = 0};
    sl_stream_t *st = stream_new(SL_PROVIDER_ANTHROPIC, &cs);
    json_t *usage = sl_adapter_usage(ad, r.body);
    sl_stream_end_whole(st, c, usage);
    ck_assert_int_eq(cs.n, 1);
    char *joined = joined_arguments(&cs, 0);
    ck_assert_str_eq(joined, "{}");
    free(joined);
    sl_stream_free(st);
    chunks_clear(&cs);
    json_decref(usage);
    json_decref(c);
    json_decref(r.body);
}
END_TEST

/* Feeds fixture up to (not including) the first occurrence of cut_at. */
static sl_stream_t *feed_until(sl_provider_t api, const char *fixture, const char *cut_at,
                               chunks_t *cs)
{
    size_t len = 0;
    char *text = read_fixture(fixture, &len);
    char *cut = strstr(text, cut_at);
    ck_assert_msg(cut != NULL, "%s has no \"%s\"", fixture, cut_at);
    sl_stream_t *st = stream_new(api, cs);
    ck_assert_int_eq(feed(st, text, (size_t)(cut - text), 7), SL_OK);
    free(text);
    return st;
}

static void expect_cut_end(const chunks_t *cs)
{
    expect_chunk_sequence(cs);
    const json_t *last = cs->chunk[cs->n - 1];
    ck_assert(json_is_null(json_object_get(last, "finish_reason")));
    ck_assert_str_eq(jstr(last, "delta"), "");
}

START_TEST(cut_anthropic_stream_is_charged_what_it_consumed)
{
    chunks_t cs = {.n = 0};
    sl_stream_t *st =
        feed_until(SL_PROVIDER_ANTHROPIC, "anthropic/stream.sse",
                   "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
                   "\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" and",
                   &cs);
    ck_assert_int_eq(cs.n, 3); /* start, "The Danube", ", the Rhine" */
    ck_assert_str_eq(stream_end(st, 1), "transport");
    ck_assert_int_eq(cs.n, 4);
    expect_cut_end(&cs);
    /* Input from message_start; output: the provider's count (1) is behind what was seen,
     * so ceil(21 characters / 4) = 6. */
    expect_usage(json_object_get(cs.chunk[3], "usage"), 2125, 6, 2000, 0, 2131);
    char *deltas = joined_deltas(&cs);
    ck_assert_str_eq(deltas, "The Danube, the Rhine");
    free(deltas);
    sl_stream_free(st);
    chunks_clear(&cs);
}
END_TEST

START_TEST(stream_that_times_out_estimates_input_and_output)
{
    chunks_t cs = {.n = 0};
    /* Finished text, but neither the usage chunk nor [DONE] came. */
    sl_stream_t *st = feed_until(SL_PROVIDER_OPENAI, "openai/stream.sse",
                                 "data: {\"id\":"
                                 "\"chatcmpl-Str3am01\",\"object\":\"chat.completion.chunk\","
                                 "\"created\":1760433200,\"model\":\"gpt-4o-mini-2024-07-18\","
                                 "\"service_tier\":\"default\",\"system_fingerprint\":"
                                 "\"fp_560af6e559\",\"choices\":[]",
                                 &cs);
    ck_assert_str_eq(stream_end(st, 2), "timeout");
    expect_cut_end(&cs);
    /* Input: the request's estimate (40); output: ceil(36 / 4). */
    expect_usage(json_object_get(cs.chunk[cs.n - 1], "usage"), 40, 9, 0, 0, 49);
    sl_stream_free(st);
    chunks_clear(&cs);
}
END_TEST

START_TEST(stream_without_its_final_event_is_cut)
{
    /* OpenAI: usage came, [DONE] did not: not complete, charged at least the provider's count. */
    chunks_t cs = {.n = 0};
    sl_stream_t *st = feed_until(SL_PROVIDER_OPENAI, "openai/stream.sse", "data: [DONE]", &cs);
    ck_assert_str_eq(stream_end(st, 0), "transport");
    expect_cut_end(&cs);
    expect_usage(json_object_get(cs.chunk[cs.n - 1], "usage"), 19, 10, 0, 0, 29);
    sl_stream_free(st);
    chunks_clear(&cs);
    /* Gemini has no final event: a clean end before any finishReason is a cut. */
    st = feed_until(SL_PROVIDER_GEMINI, "gemini/stream.sse",
                    "data: {\"candidates\":[{\"content\":"
                    "{\"parts\":[{\"text\":\" and",
                    &cs);
    ck_assert_str_eq(stream_end(st, 0), "transport");
    expect_cut_end(&cs);
    /* Input from usageMetadata; no output count yet: ceil(21 / 4). */
    expect_usage(json_object_get(cs.chunk[cs.n - 1], "usage"), 12, 6, 0, 0, 18);
    sl_stream_free(st);
    chunks_clear(&cs);
    /* A stream that never sent a byte. */
    st = stream_new(SL_PROVIDER_ANTHROPIC, &cs);
    ck_assert_str_eq(stream_end(st, 1), "transport");
    ck_assert_int_eq(cs.n, 1);
    expect_cut_end(&cs);
    expect_usage(json_object_get(cs.chunk[0], "usage"), 40, 0, 0, 0, 40);
    sl_stream_free(st);
    chunks_clear(&cs);
}
END_TEST

START_TEST(provider_error_event_ends_the_stream_with_its_outcome)
{
    chunks_t cs = {.n = 0};
    size_t len = 0;
    char *text = read_fixture("anthropic/stream_overloaded.sse", &len);
    sl_stream_t *st = stream_new(SL_PROVIDER_ANTHROPIC, &cs);
    ck_assert_int_eq(feed(st, text, len, 1), SL_OK);
    ck_assert_str_eq(stream_end(st, 0), "overloaded");
    expect_cut_end(&cs);
    expect_usage(json_object_get(cs.chunk[cs.n - 1], "usage"), 2125, 3, 2000, 0, 2128);
    const json_t *perr = sl_stream_error(st);
    ck_assert_ptr_nonnull(perr);
    json_t *err = sl_adapter_error(adapter(SL_PROVIDER_ANTHROPIC), perr, "overloaded", NULL);
    ck_assert_str_eq(jstr(err, "type"), "overloaded_error");
    ck_assert_str_eq(jstr(err, "message"), "Overloaded");
    json_decref(err);
    free(text);
    sl_stream_free(st);
    chunks_clear(&cs);

    /* OpenAI sends an error object as a data event. */
    st = stream_new(SL_PROVIDER_OPENAI, &cs);
    const char *oe = "data: {\"error\":{\"message\":\"Rate limit reached\",\"type\":\"tokens\","
                     "\"code\":\"rate_limit_exceeded\"}}\n\n";
    ck_assert_int_eq(feed(st, oe, strlen(oe), 5), SL_OK);
    ck_assert_str_eq(stream_end(st, 0), "rate_limited");
    sl_stream_free(st);
    chunks_clear(&cs);
    /* Gemini too, with its status. */
    st = stream_new(SL_PROVIDER_GEMINI, &cs);
    const char *ge = "data: {\"error\":{\"code\":503,\"message\":\"The model is overloaded.\","
                     "\"status\":\"UNAVAILABLE\"}}\r\n\r\n";
    ck_assert_int_eq(feed(st, ge, strlen(ge), 3), SL_OK);
    ck_assert_str_eq(stream_end(st, 0), "overloaded");
    sl_stream_free(st);
    chunks_clear(&cs);
}
END_TEST

START_TEST(malformed_or_oversized_stream_is_a_bad_response)
{
    chunks_t cs = {.n = 0};
    sl_stream_t *st = stream_new(SL_PROVIDER_OPENAI, &cs);
    const char *bad =
        "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\ndata: {not json\n\n";
    ck_assert_int_eq(feed(st, bad, strlen(bad), 4), SL_EPARSE);
    ck_assert_int_eq(sl_stream_feed(st, "data: x\n\n", 9), SL_EINVAL); /* no more after that */
    ck_assert_str_eq(stream_end(st, 1), "bad_response");
    expect_cut_end(&cs);
    sl_stream_free(st);
    chunks_clear(&cs);

    /* 70 deltas of 64 KiB: past the 4 MiB answer cap. */
    st = stream_new(SL_PROVIDER_OPENAI, &cs);
    size_t piece = 64 * 1024;
    char *ev = malloc(piece + 128);
    int n = snprintf(ev, 128, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"");
    memset(ev + n, 'x', piece);
    strcpy(ev + n + piece, "\"}}]}\n\n");
    sl_err_t rc = SL_OK;
    int fed = 0;
    for (; fed < 70 && rc == SL_OK; fed++)
        rc = sl_stream_feed(st, ev, strlen(ev));
    ck_assert_int_eq(rc, SL_ETOOBIG);
    ck_assert_int_eq(fed, 65); /* 64 fit in 4 MiB; the 65th does not */
    ck_assert_str_eq(stream_end(st, 1), "bad_response");
    ck_assert(json_is_true(json_object_get(cs.chunk[cs.n - 1], "done")));
    /* What was consumed is still charged: 4 MiB of x is about a million tokens. */
    ck_assert_int_eq(jint(json_object_get(cs.chunk[cs.n - 1], "usage"), "output"),
                     64 * 64 * 1024 / 4);
    free(ev);
    sl_stream_free(st);
    chunks_clear(&cs);

    /* One event larger than the SSE bound. */
    st = stream_new(SL_PROVIDER_GEMINI, &cs);
    char *huge = malloc(SL_STREAM_MAX_EVENT_BYTES + 16);
    memcpy(huge, "data: ", 6);
    memset(huge + 6, 'y', SL_STREAM_MAX_EVENT_BYTES + 8);
    ck_assert_int_eq(feed(st, huge, SL_STREAM_MAX_EVENT_BYTES + 14, 65536), SL_ETOOBIG);
    ck_assert_str_eq(stream_end(st, 1), "bad_response");
    free(huge);
    sl_stream_free(st);
    chunks_clear(&cs);
}
END_TEST

START_TEST(events_after_the_final_one_change_nothing)
{
    chunks_t cs = {.n = 0};
    size_t len = 0;
    char *text = read_fixture("anthropic/stream.sse", &len);
    sl_stream_t *st = stream_new(SL_PROVIDER_ANTHROPIC, &cs);
    ck_assert_int_eq(feed(st, text, len, len), SL_OK);
    int n = cs.n;
    const char *late = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
                       "\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"LATE\"}}\n\n";
    ck_assert_int_eq(feed(st, late, strlen(late), 9), SL_OK);
    ck_assert_int_eq(cs.n, n);
    ck_assert_str_eq(stream_end(st, 1), "ok"); /* complete before the connection broke */
    ck_assert_int_eq(cs.n, n);
    json_t *resp = sl_stream_response(st);
    ck_assert_ptr_null(
        strstr(jstr(json_object_get(json_array_get(json_object_get(resp, "choices"), 0), "message"),
                    "content"),
               "LATE"));
    json_decref(resp);
    free(text);
    sl_stream_free(st);
    chunks_clear(&cs);
}
END_TEST

START_TEST(whole_answer_to_a_stream_request_is_one_last_chunk)
{
    chunks_t cs = {.n = 0};
    sl_stream_t *st = stream_new(SL_PROVIDER_ANTHROPIC, &cs);
    recorded_t r = replay("anthropic/200_tool_use.http");
    json_t *resp = sl_adapter_response(adapter(SL_PROVIDER_ANTHROPIC), r.body, NULL);
    json_t *usage = sl_adapter_usage(adapter(SL_PROVIDER_ANTHROPIC), r.body);
    sl_stream_end_whole(st, resp, usage);
    sl_stream_end_whole(st, resp, usage); /* once only */
    ck_assert_int_eq(cs.n, 1);
    expect_chunk_sequence(&cs);
    const json_t *c = cs.chunk[0];
    ck_assert_str_eq(jstr(c, "delta"), "I'll check the weather in Paris.");
    ck_assert_str_eq(jstr(c, "finish_reason"), "tool_calls");
    json_t *tc = json_array_get(json_object_get(c, "tool_calls"), 0);
    ck_assert_int_eq(jint(tc, "index"), 0);
    ck_assert_str_eq(jstr(tc, "id"), "toolu_01A09q90qw90lq917835lq9");
    expect_usage(json_object_get(c, "usage"), 472, 67, 0, 0, 539);
    json_decref(resp);
    json_decref(usage);
    json_decref(r.body);
    sl_stream_free(st);
    chunks_clear(&cs);
    /* An HTTP error to a stream request: done, no answer, no usage. */
    st = stream_new(SL_PROVIDER_GEMINI, &cs);
    sl_stream_end_whole(st, NULL, NULL);
    ck_assert_int_eq(cs.n, 1);
    ck_assert(json_is_null(json_object_get(cs.chunk[0], "usage")));
    ck_assert(json_is_null(json_object_get(cs.chunk[0], "finish_reason")));
    ck_assert(json_is_true(json_object_get(cs.chunk[0], "done")));
    sl_stream_free(st);
    chunks_clear(&cs);
}
END_TEST

static Suite *adapters_suite(void)
{
    Suite *s = suite_create("adapters");
    TCase *rq = tcase_create("requests");
    tcase_add_test(rq, openai_request_sends_the_deployment_model_and_asks_for_stream_usage);
    tcase_add_test(rq, azure_request_names_api_version_and_no_model);
    tcase_add_test(rq, anthropic_request_maps_system_tools_and_tool_results);
    tcase_add_test(rq, anthropic_request_always_has_max_tokens_and_one_system_string);
    tcase_add_test(rq, requests_the_api_cannot_express_are_refused);
    tcase_add_test(rq, gemini_request_builds_contents_system_instruction_and_generation_config);
    tcase_add_test(rq, gemini_request_maps_response_format_to_a_response_schema);
    tcase_add_test(rq, credential_goes_only_in_the_provider_header);
    suite_add_tcase(s, rq);
    TCase *rs = tcase_create("responses");
    tcase_add_test(rs, recorded_responses_are_classified_with_retry_hints_and_errors);
    tcase_add_test(rs, protobuf_durations_out_of_range_are_rejected);
    tcase_add_test(rs, retry_hints_are_capped_at_an_hour);
    tcase_add_test(rs, transport_failures_and_should_retry_win_over_status);
    tcase_add_test(rs, protobuf_durations_are_parsed);
    tcase_add_test(rs, anthropic_and_gemini_headers_fill_the_ratelimit_object);
    tcase_add_test(rs, openai_and_azure_usage_include_cached_and_reasoning);
    tcase_add_test(rs, anthropic_message_becomes_a_chat_completion);
    tcase_add_test(rs, anthropic_tool_use_with_empty_input_has_empty_object_arguments);
    tcase_add_test(rs, gemini_response_becomes_a_chat_completion);
    suite_add_tcase(s, rs);
    TCase *ss = tcase_create("sse");
    tcase_add_test(ss, sse_events_do_not_depend_on_how_the_bytes_were_cut);
    tcase_add_test(ss, sse_memory_is_bounded);
    suite_add_tcase(s, ss);
    TCase *st = tcase_create("streams");
    tcase_set_timeout(st, 60);
    tcase_add_loop_test(st, streams_translate_to_the_same_chunks_however_the_bytes_arrive, 0,
                        (int)(sizeof stream_cases / sizeof stream_cases[0]));
    tcase_add_test(st, streamed_tool_call_without_arguments_has_an_empty_object);
    tcase_add_test(st, cut_anthropic_stream_is_charged_what_it_consumed);
    tcase_add_test(st, stream_that_times_out_estimates_input_and_output);
    tcase_add_test(st, stream_without_its_final_event_is_cut);
    tcase_add_test(st, provider_error_event_ends_the_stream_with_its_outcome);
    tcase_add_test(st, malformed_or_oversized_stream_is_a_bad_response);
    tcase_add_test(st, events_after_the_final_one_change_nothing);
    tcase_add_test(st, whole_answer_to_a_stream_request_is_one_last_chunk);
    suite_add_tcase(s, st);
    return s;
}

int main(void)
{
    char err[512] = "";
    if (sl_schema_load_file("schema/stream.json", &stream_schema, err, sizeof err) != SL_OK) {
        fprintf(stderr, "test_adapters: %s\n", err);
        return 1;
    }
    SRunner *sr = srunner_create(adapters_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    sl_schema_free(stream_schema);
    return failed == 0 ? 0 : 1;
}
