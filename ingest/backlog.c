/* backlog.c - the schedulers' backlog on the jobs topic, as ingest sees it (see backlog.h). */
#include "backlog.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

struct sl_backlog {
    rd_kafka_t *rk;
    rd_kafka_queue_t *answers;
    char *topic, *group;
    int n;                         /* partitions 0..n-1 may have been written to */
    int64_t *written;              /* the last offset landed per partition, -1 none */
    int64_t *committed;            /* from the last answer, -1 none */
    int asking;                    /* a question is in flight */
    int64_t asked_ms, answered_ms; /* monotonic; 0 never */
    int refused_logged;
};

sl_backlog_t *sl_backlog_new(rd_kafka_t *rk, const char *topic, const char *group)
{
    sl_backlog_t *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->rk = rk;
    b->topic = strdup(topic);
    b->group = strdup(group);
    b->written = malloc(SL_BACKLOG_MAX_PARTITIONS * sizeof *b->written);
    b->committed = malloc(SL_BACKLOG_MAX_PARTITIONS * sizeof *b->committed);
    b->answers = rd_kafka_queue_new(rk);
    if (b->topic == NULL || b->group == NULL || b->written == NULL || b->committed == NULL ||
        b->answers == NULL) {
        sl_backlog_free(b);
        return NULL;
    }
    for (int p = 0; p < SL_BACKLOG_MAX_PARTITIONS; p++)
        b->written[p] = b->committed[p] = -1;
    return b;
}

void sl_backlog_free(sl_backlog_t *b)
{
    if (b == NULL)
        return;
    if (b->answers != NULL)
        rd_kafka_queue_destroy(b->answers);
    free(b->topic);
    free(b->group);
    free(b->written);
    free(b->committed);
    free(b);
}

void sl_backlog_written(sl_backlog_t *b, const char *topic, int32_t partition, int64_t offset)
{
    if (partition < 0 || partition >= SL_BACKLOG_MAX_PARTITIONS || offset < 0 ||
        strcmp(topic, b->topic) != 0)
        return;
    if (offset > b->written[partition])
        b->written[partition] = offset;
    if (partition >= b->n)
        b->n = partition + 1;
}

int64_t sl_backlog_compute(const int64_t *written, const int64_t *committed, int n)
{
    int64_t worst = 0;
    for (int p = 0; p < n; p++) {
        if (written[p] < 0)
            continue;
        int64_t behind = written[p] + 1 - (committed[p] >= 0 ? committed[p] : 0);
        if (behind > worst)
            worst = behind;
    }
    return worst;
}

/* Takes the committed offsets out of an answer; 0 when it holds them, else -1 with why. */
static int take_answer(sl_backlog_t *b, rd_kafka_event_t *ev, const char **why)
{
    *why = rd_kafka_event_error_string(ev);
    if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return -1;
    const rd_kafka_ListConsumerGroupOffsets_result_t *res =
        rd_kafka_event_ListConsumerGroupOffsets_result(ev);
    size_t ngroups = 0;
    const rd_kafka_group_result_t **groups =
        res != NULL ? rd_kafka_ListConsumerGroupOffsets_result_groups(res, &ngroups) : NULL;
    if (ngroups != 1) {
        *why = "an answer without the group";
        return -1;
    }
    const rd_kafka_error_t *gerr = rd_kafka_group_result_error(groups[0]);
    if (gerr != NULL) {
        *why = rd_kafka_error_string(gerr);
        return -1;
    }
    const rd_kafka_topic_partition_list_t *parts = rd_kafka_group_result_partitions(groups[0]);
    for (int i = 0; parts != NULL && i < parts->cnt; i++) {
        const rd_kafka_topic_partition_t *tp = &parts->elems[i];
        if (tp->partition < 0 || tp->partition >= SL_BACKLOG_MAX_PARTITIONS ||
            strcmp(tp->topic, b->topic) != 0)
            continue;
        /* A partition's own error (unknown to the group) reads as "never committed". */
        b->committed[tp->partition] =
            tp->err == RD_KAFKA_RESP_ERR_NO_ERROR && tp->offset >= 0 ? tp->offset : -1;
    }
    return 0;
}

static void ask(sl_backlog_t *b, int64_t now_ms)
{
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(b->n);
    if (parts == NULL)
        return;
    for (int p = 0; p < b->n; p++) {
        if (b->written[p] >= 0)
            rd_kafka_topic_partition_list_add(parts, b->topic, p);
    }
    rd_kafka_ListConsumerGroupOffsets_t *q = rd_kafka_ListConsumerGroupOffsets_new(b->group, parts);
    rd_kafka_AdminOptions_t *o =
        rd_kafka_AdminOptions_new(b->rk, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS);
    if (q != NULL && o != NULL) {
        char err[128];
        rd_kafka_AdminOptions_set_request_timeout(o, SL_BACKLOG_TIMEOUT_MS, err, sizeof err);
        rd_kafka_ListConsumerGroupOffsets(b->rk, &q, 1, o, b->answers);
        b->asking = 1;
        b->asked_ms = now_ms;
    }
    if (o != NULL)
        rd_kafka_AdminOptions_destroy(o);
    if (q != NULL)
        rd_kafka_ListConsumerGroupOffsets_destroy(q);
    rd_kafka_topic_partition_list_destroy(parts);
}

void sl_backlog_step(sl_backlog_t *b, int64_t now_ms)
{
    rd_kafka_event_t *ev;
    while ((ev = rd_kafka_queue_poll(b->answers, 0)) != NULL) {
        const char *why = NULL;
        if (take_answer(b, ev, &why) == 0) {
            b->answered_ms = now_ms;
            if (b->refused_logged) {
                sl_info("the jobs topic's backlog is known again");
                b->refused_logged = 0;
            }
        } else if (!b->refused_logged) {
            sl_warn("cannot read the committed offsets of group %s on %s (%s); batch requests "
                    "are not held back for the schedulers while this lasts",
                    b->group, b->topic, why != NULL ? why : "no reason given");
            b->refused_logged = 1;
        }
        rd_kafka_event_destroy(ev);
        b->asking = 0;
    }
    /* The admin request times out by itself and answers then; this is for one that never
     * answers at all. */
    if (b->asking && now_ms - b->asked_ms > 2 * SL_BACKLOG_TIMEOUT_MS)
        b->asking = 0;
    if (!b->asking && b->n > 0 && now_ms - b->asked_ms >= SL_BACKLOG_REFRESH_MS)
        ask(b, now_ms);
}

int64_t sl_backlog_max(const sl_backlog_t *b, int64_t now_ms)
{
    if (b->n == 0)
        return 0; /* nothing written: nothing behind */
    if (b->answered_ms == 0 || now_ms - b->answered_ms > SL_BACKLOG_STALE_MS)
        return -1;
    return sl_backlog_compute(b->written, b->committed, b->n);
}
