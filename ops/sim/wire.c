/* wire.c - request parsing and response spelling for the four provider APIs (see wire.h).
 *
 * Validation follows each provider's own style of message (OpenAI's "Invalid type for 'x'",
 * Anthropic's "x: Field required", Gemini's "* GenerateContentRequest.x: ..."), because adapters
 * and their tests read them. Everything is formatted with snprintf into caller buffers.
 */
#include "wire.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const api_names[SL_SIM_API_COUNT_] = {"openai", "azure", "anthropic", "gemini"};

const char *sl_sim_api_name(sl_sim_api_t api)
{
    return api < SL_SIM_API_COUNT_ ? api_names[api] : "?";
}

void sl_sim_wire_escape(char *dst, size_t cap, const char *s)
{
    if (cap == 0)
        return;
    size_t len = 0;
    for (; *s && len + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            dst[len++] = '\\';
            dst[len++] = (char)c;
        } else if (c < 0x20) {
            len += (size_t)snprintf(dst + len, cap - len, "\\u%04x", c);
        } else {
            dst[len++] = (char)c;
        }
    }
    dst[len] = '\0';
}

/* ---- Errors ----------------------------------------------------------------------------- */

static void sl_sim_wire_fail(sl_sim_error_t *err, const char *param, const char *code,
                             const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Describes a 400. */
static void sl_sim_wire_fail(sl_sim_error_t *err, const char *param, const char *code,
                             const char *fmt, ...)
{
    memset(err, 0, sizeof *err);
    err->kind = SL_SIM_ERR_INVALID;
    err->param = param;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

int sl_sim_wire_error_status(sl_sim_api_t api, sl_sim_err_kind_t kind)
{
    switch (kind) {
    case SL_SIM_ERR_INVALID:
        return 400;
    case SL_SIM_ERR_AUTH:
        return 401;
    case SL_SIM_ERR_PERMISSION:
        return 403;
    case SL_SIM_ERR_NOT_FOUND:
        return 404;
    case SL_SIM_ERR_METHOD:
        /* Google's front end answers an unsupported method as an unknown URL. */
        return api == SL_SIM_API_GEMINI ? 404 : 405;
    case SL_SIM_ERR_TOO_LARGE:
        return api == SL_SIM_API_GEMINI ? 400 : 413;
    case SL_SIM_ERR_RATE_LIMIT:
    case SL_SIM_ERR_QUOTA:
        return 429;
    case SL_SIM_ERR_OVERLOADED:
        return api == SL_SIM_API_ANTHROPIC ? 529 : 503;
    }
    return 500;
}

static const char *openai_type(sl_sim_err_kind_t kind)
{
    switch (kind) {
    case SL_SIM_ERR_RATE_LIMIT:
        return "requests";
    case SL_SIM_ERR_QUOTA:
        return "insufficient_quota";
    case SL_SIM_ERR_OVERLOADED:
        return "server_error";
    default:
        return "invalid_request_error";
    }
}

static const char *anthropic_type(sl_sim_err_kind_t kind)
{
    switch (kind) {
    case SL_SIM_ERR_AUTH:
        return "authentication_error";
    case SL_SIM_ERR_PERMISSION:
        return "permission_error";
    case SL_SIM_ERR_NOT_FOUND:
        return "not_found_error";
    case SL_SIM_ERR_TOO_LARGE:
        return "request_too_large";
    case SL_SIM_ERR_RATE_LIMIT:
    case SL_SIM_ERR_QUOTA:
        return "rate_limit_error";
    case SL_SIM_ERR_OVERLOADED:
        return "overloaded_error";
    default:
        return "invalid_request_error";
    }
}

static const char *google_status(sl_sim_err_kind_t kind)
{
    switch (kind) {
    case SL_SIM_ERR_AUTH:
        return "UNAUTHENTICATED";
    case SL_SIM_ERR_PERMISSION:
        return "PERMISSION_DENIED";
    case SL_SIM_ERR_NOT_FOUND:
    case SL_SIM_ERR_METHOD:
        return "NOT_FOUND";
    case SL_SIM_ERR_RATE_LIMIT:
    case SL_SIM_ERR_QUOTA:
        return "RESOURCE_EXHAUSTED";
    case SL_SIM_ERR_OVERLOADED:
        return "UNAVAILABLE";
    default:
        return "INVALID_ARGUMENT";
    }
}

void sl_sim_wire_google_duration(int64_t ms, char *buf, size_t cap)
{
    if (ms < 0)
        ms = 0;
    if (ms % 1000 == 0) {
        snprintf(buf, cap, "%llds", (long long)(ms / 1000));
        return;
    }
    char frac[8];
    snprintf(frac, sizeof frac, "%03lld", (long long)(ms % 1000));
    for (int i = 2; i > 0 && frac[i] == '0'; i--)
        frac[i] = '\0';
    snprintf(buf, cap, "%lld.%ss", (long long)(ms / 1000), frac);
}

/* OpenAI's error body, or Azure's {"error":{"code","message"}} when err has an azure_code; msg is
 * err's message, already escaped. Returns what snprintf does. */
static int sl_sim_wire_openai_error(sl_sim_api_t api, const sl_sim_error_t *err, const char *msg,
                                    char *buf, size_t cap)
{
    if (api == SL_SIM_API_AZURE && err->azure_code != NULL)
        return snprintf(buf, cap, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}",
                        err->azure_code, msg);
    char param[80] = "null";
    char code[80] = "null";
    if (err->param != NULL)
        snprintf(param, sizeof param, "\"%s\"", err->param);
    if (err->code != NULL)
        snprintf(code, sizeof code, "\"%s\"", err->code);
    return snprintf(buf, cap,
                    "{\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"param\":%s,\"code\":%s}}",
                    msg, err->type != NULL ? err->type : openai_type(err->kind), param, code);
}

/* Anthropic's error body; msg is err's message, already escaped. Returns what snprintf does. */
static int sl_sim_wire_anthropic_error(const sl_sim_error_t *err, const char *msg,
                                       const char *request_id, char *buf, size_t cap)
{
    return snprintf(
        buf, cap,
        "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":\"%s\"%s},"
        "\"request_id\":\"%s\"}",
        anthropic_type(err->kind), msg,
        err->spend_limit ? ",\"details\":{\"error_code\":\"enforced_spend_limit_reached\"}" : "",
        request_id != NULL ? request_id : "");
}

/* Google's error body with its QuotaFailure, ErrorInfo and RetryInfo details; msg is err's
 * message, already escaped. Returns what snprintf does. */
static int sl_sim_wire_gemini_error(const sl_sim_error_t *err, const char *msg, char *buf,
                                    size_t cap)
{
    char details[1024] = "";
    size_t used = 0;
    if (err->quota_id != NULL) {
        char metric[200] = "";
        char value[64] = "";
        if (err->quota_metric != NULL)
            snprintf(metric, sizeof metric, "\"quotaMetric\":\"%s\",", err->quota_metric);
        if (err->quota_value > 0)
            snprintf(value, sizeof value, ",\"quotaValue\":\"%lld\"", (long long)err->quota_value);
        used += (size_t)snprintf(
            details + used, sizeof details - used,
            "%s{\"@type\":\"type.googleapis.com/google.rpc.QuotaFailure\",\"violations\":[{"
            "%s\"quotaId\":\"%s\"%s}]}",
            used ? "," : "", metric, err->quota_id, value);
    }
    if (err->reason != NULL && used < sizeof details) {
        used += (size_t)snprintf(details + used, sizeof details - used,
                                 "%s{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\","
                                 "\"reason\":\"%s\",\"domain\":\"googleapis.com\"}",
                                 used ? "," : "", err->reason);
    }
    if (err->retry_info && used < sizeof details) {
        char delay[32];
        sl_sim_wire_google_duration(err->retry_delay_ms, delay, sizeof delay);
        used += (size_t)snprintf(details + used, sizeof details - used,
                                 "%s{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\","
                                 "\"retryDelay\":\"%s\"}",
                                 used ? "," : "", delay);
    }
    char with_details[1100] = "";
    if (used > 0)
        snprintf(with_details, sizeof with_details, ",\"details\":[%s]", details);
    return snprintf(buf, cap, "{\"error\":{\"code\":%d,\"message\":\"%s\",\"status\":\"%s\"%s}}",
                    sl_sim_wire_error_status(SL_SIM_API_GEMINI, err->kind), msg,
                    google_status(err->kind), with_details);
}

size_t sl_sim_wire_error_body(sl_sim_api_t api, const sl_sim_error_t *err, const char *request_id,
                              char *buf, size_t cap)
{
    char msg[1600];
    sl_sim_wire_escape(msg, sizeof msg, err->message);
    int n = 0;
    if (api == SL_SIM_API_OPENAI || api == SL_SIM_API_AZURE)
        n = sl_sim_wire_openai_error(api, err, msg, buf, cap);
    else if (api == SL_SIM_API_ANTHROPIC)
        n = sl_sim_wire_anthropic_error(err, msg, request_id, buf, cap);
    else
        n = sl_sim_wire_gemini_error(err, msg, buf, cap);
    return n < 0 ? 0 : (size_t)n;
}

/* ---- Request parsing -------------------------------------------------------------------- */

static int64_t utf8_chars(const char *s, size_t len)
{
    int64_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            n++;
    }
    return n;
}

static int64_t sl_sim_wire_chars(json_t *s)
{
    return json_is_string(s) ? utf8_chars(json_string_value(s), json_string_length(s)) : 0;
}

static bool sl_sim_wire_is_type(json_t *obj, const char *type)
{
    json_t *t = json_object_get(obj, "type");
    return json_is_string(t) && strcmp(json_string_value(t), type) == 0;
}

/* Characters of a string, or of the "text" of every {"type":"text"} part of an array. */
static int64_t sl_sim_wire_text_chars(json_t *content)
{
    if (json_is_string(content))
        return sl_sim_wire_chars(content);
    int64_t chars = 0;
    size_t i;
    json_t *part;
    json_array_foreach(content, i, part)
    {
        if (sl_sim_wire_is_type(part, "text"))
            chars += sl_sim_wire_chars(json_object_get(part, "text"));
    }
    return chars;
}

/* OpenAI: every message's content (a string or text parts). Kept exactly as the original
 * estimate, which tests/test_estimate.c compares with sluice's own. */
static int64_t openai_chars(json_t *messages)
{
    int64_t chars = 0;
    size_t i;
    json_t *msg;
    json_array_foreach(messages, i, msg)
    {
        chars += sl_sim_wire_text_chars(json_object_get(msg, "content"));
    }
    return chars;
}

static bool sl_sim_wire_tool_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > SL_SIM_TOOL_NAME_MAX)
        return false;
    for (const char *p = name; *p; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || c == '.' || c == ':';
        if (!ok)
            return false;
    }
    return true;
}

static void sl_sim_wire_set_tool(sl_sim_ask_t *ask, const char *name)
{
    if (ask->tool_name[0] == '\0')
        snprintf(ask->tool_name, sizeof ask->tool_name, "%s", name);
}

/* Reads an optional positive integer cap into *out (-1 when absent or null). */
static bool sl_sim_wire_read_cap(json_t *v, int64_t *out)
{
    *out = -1;
    if (v == NULL || json_is_null(v))
        return true;
    if (!json_is_integer(v))
        return false;
    *out = (int64_t)json_integer_value(v);
    return true;
}

#define SL_SIM_WIRE_MAX_TOKENS 1000000000LL

static bool sl_sim_wire_openai_parse(json_t *root, sl_sim_ask_t *ask, sl_sim_error_t *err)
{
    json_t *messages = json_object_get(root, "messages");
    if (messages == NULL) {
        sl_sim_wire_fail(err, "messages", "missing_required_parameter",
                         "Missing required parameter: 'messages'.");
        return false;
    }
    if (!json_is_array(messages)) {
        sl_sim_wire_fail(err, "messages", "invalid_type",
                         "Invalid type for 'messages': expected an array.");
        return false;
    }
    if (json_array_size(messages) == 0) {
        sl_sim_wire_fail(
            err, "messages", "empty_array",
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got "
            "an empty array instead.");
        return false;
    }
    for (size_t i = 0; i < json_array_size(messages); i++) {
        if (!json_is_object(json_array_get(messages, i))) {
            sl_sim_wire_fail(err, "messages", "invalid_type",
                             "Invalid type for 'messages[%zu]': expected an object.", i);
            return false;
        }
    }
    json_t *stream = json_object_get(root, "stream");
    if (stream != NULL && !json_is_null(stream) && !json_is_boolean(stream)) {
        sl_sim_wire_fail(err, "stream", "invalid_type",
                         "Invalid type for 'stream': expected a boolean.");
        return false;
    }
    ask->stream = json_is_true(stream);
    json_t *options = json_object_get(root, "stream_options");
    if (options != NULL && !json_is_null(options)) {
        if (!ask->stream) {
            sl_sim_wire_fail(
                err, "stream_options", "invalid_value",
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.");
            return false;
        }
        if (!json_is_object(options)) {
            sl_sim_wire_fail(err, "stream_options", "invalid_type",
                             "Invalid type for 'stream_options': expected an object.");
            return false;
        }
        ask->include_usage = json_is_true(json_object_get(options, "include_usage"));
    }
    /* max_completion_tokens replaced max_tokens in OpenAI's API; honour either. */
    const char *param = "max_completion_tokens";
    json_t *mt = json_object_get(root, param);
    if (mt == NULL || json_is_null(mt)) {
        param = "max_tokens";
        mt = json_object_get(root, param);
    }
    if (!sl_sim_wire_read_cap(mt, &ask->max_tokens)) {
        sl_sim_wire_fail(err, param, "invalid_type", "Invalid type for '%s': expected an integer.",
                         param);
        return false;
    }
    if (ask->max_tokens != -1 &&
        (ask->max_tokens < 1 || ask->max_tokens > SL_SIM_WIRE_MAX_TOKENS)) {
        sl_sim_wire_fail(
            err, param, ask->max_tokens < 1 ? "integer_below_min_value" : "integer_above_max_value",
            "Invalid '%s': integer out of range. Expected a value between 1 and %lld, but got "
            "%lld instead.",
            param, SL_SIM_WIRE_MAX_TOKENS, (long long)ask->max_tokens);
        return false;
    }
    json_t *tools = json_object_get(root, "tools");
    if (tools != NULL && !json_is_null(tools)) {
        if (!json_is_array(tools)) {
            sl_sim_wire_fail(err, "tools", "invalid_type",
                             "Invalid type for 'tools': expected an array.");
            return false;
        }
        size_t i;
        json_t *tool;
        json_array_foreach(tools, i, tool)
        {
            if (!json_is_object(tool)) {
                sl_sim_wire_fail(err, "tools", "invalid_type",
                                 "Invalid type for 'tools[%zu]': expected an object.", i);
                return false;
            }
            if (!sl_sim_wire_is_type(tool, "function"))
                continue; /* custom and built-in tools: never called by the simulator */
            json_t *name = json_object_get(json_object_get(tool, "function"), "name");
            if (!json_is_string(name)) {
                sl_sim_wire_fail(err, "tools", "missing_required_parameter",
                                 "Missing required parameter: 'tools[%zu].function.name'.", i);
                return false;
            }
            if (!sl_sim_wire_tool_name_ok(json_string_value(name))) {
                sl_sim_wire_fail(
                    err, "tools", "invalid_value",
                    "Invalid 'tools[%zu].function.name': string does not match pattern. "
                    "Expected a string that matches the pattern '^[a-zA-Z0-9_.:-]{1,64}$'.",
                    i);
                return false;
            }
            sl_sim_wire_set_tool(ask, json_string_value(name));
        }
    }
    json_t *choice = json_object_get(root, "tool_choice");
    if (json_is_string(choice) && strcmp(json_string_value(choice), "none") == 0)
        ask->tool_name[0] = '\0';
    ask->prompt_tokens = (openai_chars(messages) + 3) / 4;
    return true;
}

static const char *const anthropic_keys[] = {"model",
                                             "messages",
                                             "max_tokens",
                                             "system",
                                             "metadata",
                                             "stop_sequences",
                                             "stream",
                                             "temperature",
                                             "top_p",
                                             "top_k",
                                             "tools",
                                             "tool_choice",
                                             "thinking",
                                             "service_tier",
                                             "container",
                                             "mcp_servers",
                                             "context_management",
                                             NULL};

/* Anthropic content: a string or blocks; counts text blocks and tool results' text. */
static bool anthropic_content(json_t *content, const char *where, int64_t *chars,
                              sl_sim_error_t *err)
{
    if (json_is_string(content)) {
        *chars += sl_sim_wire_chars(content);
        return true;
    }
    if (!json_is_array(content)) {
        sl_sim_wire_fail(err, NULL, NULL, "%s: Input should be a valid list", where);
        return false;
    }
    size_t i;
    json_t *block;
    json_array_foreach(content, i, block)
    {
        json_t *type = json_object_get(block, "type");
        if (!json_is_object(block) || !json_is_string(type)) {
            sl_sim_wire_fail(err, NULL, NULL, "%s.%zu.type: Field required", where, i);
            return false;
        }
        const char *t = json_string_value(type);
        if (strcmp(t, "text") == 0) {
            if (!json_is_string(json_object_get(block, "text"))) {
                sl_sim_wire_fail(err, NULL, NULL, "%s.%zu.text: Field required", where, i);
                return false;
            }
            *chars += sl_sim_wire_chars(json_object_get(block, "text"));
        } else if (strcmp(t, "tool_result") == 0) {
            if (!json_is_string(json_object_get(block, "tool_use_id"))) {
                sl_sim_wire_fail(err, NULL, NULL, "%s.%zu.tool_use_id: Field required", where, i);
                return false;
            }
            json_t *inner = json_object_get(block, "content");
            if (inner != NULL)
                *chars += sl_sim_wire_text_chars(inner);
        } else if (strcmp(t, "tool_use") == 0) {
            if (!json_is_string(json_object_get(block, "id")) ||
                !json_is_string(json_object_get(block, "name")) ||
                !json_is_object(json_object_get(block, "input"))) {
                sl_sim_wire_fail(err, NULL, NULL, "%s.%zu: tool_use blocks need id, name and input",
                                 where, i);
                return false;
            }
        }
    }
    return true;
}

static bool sl_sim_wire_anthropic_parse(json_t *root, sl_sim_ask_t *ask, sl_sim_error_t *err)
{
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        bool known = false;
        for (size_t i = 0; anthropic_keys[i] != NULL; i++)
            known = known || strcmp(key, anthropic_keys[i]) == 0;
        if (!known) {
            sl_sim_wire_fail(err, NULL, NULL, "%.64s: Extra inputs are not permitted", key);
            return false;
        }
    }
    json_t *model = json_object_get(root, "model");
    if (!json_is_string(model)) {
        sl_sim_wire_fail(err, NULL, NULL,
                         model == NULL ? "model: Field required"
                                       : "model: Input should be a valid string");
        return false;
    }
    json_t *mt = json_object_get(root, "max_tokens");
    if (mt == NULL) {
        sl_sim_wire_fail(err, NULL, NULL, "max_tokens: Field required");
        return false;
    }
    if (!json_is_integer(mt)) {
        sl_sim_wire_fail(err, NULL, NULL, "max_tokens: Input should be a valid integer");
        return false;
    }
    ask->max_tokens = (int64_t)json_integer_value(mt);
    if (ask->max_tokens < 1 || ask->max_tokens > SL_SIM_WIRE_MAX_TOKENS) {
        sl_sim_wire_fail(err, NULL, NULL, "max_tokens: Input should be between 1 and %lld",
                         SL_SIM_WIRE_MAX_TOKENS);
        return false;
    }
    json_t *messages = json_object_get(root, "messages");
    if (messages == NULL) {
        sl_sim_wire_fail(err, NULL, NULL, "messages: Field required");
        return false;
    }
    if (!json_is_array(messages)) {
        sl_sim_wire_fail(err, NULL, NULL, "messages: Input should be a valid list");
        return false;
    }
    if (json_array_size(messages) == 0) {
        sl_sim_wire_fail(err, NULL, NULL, "messages: at least one message is required");
        return false;
    }
    int64_t chars = 0;
    char where[64];
    size_t i;
    json_t *msg;
    json_array_foreach(messages, i, msg)
    {
        if (!json_is_object(msg)) {
            sl_sim_wire_fail(err, NULL, NULL, "messages.%zu: Input should be a valid dictionary",
                             i);
            return false;
        }
        json_t *role = json_object_get(msg, "role");
        if (!json_is_string(role) || (strcmp(json_string_value(role), "user") != 0 &&
                                      strcmp(json_string_value(role), "assistant") != 0)) {
            sl_sim_wire_fail(err, NULL, NULL,
                             "messages.%zu.role: Input should be 'user' or 'assistant'", i);
            return false;
        }
        json_t *content = json_object_get(msg, "content");
        if (content == NULL) {
            sl_sim_wire_fail(err, NULL, NULL, "messages.%zu.content: Field required", i);
            return false;
        }
        snprintf(where, sizeof where, "messages.%zu.content", i);
        if (!anthropic_content(content, where, &chars, err))
            return false;
    }
    json_t *system = json_object_get(root, "system");
    if (system != NULL && !anthropic_content(system, "system", &chars, err))
        return false;
    json_t *stream = json_object_get(root, "stream");
    if (stream != NULL && !json_is_boolean(stream)) {
        sl_sim_wire_fail(err, NULL, NULL, "stream: Input should be a valid boolean");
        return false;
    }
    ask->stream = json_is_true(stream);
    json_t *tools = json_object_get(root, "tools");
    if (tools != NULL) {
        if (!json_is_array(tools)) {
            sl_sim_wire_fail(err, NULL, NULL, "tools: Input should be a valid list");
            return false;
        }
        json_t *tool;
        json_array_foreach(tools, i, tool)
        {
            json_t *name = json_object_get(tool, "name");
            if (!json_is_object(tool) || !json_is_string(name)) {
                sl_sim_wire_fail(err, NULL, NULL, "tools.%zu.name: Field required", i);
                return false;
            }
            /* Server tools (web search, ...) have a type; only client tools are called here. */
            json_t *type = json_object_get(tool, "type");
            if (type != NULL && !sl_sim_wire_is_type(tool, "custom"))
                continue;
            if (!sl_sim_wire_tool_name_ok(json_string_value(name))) {
                sl_sim_wire_fail(
                    err, NULL, NULL,
                    "tools.%zu.name: String should match pattern '^[a-zA-Z0-9_.:-]{1,64}$'", i);
                return false;
            }
            if (!json_is_object(json_object_get(tool, "input_schema"))) {
                sl_sim_wire_fail(err, NULL, NULL, "tools.%zu.input_schema: Field required", i);
                return false;
            }
            sl_sim_wire_set_tool(ask, json_string_value(name));
        }
    }
    if (sl_sim_wire_is_type(json_object_get(root, "tool_choice"), "none"))
        ask->tool_name[0] = '\0';
    ask->prompt_tokens = (chars + 3) / 4;
    return true;
}

static const char *const gemini_keys[] = {"contents",
                                          "systemInstruction",
                                          "system_instruction",
                                          "generationConfig",
                                          "generation_config",
                                          "tools",
                                          "toolConfig",
                                          "tool_config",
                                          "safetySettings",
                                          "safety_settings",
                                          "cachedContent",
                                          "cached_content",
                                          "labels",
                                          "model",
                                          NULL};

static const char *const gemini_part_keys[] = {"text",
                                               "inlineData",
                                               "inline_data",
                                               "fileData",
                                               "file_data",
                                               "functionCall",
                                               "function_call",
                                               "functionResponse",
                                               "function_response",
                                               "executableCode",
                                               "executable_code",
                                               "codeExecutionResult",
                                               "code_execution_result",
                                               NULL};

/* Either spelling of a proto field (JSON names are camelCase; snake_case is accepted too). */
static json_t *field(json_t *obj, const char *camel, const char *snake)
{
    json_t *v = json_object_get(obj, camel);
    return v != NULL ? v : json_object_get(obj, snake);
}

/* A Content's parts: counts their text. */
static bool gemini_parts(json_t *content, const char *where, int64_t *chars, sl_sim_error_t *err)
{
    json_t *parts = json_object_get(content, "parts");
    if (!json_is_array(parts) || json_array_size(parts) == 0) {
        sl_sim_wire_fail(err, NULL, NULL,
                         "* GenerateContentRequest.%s.parts: contents.parts must not be "
                         "empty.\n",
                         where);
        return false;
    }
    size_t i;
    json_t *part;
    json_array_foreach(parts, i, part)
    {
        bool has_data = false;
        for (size_t k = 0; json_is_object(part) && gemini_part_keys[k] != NULL; k++)
            has_data = has_data || json_object_get(part, gemini_part_keys[k]) != NULL;
        if (!has_data) {
            sl_sim_wire_fail(
                err, NULL, NULL,
                "* GenerateContentRequest.%s.parts[%zu].data: required oneof field 'data' must "
                "have one initialized field\n",
                where, i);
            return false;
        }
        *chars += sl_sim_wire_chars(json_object_get(part, "text"));
    }
    return true;
}

static bool sl_sim_wire_gemini_parse(json_t *root, sl_sim_ask_t *ask, sl_sim_error_t *err)
{
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        bool known = false;
        for (size_t i = 0; gemini_keys[i] != NULL; i++)
            known = known || strcmp(key, gemini_keys[i]) == 0;
        if (!known) {
            sl_sim_wire_fail(
                err, NULL, NULL,
                "Invalid JSON payload received. Unknown name \"%.64s\": Cannot find field.", key);
            return false;
        }
    }
    json_t *contents = json_object_get(root, "contents");
    if (!json_is_array(contents) || json_array_size(contents) == 0) {
        sl_sim_wire_fail(err, NULL, NULL,
                         "* GenerateContentRequest.contents: contents is not specified\n");
        return false;
    }
    int64_t chars = 0;
    char where[48];
    size_t i;
    json_t *content;
    json_array_foreach(contents, i, content)
    {
        json_t *role = json_object_get(content, "role");
        if (!json_is_object(content) ||
            (role != NULL &&
             (!json_is_string(role) || (strcmp(json_string_value(role), "user") != 0 &&
                                        strcmp(json_string_value(role), "model") != 0)))) {
            sl_sim_wire_fail(err, NULL, NULL, "Please use a valid role: user, model.");
            return false;
        }
        snprintf(where, sizeof where, "contents[%zu]", i);
        if (!gemini_parts(content, where, &chars, err))
            return false;
    }
    json_t *system = field(root, "systemInstruction", "system_instruction");
    if (system != NULL && !gemini_parts(system, "system_instruction", &chars, err))
        return false;
    json_t *config = field(root, "generationConfig", "generation_config");
    if (config != NULL && !json_is_object(config)) {
        sl_sim_wire_fail(
            err, NULL, NULL,
            "Invalid JSON payload received. Unknown name \"generationConfig\": Proto field is "
            "not repeating, cannot start list.");
        return false;
    }
    json_t *mt = field(config, "maxOutputTokens", "max_output_tokens");
    if (!sl_sim_wire_read_cap(mt, &ask->max_tokens)) {
        sl_sim_wire_fail(err, NULL, NULL,
                         "Invalid value at 'generation_config.max_output_tokens' (TYPE_INT32)");
        return false;
    }
    if (ask->max_tokens != -1 &&
        (ask->max_tokens < 1 || ask->max_tokens > SL_SIM_WIRE_MAX_TOKENS)) {
        sl_sim_wire_fail(
            err, NULL, NULL,
            "* GenerateContentRequest.generation_config.max_output_tokens: max_output_tokens "
            "must be positive.\n");
        return false;
    }
    json_t *tools = json_object_get(root, "tools");
    if (tools != NULL && !json_is_array(tools)) {
        sl_sim_wire_fail(
            err, NULL, NULL,
            "Invalid JSON payload received. Unknown name \"tools\": Proto field is repeating, "
            "expected a list.");
        return false;
    }
    json_t *tool;
    json_array_foreach(tools, i, tool)
    {
        json_t *decls = field(tool, "functionDeclarations", "function_declarations");
        size_t j;
        json_t *decl;
        json_array_foreach(decls, j, decl)
        {
            json_t *name = json_object_get(decl, "name");
            if (!json_is_string(name) || !sl_sim_wire_tool_name_ok(json_string_value(name))) {
                sl_sim_wire_fail(
                    err, NULL, NULL,
                    "* GenerateContentRequest.tools[%zu].function_declarations[%zu].name: "
                    "Invalid function name. Must start with a letter or an underscore. Must be "
                    "a-z, A-Z, 0-9, or contain underscores, dots, colons and dashes, with a "
                    "maximum length of 64.\n",
                    i, j);
                return false;
            }
            sl_sim_wire_set_tool(ask, json_string_value(name));
        }
    }
    json_t *calling = field(field(root, "toolConfig", "tool_config"), "functionCallingConfig",
                            "function_calling_config");
    json_t *mode = json_object_get(calling, "mode");
    if (json_is_string(mode) && strcmp(json_string_value(mode), "NONE") == 0)
        ask->tool_name[0] = '\0';
    ask->prompt_tokens = (chars + 3) / 4;
    return true;
}

bool sl_sim_wire_parse(sl_sim_api_t api, const char *body, size_t len, sl_sim_ask_t *ask,
                       sl_sim_error_t *err)
{
    memset(ask, 0, sizeof *ask);
    ask->max_tokens = -1;
    json_t *root = NULL;
    if (body != NULL && len > 0)
        root = json_loadb(body, len, 0, NULL);
    bool ok = false;
    if (!json_is_object(root)) {
        if (api == SL_SIM_API_ANTHROPIC)
            sl_sim_wire_fail(err, NULL, NULL,
                             "There was an error parsing the body of your request: "
                             "expected a JSON object.");
        else if (api == SL_SIM_API_GEMINI)
            sl_sim_wire_fail(err, NULL, NULL,
                             "Invalid JSON payload received. Expected a JSON object.");
        else
            sl_sim_wire_fail(
                err, NULL, NULL,
                "We could not parse the JSON body of your request. (HINT: This likely means "
                "you aren't using your HTTP library correctly. The OpenAI API expects a JSON "
                "payload, but what was sent was not valid JSON.)");
    } else if (api == SL_SIM_API_ANTHROPIC) {
        ok = sl_sim_wire_anthropic_parse(root, ask, err);
    } else if (api == SL_SIM_API_GEMINI) {
        ok = sl_sim_wire_gemini_parse(root, ask, err);
    } else {
        ok = sl_sim_wire_openai_parse(root, ask, err);
    }
    json_decref(root);
    return ok;
}

int64_t sl_sim_wire_openai_estimate(const char *body, size_t len)
{
    json_t *root = json_loadb(body, len, 0, NULL);
    json_t *messages = json_object_get(root, "messages");
    int64_t est = json_is_array(messages) ? (openai_chars(messages) + 3) / 4 : -1;
    json_decref(root);
    return est;
}

/* ---- Responses -------------------------------------------------------------------------- */

size_t sl_sim_wire_reply_text(const sl_sim_reply_t *reply, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "Simulated reply from %s (%lld completion tokens).",
                     reply->deployment, (long long)reply->completion_tokens);
    return n < 0 ? 0 : (size_t)n;
}

static bool sl_sim_wire_calls_tool(const sl_sim_reply_t *reply)
{
    return reply->tool_name != NULL && reply->tool_name[0] != '\0';
}

/* Ids: every one derives from reply->id, so a replay repeats them exactly. */
static unsigned long long sl_sim_wire_id_hex(const sl_sim_reply_t *reply, unsigned salt)
{
    uint64_t x = reply->id + 0x9e3779b97f4a7c15ULL * (salt + 1);
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (unsigned long long)x;
}

static const char *openai_finish(const sl_sim_reply_t *reply)
{
    if (reply->hit_max_tokens)
        return "length";
    return sl_sim_wire_calls_tool(reply) ? "tool_calls" : "stop";
}

static const char *anthropic_stop(const sl_sim_reply_t *reply)
{
    if (reply->hit_max_tokens)
        return "max_tokens";
    return sl_sim_wire_calls_tool(reply) ? "tool_use" : "end_turn";
}

static void openai_usage(const sl_sim_reply_t *reply, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "{\"prompt_tokens\":%lld,\"completion_tokens\":%lld,\"total_tokens\":%lld,"
             "\"prompt_tokens_details\":{\"cached_tokens\":%lld,\"audio_tokens\":0},"
             "\"completion_tokens_details\":{\"reasoning_tokens\":0,\"audio_tokens\":0,"
             "\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}",
             (long long)reply->prompt_tokens, (long long)reply->completion_tokens,
             (long long)(reply->prompt_tokens + reply->completion_tokens),
             (long long)reply->cached_tokens);
}

/* Anthropic's input_tokens leave out what was read from (or written to) the cache. */
static void anthropic_usage(const sl_sim_reply_t *reply, int64_t output_tokens, char *buf,
                            size_t cap)
{
    snprintf(buf, cap,
             "{\"input_tokens\":%lld,\"cache_creation_input_tokens\":0,"
             "\"cache_read_input_tokens\":%lld,\"output_tokens\":%lld,"
             "\"service_tier\":\"standard\"}",
             (long long)(reply->prompt_tokens - reply->cached_tokens),
             (long long)reply->cached_tokens, (long long)output_tokens);
}

/* Gemini's promptTokenCount includes the cached tokens. */
static void gemini_usage(const sl_sim_reply_t *reply, int64_t candidates, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "{\"promptTokenCount\":%lld,\"cachedContentTokenCount\":%lld,"
             "\"candidatesTokenCount\":%lld,\"thoughtsTokenCount\":0,\"totalTokenCount\":%lld,"
             "\"promptTokensDetails\":[{\"modality\":\"TEXT\",\"tokenCount\":%lld}]}",
             (long long)reply->prompt_tokens, (long long)reply->cached_tokens,
             (long long)candidates, (long long)(reply->prompt_tokens + candidates),
             (long long)reply->prompt_tokens);
}

/* The non-streamed 200 of OpenAI (and Azure, which adds prompt_filter_results); text is the
 * reply text. Returns what snprintf does. */
static int sl_sim_wire_openai_body(const sl_sim_reply_t *reply, const char *text, char *buf,
                                   size_t cap)
{
    char usage[512];
    char message[512];
    if (sl_sim_wire_calls_tool(reply))
        snprintf(message, sizeof message,
                 "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":"
                 "\"call_sim%016llx\",\"type\":\"function\",\"function\":{\"name\":\"%s\","
                 "\"arguments\":\"{}\"}}],\"refusal\":null,\"annotations\":[]}",
                 sl_sim_wire_id_hex(reply, 1), reply->tool_name);
    else
        snprintf(message, sizeof message,
                 "{\"role\":\"assistant\",\"content\":\"%s\",\"refusal\":null,"
                 "\"annotations\":[]}",
                 text);
    openai_usage(reply, usage, sizeof usage);
    return snprintf(buf, cap,
                    "{\"id\":\"chatcmpl-sim%016llx\",\"object\":\"chat.completion\","
                    "\"created\":%lld,\"model\":\"%s\",\"choices\":[{\"index\":0,\"message\":%s,"
                    "\"logprobs\":null,\"finish_reason\":\"%s\"}],\"usage\":%s,%s"
                    "\"system_fingerprint\":\"fp_sluice_sim\"}",
                    sl_sim_wire_id_hex(reply, 0), (long long)reply->created_s, reply->model,
                    message, openai_finish(reply), usage,
                    reply->api == SL_SIM_API_AZURE
                        ? "\"prompt_filter_results\":[{\"prompt_index\":0,"
                          "\"content_filter_results\":{}}],"
                        : "\"service_tier\":\"default\",");
}

/* Anthropic's non-streamed 200; text is the reply text. Returns what snprintf does. */
static int sl_sim_wire_anthropic_body(const sl_sim_reply_t *reply, const char *text, char *buf,
                                      size_t cap)
{
    char usage[512];
    char content[512];
    if (sl_sim_wire_calls_tool(reply))
        snprintf(content, sizeof content,
                 "{\"type\":\"tool_use\",\"id\":\"toolu_01sim%016llx\",\"name\":\"%s\","
                 "\"input\":{}}",
                 sl_sim_wire_id_hex(reply, 1), reply->tool_name);
    else
        snprintf(content, sizeof content, "{\"type\":\"text\",\"text\":\"%s\"}", text);
    anthropic_usage(reply, reply->completion_tokens, usage, sizeof usage);
    return snprintf(buf, cap,
                    "{\"id\":\"msg_01sim%016llx\",\"type\":\"message\",\"role\":\"assistant\","
                    "\"model\":\"%s\",\"content\":[%s],\"stop_reason\":\"%s\","
                    "\"stop_sequence\":null,\"usage\":%s}",
                    sl_sim_wire_id_hex(reply, 0), reply->model, content, anthropic_stop(reply),
                    usage);
}

/* Gemini's non-streamed 200 (a GenerateContentResponse); text is the reply text. Returns what
 * snprintf does. */
static int sl_sim_wire_gemini_body(const sl_sim_reply_t *reply, const char *text, char *buf,
                                   size_t cap)
{
    char usage[512];
    char part[512];
    if (sl_sim_wire_calls_tool(reply))
        snprintf(part, sizeof part, "{\"functionCall\":{\"name\":\"%s\",\"args\":{}}}",
                 reply->tool_name);
    else
        snprintf(part, sizeof part, "{\"text\":\"%s\"}", text);
    gemini_usage(reply, reply->completion_tokens, usage, sizeof usage);
    return snprintf(buf, cap,
                    "{\"candidates\":[{\"content\":{\"parts\":[%s],\"role\":\"model\"},"
                    "\"finishReason\":\"%s\",\"index\":0}],\"usageMetadata\":%s,"
                    "\"modelVersion\":\"%s\",\"responseId\":\"sim%016llx\"}",
                    part, reply->hit_max_tokens ? "MAX_TOKENS" : "STOP", usage, reply->model,
                    sl_sim_wire_id_hex(reply, 0));
}

size_t sl_sim_wire_body(const sl_sim_reply_t *reply, char *buf, size_t cap)
{
    char text[256];
    sl_sim_wire_reply_text(reply, text, sizeof text);
    int n = 0;
    switch (reply->api) {
    case SL_SIM_API_OPENAI:
    case SL_SIM_API_AZURE:
        n = sl_sim_wire_openai_body(reply, text, buf, cap);
        break;
    case SL_SIM_API_ANTHROPIC:
        n = sl_sim_wire_anthropic_body(reply, text, buf, cap);
        break;
    default:
        n = sl_sim_wire_gemini_body(reply, text, buf, cap);
        break;
    }
    return n < 0 ? 0 : (size_t)n;
}

/* ---- Streams ---------------------------------------------------------------------------- */

typedef struct {
    sl_sim_event_t *events;
    size_t n;
    bool overflow;
} sl_sim_wire_emitter_t;

static void sl_sim_wire_emit(sl_sim_wire_emitter_t *e, int64_t tokens_before, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void sl_sim_wire_emit(sl_sim_wire_emitter_t *e, int64_t tokens_before, const char *fmt, ...)
{
    sl_sim_event_t *ev = &e->events[e->n++];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(ev->text, sizeof ev->text, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof ev->text)
        e->overflow = true;
    ev->len = n < 0 ? 0 : (size_t)n < sizeof ev->text ? (size_t)n : sizeof ev->text - 1;
    ev->tokens_before = tokens_before;
}

size_t sl_sim_wire_stream_max(size_t pieces)
{
    return pieces + 8;
}

/* Piece k of n of text (split evenly by bytes; the text is ASCII) into buf. */
static void sl_sim_wire_piece(const char *text, size_t k, size_t n, char *buf, size_t cap)
{
    size_t len = strlen(text);
    size_t from = len * k / n;
    size_t to = len * (k + 1) / n;
    snprintf(buf, cap, "%.*s", (int)(to - from), text + from);
}

static void sl_sim_wire_openai_stream(const sl_sim_reply_t *r, size_t pieces, const char *text,
                                      sl_sim_wire_emitter_t *e)
{
    char head[256];
    snprintf(head, sizeof head,
             "\"id\":\"chatcmpl-sim%016llx\",\"object\":\"chat.completion.chunk\",\"created\":%lld,"
             "\"model\":\"%s\",\"system_fingerprint\":\"fp_sluice_sim\"",
             sl_sim_wire_id_hex(r, 0), (long long)r->created_s, r->model);
    /* With include_usage, OpenAI sends "usage": null on every chunk but the usage one. */
    const char *usage_null = r->include_usage ? ",\"usage\":null" : "";
    char piece[256];
    if (sl_sim_wire_calls_tool(r)) {
        sl_sim_wire_emit(
            e, 0,
            "data: {%s,\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":"
            "null,\"tool_calls\":[{\"index\":0,\"id\":\"call_sim%016llx\",\"type\":\"function\","
            "\"function\":{\"name\":\"%s\",\"arguments\":\"\"}}],\"refusal\":null},"
            "\"logprobs\":null,\"finish_reason\":null}]%s}\n\n",
            head, sl_sim_wire_id_hex(r, 1), r->tool_name, usage_null);
        sl_sim_wire_emit(
            e, r->completion_tokens / 2,
            "data: {%s,\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
            "\"function\":{\"arguments\":\"{}\"}}]},\"logprobs\":null,\"finish_reason\":null}]"
            "%s}\n\n",
            head, usage_null);
    } else {
        for (size_t k = 0; k < pieces; k++) {
            sl_sim_wire_piece(text, k, pieces, piece, sizeof piece);
            sl_sim_wire_emit(e, r->completion_tokens * (int64_t)k / (int64_t)pieces,
                             "data: {%s,\"choices\":[{\"index\":0,\"delta\":{%s\"content\":\"%s\"},"
                             "\"logprobs\":null,\"finish_reason\":null}]%s}\n\n",
                             head, k == 0 ? "\"role\":\"assistant\"," : "", piece, usage_null);
        }
    }
    int64_t end = r->completion_tokens;
    sl_sim_wire_emit(e, end,
                     "data: {%s,\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,"
                     "\"finish_reason\":\"%s\"}]%s}\n\n",
                     head, openai_finish(r), usage_null);
    if (r->include_usage) {
        char usage[512];
        openai_usage(r, usage, sizeof usage);
        sl_sim_wire_emit(e, end, "data: {%s,\"choices\":[],\"usage\":%s}\n\n", head, usage);
    }
    sl_sim_wire_emit(e, end, "data: [DONE]\n\n");
}

static void sl_sim_wire_anthropic_stream(const sl_sim_reply_t *r, size_t pieces, const char *text,
                                         sl_sim_wire_emitter_t *e)
{
    char usage[512];
    anthropic_usage(r, r->completion_tokens > 0 ? 1 : 0, usage, sizeof usage);
    sl_sim_wire_emit(
        e, 0,
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"
        "\"msg_01sim%016llx\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"%s\","
        "\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":%s}}\n\n",
        sl_sim_wire_id_hex(r, 0), r->model, usage);
    char piece[256];
    if (sl_sim_wire_calls_tool(r)) {
        sl_sim_wire_emit(
            e, 0,
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
            "\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01sim%016llx\",\"name\":"
            "\"%s\",\"input\":{}}}\n\n",
            sl_sim_wire_id_hex(r, 1), r->tool_name);
        sl_sim_wire_emit(e, 0, "event: ping\ndata: {\"type\":\"ping\"}\n\n");
        sl_sim_wire_emit(
            e, r->completion_tokens / 2,
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
            "\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n");
    } else {
        sl_sim_wire_emit(
            e, 0,
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
            "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n");
        sl_sim_wire_emit(e, 0, "event: ping\ndata: {\"type\":\"ping\"}\n\n");
        for (size_t k = 0; k < pieces; k++) {
            sl_sim_wire_piece(text, k, pieces, piece, sizeof piece);
            sl_sim_wire_emit(
                e, r->completion_tokens * (int64_t)k / (int64_t)pieces,
                "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
                "\"delta\":{\"type\":\"text_delta\",\"text\":\"%s\"}}\n\n",
                piece);
        }
    }
    int64_t end = r->completion_tokens;
    sl_sim_wire_emit(
        e, end,
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n");
    sl_sim_wire_emit(
        e, end,
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
        "\"%s\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":%lld}}\n\n",
        anthropic_stop(r), (long long)end);
    sl_sim_wire_emit(e, end, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
}

/* Gemini: each event is a whole GenerateContentResponse; usageMetadata on every one, with the
 * candidates counted so far, and finishReason on the last. SSE events end in CRLF CRLF as
 * Google's do; without alt=sse the responses form one JSON array sent piece by piece. */
static void sl_sim_wire_gemini_stream(const sl_sim_reply_t *r, size_t pieces, const char *text,
                                      sl_sim_wire_emitter_t *e)
{
    size_t n = sl_sim_wire_calls_tool(r) ? 1 : pieces;
    char piece[256];
    char part[384];
    char usage[512];
    char finish[48];
    for (size_t k = 0; k < n; k++) {
        bool last = k + 1 == n;
        /* The last response carries the finish reason: it is due when generation ends. */
        int64_t before =
            last ? r->completion_tokens : r->completion_tokens * (int64_t)k / (int64_t)n;
        int64_t through =
            last ? r->completion_tokens : r->completion_tokens * (int64_t)(k + 1) / (int64_t)n;
        if (sl_sim_wire_calls_tool(r)) {
            snprintf(part, sizeof part, "{\"functionCall\":{\"name\":\"%s\",\"args\":{}}}",
                     r->tool_name);
        } else {
            sl_sim_wire_piece(text, k, n, piece, sizeof piece);
            snprintf(part, sizeof part, "{\"text\":\"%s\"}", piece);
        }
        gemini_usage(r, through, usage, sizeof usage);
        finish[0] = '\0';
        if (last)
            snprintf(finish, sizeof finish, "\"finishReason\":\"%s\",",
                     r->hit_max_tokens ? "MAX_TOKENS" : "STOP");
        const char *prefix = r->sse ? "data: " : k == 0 ? "[" : ",\r\n";
        sl_sim_wire_emit(
            e, before,
            "%s{\"candidates\":[{\"content\":{\"parts\":[%s],\"role\":\"model\"},%s\"index\":0}],"
            "\"usageMetadata\":%s,\"modelVersion\":\"%s\",\"responseId\":\"sim%016llx\"}%s",
            prefix, part, finish, usage, r->model, sl_sim_wire_id_hex(r, 0),
            r->sse ? "\r\n\r\n" : "");
    }
    if (!r->sse)
        sl_sim_wire_emit(e, r->completion_tokens, "]");
}

size_t sl_sim_wire_stream(const sl_sim_reply_t *reply, size_t pieces, sl_sim_event_t *events)
{
    char text[256];
    sl_sim_wire_reply_text(reply, text, sizeof text);
    if (pieces < 1)
        pieces = 1;
    if (pieces > strlen(text))
        pieces = strlen(text);
    sl_sim_wire_emitter_t e = {events, 0, false};
    switch (reply->api) {
    case SL_SIM_API_OPENAI:
    case SL_SIM_API_AZURE:
        sl_sim_wire_openai_stream(reply, pieces, text, &e);
        break;
    case SL_SIM_API_ANTHROPIC:
        sl_sim_wire_anthropic_stream(reply, pieces, text, &e);
        break;
    default:
        sl_sim_wire_gemini_stream(reply, pieces, text, &e);
        break;
    }
    return e.overflow ? 0 : e.n;
}
