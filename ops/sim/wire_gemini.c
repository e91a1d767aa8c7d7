/* wire_gemini.c - Gemini's generateContent as the simulator speaks it: request validation in
 * Google's wording, google.rpc error bodies with their details, GenerateContentResponse bodies,
 * and streams as SSE or as a progressively sent JSON array (see wire_internal.h).
 */
#include "wire_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

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

int sl_sim_wire_gemini_error(const sl_sim_error_t *err, const char *msg, char *buf, size_t cap)
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

bool sl_sim_wire_gemini_parse(json_t *root, sl_sim_ask_t *ask, sl_sim_error_t *err)
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

int sl_sim_wire_gemini_body(const sl_sim_reply_t *reply, const char *text, char *buf, size_t cap)
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

void sl_sim_wire_gemini_stream(const sl_sim_reply_t *r, size_t pieces, const char *text,
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
