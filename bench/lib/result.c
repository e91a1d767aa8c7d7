/* result.c - see result.h. */
#include "result.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int b_result_parse(const void *payload, size_t len, b_result_t *r)
{
    *r = (b_result_t){.doc = json_loadb(payload, len, 0, NULL), .dispatch_ms = -1};
    r->idem = json_string_value(json_object_get(r->doc, "idempotency_key"));
    r->status = json_string_value(json_object_get(r->doc, "status"));
    if (r->idem == NULL || r->status == NULL) {
        json_decref(r->doc);
        r->doc = NULL;
        return -1;
    }
    r->reason = json_string_value(json_object_get(json_object_get(r->doc, "error"), "reason"));
    r->job_id = json_string_value(json_object_get(r->doc, "job_id"));
    json_t *usage = json_object_get(r->doc, "usage");
    r->input = json_integer_value(json_object_get(usage, "input"));
    r->output = json_integer_value(json_object_get(usage, "output"));
    r->attempts = (int)json_integer_value(json_object_get(r->doc, "attempts"));
    json_t *tm = json_object_get(r->doc, "timings");
    r->queued_ms = json_number_value(json_object_get(tm, "queued_ms"));
    if (r->attempts > 0) {
        /* queued_ms is (last) dispatch minus submit, total_ms finish minus submit: the dispatch
         * happened at finished_ms - total_ms + queued_ms on the scheduler's (wall) clock. */
        r->dispatch_ms = (double)json_integer_value(json_object_get(r->doc, "finished_ms")) -
                         json_number_value(json_object_get(tm, "total_ms")) + r->queued_ms;
    }
    return 0;
}

void b_result_free(b_result_t *r)
{
    json_decref(r->doc);
    r->doc = NULL;
}

void b_result_poll(rd_kafka_t *cons, int wait_ms, void (*on_result)(void *arg, const b_result_t *r),
                   void *arg)
{
    rd_kafka_message_t *m = rd_kafka_consumer_poll(cons, wait_ms);
    while (m != NULL) {
        b_result_t r;
        if (!m->err && b_result_parse(m->payload, m->len, &r) == 0) {
            on_result(arg, &r);
            b_result_free(&r);
        }
        rd_kafka_message_destroy(m);
        m = rd_kafka_consumer_poll(cons, 0);
    }
}

void b_job_key(int index, char *out, size_t cap)
{
    snprintf(out, cap, "j%07d", index);
}

int b_job_index(const char *idem, int njobs)
{
    int i = idem[0] == 'j' ? atoi(idem + 1) : -1;
    return i >= 0 && i < njobs ? i : -1;
}

b_status_t b_status_parse(const char *s)
{
    static const char *const names[] = {"succeeded", "failed", "rejected", "expired", "cancelled"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(s, names[i]) == 0)
            return (b_status_t)(B_SUCCEEDED + i);
    }
    return B_OTHER;
}
