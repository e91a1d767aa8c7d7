/* wire_openai.c - OpenAI chat completions as the simulator speaks them, with Azure OpenAI's
 * differences (its error shape and prompt_filter_results): request validation in OpenAI's own
 * wording, error and 200 bodies, and chat.completion.chunk streams (see wire_internal.h).
 */
#include "wire_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

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

int sl_sim_wire_openai_error(sl_sim_api_t api, const sl_sim_error_t *err, const char *msg,
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

bool sl_sim_wire_openai_parse(json_t *root, sl_sim_ask_t *ask, sl_sim_error_t *err)
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

int64_t sl_sim_wire_openai_estimate(const char *body, size_t len)
{
    json_t *root = json_loadb(body, len, 0, NULL);
    json_t *messages = json_object_get(root, "messages");
    int64_t est = json_is_array(messages) ? (openai_chars(messages) + 3) / 4 : -1;
    json_decref(root);
    return est;
}

static const char *openai_finish(const sl_sim_reply_t *reply)
{
    if (reply->hit_max_tokens)
        return "length";
    return sl_sim_wire_calls_tool(reply) ? "tool_calls" : "stop";
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

int sl_sim_wire_openai_body(const sl_sim_reply_t *reply, const char *text, char *buf, size_t cap)
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

void sl_sim_wire_openai_stream(const sl_sim_reply_t *r, size_t pieces, const char *text,
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
