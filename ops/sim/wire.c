/* wire.c - the entry points of wire.h, dispatching on the API to wire_openai.c, wire_anthropic.c
 * and wire_gemini.c, and the helpers those share (see wire_internal.h).
 *
 * Validation follows each provider's own style of message (OpenAI's "Invalid type for 'x'",
 * Anthropic's "x: Field required", Gemini's "* GenerateContentRequest.x: ..."), because adapters
 * and their tests read them. Everything is formatted with snprintf into caller buffers.
 */
#include "wire_internal.h"

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

void sl_sim_wire_fail(sl_sim_error_t *err, const char *param, const char *code, const char *fmt,
                      ...)
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

int64_t sl_sim_wire_chars(json_t *s)
{
    return json_is_string(s) ? utf8_chars(json_string_value(s), json_string_length(s)) : 0;
}

bool sl_sim_wire_is_type(json_t *obj, const char *type)
{
    json_t *t = json_object_get(obj, "type");
    return json_is_string(t) && strcmp(json_string_value(t), type) == 0;
}

int64_t sl_sim_wire_text_chars(json_t *content)
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

bool sl_sim_wire_tool_name_ok(const char *name)
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

void sl_sim_wire_set_tool(sl_sim_ask_t *ask, const char *name)
{
    if (ask->tool_name[0] == '\0')
        snprintf(ask->tool_name, sizeof ask->tool_name, "%s", name);
}

bool sl_sim_wire_read_cap(json_t *v, int64_t *out)
{
    *out = -1;
    if (v == NULL || json_is_null(v))
        return true;
    if (!json_is_integer(v))
        return false;
    *out = (int64_t)json_integer_value(v);
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

/* ---- Responses -------------------------------------------------------------------------- */

size_t sl_sim_wire_reply_text(const sl_sim_reply_t *reply, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "Simulated reply from %s (%lld completion tokens).",
                     reply->deployment, (long long)reply->completion_tokens);
    return n < 0 ? 0 : (size_t)n;
}

bool sl_sim_wire_calls_tool(const sl_sim_reply_t *reply)
{
    return reply->tool_name != NULL && reply->tool_name[0] != '\0';
}

unsigned long long sl_sim_wire_id_hex(const sl_sim_reply_t *reply, unsigned salt)
{
    uint64_t x = reply->id + 0x9e3779b97f4a7c15ULL * (salt + 1);
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (unsigned long long)x;
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

void sl_sim_wire_emit(sl_sim_wire_emitter_t *e, int64_t tokens_before, const char *fmt, ...)
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

void sl_sim_wire_piece(const char *text, size_t k, size_t n, char *buf, size_t cap)
{
    size_t len = strlen(text);
    size_t from = len * k / n;
    size_t to = len * (k + 1) / n;
    snprintf(buf, cap, "%.*s", (int)(to - from), text + from);
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
