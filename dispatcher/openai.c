/* openai.c - the openai and azure adapters and the OpenAI dialect helpers (see openai.h). */
#include "openai.h"

#include <stdlib.h>
#include <string.h>

#include "adapter_impl.h"

/* OpenAI says "do not retry" for quota and spend caps with a 429 status. */
static int is_quota_error(const json_t *body)
{
    static const char *const codes[] = {"insufficient_quota", "credit_balance_exhausted",
                                        "organization_spend_limit_exceeded",
                                        "project_spend_limit_exceeded", NULL};
    const json_t *err = json_object_get(body, "error");
    const char *code = json_string_value(json_object_get(err, "code"));
    const char *type = json_string_value(json_object_get(err, "type"));
    for (int i = 0; codes[i] != NULL; i++) {
        if ((code != NULL && strcmp(code, codes[i]) == 0) ||
            (type != NULL && strcmp(type, codes[i]) == 0))
            return 1;
    }
    return 0;
}

sl_outcome_t sl_openai_classify(int transport_error, long http_status, const json_t *body)
{
    if (transport_error == 2)
        return SL_OUTCOME_TIMEOUT;
    if (transport_error != 0)
        return SL_OUTCOME_TRANSPORT;
    if (http_status >= 200 && http_status < 300)
        return json_is_object(body) && json_is_object(json_object_get(body, "usage"))
                   ? SL_OUTCOME_OK
                   : SL_OUTCOME_BAD_RESPONSE;
    if (http_status == 429)
        return is_quota_error(body) ? SL_OUTCOME_QUOTA_EXHAUSTED : SL_OUTCOME_RATE_LIMITED;
    if (http_status == 401 || http_status == 403)
        return SL_OUTCOME_AUTH_ERROR;
    if (http_status == 408 || http_status == 409)
        return SL_OUTCOME_SERVER_ERROR;
    if (http_status == 503 || http_status == 529)
        return SL_OUTCOME_OVERLOADED;
    if (http_status == 504)
        return SL_OUTCOME_TIMEOUT;
    if (http_status >= 500)
        return SL_OUTCOME_SERVER_ERROR;
    return SL_OUTCOME_CLIENT_ERROR;
}

static int64_t jint(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (int64_t)json_integer_value(v) : 0;
}

json_t *sl_openai_usage(const json_t *body)
{
    const json_t *u = json_object_get(body, "usage");
    if (!json_is_object(u))
        return NULL;
    int64_t in = jint(u, "prompt_tokens");
    int64_t out = jint(u, "completion_tokens");
    int64_t cached = jint(json_object_get(u, "prompt_tokens_details"), "cached_tokens");
    int64_t reasoning = jint(json_object_get(u, "completion_tokens_details"), "reasoning_tokens");
    int64_t total = jint(u, "total_tokens");
    if (total < in + out)
        total = in + out;
    return json_pack("{s:I, s:I, s:I, s:I, s:I}", "input", (json_int_t)in, "output",
                     (json_int_t)out, "cached", (json_int_t)cached, "reasoning",
                     (json_int_t)reasoning, "total", (json_int_t)total);
}

/* ---- The openai and azure adapters (adapter.h) ---------------------------------------------
 *
 * Both speak chat completions, so the canonical body goes out almost as it is and the answer is
 * already canonical. They differ in the URL, the credential header and the model: Azure names
 * the model by the deployment in the URL and takes none in the body. */

/* base_url + suffix, without doubling a '/'. */
static char *join_url(const char *base, const char *suffix)
{
    size_t n = strlen(base);
    while (n > 0 && base[n - 1] == '/')
        n--;
    return sl_strdupf("%.*s%s", (int)n, base, suffix);
}

/* The canonical body with streaming usage requested: without include_usage, OpenAI sends no
 * usage in a stream, and the ledger could not settle it. NULL when out of memory. */
static json_t *chat_body(const json_t *chat, int *stream)
{
    json_t *body = json_deep_copy(chat);
    if (body == NULL)
        return NULL;
    *stream = json_is_true(json_object_get(body, "stream"));
    if (*stream) {
        json_t *opts = json_object_get(body, "stream_options");
        /* json_object_set_new releases the value when it fails, so opts is only used after a
         * success. */
        if (!json_is_object(opts)) {
            opts = json_object();
            if (json_object_set_new(body, "stream_options", opts) != 0)
                opts = NULL;
        }
        if (opts == NULL || json_object_set_new(opts, "include_usage", json_true()) != 0) {
            json_decref(body);
            return NULL;
        }
    } else {
        /* "stream_options" is only allowed with "stream": true. */
        json_object_del(body, "stream_options");
    }
    return body;
}

static sl_err_t request_openai(const sl_deployment_cfg_t *dep, const json_t *chat,
                               sl_adapter_request_t *out, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    json_t *body = chat_body(chat, &out->stream);
    if (body == NULL)
        return SL_ENOMEM;
    /* The deployment's own model name goes to the provider, whatever the caller asked for:
     * the route decided where the job runs. */
    sl_err_t rc =
        json_object_set_new(body, "model", json_string(dep->model)) == 0 ? SL_OK : SL_ENOMEM;
    if (rc == SL_OK)
        rc = sl_adapter_set_body(out, body);
    json_decref(body);
    out->url = join_url(dep->base_url, "/chat/completions");
    return rc == SL_OK && out->url == NULL ? SL_ENOMEM : rc;
}

static sl_err_t request_azure(const sl_deployment_cfg_t *dep, const json_t *chat,
                              sl_adapter_request_t *out, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    json_t *body = chat_body(chat, &out->stream);
    if (body == NULL)
        return SL_ENOMEM;
    json_object_del(body, "model"); /* the deployment in the URL is the model */
    sl_err_t rc = sl_adapter_set_body(out, body);
    json_decref(body);
    char *suffix = sl_strdupf("/chat/completions?api-version=%s", dep->api_version);
    out->url = suffix != NULL ? join_url(dep->base_url, suffix) : NULL;
    free(suffix);
    return rc == SL_OK && out->url == NULL ? SL_ENOMEM : rc;
}

/* What an error object means when it arrives without a telling status: inside a stream (HTTP
 * 200 already sent) or in a 2xx body. */
static sl_outcome_t openai_error_outcome(const json_t *body)
{
    if (is_quota_error(body))
        return SL_OUTCOME_QUOTA_EXHAUSTED;
    const json_t *err = json_object_get(body, "error");
    const char *code = json_string_value(json_object_get(err, "code"));
    const char *type = json_string_value(json_object_get(err, "type"));
    if (code != NULL && strcmp(code, "rate_limit_exceeded") == 0)
        return SL_OUTCOME_RATE_LIMITED;
    if (type != NULL && strcmp(type, "invalid_request_error") == 0)
        return SL_OUTCOME_CLIENT_ERROR;
    return SL_OUTCOME_SERVER_ERROR;
}

static sl_outcome_t classify_openai(long http_status, const json_t *body)
{
    if (http_status >= 200 && http_status < 300 && json_is_object(json_object_get(body, "error")))
        return openai_error_outcome(body);
    return sl_openai_classify(0, http_status, body);
}

static json_t *response_openai(const json_t *body, const char *model)
{
    (void)model;
    if (!json_is_object(body) || !json_is_array(json_object_get(body, "choices")))
        return NULL;
    /* Already canonical: a reference, not a copy (the copy was 2 % of the dispatcher's time).
     * The body is only read from here on. */
    return json_incref((json_t *)body);
}

static int usage_openai(const json_t *body, sl_usage_t *u)
{
    const json_t *us = json_object_get(body, "usage");
    if (!json_is_object(us))
        return 0;
    u->input = jint(us, "prompt_tokens");
    u->output = jint(us, "completion_tokens");
    u->cached = jint(json_object_get(us, "prompt_tokens_details"), "cached_tokens");
    u->reasoning = jint(json_object_get(us, "completion_tokens_details"), "reasoning_tokens");
    u->total = jint(us, "total_tokens");
    return 1;
}

static json_t *error_openai(const json_t *body)
{
    /* Keep the provider's own error text (never headers, never credentials). Azure sends a
     * code ("429") and no type. */
    const json_t *perr = json_object_get(body, "error");
    if (!json_is_object(perr))
        return NULL;
    json_t *e = json_object();
    const char *type = json_string_value(json_object_get(perr, "type"));
    const char *code = json_string_value(json_object_get(perr, "code"));
    const char *msg = json_string_value(json_object_get(perr, "message"));
    if (type != NULL)
        json_object_set_new(e, "type", json_string(type));
    json_object_set_new(e, "code", code != NULL ? json_string(code) : json_null());
    if (msg != NULL)
        json_object_set_new(e, "message", json_string(msg));
    return e;
}

static const char *finish_openai(const char *reason, int has_tool_calls)
{
    (void)has_tool_calls;
    if (strcmp(reason, "length") == 0)
        return "length";
    if (strcmp(reason, "tool_calls") == 0 || strcmp(reason, "function_call") == 0)
        return "tool_calls";
    if (strcmp(reason, "content_filter") == 0)
        return "content_filter";
    return "stop";
}

static sl_err_t stream_event_openai(sl_stream_t *st, const char *event, const char *data,
                                    size_t len)
{
    (void)event;
    if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
        sl_stream_done(st);
        return SL_OK;
    }
    json_t *j = json_loadb(data, len, 0, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return SL_EPARSE;
    }
    sl_err_t rc = SL_OK;
    if (json_is_object(json_object_get(j, "error"))) {
        sl_stream_fail(st, j, openai_error_outcome(j));
        goto out;
    }
    sl_stream_meta(st, json_string_value(json_object_get(j, "id")),
                   json_string_value(json_object_get(j, "model")),
                   json_integer_value(json_object_get(j, "created")));
    sl_usage_t u = {0, 0, 0, 0, 0};
    if (usage_openai(j, &u))
        sl_stream_set_usage(st, &u, 1, 1);
    /* n is 1 (schema/request.json), so only choice 0 exists; Azure's first chunk has none. */
    const json_t *choice = json_array_get(json_object_get(j, "choices"), 0);
    const json_t *delta = json_object_get(choice, "delta");
    const json_t *content = json_object_get(delta, "content");
    if (json_is_string(content))
        rc = sl_stream_text(st, json_string_value(content), json_string_length(content));
    static const char *const reasoning_keys[] = {"reasoning_content", "reasoning", NULL};
    for (int i = 0; reasoning_keys[i] != NULL; i++) {
        const json_t *r = json_object_get(delta, reasoning_keys[i]);
        if (json_is_string(r))
            sl_stream_reasoning_text(st, json_string_value(r), json_string_length(r));
    }
    size_t i;
    const json_t *tc;
    json_array_foreach(json_object_get(delta, "tool_calls"), i, tc)
    {
        if (rc != SL_OK)
            break;
        const json_t *fn = json_object_get(tc, "function");
        const json_t *idx = json_object_get(tc, "index");
        const json_t *args = json_object_get(fn, "arguments");
        rc = sl_stream_tool(st, json_is_integer(idx) ? json_integer_value(idx) : (json_int_t)i,
                            json_string_value(json_object_get(tc, "id")),
                            json_string_value(json_object_get(fn, "name")), json_string_value(args),
                            json_is_string(args) ? json_string_length(args) : 0);
    }
    const char *fr = json_string_value(json_object_get(choice, "finish_reason"));
    if (rc == SL_OK && fr != NULL)
        sl_stream_finish(st, finish_openai(fr, sl_stream_tool_count(st) > 0));
out:
    json_decref(j);
    return rc;
}

const sl_adapter_t sl_adapter_openai = {
    .api = SL_PROVIDER_OPENAI,
    .name = "openai",
    .auth_prefix = "Authorization: Bearer ",
    .request = request_openai,
    .classify = classify_openai,
    .response = response_openai,
    .usage = usage_openai,
    .error = error_openai,
    .retry_hint_ms = NULL,
    .finish_reason = finish_openai,
    .stream_event = stream_event_openai,
    .complete_at_eof = 0,
};

const sl_adapter_t sl_adapter_azure = {
    .api = SL_PROVIDER_AZURE,
    .name = "azure",
    .auth_prefix = "api-key: ",
    .request = request_azure,
    .classify = classify_openai,
    .response = response_openai,
    .usage = usage_openai,
    .error = error_openai,
    .retry_hint_ms = NULL,
    .finish_reason = finish_openai,
    .stream_event = stream_event_openai,
    .complete_at_eof = 0,
};
