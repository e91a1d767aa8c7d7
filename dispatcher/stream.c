/* stream.c - streamed answers: SSE in, canonical chunks out, the whole answer assembled
 * (see stream.h). */
#include "stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter_impl.h"
#include "buf.h"
#include "sse.h"
#include "util.h"

/* The answer's text and each call's arguments together stay within SL_STREAM_MAX_CONTENT_BYTES
 * (answer_bytes); every buffer has that cap too, plus room for a closing "{}". */
#define ANSWER_BUF_MAX (SL_STREAM_MAX_CONTENT_BYTES + 2)

typedef struct {
    int64_t key;
    char *id, *name;
    sl_buf_t args;
} tool_t;

struct sl_stream {
    const sl_adapter_t *ad;
    char *job_id, *res_id, *dep_model;
    int attempt;
    int64_t input_estimate;
    sl_stream_chunk_fn fn;
    void *arg;
    sl_sse_t *sse;

    char *id, *model;
    int64_t created;
    sl_buf_t content;
    size_t answer_bytes; /* content plus tool-call arguments, against the cap */
    int64_t chars;       /* code points generated (answer, arguments, reasoning) */
    tool_t tools[SL_STREAM_MAX_TOOL_CALLS];
    int ntools;
    const char *finish;
    sl_usage_t usage;
    int has_input, has_output;

    int done;      /* the provider's final event came */
    json_t *error; /* a provider error event */
    int failed;    /* a provider error event came: error_outcome says what it means */
    sl_outcome_t error_outcome;
    int bad;   /* sl_stream_feed failed */
    int ended; /* sl_stream_end was called: outcome is set */
    sl_outcome_t outcome;
    int last_sent; /* the chunk with done: true went out */
    int64_t seq;
    double first_event_ms;

    /* What the event being translated said. */
    sl_buf_t ev_text;
    json_t *ev_tools;
    const char *ev_finish;
};

/* UTF-8 code points in n bytes (continuation bytes do not start one). */
static int64_t code_points(const char *s, size_t n)
{
    int64_t cp = 0;
    for (size_t i = 0; i < n; i++)
        cp += ((unsigned char)s[i] & 0xC0) != 0x80;
    return cp;
}

sl_err_t sl_stream_new(const sl_adapter_t *ad, const sl_stream_ids_t *ids, sl_stream_chunk_fn fn,
                       void *arg, sl_stream_t **out)
{
    *out = NULL;
    sl_stream_t *st = calloc(1, sizeof *st);
    if (st == NULL)
        return SL_ENOMEM;
    st->ad = ad;
    st->fn = fn;
    st->arg = arg;
    st->attempt = ids->attempt;
    st->input_estimate = ids->input_estimate > 0 ? ids->input_estimate : 0;
    st->job_id = strdup(ids->job_id != NULL ? ids->job_id : "");
    st->res_id = strdup(ids->reservation_id != NULL ? ids->reservation_id : "");
    st->dep_model = strdup(ids->model != NULL ? ids->model : "");
    sl_buf_init(&st->content, ANSWER_BUF_MAX);
    sl_buf_init(&st->ev_text, ANSWER_BUF_MAX);
    st->ev_tools = json_array();
    if (st->job_id == NULL || st->res_id == NULL || st->dep_model == NULL || st->ev_tools == NULL ||
        sl_sse_new(SL_STREAM_MAX_EVENT_BYTES, &st->sse) != SL_OK) {
        sl_stream_free(st);
        return SL_ENOMEM;
    }
    *out = st;
    return SL_OK;
}

void sl_stream_free(sl_stream_t *st)
{
    if (st == NULL)
        return;
    free(st->job_id);
    free(st->res_id);
    free(st->dep_model);
    sl_sse_free(st->sse);
    free(st->id);
    free(st->model);
    sl_buf_free(&st->content);
    for (int i = 0; i < st->ntools; i++) {
        free(st->tools[i].id);
        free(st->tools[i].name);
        sl_buf_free(&st->tools[i].args);
    }
    json_decref(st->error);
    sl_buf_free(&st->ev_text);
    json_decref(st->ev_tools);
    free(st);
}

/* Whether the answer is known to be whole. */
static int complete(const sl_stream_t *st)
{
    return st->done || (st->ended && st->outcome == SL_OUTCOME_OK);
}

static void current_usage(const sl_stream_t *st, sl_usage_t *u)
{
    *u = st->usage;
    if (!st->has_input)
        u->input = st->input_estimate;
    /* Without the provider's count, about four characters a token. A cut stream may have
     * generated past the provider's last (cumulative) count, so the larger one is charged. */
    int64_t estimate = (st->chars + 3) / 4;
    if (!st->has_output || (!complete(st) && estimate > u->output))
        u->output = estimate;
    if (u->total < u->input + u->output)
        u->total = u->input + u->output;
}

json_t *sl_stream_usage(const sl_stream_t *st)
{
    sl_usage_t u;
    current_usage(st, &u);
    return sl_usage_json(&u);
}

/* Builds and hands over one chunk message. delta (may be NULL: ""), tool_calls (borrowed, may
 * be NULL or empty: left out), finish (may be NULL), usage (stolen, may be NULL). */
static void emit(sl_stream_t *st, const char *delta, const json_t *tool_calls, const char *finish,
                 int done, json_t *usage)
{
    json_t *c = json_pack("{s:i, s:s, s:i, s:s, s:I, s:s}", "v", 1, "job_id", st->job_id, "attempt",
                          st->attempt, "reservation_id", st->res_id, "seq", (json_int_t)st->seq,
                          "delta", delta != NULL ? delta : "");
    if (c == NULL) {
        json_decref(usage);
        return;
    }
    st->seq++;
    if (json_array_size(tool_calls) > 0)
        json_object_set_new(c, "tool_calls", json_deep_copy(tool_calls));
    json_object_set_new(c, "finish_reason", finish != NULL ? json_string(finish) : json_null());
    json_object_set_new(c, "done", json_boolean(done));
    json_object_set_new(c, "usage", usage != NULL ? usage : json_null());
    json_object_set_new(c, "ts_ms", json_integer(sl_now_ms()));
    if (st->fn != NULL)
        st->fn(c, st->arg);
    json_decref(c);
}

static void emit_last(sl_stream_t *st)
{
    if (st->last_sent)
        return;
    st->last_sent = 1;
    emit(st, "", NULL, complete(st) ? st->finish : NULL, 1, sl_stream_usage(st));
}

/* Adds the chunk delta of tool call index to the event being translated: its id and name when
 * given (the delta that opens the call), and len bytes of arguments. */
static sl_err_t tool_delta(sl_stream_t *st, int index, const char *id, const char *name,
                           const char *args, size_t len)
{
    json_t *d = json_pack("{s:i}", "index", index);
    json_t *fn = json_object();
    if (d == NULL || fn == NULL) {
        json_decref(d);
        json_decref(fn);
        return SL_ENOMEM;
    }
    if (id != NULL) {
        json_object_set_new(d, "id", json_string(id));
        json_object_set_new(d, "type", json_string("function"));
    }
    if (name != NULL)
        json_object_set_new(fn, "name", json_string(name));
    json_object_set_new(fn, "arguments", json_stringn(args != NULL ? args : "", len));
    json_object_set_new(d, "function", fn);
    json_array_append_new(st->ev_tools, d);
    return SL_OK;
}

/* A tool call whose arguments never came gets "{}" once the answer is complete: Anthropic streams
 * a call that takes no arguments as one partial_json of "", while in OpenAI's shape, which every
 * client parses, arguments are always a JSON object. The "{}" also goes out as a delta, so the
 * chunks join to the same arguments as the assembled answer. */
static sl_err_t close_tool_calls(sl_stream_t *st)
{
    for (int i = 0; i < st->ntools; i++) {
        if (st->tools[i].args.len > 0)
            continue;
        if (sl_buf_add(&st->tools[i].args, "{}", 2) != SL_OK)
            return SL_ENOMEM;
        sl_err_t rc = tool_delta(st, i, NULL, NULL, "{}", 2);
        if (rc != SL_OK)
            return rc;
    }
    return SL_OK;
}

static sl_err_t on_event(void *arg, const char *event, const char *data, size_t len)
{
    sl_stream_t *st = arg;
    /* After the final event or an error event nothing the provider says changes the answer. */
    if (st->last_sent || st->failed)
        return SL_OK;
    if (st->first_event_ms == 0)
        st->first_event_ms = sl_mono_ms();
    sl_buf_reset(&st->ev_text);
    json_array_clear(st->ev_tools);
    st->ev_finish = NULL;
    sl_err_t rc = st->ad->stream_event(st, event, data, len);
    if (rc != SL_OK || st->failed)
        return rc; /* the last chunk goes out from sl_stream_end */
    /* A finish reason or the final event: no more arguments will come. */
    if (st->ev_finish != NULL || st->done) {
        rc = close_tool_calls(st);
        if (rc != SL_OK)
            return rc;
    }
    /* The first event always makes a chunk, so a consumer sees at once that the provider has
     * started; later ones only when they carry something. */
    if (st->ev_text.len > 0 || json_array_size(st->ev_tools) > 0 || st->ev_finish != NULL ||
        st->seq == 0)
        emit(st, st->ev_text.ptr, st->ev_tools, st->ev_finish, 0, NULL);
    if (st->done)
        emit_last(st);
    return SL_OK;
}

sl_err_t sl_stream_feed(sl_stream_t *st, const char *data, size_t len)
{
    if (st->bad || st->ended)
        return SL_EINVAL;
    sl_err_t rc = sl_sse_feed(st->sse, data, len, on_event, st);
    if (rc != SL_OK)
        st->bad = 1;
    return rc;
}

sl_outcome_t sl_stream_end(sl_stream_t *st, int transport_error)
{
    if (st->ended)
        return st->outcome;
    if (st->failed)
        st->outcome = st->error_outcome;
    else if (st->done)
        st->outcome = SL_OUTCOME_OK;
    else if (st->bad)
        st->outcome = SL_OUTCOME_BAD_RESPONSE;
    else if (st->ad->complete_at_eof && st->finish != NULL && transport_error == 0)
        st->outcome = SL_OUTCOME_OK;
    else
        st->outcome = transport_error == 2 ? SL_OUTCOME_TIMEOUT : SL_OUTCOME_TRANSPORT;
    st->ended = 1;
    emit_last(st);
    return st->outcome;
}

void sl_stream_end_whole(sl_stream_t *st, const json_t *response, const json_t *usage)
{
    if (st->last_sent)
        return;
    st->last_sent = 1;
    const json_t *choice = json_array_get(json_object_get(response, "choices"), 0);
    const json_t *msg = json_object_get(choice, "message");
    json_t *tools = json_array();
    size_t i;
    const json_t *tc;
    json_array_foreach(json_object_get(msg, "tool_calls"), i, tc)
    {
        json_t *d = json_deep_copy(tc);
        json_object_set_new(d, "index", json_integer((json_int_t)i));
        json_array_append_new(tools, d);
    }
    emit(st, json_string_value(json_object_get(msg, "content")), tools,
         json_string_value(json_object_get(choice, "finish_reason")), 1,
         usage != NULL ? json_deep_copy(usage) : NULL);
    json_decref(tools);
}

json_t *sl_stream_response(const sl_stream_t *st)
{
    json_t *tools = json_array();
    if (tools == NULL)
        return NULL;
    for (int i = 0; i < st->ntools; i++) {
        const tool_t *t = &st->tools[i];
        char gen[32];
        snprintf(gen, sizeof gen, "call_sl%d", i);
        json_array_append_new(tools, json_pack("{s:s, s:s, s:{s:s, s:s}}", "id",
                                               t->id != NULL ? t->id : gen, "type", "function",
                                               "function", "name", t->name ? t->name : "",
                                               "arguments", t->args.ptr ? t->args.ptr : ""));
    }
    sl_usage_t u;
    current_usage(st, &u);
    const char *content = st->content.ptr != NULL ? st->content.ptr : st->ntools > 0 ? NULL : "";
    json_t *c = sl_canonical_completion(st->id, st->model != NULL ? st->model : st->dep_model,
                                        st->created, content, tools, st->finish, &u);
    json_decref(tools);
    return c;
}

const json_t *sl_stream_error(const sl_stream_t *st)
{
    return st->error;
}

int64_t sl_stream_chunks(const sl_stream_t *st)
{
    return st->seq;
}

double sl_stream_first_event_ms(const sl_stream_t *st)
{
    return st->first_event_ms;
}

/* ---- For adapters -------------------------------------------------------------------------- */

static void replace(char **dst, const char *src)
{
    if (src == NULL || src[0] == '\0')
        return;
    char *copy = strdup(src);
    if (copy == NULL)
        return; /* keeps the old value: an id is not worth failing the stream for */
    free(*dst);
    *dst = copy;
}

void sl_stream_meta(sl_stream_t *st, const char *id, const char *model, int64_t created)
{
    if (st->id == NULL)
        replace(&st->id, id);
    replace(&st->model, model);
    if (created > 0)
        st->created = created;
}

sl_err_t sl_stream_text(sl_stream_t *st, const char *text, size_t len)
{
    if (len == 0)
        return SL_OK;
    if (st->answer_bytes + len > SL_STREAM_MAX_CONTENT_BYTES)
        return SL_ETOOBIG;
    sl_err_t rc = sl_buf_add(&st->content, text, len);
    if (rc == SL_OK)
        rc = sl_buf_add(&st->ev_text, text, len);
    if (rc != SL_OK)
        return rc;
    st->answer_bytes += len;
    st->chars += code_points(text, len);
    return SL_OK;
}

void sl_stream_reasoning_text(sl_stream_t *st, const char *text, size_t len)
{
    st->chars += code_points(text, len);
}

sl_err_t sl_stream_tool(sl_stream_t *st, int64_t key, const char *id, const char *name,
                        const char *args, size_t len)
{
    int index = -1;
    for (int i = 0; i < st->ntools; i++) {
        if (st->tools[i].key == key)
            index = i;
    }
    if (index < 0) {
        if (st->ntools >= SL_STREAM_MAX_TOOL_CALLS)
            return SL_ETOOBIG;
        index = st->ntools++;
        memset(&st->tools[index], 0, sizeof st->tools[index]);
        st->tools[index].key = key;
        sl_buf_init(&st->tools[index].args, ANSWER_BUF_MAX);
    }
    tool_t *t = &st->tools[index];
    if (st->answer_bytes + len > SL_STREAM_MAX_CONTENT_BYTES)
        return SL_ETOOBIG;
    if (id != NULL && t->id == NULL && (t->id = strdup(id)) == NULL)
        return SL_ENOMEM;
    if (name != NULL && t->name == NULL && (t->name = strdup(name)) == NULL)
        return SL_ENOMEM;
    if (len > 0 && sl_buf_add(&t->args, args, len) != SL_OK)
        return SL_ENOMEM;
    st->answer_bytes += len;
    st->chars += code_points(args != NULL ? args : "", len);
    if (id == NULL && name == NULL && len == 0)
        return SL_OK; /* an empty delta (Anthropic opens arguments with ""): nothing to say */
    return tool_delta(st, index, id, name, args, len);
}

int sl_stream_tool_count(const sl_stream_t *st)
{
    return st->ntools;
}

void sl_stream_finish(sl_stream_t *st, const char *finish_reason)
{
    if (finish_reason == NULL)
        return;
    st->finish = finish_reason;
    st->ev_finish = finish_reason;
}

void sl_stream_set_usage(sl_stream_t *st, const sl_usage_t *u, int has_input, int has_output)
{
    if (has_input) {
        st->usage.input = u->input;
        st->usage.cached = u->cached;
        st->has_input = 1;
    }
    if (has_output) {
        st->usage.output = u->output;
        st->usage.reasoning = u->reasoning;
        st->has_output = 1;
    }
    if (u->total > 0)
        st->usage.total = u->total;
}

void sl_stream_done(sl_stream_t *st)
{
    st->done = 1;
}

void sl_stream_fail(sl_stream_t *st, const json_t *body, sl_outcome_t outcome)
{
    json_decref(st->error);
    st->error = json_deep_copy(body);
    st->failed = 1;
    st->error_outcome = outcome;
}
