/* msg_result.c - the result message (see msg_result.h). */
#include "msg_result.h"

#include <string.h>

#include "seal.h"

#define NAME_TABLE(map, fn_name, type, count)                                                      \
    static const char *const fn_name##_names[] = {map(NAME_ENTRY_)};                               \
    const char *fn_name(type v)                                                                    \
    {                                                                                              \
        return (int)v >= 0 && (int)v < (int)(count) ? fn_name##_names[v] : "unknown";              \
    }
#define NAME_ENTRY_(name, text) text,

NAME_TABLE(SL_STATUS_MAP, sl_status_name, sl_status_t, SL_STATUS_COUNT_)
NAME_TABLE(SL_ERRTYPE_MAP, sl_errtype_name, sl_errtype_t, SL_ERRTYPE_COUNT_)
NAME_TABLE(SL_DECISION_MAP, sl_decision_name, sl_decision_t, SL_DECISION_COUNT_)
NAME_TABLE(SL_REASON_MAP, sl_reason_name, sl_reason_t, SL_REASON_COUNT_)

static int find(const char *const *names, int n, const char *name)
{
    for (int i = 0; name != NULL && i < n; i++) {
        if (strcmp(names[i], name) == 0)
            return i;
    }
    return -1;
}

int sl_status_parse(const char *name)
{
    return find(sl_status_name_names, SL_STATUS_COUNT_, name);
}

int sl_reason_parse(const char *name)
{
    return find(sl_reason_name_names, SL_REASON_COUNT_, name);
}

void sl_msg_result_init(sl_msg_result_t *r, const char *job_id, sl_status_t status)
{
    memset(r, 0, sizeof *r);
    r->job_id = job_id;
    r->status = status;
    r->cost_usd = -1;
    r->online_cost_usd = -1;
}

void sl_msg_error_init(sl_msg_error_t *e, sl_errtype_t type, sl_reason_t reason,
                       sl_decision_t decision, const char *message)
{
    memset(e, 0, sizeof *e);
    e->type = type;
    e->reason = reason;
    e->decision = decision;
    e->message = message != NULL ? message : "";
    e->retry_after_ms = -1;
}

void sl_msg_result_rejected(sl_msg_result_t *r, sl_msg_error_t *e, const char *job_id,
                            const char *idem, const char *tenant, sl_errtype_t type,
                            sl_reason_t reason, const char *message, int64_t now_ms)
{
    sl_msg_error_init(e, type, reason, SL_DECISION_REJECTED_LOCALLY, message);
    sl_msg_result_init(r, job_id, SL_STATUS_REJECTED);
    r->idempotency_key = idem;
    r->tenant = tenant;
    r->finished_ms = now_ms;
    r->error = e;
}

/* A string or JSON null (jansson's json_string(NULL) would fail the whole object). */
static json_t *str_or_null(const char *s)
{
    return s != NULL ? json_string(s) : json_null();
}

static json_t *error_json(const sl_msg_error_t *e)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:b, s:b}", "type", sl_errtype_name(e->type),
                          "reason", sl_reason_name(e->reason), "message", e->message,
                          "gateway_decision", sl_decision_name(e->decision), "retryable",
                          e->retryable != 0, "fallback_allowed", e->fallback_allowed != 0);
    if (o == NULL)
        return NULL;
    int bad = json_object_set_new(o, "limiter", str_or_null(e->limiter)) != 0;
    bad |= json_object_set_new(o, "scope", str_or_null(e->scope)) != 0;
    bad |= json_object_set_new(o, "retry_after_ms",
                               e->retry_after_ms >= 0 ? json_integer(e->retry_after_ms)
                                                      : json_null()) != 0;
    bad |= json_object_set_new(o, "trace_id", str_or_null(e->trace_id)) != 0;
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A borrowed JSON value or null; json_object_set takes its own reference. */
static int set_value(json_t *o, const char *key, const json_t *v)
{
    return json_object_set(o, key, v != NULL ? (json_t *)v : json_null());
}

json_t *sl_msg_result_json(const sl_msg_result_t *r)
{
    if (r->job_id == NULL)
        return NULL;
    json_t *o = json_pack("{s:i, s:s}", "v", 1, "job_id", r->job_id);
    if (o == NULL)
        return NULL;
    int bad = json_object_set_new(o, "idempotency_key", str_or_null(r->idempotency_key));
    bad |= json_object_set_new(o, "tenant", str_or_null(r->tenant));
    bad |= json_object_set_new(o, "route", str_or_null(r->route));
    bad |= json_object_set_new(o, "class", str_or_null(r->cls));
    bad |= json_object_set_new(o, "status", json_string(sl_status_name(r->status)));
    bad |= json_object_set_new(o, "attempts", json_integer(r->attempts));
    bad |= json_object_set_new(o, "fallback_used", json_boolean(r->fallback_used));
    if (r->degraded_from != NULL)
        bad |= json_object_set_new(o, "degraded_from", json_string(r->degraded_from));
    bad |= json_object_set_new(o, "finished_ms", json_integer(r->finished_ms));
    bad |= json_object_set_new(o, "deployment", str_or_null(r->deployment));
    if (r->path != NULL)
        bad |= json_object_set_new(o, "path", json_string(r->path));
    if (r->cost_usd >= 0 && r->seal_pk == NULL)
        bad |= json_object_set_new(o, "cost_usd", json_real(r->cost_usd));
    if (r->online_cost_usd >= 0 && r->seal_pk == NULL)
        bad |= json_object_set_new(o, "online_cost_usd", json_real(r->online_cost_usd));
    bad |= set_value(o, "response", r->response);
    bad |= set_value(o, "usage", r->usage);
    bad |= set_value(o, "metadata", r->metadata);
    if (r->has_timings)
        bad |=
            json_object_set_new(o, "timings",
                                json_pack("{s:f, s:f, s:f}", "queued_ms", r->queued_ms,
                                          "provider_ms", r->provider_ms, "total_ms", r->total_ms));
    if (r->has_source)
        bad |= json_object_set_new(
            o, "source",
            json_pack("{s:s, s:i, s:I}", "topic", r->source_topic ? r->source_topic : "",
                      "partition", r->source_partition, "offset", (json_int_t)r->source_offset));
    bad |= json_object_set_new(o, "error", r->error != NULL ? error_json(r->error) : json_null());
    /* Sealed as it is built, so whatever is done to the message later (signing it, storing it
     * in the outbox) is done to the sealed form. */
    if (!bad && r->seal_pk != NULL)
        bad = sl_seal_result(o, r->seal_pk) != SL_OK;
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}
