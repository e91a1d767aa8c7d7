/* gemini.c - the Google Gemini generateContent adapter (adapter.h).
 *
 * The one idea: Gemini's conversation is "contents", turns of role user or model made of parts
 * (text, functionCall, functionResponse); system messages go to systemInstruction and sampling
 * settings to generationConfig. A function's answer names the function, not the call, so the
 * translation remembers which function each earlier tool call id called. Gemini sends no
 * rate-limit headers: its retry hint is google.rpc.RetryInfo in the error body, and whether a
 * 429 passes by waiting is in google.rpc.QuotaFailure (per-day quotas do not, soon).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter_impl.h"
#include "timefmt.h"

/* The keys of Gemini's Schema object (an OpenAPI 3.0 subset); anything else in a JSON Schema
 * (additionalProperties, $schema, strict, ...) makes the API refuse the request. */
static const char *const schema_keys[] = {"type",
                                          "format",
                                          "title",
                                          "description",
                                          "nullable",
                                          "enum",
                                          "maxItems",
                                          "minItems",
                                          "properties",
                                          "required",
                                          "minProperties",
                                          "maxProperties",
                                          "minLength",
                                          "maxLength",
                                          "pattern",
                                          "example",
                                          "anyOf",
                                          "propertyOrdering",
                                          "default",
                                          "items",
                                          "minimum",
                                          "maximum",
                                          NULL};

/* A JSON Schema reduced to what Gemini's Schema takes: unknown keywords dropped, a type list
 * with "null" turned into nullable, const into a one-value enum. Caller owns the result. */
static json_t *gemini_schema(const json_t *s, int depth)
{
    if (!json_is_object(s) || depth > 32)
        return json_object();
    json_t *out = json_object();
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v)
    {
        int known = 0;
        for (int i = 0; schema_keys[i] != NULL; i++)
            known |= strcmp(key, schema_keys[i]) == 0;
        if (strcmp(key, "const") == 0) {
            json_object_set_new(out, "enum", json_pack("[O]", v));
            continue;
        }
        if (!known)
            continue;
        if (strcmp(key, "type") == 0 && json_is_array(v)) {
            size_t i;
            json_t *t;
            json_array_foreach(v, i, t)
            {
                if (json_is_string(t) && strcmp(json_string_value(t), "null") == 0)
                    json_object_set_new(out, "nullable", json_true());
                else if (json_is_string(t) && json_object_get(out, "type") == NULL)
                    json_object_set(out, "type", t);
            }
        } else if (strcmp(key, "properties") == 0 && json_is_object(v)) {
            json_t *props = json_object();
            const char *pk;
            json_t *pv;
            json_object_foreach(v, pk, pv)
                json_object_set_new(props, pk, gemini_schema(pv, depth + 1));
            json_object_set_new(out, "properties", props);
        } else if (strcmp(key, "items") == 0) {
            json_object_set_new(out, "items", gemini_schema(v, depth + 1));
        } else if (strcmp(key, "anyOf") == 0 && json_is_array(v)) {
            json_t *alts = json_array();
            size_t i;
            json_t *alt;
            json_array_foreach(v, i, alt)
                json_array_append_new(alts, gemini_schema(alt, depth + 1));
            json_object_set_new(out, "anyOf", alts);
        } else {
            json_object_set(out, key, v);
        }
    }
    return out;
}

static sl_err_t content_parts(const json_t *content, json_t *parts, char *err, size_t errlen)
{
    if (json_is_string(content)) {
        if (json_string_length(content) > 0)
            json_array_append_new(parts, json_pack("{s:O}", "text", content));
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
                json_array_append_new(parts, json_pack("{s:O}", "text", text));
            continue;
        }
        if (type != NULL && strcmp(type, "image_url") == 0) {
            const json_t *iu = json_object_get(part, "image_url");
            const char *url = json_is_string(iu) ? json_string_value(iu)
                                                 : json_string_value(json_object_get(iu, "url"));
            char *mime = NULL, *data = NULL;
            if (sl_data_url(url, &mime, &data)) {
                json_array_append_new(parts, json_pack("{s:{s:s, s:s}}", "inlineData", "mimeType",
                                                       mime, "data", data));
                free(mime);
                free(data);
                continue;
            }
            /* fileData needs a Files API URI and its MIME type; a web URL is neither. */
            snprintf(err, errlen, "gemini takes images as data: URLs only");
            return SL_EINVAL;
        }
        snprintf(err, errlen, "content part type \"%s\" is not supported by gemini",
                 type != NULL ? type : "(none)");
        return SL_EINVAL;
    }
    return SL_OK;
}

static sl_err_t translate_contents(const json_t *chat, json_t *body, char *err, size_t errlen)
{
    json_t *contents = json_array();
    json_t *system = json_array();  /* parts */
    json_t *called = json_object(); /* tool call id -> function name */
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
            rc = content_parts(content, system, err, errlen);
        } else if (strcmp(role, "user") == 0) {
            json_t *parts = json_array();
            rc = content_parts(content, parts, err, errlen);
            sl_add_turn(contents, "user", "parts", parts);
        } else if (strcmp(role, "assistant") == 0) {
            json_t *parts = json_array();
            rc = content_parts(content, parts, err, errlen);
            size_t k;
            const json_t *tc;
            json_array_foreach(json_object_get(m, "tool_calls"), k, tc)
            {
                if (rc != SL_OK)
                    break;
                const json_t *fn = json_object_get(tc, "function");
                const char *id = json_string_value(json_object_get(tc, "id"));
                const char *name = json_string_value(json_object_get(fn, "name"));
                const char *args = json_string_value(json_object_get(fn, "arguments"));
                json_t *input =
                    args != NULL && args[0] != '\0' ? json_loads(args, 0, NULL) : json_object();
                if (name == NULL || !json_is_object(input)) {
                    json_decref(input);
                    snprintf(err, errlen,
                             "tool call %s: no function name, or arguments that "
                             "are not a JSON object",
                             id != NULL ? id : "(no id)");
                    rc = SL_EINVAL;
                    break;
                }
                if (id != NULL)
                    json_object_set_new(called, id, json_string(name));
                json_array_append_new(parts, json_pack("{s:{s:s, s:o}}", "functionCall", "name",
                                                       name, "args", input));
            }
            sl_add_turn(contents, "model", "parts", parts);
        } else if (strcmp(role, "tool") == 0) {
            const char *id = json_string_value(json_object_get(m, "tool_call_id"));
            const char *name = json_string_value(json_object_get(m, "name"));
            if (name == NULL && id != NULL)
                name = json_string_value(json_object_get(called, id));
            if (name == NULL) {
                snprintf(err, errlen,
                         "message %zu: a tool result whose function is unknown "
                         "(no earlier tool call with its tool_call_id)",
                         i);
                rc = SL_EINVAL;
                break;
            }
            char *text = sl_content_text(content);
            if (text == NULL) {
                rc = SL_ENOMEM;
                break;
            }
            /* functionResponse.response is an object: a JSON object result goes as it is,
             * anything else is wrapped. */
            json_t *result = json_loads(text, JSON_DECODE_ANY, NULL);
            if (!json_is_object(result)) {
                json_decref(result);
                result = json_pack("{s:s}", "content", text);
            }
            free(text);
            sl_add_turn(contents, "user", "parts",
                        json_pack("[{s:{s:s, s:o}}]", "functionResponse", "name", name, "response",
                                  result));
        } else {
            snprintf(err, errlen, "message %zu: role \"%s\" is not supported", i, role);
            rc = SL_EINVAL;
        }
        if (rc != SL_OK)
            break;
    }
    if (rc == SL_OK) {
        json_object_set(body, "contents", contents);
        if (json_array_size(system) > 0)
            json_object_set_new(body, "systemInstruction", json_pack("{s:O}", "parts", system));
    }
    json_decref(contents);
    json_decref(system);
    json_decref(called);
    return rc;
}

static void generation_config(const json_t *chat, json_t *body)
{
    json_t *gc = json_object();
    int64_t max_tokens = sl_chat_max_tokens(chat);
    if (max_tokens > 0)
        json_object_set_new(gc, "maxOutputTokens", json_integer(max_tokens));
    static const struct {
        const char *from, *to;
    } same[] = {{"temperature", "temperature"},
                {"top_p", "topP"},
                {"presence_penalty", "presencePenalty"},
                {"frequency_penalty", "frequencyPenalty"},
                {"seed", "seed"}};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        json_t *v = json_object_get(chat, same[i].from);
        if (json_is_number(v))
            json_object_set(gc, same[i].to, v);
    }
    const json_t *stop = json_object_get(chat, "stop");
    if (json_is_string(stop))
        json_object_set_new(gc, "stopSequences", json_pack("[O]", stop));
    else if (json_array_size(stop) > 0)
        json_object_set_new(gc, "stopSequences", json_deep_copy(stop));
    const json_t *rf = json_object_get(chat, "response_format");
    const char *rft = json_string_value(json_object_get(rf, "type"));
    if (rft != NULL && strcmp(rft, "json_object") == 0) {
        json_object_set_new(gc, "responseMimeType", json_string("application/json"));
    } else if (rft != NULL && strcmp(rft, "json_schema") == 0) {
        json_object_set_new(gc, "responseMimeType", json_string("application/json"));
        const json_t *schema = json_object_get(json_object_get(rf, "json_schema"), "schema");
        if (json_is_object(schema))
            json_object_set_new(gc, "responseSchema", gemini_schema(schema, 0));
    }
    if (json_object_size(gc) > 0)
        json_object_set_new(body, "generationConfig", gc);
    else
        json_decref(gc);
}

static sl_err_t translate_tools(const json_t *chat, json_t *body, char *err, size_t errlen)
{
    const json_t *tools = json_object_get(chat, "tools");
    if (json_array_size(tools) > 0) {
        json_t *decls = json_array();
        size_t i;
        const json_t *t;
        json_array_foreach(tools, i, t)
        {
            const char *type = json_string_value(json_object_get(t, "type"));
            const json_t *fn = json_object_get(t, "function");
            const char *name = json_string_value(json_object_get(fn, "name"));
            if ((type != NULL && strcmp(type, "function") != 0) || name == NULL) {
                json_decref(decls);
                snprintf(err, errlen, "tool %zu is not a function with a name", i);
                return SL_EINVAL;
            }
            json_t *decl = json_pack("{s:s}", "name", name);
            const json_t *desc = json_object_get(fn, "description");
            if (json_is_string(desc))
                json_object_set(decl, "description", (json_t *)desc);
            /* Gemini refuses an OBJECT schema without properties: leave such parameters out. */
            const json_t *params = json_object_get(fn, "parameters");
            if (json_object_size(json_object_get(params, "properties")) > 0)
                json_object_set_new(decl, "parameters", gemini_schema(params, 0));
            json_array_append_new(decls, decl);
        }
        json_object_set_new(body, "tools", json_pack("[{s:o}]", "functionDeclarations", decls));
    }
    const json_t *choice = json_object_get(chat, "tool_choice");
    json_t *fcc = NULL;
    if (json_is_string(choice)) {
        const char *c = json_string_value(choice);
        fcc = json_pack("{s:s}", "mode",
                        strcmp(c, "required") == 0 ? "ANY"
                        : strcmp(c, "none") == 0   ? "NONE"
                                                   : "AUTO");
    } else if (json_is_object(choice)) {
        const char *name =
            json_string_value(json_object_get(json_object_get(choice, "function"), "name"));
        if (name == NULL) {
            snprintf(err, errlen, "tool_choice names no function");
            return SL_EINVAL;
        }
        fcc = json_pack("{s:s, s:[s]}", "mode", "ANY", "allowedFunctionNames", name);
    }
    if (fcc != NULL)
        json_object_set_new(body, "toolConfig", json_pack("{s:o}", "functionCallingConfig", fcc));
    return SL_OK;
}

static sl_err_t request_gemini(const sl_deployment_cfg_t *dep, const json_t *chat,
                               sl_adapter_request_t *out, char *err, size_t errlen)
{
    json_t *body = json_object();
    if (body == NULL)
        return SL_ENOMEM;
    sl_err_t rc = translate_contents(chat, body, err, errlen);
    if (rc == SL_OK)
        rc = translate_tools(chat, body, err, errlen);
    if (rc != SL_OK) {
        json_decref(body);
        return rc;
    }
    generation_config(chat, body);
    /* Not expressed: n (always 1), logit_bias, logprobs, user. */
    rc = sl_adapter_set_body(out, body);
    json_decref(body);
    if (rc != SL_OK)
        return rc;
    out->stream = json_is_true(json_object_get(chat, "stream"));
    size_t n = strlen(dep->base_url);
    while (n > 0 && dep->base_url[n - 1] == '/')
        n--;
    /* The model may be configured as the API's resource name, "models/gemini-...". */
    const char *model = dep->model;
    if (strncmp(model, "models/", 7) == 0)
        model += 7;
    out->url = sl_strdupf("%.*s/models/%s:%s", (int)n, dep->base_url, model,
                          out->stream ? "streamGenerateContent?alt=sse" : "generateContent");
    return out->url != NULL ? SL_OK : SL_ENOMEM;
}

/* ---- Answers ------------------------------------------------------------------------------- */

/* Gemini answers some errors (and streamed ones) as a one-element array. */
static const json_t *unwrap(const json_t *body)
{
    return json_is_array(body) ? json_array_get(body, 0) : body;
}

static int usage_gemini(const json_t *body, sl_usage_t *u)
{
    const json_t *um = json_object_get(unwrap(body), "usageMetadata");
    if (!json_is_object(um))
        return 0;
    /* promptTokenCount includes the cached tokens; candidatesTokenCount excludes thinking. */
    u->input = sl_jcount(um, "promptTokenCount");
    u->cached = sl_jcount(um, "cachedContentTokenCount");
    u->reasoning = sl_jcount(um, "thoughtsTokenCount");
    u->output = sl_jcount(um, "candidatesTokenCount") + u->reasoning;
    u->total = sl_jcount(um, "totalTokenCount");
    return 1;
}

static const char *finish_gemini(const char *reason, int has_tool_calls)
{
    if (strcmp(reason, "MAX_TOKENS") == 0)
        return "length";
    static const char *const filtered[] = {
        "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", NULL};
    for (int i = 0; filtered[i] != NULL; i++) {
        if (strcmp(reason, filtered[i]) == 0)
            return "content_filter";
    }
    /* Gemini says STOP after a function call too. */
    return has_tool_calls ? "tool_calls" : "stop";
}

static json_t *tool_call(const json_t *fc, int index)
{
    char gen[32];
    snprintf(gen, sizeof gen, "call_%d", index);
    const char *id = json_string_value(json_object_get(fc, "id"));
    const char *name = json_string_value(json_object_get(fc, "name"));
    const json_t *args = json_object_get(fc, "args");
    char *text = args != NULL ? json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_t *tc = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id != NULL ? id : gen, "type",
                           "function", "function", "name", name != NULL ? name : "", "arguments",
                           text != NULL ? text : "{}");
    free(text);
    return tc;
}

static json_t *response_gemini(const json_t *body, const char *model)
{
    body = unwrap(body);
    if (!json_is_object(body) || json_is_object(json_object_get(body, "error")))
        return NULL;
    const json_t *cand = json_array_get(json_object_get(body, "candidates"), 0);
    const json_t *parts = json_object_get(json_object_get(cand, "content"), "parts");
    json_t *tools = json_array();
    size_t len = 0;
    size_t i;
    const json_t *p;
    json_array_foreach(parts, i, p) len += json_string_length(json_object_get(p, "text"));
    char *text = malloc(len + 1);
    if (text == NULL || tools == NULL) {
        free(text);
        json_decref(tools);
        return NULL;
    }
    size_t at = 0;
    int ntext = 0;
    json_array_foreach(parts, i, p)
    {
        const json_t *t = json_object_get(p, "text");
        if (json_is_string(t) && !json_is_true(json_object_get(p, "thought"))) {
            memcpy(text + at, json_string_value(t), json_string_length(t));
            at += json_string_length(t);
            ntext++;
        }
        const json_t *fc = json_object_get(p, "functionCall");
        if (json_is_object(fc))
            json_array_append_new(tools, tool_call(fc, (int)json_array_size(tools)));
    }
    text[at] = '\0';
    const char *fr = json_string_value(json_object_get(cand, "finishReason"));
    const char *finish = fr != NULL ? finish_gemini(fr, json_array_size(tools) > 0) : NULL;
    /* A prompt blocked before any candidate: an empty, filtered answer. */
    if (cand == NULL && json_object_get(json_object_get(body, "promptFeedback"), "blockReason"))
        finish = "content_filter";
    sl_usage_t u = {0, 0, 0, 0, 0};
    int has_usage = usage_gemini(body, &u);
    const char *mv = json_string_value(json_object_get(body, "modelVersion"));
    json_t *c = sl_canonical_completion(json_string_value(json_object_get(body, "responseId")),
                                        mv != NULL ? mv : model, 0,
                                        ntext == 0 && json_array_size(tools) > 0 ? NULL : text,
                                        tools, finish, has_usage ? &u : NULL);
    free(text);
    json_decref(tools);
    return c;
}

/* The details[] entry of error whose @type ends in name, or NULL. */
static const json_t *detail(const json_t *error, const char *name)
{
    size_t i;
    const json_t *d;
    size_t nlen = strlen(name);
    json_array_foreach(json_object_get(error, "details"), i, d)
    {
        const char *type = json_string_value(json_object_get(d, "@type"));
        size_t tlen = type != NULL ? strlen(type) : 0;
        if (tlen >= nlen && strcmp(type + tlen - nlen, name) == 0)
            return d;
    }
    return NULL;
}

/* Whether a RESOURCE_EXHAUSTED names a per-day quota (RPD): waiting a few seconds won't help. */
static int per_day_quota(const json_t *error)
{
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(detail(error, "google.rpc.QuotaFailure"), "violations"), i,
                       v)
    {
        const char *id = json_string_value(json_object_get(v, "quotaId"));
        if (id != NULL && strstr(id, "PerDay") != NULL)
            return 1;
    }
    return 0;
}

/* The outcome that error's google.rpc status (not NULL) means. */
static sl_outcome_t status_outcome(const json_t *error, const char *status)
{
    if (strcmp(status, "RESOURCE_EXHAUSTED") == 0)
        return per_day_quota(error) ? SL_OUTCOME_QUOTA_EXHAUSTED : SL_OUTCOME_RATE_LIMITED;
    if (strcmp(status, "UNAVAILABLE") == 0)
        return SL_OUTCOME_OVERLOADED;
    if (strcmp(status, "DEADLINE_EXCEEDED") == 0)
        return SL_OUTCOME_TIMEOUT;
    if (strcmp(status, "UNAUTHENTICATED") == 0 || strcmp(status, "PERMISSION_DENIED") == 0)
        return SL_OUTCOME_AUTH_ERROR;
    if (strcmp(status, "INVALID_ARGUMENT") == 0) {
        /* A bad key is a 400 INVALID_ARGUMENT whose ErrorInfo says API_KEY_INVALID. */
        const char *reason =
            json_string_value(json_object_get(detail(error, "google.rpc.ErrorInfo"), "reason"));
        return reason != NULL && strcmp(reason, "API_KEY_INVALID") == 0 ? SL_OUTCOME_AUTH_ERROR
                                                                        : SL_OUTCOME_CLIENT_ERROR;
    }
    if (strcmp(status, "INTERNAL") == 0 || strcmp(status, "UNKNOWN") == 0 ||
        strcmp(status, "ABORTED") == 0 || strcmp(status, "DATA_LOSS") == 0)
        return SL_OUTCOME_SERVER_ERROR;
    return SL_OUTCOME_CLIENT_ERROR; /* FAILED_PRECONDITION, NOT_FOUND, OUT_OF_RANGE, ... */
}

static sl_outcome_t classify_gemini(long http_status, const json_t *body)
{
    const json_t *error = json_object_get(unwrap(body), "error");
    const char *status = json_string_value(json_object_get(error, "status"));
    if (status != NULL)
        return status_outcome(error, status);
    if (http_status >= 200 && http_status < 300)
        return json_is_object(json_object_get(unwrap(body), "usageMetadata"))
                   ? SL_OUTCOME_OK
                   : SL_OUTCOME_BAD_RESPONSE;
    if (http_status == 429)
        return json_is_object(error) && per_day_quota(error) ? SL_OUTCOME_QUOTA_EXHAUSTED
                                                             : SL_OUTCOME_RATE_LIMITED;
    if (http_status == 401 || http_status == 403)
        return SL_OUTCOME_AUTH_ERROR;
    if (http_status == 503)
        return SL_OUTCOME_OVERLOADED;
    if (http_status == 504)
        return SL_OUTCOME_TIMEOUT;
    if (http_status >= 500)
        return SL_OUTCOME_SERVER_ERROR;
    return SL_OUTCOME_CLIENT_ERROR;
}

static json_t *error_gemini(const json_t *body)
{
    const json_t *error = json_object_get(unwrap(body), "error");
    if (!json_is_object(error))
        return NULL;
    json_t *e = json_object();
    const char *status = json_string_value(json_object_get(error, "status"));
    const char *msg = json_string_value(json_object_get(error, "message"));
    const json_t *qf =
        json_array_get(json_object_get(detail(error, "google.rpc.QuotaFailure"), "violations"), 0);
    const char *code = json_string_value(json_object_get(qf, "quotaId"));
    if (code == NULL)
        code = json_string_value(json_object_get(detail(error, "google.rpc.ErrorInfo"), "reason"));
    if (status != NULL)
        json_object_set_new(e, "type", json_string(status));
    json_object_set_new(e, "code", code != NULL ? json_string(code) : json_null());
    if (msg != NULL)
        json_object_set_new(e, "message", json_string(msg));
    return e;
}

static int64_t retry_hint_gemini(const json_t *body)
{
    const json_t *error = json_object_get(unwrap(body), "error");
    const json_t *ri = detail(error, "google.rpc.RetryInfo");
    return sl_timefmt_proto_duration_ms(json_string_value(json_object_get(ri, "retryDelay")));
}

/* ---- Streams -------------------------------------------------------------------------------
 * With alt=sse every event is one GenerateContentResponse holding the new parts; usageMetadata
 * is cumulative; the last one has a finishReason. There is no final event: the stream ends. */

static sl_err_t stream_event_gemini(sl_stream_t *st, const char *event, const char *data,
                                    size_t len)
{
    (void)event;
    json_t *j = json_loadb(data, len, 0, NULL);
    const json_t *r = unwrap(j);
    if (!json_is_object(r)) {
        json_decref(j);
        return SL_EPARSE;
    }
    sl_err_t rc = SL_OK;
    const json_t *error = json_object_get(r, "error");
    if (json_is_object(error)) {
        const char *status = json_string_value(json_object_get(error, "status"));
        sl_stream_fail(st, r,
                       status != NULL ? status_outcome(error, status) : SL_OUTCOME_SERVER_ERROR);
        json_decref(j);
        return SL_OK;
    }
    sl_stream_meta(st, json_string_value(json_object_get(r, "responseId")),
                   json_string_value(json_object_get(r, "modelVersion")), 0);
    const json_t *cand = json_array_get(json_object_get(r, "candidates"), 0);
    size_t i;
    const json_t *p;
    json_array_foreach(json_object_get(json_object_get(cand, "content"), "parts"), i, p)
    {
        if (rc != SL_OK)
            break;
        const json_t *t = json_object_get(p, "text");
        if (json_is_string(t) && json_is_true(json_object_get(p, "thought")))
            sl_stream_reasoning_text(st, json_string_value(t), json_string_length(t));
        else if (json_is_string(t))
            rc = sl_stream_text(st, json_string_value(t), json_string_length(t));
        const json_t *fc = json_object_get(p, "functionCall");
        if (rc == SL_OK && json_is_object(fc)) {
            /* A streamed function call comes whole, in one part. */
            int n = sl_stream_tool_count(st);
            json_t *tc = tool_call(fc, n);
            json_t *fn = json_object_get(tc, "function");
            const json_t *args = json_object_get(fn, "arguments");
            rc = sl_stream_tool(st, n, json_string_value(json_object_get(tc, "id")),
                                json_string_value(json_object_get(fn, "name")),
                                json_string_value(args), json_string_length(args));
            json_decref(tc);
        }
    }
    const char *fr = json_string_value(json_object_get(cand, "finishReason"));
    if (rc == SL_OK && fr != NULL)
        sl_stream_finish(st, finish_gemini(fr, sl_stream_tool_count(st) > 0));
    const json_t *um = json_object_get(r, "usageMetadata");
    sl_usage_t u = {0, 0, 0, 0, 0};
    if (usage_gemini(r, &u))
        sl_stream_set_usage(st, &u, json_object_get(um, "promptTokenCount") != NULL,
                            json_object_get(um, "candidatesTokenCount") != NULL ||
                                json_object_get(um, "thoughtsTokenCount") != NULL);
    json_decref(j);
    return rc;
}

const sl_adapter_t sl_adapter_gemini = {
    .api = SL_PROVIDER_GEMINI,
    .name = "gemini",
    .auth_prefix = "x-goog-api-key: ",
    .request = request_gemini,
    .classify = classify_gemini,
    .response = response_gemini,
    .usage = usage_gemini,
    .error = error_gemini,
    .retry_hint_ms = retry_hint_gemini,
    .finish_reason = finish_gemini,
    .stream_event = stream_event_gemini,
    .complete_at_eof = 1,
};
