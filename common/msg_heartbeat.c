/* msg_heartbeat.c - the dispatcher heartbeat in JSON (see msg_heartbeat.h). */
#include "msg_heartbeat.h"

#include <string.h>

json_t *sl_msg_heartbeat_json(const sl_msg_heartbeat_t *h)
{
    json_t *doc = json_pack("{s:i, s:s, s:s, s:s, s:I, s:I, s:b, s:[]}", "v", 1, "kind",
                            "heartbeat", "dispatcher", h->dispatcher, "incarnation",
                            h->incarnation, "started_ms", (json_int_t)h->started_ms, "sent_ms",
                            (json_int_t)h->sent_ms, "full", h->full, "attempts");
    if (doc != NULL && h->max_in_flight > 0 &&
        json_object_set_new(doc, "max_in_flight", json_integer(h->max_in_flight)) != 0) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

sl_err_t sl_msg_heartbeat_add(json_t *doc, const char *job_id, const char *reservation_id)
{
    json_t *a = json_pack("{s:s, s:s}", "job_id", job_id, "reservation_id", reservation_id);
    if (a == NULL || json_array_append_new(json_object_get(doc, "attempts"), a) != 0)
        return SL_ENOMEM;
    return SL_OK;
}

int sl_msg_is_heartbeat(const json_t *doc)
{
    const char *kind = json_string_value(json_object_get(doc, "kind"));
    return kind != NULL && strcmp(kind, "heartbeat") == 0;
}

sl_err_t sl_msg_heartbeat_read(const json_t *doc, sl_msg_heartbeat_t *h, const json_t **attempts)
{
    h->dispatcher = json_string_value(json_object_get(doc, "dispatcher"));
    h->incarnation = json_string_value(json_object_get(doc, "incarnation"));
    h->started_ms = json_integer_value(json_object_get(doc, "started_ms"));
    h->sent_ms = json_integer_value(json_object_get(doc, "sent_ms"));
    h->full = json_is_true(json_object_get(doc, "full"));
    h->max_in_flight = json_integer_value(json_object_get(doc, "max_in_flight"));
    *attempts = json_object_get(doc, "attempts");
    if (h->dispatcher == NULL || h->incarnation == NULL || !json_is_array(*attempts))
        return SL_EINVAL;
    return SL_OK;
}
