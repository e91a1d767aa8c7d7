/* adapter.c - the adapter lookup, the generic half of every adapter call, and helpers the
 * adapters share (see adapter.h, adapter_impl.h). */
#include "adapter_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

const sl_adapter_t *sl_adapter_for(sl_provider_t api)
{
    switch (api) {
    case SL_PROVIDER_OPENAI:
        return &sl_adapter_openai;
    case SL_PROVIDER_AZURE:
        return &sl_adapter_azure;
    case SL_PROVIDER_ANTHROPIC:
        return &sl_adapter_anthropic;
    case SL_PROVIDER_GEMINI:
        return &sl_adapter_gemini;
    case SL_PROVIDER_COUNT:
        break;
    }
    return NULL;
}

const char *sl_adapter_name(const sl_adapter_t *ad)
{
    return ad->name;
}

char *sl_adapter_auth_header(const sl_adapter_t *ad, const char *key)
{
    if (key == NULL || strpbrk(key, "\r\n") != NULL)
        return NULL;
    return sl_strdupf("%s%s", ad->auth_prefix, key);
}

sl_err_t sl_adapter_request(const sl_adapter_t *ad, const sl_deployment_cfg_t *dep,
                            const json_t *chat, sl_adapter_request_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (errlen > 0)
        err[0] = '\0';
    if (!json_is_object(chat) || !json_is_array(json_object_get(chat, "messages"))) {
        snprintf(err, errlen, "the request has no messages array");
        return SL_EINVAL;
    }
    sl_err_t rc = ad->request(dep, chat, out, err, errlen);
    if (rc != SL_OK)
        sl_adapter_request_clear(out);
    return rc;
}

void sl_adapter_request_clear(sl_adapter_request_t *req)
{
    free(req->url);
    free(req->body);
    for (int i = 0; i < req->nheaders; i++)
        free(req->headers[i]);
    memset(req, 0, sizeof *req);
}

sl_err_t sl_adapter_add_header(sl_adapter_request_t *req, const char *line)
{
    if (req->nheaders >= SL_ADAPTER_MAX_HEADERS)
        return SL_EINVAL;
    char *copy = strdup(line);
    if (copy == NULL)
        return SL_ENOMEM;
    req->headers[req->nheaders++] = copy;
    return SL_OK;
}

sl_err_t sl_adapter_set_body(sl_adapter_request_t *req, const json_t *body)
{
    free(req->body);
    req->body = json_dumps(body, JSON_COMPACT);
    return req->body != NULL ? SL_OK : SL_ENOMEM;
}

json_t *sl_usage_json(const sl_usage_t *u)
{
    int64_t total = u->total;
    if (total < u->input + u->output)
        total = u->input + u->output;
    return json_pack("{s:I, s:I, s:I, s:I, s:I}", "input", (json_int_t)u->input, "output",
                     (json_int_t)u->output, "cached", (json_int_t)u->cached, "reasoning",
                     (json_int_t)u->reasoning, "total", (json_int_t)total);
}

static int retryable(sl_outcome_t outcome)
{
    return outcome == SL_OUTCOME_RATE_LIMITED || outcome == SL_OUTCOME_OVERLOADED ||
           outcome == SL_OUTCOME_SERVER_ERROR || outcome == SL_OUTCOME_TIMEOUT;
}

sl_outcome_t sl_adapter_classify(const sl_adapter_t *ad, int transport_error, long http_status,
                                 const json_t *body, const sl_ratelimit_t *rl)
{
    sl_outcome_t outcome;
    if (transport_error == 2)
        outcome = SL_OUTCOME_TIMEOUT;
    else if (transport_error != 0)
        outcome = SL_OUTCOME_TRANSPORT;
    else
        outcome = ad->classify(http_status, body);
    /* OpenAI's x-should-retry: false overrides the status: e.g. a 429 "Request too large" can
     * never succeed by waiting, so it is a request error, not a capacity one. */
    if (rl != NULL && rl->should_retry == 0 && retryable(outcome))
        outcome = SL_OUTCOME_CLIENT_ERROR;
    return outcome;
}

json_t *sl_adapter_response(const sl_adapter_t *ad, const json_t *body, const char *model)
{
    return ad->response(body, model);
}

int sl_adapter_usage_of(const sl_adapter_t *ad, const json_t *body, sl_usage_t *u)
{
    memset(u, 0, sizeof *u);
    if (!ad->usage(body, u)) {
        memset(u, 0, sizeof *u);
        return 0;
    }
    if (u->total < u->input + u->output)
        u->total = u->input + u->output;
    return 1;
}

json_t *sl_adapter_usage(const sl_adapter_t *ad, const json_t *body)
{
    sl_usage_t u;
    return sl_adapter_usage_of(ad, body, &u) ? sl_usage_json(&u) : NULL;
}

int64_t sl_adapter_retry_after_ms(const sl_adapter_t *ad, const sl_ratelimit_t *rl,
                                  const json_t *body)
{
    if (rl != NULL && rl->retry_after_ms >= 0)
        return rl->retry_after_ms;
    return ad->retry_hint_ms != NULL && body != NULL ? ad->retry_hint_ms(body) : -1;
}

json_t *sl_adapter_error(const sl_adapter_t *ad, const json_t *body, const char *outcome,
                         const char *detail)
{
    json_t *e = body != NULL ? ad->error(body) : NULL;
    if (e == NULL)
        e = json_object();
    if (e == NULL)
        return NULL;
    if (!json_is_string(json_object_get(e, "type")))
        json_object_set_new(e, "type", json_string(outcome));
    if (!json_is_string(json_object_get(e, "message")))
        json_object_set_new(e, "message", json_string(detail != NULL ? detail : outcome));
    if (json_object_get(e, "code") == NULL)
        json_object_set_new(e, "code", json_null());
    return e;
}

const char *sl_adapter_finish_reason(const sl_adapter_t *ad, const char *reason, int has_tool_calls)
{
    return reason != NULL ? ad->finish_reason(reason, has_tool_calls) : NULL;
}

/* ---- Shared helpers ------------------------------------------------------------------------ */

char *sl_strdupf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    return n < 0 ? NULL : s;
}

int64_t sl_jcount(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (int64_t)json_integer_value(v) : 0;
}

int64_t sl_chat_max_tokens(const json_t *chat)
{
    int64_t n = sl_jcount(chat, "max_tokens");
    return n > 0 ? n : sl_jcount(chat, "max_completion_tokens");
}

char *sl_content_text(const json_t *content)
{
    if (json_is_string(content))
        return strdup(json_string_value(content));
    size_t cap = 1;
    size_t i;
    const json_t *part;
    json_array_foreach(content, i, part)
    {
        const char *t = json_string_value(json_object_get(part, "text"));
        if (t != NULL)
            cap += strlen(t) + 1;
    }
    char *out = malloc(cap);
    if (out == NULL)
        return NULL;
    size_t len = 0;
    out[0] = '\0';
    json_array_foreach(content, i, part)
    {
        const char *t = json_string_value(json_object_get(part, "text"));
        if (t == NULL)
            continue;
        if (len > 0)
            out[len++] = '\n';
        size_t tl = strlen(t);
        memcpy(out + len, t, tl);
        len += tl;
        out[len] = '\0';
    }
    return out;
}

json_t *sl_canonical_completion(const char *id, const char *model, int64_t created,
                                const char *content, const json_t *tool_calls, const char *finish,
                                const sl_usage_t *usage)
{
    char gen_id[48];
    if (id == NULL || id[0] == '\0') {
        char hex[33];
        sl_random_id(hex, 12);
        snprintf(gen_id, sizeof gen_id, "chatcmpl-sl%s", hex);
        id = gen_id;
    }
    if (created <= 0)
        created = sl_now_ms() / 1000;
    json_t *msg = json_pack("{s:s}", "role", "assistant");
    json_t *choice = json_pack("{s:i}", "index", 0);
    json_t *c = json_pack("{s:s, s:s, s:I, s:s}", "id", id, "object", "chat.completion", "created",
                          (json_int_t)created, "model", model != NULL ? model : "");
    if (msg == NULL || choice == NULL || c == NULL) {
        json_decref(msg);
        json_decref(choice);
        json_decref(c);
        return NULL;
    }
    json_object_set_new(msg, "content", content != NULL ? json_string(content) : json_null());
    if (json_array_size(tool_calls) > 0)
        json_object_set_new(msg, "tool_calls", json_deep_copy(tool_calls));
    json_object_set_new(choice, "message", msg);
    json_object_set_new(choice, "finish_reason",
                        finish != NULL ? json_string(finish) : json_null());
    json_object_set_new(c, "choices", json_pack("[o]", choice));
    if (usage != NULL) {
        int64_t total = usage->total > usage->input + usage->output ? usage->total
                                                                    : usage->input + usage->output;
        json_object_set_new(c, "usage",
                            json_pack("{s:I, s:I, s:I, s:{s:I}, s:{s:I}}", "prompt_tokens",
                                      (json_int_t)usage->input, "completion_tokens",
                                      (json_int_t)usage->output, "total_tokens", (json_int_t)total,
                                      "prompt_tokens_details", "cached_tokens",
                                      (json_int_t)usage->cached, "completion_tokens_details",
                                      "reasoning_tokens", (json_int_t)usage->reasoning));
    }
    return c;
}

int sl_data_url(const char *url, char **mime, char **data)
{
    *mime = *data = NULL;
    if (url == NULL || strncmp(url, "data:", 5) != 0)
        return 0;
    const char *semi = strstr(url + 5, ";base64,");
    if (semi == NULL)
        return 0;
    *mime = strndup(url + 5, (size_t)(semi - (url + 5)));
    *data = strdup(semi + 8);
    if (*mime == NULL || *data == NULL) {
        free(*mime);
        free(*data);
        *mime = *data = NULL;
        return 0;
    }
    return 1;
}

void sl_add_turn(json_t *turns, const char *role, const char *key, json_t *items)
{
    if (json_array_size(items) == 0) {
        json_decref(items);
        return;
    }
    json_t *last = json_array_get(turns, json_array_size(turns) - 1);
    const char *last_role = json_string_value(json_object_get(last, "role"));
    if (last_role != NULL && strcmp(last_role, role) == 0) {
        json_array_extend(json_object_get(last, key), items);
        json_decref(items);
        return;
    }
    json_array_append_new(turns, json_pack("{s:s, s:o}", "role", role, key, items));
}
