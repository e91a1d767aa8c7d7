/* msg_usage.c - the usage event (see msg_usage.h). */
#include "msg_usage.h"

#include <string.h>

static const char *const outcome_names[] = {
#define X(name, text) text,
    SL_OUTCOME_MAP(X)
#undef X
};

const char *sl_outcome_name(sl_outcome_t o)
{
    return (int)o >= 0 && o < SL_OUTCOME_COUNT_ ? outcome_names[o] : "unknown";
}

int sl_outcome_parse(const char *name)
{
    for (int i = 0; name != NULL && i < SL_OUTCOME_COUNT_; i++) {
        if (strcmp(outcome_names[i], name) == 0)
            return i;
    }
    return -1;
}

int sl_outcome_is_refusal(sl_outcome_t o)
{
    return o == SL_OUTCOME_RATE_LIMITED || o == SL_OUTCOME_OVERLOADED;
}

json_t *sl_msg_usage_json(const sl_msg_usage_t *u)
{
    json_t *o = json_pack("{s:i, s:s, s:i, s:s, s:s, s:s, s:i, s:I, s:I}", "v", 1, "job_id",
                          u->job_id, "attempt", u->attempt, "reservation_id", u->reservation_id,
                          "deployment", u->deployment, "outcome", sl_outcome_name(u->outcome),
                          "http_status", u->http_status, "started_ms",
                          (json_int_t)u->started_ms, "finished_ms", (json_int_t)u->finished_ms);
    if (o == NULL)
        return NULL;
    int ok = u->outcome == SL_OUTCOME_OK;
    int bad = json_object_set(o, "usage", u->usage ? (json_t *)u->usage : json_null());
    bad |= u->ratelimit != NULL ? json_object_set(o, "ratelimit", (json_t *)u->ratelimit)
                                : json_object_set_new(o, "ratelimit", json_object());
    bad |= json_object_set_new(o, "retry_after_ms", u->retry_after_ms >= 0
                                                         ? json_integer(u->retry_after_ms)
                                                         : json_null());
    bad |= json_object_set_new(o, "latency", json_pack("{s:f, s:f}", "ttft_ms", u->ttft_ms,
                                                       "total_ms", u->total_ms));
    bad |= json_object_set(o, "response",
                           ok && u->response ? (json_t *)u->response : json_null());
    bad |= json_object_set(o, "error", !ok && u->error ? (json_t *)u->error : json_null());
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int64_t int_or(const json_t *obj, const char *key, int64_t def)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? json_integer_value(v) : def;
}

sl_err_t sl_msg_usage_read(const json_t *doc, sl_msg_usage_t *u, sl_msg_tokens_t *tokens)
{
    memset(u, 0, sizeof *u);
    u->job_id = json_string_value(json_object_get(doc, "job_id"));
    u->reservation_id = json_string_value(json_object_get(doc, "reservation_id"));
    u->deployment = json_string_value(json_object_get(doc, "deployment"));
    int outcome = sl_outcome_parse(json_string_value(json_object_get(doc, "outcome")));
    if (u->job_id == NULL || u->reservation_id == NULL || u->deployment == NULL || outcome < 0)
        return SL_EPARSE;
    u->outcome = (sl_outcome_t)outcome;
    u->attempt = (int)int_or(doc, "attempt", 0);
    u->http_status = (int)int_or(doc, "http_status", 0);
    u->started_ms = int_or(doc, "started_ms", 0);
    u->finished_ms = int_or(doc, "finished_ms", 0);
    const json_t *usage = json_object_get(doc, "usage");
    u->usage = json_is_object(usage) ? usage : NULL;
    u->ratelimit = json_object_get(doc, "ratelimit");
    u->retry_after_ms = int_or(doc, "retry_after_ms", -1);
    if (u->retry_after_ms > SL_RETRY_AFTER_MAX_MS)
        u->retry_after_ms = SL_RETRY_AFTER_MAX_MS;
    const json_t *latency = json_object_get(doc, "latency");
    u->ttft_ms = json_number_value(json_object_get(latency, "ttft_ms"));
    u->total_ms = json_number_value(json_object_get(latency, "total_ms"));
    const json_t *response = json_object_get(doc, "response");
    u->response = json_is_object(response) ? response : NULL;
    const json_t *error = json_object_get(doc, "error");
    u->error = json_is_object(error) ? error : NULL;
    if (tokens != NULL) {
        int has = u->usage != NULL;
        tokens->input = has ? int_or(u->usage, "input", 0) : -1;
        tokens->output = has ? int_or(u->usage, "output", 0) : -1;
        tokens->cached = has ? int_or(u->usage, "cached", 0) : -1;
        tokens->reasoning = has ? int_or(u->usage, "reasoning", 0) : -1;
        tokens->total = has ? int_or(u->usage, "total", 0) : -1;
    }
    return SL_OK;
}
