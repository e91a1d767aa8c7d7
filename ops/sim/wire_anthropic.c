/* wire_anthropic.c - Anthropic's messages API as the simulator speaks it: request validation in
 * Anthropic's wording ("x: Field required"), error and 200 bodies, and its named SSE events
 * (message_start ... message_stop) (see wire_internal.h).
 */
#include "wire_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

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

int sl_sim_wire_anthropic_error(const sl_sim_error_t *err, const char *msg, const char *request_id,
                                char *buf, size_t cap)
{
    return snprintf(
        buf, cap,
        "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":\"%s\"%s},"
        "\"request_id\":\"%s\"}",
        anthropic_type(err->kind), msg,
        err->spend_limit ? ",\"details\":{\"error_code\":\"enforced_spend_limit_reached\"}" : "",
        request_id != NULL ? request_id : "");
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

bool sl_sim_wire_anthropic_parse(json_t *root, sl_sim_ask_t *ask, sl_sim_error_t *err)
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

static const char *anthropic_stop(const sl_sim_reply_t *reply)
{
    if (reply->hit_max_tokens)
        return "max_tokens";
    return sl_sim_wire_calls_tool(reply) ? "tool_use" : "end_turn";
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

int sl_sim_wire_anthropic_body(const sl_sim_reply_t *reply, const char *text, char *buf, size_t cap)
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

void sl_sim_wire_anthropic_stream(const sl_sim_reply_t *r, size_t pieces, const char *text,
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
