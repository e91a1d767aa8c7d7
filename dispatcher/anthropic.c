/* anthropic.c - the Anthropic Messages API adapter (adapter.h).
 *
 * The one idea: Anthropic has no system or tool roles. System and developer messages become the
 * top-level "system"; a tool's answer is a tool_result block in a user turn; an assistant's tool
 * calls are tool_use blocks. Consecutive turns of the same role are merged into one turn, which
 * also puts the results of parallel tool calls together as the API wants them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter_impl.h"

/* Anthropic's temperature runs 0..1, OpenAI's 0..2. */
#define ANTHROPIC_MAX_TEMPERATURE 1.0
/* When neither the request nor the deployment says (the API requires max_tokens). */
#define ANTHROPIC_DEFAULT_MAX_TOKENS 4096

/* The content blocks of an OpenAI content (string, parts or null) into blocks. */
static sl_err_t content_blocks(const json_t *content, json_t *blocks, char *err, size_t errlen)
{
    if (json_is_string(content)) {
        if (json_string_length(content) > 0)
            json_array_append_new(blocks, json_pack("{s:s, s:O}", "type", "text", "text", content));
        return SL_OK;
    }
    size_t i;
    const json_t *part;
    json_array_foreach(content, i, part)
    {
        const char *type = json_string_value(json_object_get(part, "type"));
        if (type != NULL && strcmp(type, "text") == 0) {
            const json_t *text = json_object_get(part, "text");
            if (json_string_length(text) > 0)
                json_array_append_new(blocks,
                                      json_pack("{s:s, s:O}", "type", "text", "text", text));
        } else if (type != NULL && strcmp(type, "image_url") == 0) {
            const json_t *iu = json_object_get(part, "image_url");
            const char *url = json_is_string(iu) ? json_string_value(iu)
                                                 : json_string_value(json_object_get(iu, "url"));
            char *mime = NULL, *data = NULL;
            if (sl_data_url(url, &mime, &data)) {
                json_array_append_new(blocks, json_pack("{s:s, s:{s:s, s:s, s:s}}", "type", "image",
                                                        "source", "type", "base64", "media_type",
                                                        mime, "data", data));
                free(mime);
                free(data);
            } else if (url != NULL) {
                json_array_append_new(blocks, json_pack("{s:s, s:{s:s, s:s}}", "type", "image",
                                                        "source", "type", "url", "url", url));
            } else {
                snprintf(err, errlen, "an image_url part without a url");
                return SL_EINVAL;
            }
        } else {
            snprintf(err, errlen, "content part type \"%s\" is not supported by anthropic",
                     type != NULL ? type : "(none)");
            return SL_EINVAL;
        }
    }
    return SL_OK;
}

/* An assistant message's tool_calls as tool_use blocks appended to blocks. */
static sl_err_t tool_use_blocks(const json_t *calls, json_t *blocks, char *err, size_t errlen)
{
    size_t i;
    const json_t *tc;
    json_array_foreach(calls, i, tc)
    {
        const json_t *fn = json_object_get(tc, "function");
        const char *id = json_string_value(json_object_get(tc, "id"));
        const char *name = json_string_value(json_object_get(fn, "name"));
        const char *args = json_string_value(json_object_get(fn, "arguments"));
        if (id == NULL || name == NULL) {
            snprintf(err, errlen, "a tool call without id or function name");
            return SL_EINVAL;
        }
        json_t *input = args != NULL && args[0] != '\0' ? json_loads(args, 0, NULL) : json_object();
        if (!json_is_object(input)) {
            json_decref(input);
            snprintf(err, errlen, "tool call %s: arguments are not a JSON object", id);
            return SL_EINVAL;
        }
        json_array_append_new(blocks, json_pack("{s:s, s:s, s:s, s:o}", "type", "tool_use", "id",
                                                id, "name", name, "input", input));
    }
    return SL_OK;
}

static sl_err_t translate_messages(const json_t *chat, json_t *body, char *err, size_t errlen)
{
    json_t *messages = json_array();
    json_t *system = json_array(); /* text blocks */
    sl_err_t rc = SL_OK;
    size_t i;
    const json_t *m;
    json_array_foreach(json_object_get(chat, "messages"), i, m)
    {
        const char *role = json_string_value(json_object_get(m, "role"));
        const json_t *content = json_object_get(m, "content");
        if (role == NULL) {
            snprintf(err, errlen, "message %zu has no role", i);
            rc = SL_EINVAL;
            break;
        }
        if (strcmp(role, "system") == 0 || strcmp(role, "developer") == 0) {
            /* Anthropic has one system prompt, before the conversation; an instruction in the
             * middle of it is the closest to the caller's intent there. */
            char *text = sl_content_text(content);
            if (text == NULL) {
                rc = SL_ENOMEM;
                break;
            }
            if (text[0] != '\0')
                json_array_append_new(system,
                                      json_pack("{s:s, s:s}", "type", "text", "text", text));
            free(text);
        } else if (strcmp(role, "user") == 0 || strcmp(role, "assistant") == 0) {
            json_t *blocks = json_array();
            rc = content_blocks(content, blocks, err, errlen);
            if (rc == SL_OK && strcmp(role, "assistant") == 0)
                rc = tool_use_blocks(json_object_get(m, "tool_calls"), blocks, err, errlen);
            if (rc != SL_OK) {
                json_decref(blocks);
                break;
            }
            sl_add_turn(messages, role, "content", blocks);
        } else if (strcmp(role, "tool") == 0) {
            const char *id = json_string_value(json_object_get(m, "tool_call_id"));
            if (id == NULL) {
                snprintf(err, errlen, "message %zu: a tool message without tool_call_id", i);
                rc = SL_EINVAL;
                break;
            }
            char *text = sl_content_text(content);
            if (text == NULL) {
                rc = SL_ENOMEM;
                break;
            }
            json_t *block = json_pack("{s:s, s:s}", "type", "tool_result", "tool_use_id", id);
            if (text[0] != '\0')
                json_object_set_new(block, "content", json_string(text));
            free(text);
            sl_add_turn(messages, "user", "content", json_pack("[o]", block));
        } else {
            snprintf(err, errlen, "message %zu: role \"%s\" is not supported", i, role);
            rc = SL_EINVAL;
            break;
        }
    }
    if (rc == SL_OK) {
        if (json_array_size(system) == 1)
            json_object_set(body, "system", json_object_get(json_array_get(system, 0), "text"));
        else if (json_array_size(system) > 1)
            json_object_set(body, "system", system);
        json_object_set(body, "messages", messages);
    }
    json_decref(system);
    json_decref(messages);
    return rc;
}

static sl_err_t translate_tools(const json_t *chat, json_t *body, char *err, size_t errlen)
{
    const json_t *tools = json_object_get(chat, "tools");
    if (json_array_size(tools) > 0) {
        json_t *out = json_array();
        size_t i;
        const json_t *t;
        json_array_foreach(tools, i, t)
        {
            const char *type = json_string_value(json_object_get(t, "type"));
            const json_t *fn = json_object_get(t, "function");
            const char *name = json_string_value(json_object_get(fn, "name"));
            if ((type != NULL && strcmp(type, "function") != 0) || name == NULL) {
                json_decref(out);
                snprintf(err, errlen, "tool %zu is not a function with a name", i);
                return SL_EINVAL;
            }
            const json_t *params = json_object_get(fn, "parameters");
            json_t *tool = json_pack("{s:s}", "name", name);
            const json_t *desc = json_object_get(fn, "description");
            if (json_is_string(desc))
                json_object_set(tool, "description", (json_t *)desc);
            json_object_set_new(tool, "input_schema",
                                json_is_object(params)
                                    ? json_deep_copy(params)
                                    : json_pack("{s:s, s:{}}", "type", "object", "properties"));
            json_array_append_new(out, tool);
        }
        json_object_set_new(body, "tools", out);
    }
    const json_t *choice = json_object_get(chat, "tool_choice");
    json_t *tc = NULL;
    if (json_is_string(choice)) {
        const char *c = json_string_value(choice);
        tc = json_pack("{s:s}", "type",
                       strcmp(c, "required") == 0 ? "any"
                       : strcmp(c, "none") == 0   ? "none"
                                                  : "auto");
    } else if (json_is_object(choice)) {
        const char *name =
            json_string_value(json_object_get(json_object_get(choice, "function"), "name"));
        if (name == NULL) {
            snprintf(err, errlen, "tool_choice names no function");
            return SL_EINVAL;
        }
        tc = json_pack("{s:s, s:s}", "type", "tool", "name", name);
    }
    if (json_is_false(json_object_get(chat, "parallel_tool_calls")) && json_array_size(tools) > 0) {
        if (tc == NULL)
            tc = json_pack("{s:s}", "type", "auto");
        if (strcmp(json_string_value(json_object_get(tc, "type")), "none") != 0)
            json_object_set_new(tc, "disable_parallel_tool_use", json_true());
    }
    if (tc != NULL)
        json_object_set_new(body, "tool_choice", tc);
    return SL_OK;
}

static sl_err_t request_anthropic(const sl_deployment_cfg_t *dep, const json_t *chat,
                                  sl_adapter_request_t *out, char *err, size_t errlen)
{
    json_t *body = json_pack("{s:s}", "model", dep->model);
    if (body == NULL)
        return SL_ENOMEM;
    sl_err_t rc = translate_messages(chat, body, err, errlen);
    if (rc == SL_OK)
        rc = translate_tools(chat, body, err, errlen);
    if (rc != SL_OK) {
        json_decref(body);
        return rc;
    }
    /* max_tokens is required by the Messages API. */
    int64_t max_tokens = sl_chat_max_tokens(chat);
    if (max_tokens <= 0)
        max_tokens =
            dep->max_output_tokens > 0 ? dep->max_output_tokens : ANTHROPIC_DEFAULT_MAX_TOKENS;
    json_object_set_new(body, "max_tokens", json_integer(max_tokens));
    const json_t *temp = json_object_get(chat, "temperature");
    if (json_is_number(temp)) {
        double t = json_number_value(temp);
        json_object_set_new(
            body, "temperature",
            json_real(t > ANTHROPIC_MAX_TEMPERATURE ? ANTHROPIC_MAX_TEMPERATURE : t));
    }
    const json_t *top_p = json_object_get(chat, "top_p");
    if (json_is_number(top_p))
        json_object_set(body, "top_p", (json_t *)top_p);
    const json_t *stop = json_object_get(chat, "stop");
    if (json_is_string(stop)) {
        json_object_set_new(body, "stop_sequences", json_pack("[O]", stop));
    } else if (json_array_size(stop) > 0) {
        json_object_set_new(body, "stop_sequences", json_deep_copy(stop));
    }
    const json_t *user = json_object_get(chat, "user");
    if (json_is_string(user))
        json_object_set_new(body, "metadata", json_pack("{s:O}", "user_id", user));
    out->stream = json_is_true(json_object_get(chat, "stream"));
    if (out->stream)
        json_object_set_new(body, "stream", json_true());
    /* Not expressed: n (always 1), penalties, logit_bias, logprobs, seed and response_format
     * have no Messages API equivalent; route structured output to deployments that say
     * supports_json. */
    rc = sl_adapter_set_body(out, body);
    json_decref(body);
    if (rc != SL_OK)
        return rc;
    size_t n = strlen(dep->base_url);
    while (n > 0 && dep->base_url[n - 1] == '/')
        n--;
    out->url = sl_strdupf("%.*s/messages", (int)n, dep->base_url);
    char *version = sl_strdupf("anthropic-version: %s", dep->api_version);
    if (out->url == NULL || version == NULL) {
        free(version);
        return SL_ENOMEM;
    }
    rc = sl_adapter_add_header(out, version);
    free(version);
    return rc;
}

/* ---- Answers ------------------------------------------------------------------------------- */

static int usage_anthropic(const json_t *body, sl_usage_t *u)
{
    const json_t *us = json_object_get(body, "usage");
    if (!json_is_object(us))
        return 0;
    /* input_tokens excludes the cache: every input token is the sum of the three. */
    u->cached = sl_jcount(us, "cache_read_input_tokens");
    u->input =
        sl_jcount(us, "input_tokens") + sl_jcount(us, "cache_creation_input_tokens") + u->cached;
    u->output = sl_jcount(us, "output_tokens");
    u->reasoning = 0; /* thinking tokens are in output_tokens, not reported apart */
    u->total = u->input + u->output;
    return 1;
}

static const char *finish_anthropic(const char *reason, int has_tool_calls)
{
    (void)has_tool_calls;
    if (strcmp(reason, "max_tokens") == 0 || strcmp(reason, "model_context_window_exceeded") == 0)
        return "length";
    if (strcmp(reason, "tool_use") == 0)
        return "tool_calls";
    if (strcmp(reason, "refusal") == 0)
        return "content_filter";
    return "stop"; /* end_turn, stop_sequence, pause_turn */
}

static json_t *response_anthropic(const json_t *body, const char *model)
{
    const json_t *content = json_object_get(body, "content");
    if (!json_is_object(body) || !json_is_array(content))
        return NULL;
    size_t len = 0;
    size_t i;
    const json_t *b;
    json_array_foreach(content, i, b)
    {
        const char *type = json_string_value(json_object_get(b, "type"));
        if (type != NULL && strcmp(type, "text") == 0)
            len += json_string_length(json_object_get(b, "text"));
    }
    char *text = malloc(len + 1);
    json_t *tools = json_array();
    if (text == NULL || tools == NULL) {
        free(text);
        json_decref(tools);
        return NULL;
    }
    size_t at = 0;
    int ntext = 0;
    json_array_foreach(content, i, b)
    {
        const char *type = json_string_value(json_object_get(b, "type"));
        if (type == NULL)
            continue;
        if (strcmp(type, "text") == 0) {
            const json_t *t = json_object_get(b, "text");
            memcpy(text + at, json_string_value(t) ? json_string_value(t) : "",
                   json_string_length(t));
            at += json_string_length(t);
            ntext++;
        } else if (strcmp(type, "tool_use") == 0) {
            char *args = json_dumps(json_object_get(b, "input"), JSON_COMPACT | JSON_ENCODE_ANY);
            const char *id = json_string_value(json_object_get(b, "id"));
            const char *name = json_string_value(json_object_get(b, "name"));
            json_array_append_new(tools,
                                  json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id ? id : "", "type",
                                            "function", "function", "name", name ? name : "",
                                            "arguments", args ? args : "{}"));
            free(args);
        }
    }
    text[at] = '\0';
    sl_usage_t u = {0, 0, 0, 0, 0};
    int has_usage = usage_anthropic(body, &u);
    const char *stop = json_string_value(json_object_get(body, "stop_reason"));
    const char *m = json_string_value(json_object_get(body, "model"));
    json_t *c = sl_canonical_completion(
        json_string_value(json_object_get(body, "id")), m != NULL ? m : model, 0,
        ntext == 0 && json_array_size(tools) > 0 ? NULL : text, tools,
        stop != NULL ? finish_anthropic(stop, json_array_size(tools) > 0) : NULL,
        has_usage ? &u : NULL);
    free(text);
    json_decref(tools);
    return c;
}

/* A spend cap reached comes as a 429 rate_limit_error with this code and no retry-after: it
 * does not pass by waiting. */
static int spend_limit_reached(const json_t *body)
{
    const json_t *err = json_object_get(body, "error");
    const char *code =
        json_string_value(json_object_get(json_object_get(err, "details"), "error_code"));
    if (code == NULL)
        code = json_string_value(json_object_get(json_object_get(body, "details"), "error_code"));
    return code != NULL && strcmp(code, "enforced_spend_limit_reached") == 0;
}

/* The outcome the body's error type means, in *outcome; 0 when it has no type or one not known
 * here. */
static int error_type_outcome(const json_t *body, sl_outcome_t *outcome)
{
    const char *type = json_string_value(json_object_get(json_object_get(body, "error"), "type"));
    if (type == NULL)
        return 0;
    static const struct {
        const char *type;
        sl_outcome_t outcome;
    } map[] = {
        {"rate_limit_error", SL_OUTCOME_RATE_LIMITED},
        {"overloaded_error", SL_OUTCOME_OVERLOADED},
        {"api_error", SL_OUTCOME_SERVER_ERROR},
        {"timeout_error", SL_OUTCOME_TIMEOUT},
        {"authentication_error", SL_OUTCOME_AUTH_ERROR},
        {"permission_error", SL_OUTCOME_AUTH_ERROR},
        {"billing_error", SL_OUTCOME_QUOTA_EXHAUSTED},
        {"invalid_request_error", SL_OUTCOME_CLIENT_ERROR},
        {"request_too_large", SL_OUTCOME_CLIENT_ERROR},
        {"not_found_error", SL_OUTCOME_CLIENT_ERROR},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strcmp(type, map[i].type) == 0) {
            *outcome = map[i].outcome == SL_OUTCOME_RATE_LIMITED && spend_limit_reached(body)
                           ? SL_OUTCOME_QUOTA_EXHAUSTED
                           : map[i].outcome;
            return 1;
        }
    }
    return 0;
}

static sl_outcome_t classify_anthropic(long http_status, const json_t *body)
{
    sl_outcome_t by_type;
    int typed = error_type_outcome(body, &by_type);
    if (http_status >= 200 && http_status < 300) {
        if (typed)
            return by_type;
        return json_is_object(body) && json_is_object(json_object_get(body, "usage"))
                   ? SL_OUTCOME_OK
                   : SL_OUTCOME_BAD_RESPONSE;
    }
    if (typed)
        return by_type;
    if (http_status == 429)
        return spend_limit_reached(body) ? SL_OUTCOME_QUOTA_EXHAUSTED : SL_OUTCOME_RATE_LIMITED;
    if (http_status == 401 || http_status == 403)
        return SL_OUTCOME_AUTH_ERROR;
    if (http_status == 503 || http_status == 529)
        return SL_OUTCOME_OVERLOADED;
    if (http_status == 504)
        return SL_OUTCOME_TIMEOUT;
    if (http_status == 408 || http_status == 409 || http_status >= 500)
        return SL_OUTCOME_SERVER_ERROR;
    return SL_OUTCOME_CLIENT_ERROR;
}

static json_t *error_anthropic(const json_t *body)
{
    const json_t *perr = json_object_get(body, "error");
    if (!json_is_object(perr))
        return NULL;
    json_t *e = json_object();
    const char *type = json_string_value(json_object_get(perr, "type"));
    const char *msg = json_string_value(json_object_get(perr, "message"));
    const char *code =
        json_string_value(json_object_get(json_object_get(perr, "details"), "error_code"));
    if (code == NULL)
        code = json_string_value(json_object_get(json_object_get(body, "details"), "error_code"));
    if (type != NULL)
        json_object_set_new(e, "type", json_string(type));
    json_object_set_new(e, "code", code != NULL ? json_string(code) : json_null());
    if (msg != NULL)
        json_object_set_new(e, "message", json_string(msg));
    return e;
}

/* ---- Streams -------------------------------------------------------------------------------
 * message_start (id, model, input counts), content_block_start / _delta / _stop per block
 * (text_delta, input_json_delta for tool_use blocks, thinking_delta), message_delta
 * (stop_reason, cumulative output_tokens), message_stop; ping; error. */

static sl_err_t stream_event_anthropic(sl_stream_t *st, const char *event, const char *data,
                                       size_t len)
{
    json_t *j = json_loadb(data, len, 0, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return SL_EPARSE;
    }
    const char *type = json_string_value(json_object_get(j, "type"));
    if (type == NULL)
        type = event;
    sl_err_t rc = SL_OK;
    const json_t *index = json_object_get(j, "index");
    int64_t block = json_is_integer(index) ? json_integer_value(index) : 0;
    if (strcmp(type, "message_start") == 0) {
        const json_t *msg = json_object_get(j, "message");
        sl_stream_meta(st, json_string_value(json_object_get(msg, "id")),
                       json_string_value(json_object_get(msg, "model")), 0);
        sl_usage_t u = {0, 0, 0, 0, 0};
        if (usage_anthropic(msg, &u))
            sl_stream_set_usage(st, &u, 1, 1);
    } else if (strcmp(type, "content_block_start") == 0) {
        const json_t *cb = json_object_get(j, "content_block");
        const char *cbt = json_string_value(json_object_get(cb, "type"));
        if (cbt != NULL && strcmp(cbt, "tool_use") == 0) {
            rc = sl_stream_tool(st, block, json_string_value(json_object_get(cb, "id")),
                                json_string_value(json_object_get(cb, "name")), NULL, 0);
        } else if (cbt != NULL && strcmp(cbt, "text") == 0) {
            const json_t *t = json_object_get(cb, "text");
            rc = sl_stream_text(st, json_string_value(t), json_string_length(t));
        }
    } else if (strcmp(type, "content_block_delta") == 0) {
        const json_t *d = json_object_get(j, "delta");
        const char *dt = json_string_value(json_object_get(d, "type"));
        if (dt == NULL) {
            /* nothing to take */
        } else if (strcmp(dt, "text_delta") == 0) {
            const json_t *t = json_object_get(d, "text");
            rc = sl_stream_text(st, json_string_value(t), json_string_length(t));
        } else if (strcmp(dt, "input_json_delta") == 0) {
            const json_t *p = json_object_get(d, "partial_json");
            rc = sl_stream_tool(st, block, NULL, NULL, json_string_value(p), json_string_length(p));
        } else if (strcmp(dt, "thinking_delta") == 0) {
            const json_t *t = json_object_get(d, "thinking");
            sl_stream_reasoning_text(st, json_string_value(t) ? json_string_value(t) : "",
                                     json_string_length(t));
        }
    } else if (strcmp(type, "message_delta") == 0) {
        const char *stop =
            json_string_value(json_object_get(json_object_get(j, "delta"), "stop_reason"));
        if (stop != NULL)
            sl_stream_finish(st, finish_anthropic(stop, sl_stream_tool_count(st) > 0));
        const json_t *us = json_object_get(j, "usage");
        if (json_is_object(us)) {
            /* output_tokens is cumulative; newer API versions repeat the input counts too. */
            sl_usage_t u = {0, 0, 0, 0, 0};
            usage_anthropic(j, &u);
            int has_input = json_object_get(us, "input_tokens") != NULL &&
                            !json_is_null(json_object_get(us, "input_tokens"));
            sl_stream_set_usage(st, &u, has_input, json_object_get(us, "output_tokens") != NULL);
        }
    } else if (strcmp(type, "message_stop") == 0) {
        sl_stream_done(st);
    } else if (strcmp(type, "error") == 0) {
        sl_outcome_t outcome;
        if (!error_type_outcome(j, &outcome))
            outcome = SL_OUTCOME_SERVER_ERROR;
        sl_stream_fail(st, j, outcome);
    }
    /* ping, content_block_stop, and event types added later carry nothing to translate. */
    json_decref(j);
    return rc;
}

const sl_adapter_t sl_adapter_anthropic = {
    .api = SL_PROVIDER_ANTHROPIC,
    .name = "anthropic",
    .auth_prefix = "x-api-key: ",
    .request = request_anthropic,
    .classify = classify_anthropic,
    .response = response_anthropic,
    .usage = usage_anthropic,
    .error = error_anthropic,
    .retry_hint_ms = NULL,
    .finish_reason = finish_anthropic,
    .stream_event = stream_event_anthropic,
    .complete_at_eof = 0,
};
