/* backlog.c - the schedulers' backlog on a jobs topic, as ingest sees it (see backlog.h). */
#include "backlog.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

/* One partition: the jobs this ingest wrote there that the group has not committed, oldest
 * first, in a ring that grows to SL_BACKLOG_RING_MAX. Past that the oldest leave the ring
 * into `overflow`, which is only emptied by a commit past the last of them, so the count
 * errs on the side of holding back. */
typedef struct {
    int64_t *off;
    uint32_t *bytes;
    int head, len, cap;
    int64_t unread;        /* bytes of the jobs in the ring */
    int64_t overflow;      /* bytes of jobs that left the ring unread */
    int64_t overflow_last; /* the offset of the last of them */
} part_t;

struct sl_backlog {
    rd_kafka_t *rk;
    rd_kafka_queue_t *answers;
    char *topic, *group;
    part_t *parts;                 /* SL_BACKLOG_MAX_PARTITIONS */
    int64_t in_flight;             /* bytes of jobs produced, not yet delivered or failed */
    int n;                         /* partitions 0..n-1 may have been written to */
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
    b->parts = calloc(SL_BACKLOG_MAX_PARTITIONS, sizeof *b->parts);
    b->answers = rk != NULL ? rd_kafka_queue_new(rk) : NULL;
    if (b->topic == NULL || b->group == NULL || b->parts == NULL ||
        (rk != NULL && b->answers == NULL)) {
        sl_backlog_free(b);
        return NULL;
    }
    return b;
}

void sl_backlog_free(sl_backlog_t *b)
{
    if (b == NULL)
        return;
    if (b->answers != NULL)
        rd_kafka_queue_destroy(b->answers);
    for (int p = 0; b->parts != NULL && p < b->n; p++) {
        free(b->parts[p].off);
        free(b->parts[p].bytes);
    }
    free(b->parts);
    free(b->topic);
    free(b->group);
    free(b);
}

/* Room for one more job in pt's ring: grown (doubling) up to the limit, else its oldest job
 * leaves it into the overflow. */
static void make_room(part_t *pt)
{
    if (pt->len < pt->cap)
        return;
    if (pt->cap < SL_BACKLOG_RING_MAX) {
        int cap = pt->cap == 0 ? 256 : pt->cap * 2;
        int64_t *off = malloc((size_t)cap * sizeof *off);
        uint32_t *bytes = malloc((size_t)cap * sizeof *bytes);
        if (off != NULL && bytes != NULL) {
            for (int i = 0; i < pt->len; i++) {
                off[i] = pt->off[(pt->head + i) % pt->cap];
                bytes[i] = pt->bytes[(pt->head + i) % pt->cap];
            }
            free(pt->off);
            free(pt->bytes);
            pt->off = off;
            pt->bytes = bytes;
            pt->head = 0;
            pt->cap = cap;
            return;
        }
        free(off);
        free(bytes);
        if (pt->cap == 0)
            return; /* no ring at all: the caller counts the job as overflow */
    }
    pt->overflow += pt->bytes[pt->head];
    pt->overflow_last = pt->off[pt->head];
    pt->unread -= pt->bytes[pt->head];
    pt->head = (pt->head + 1) % pt->cap;
    pt->len--;
}

void sl_backlog_sent(sl_backlog_t *b, const char *topic, size_t bytes)
{
    if (strcmp(topic, b->topic) == 0)
        b->in_flight += (int64_t)bytes;
}

void sl_backlog_landed(sl_backlog_t *b, const char *topic, int32_t partition, int64_t offset,
                       size_t bytes, int ok)
{
    if (strcmp(topic, b->topic) != 0)
        return;
    b->in_flight -= (int64_t)bytes;
    if (b->in_flight < 0)
        b->in_flight = 0; /* a message sent before the backlog was told of it */
    if (!ok || partition < 0 || partition >= SL_BACKLOG_MAX_PARTITIONS || offset < 0)
        return;
    if (partition >= b->n)
        b->n = partition + 1;
    part_t *pt = &b->parts[partition];
    uint32_t size = bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
    make_room(pt);
    if (pt->len == pt->cap) { /* out of memory: counted, kept until a commit passes it */
        pt->overflow += size;
        if (offset > pt->overflow_last)
            pt->overflow_last = offset;
        return;
    }
    int at = (pt->head + pt->len) % pt->cap;
    pt->off[at] = offset;
    pt->bytes[at] = size;
    pt->len++;
    pt->unread += size;
}

void sl_backlog_answer(sl_backlog_t *b, const int64_t *committed, int n, int64_t now_ms)
{
    for (int p = 0; p < n && p < b->n; p++) {
        part_t *pt = &b->parts[p];
        if (committed[p] < 0)
            continue; /* never committed: all of it is unread */
        while (pt->len > 0 && pt->off[pt->head] < committed[p]) {
            pt->unread -= pt->bytes[pt->head];
            pt->head = (pt->head + 1) % pt->cap;
            pt->len--;
        }
        if (pt->overflow > 0 && committed[p] > pt->overflow_last)
            pt->overflow = 0;
    }
    b->answered_ms = now_ms;
}

/* Takes the committed offsets out of an answer into b; 0 when it held them, else -1 with
 * why. */
static int take_answer(sl_backlog_t *b, rd_kafka_event_t *ev, int64_t now_ms, const char **why)
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
    int64_t *committed = malloc((size_t)b->n * sizeof *committed);
    if (committed == NULL) {
        *why = "out of memory";
        return -1;
    }
    for (int p = 0; p < b->n; p++)
        committed[p] = -1;
    const rd_kafka_topic_partition_list_t *parts = rd_kafka_group_result_partitions(groups[0]);
    for (int i = 0; parts != NULL && i < parts->cnt; i++) {
        const rd_kafka_topic_partition_t *tp = &parts->elems[i];
        /* A partition's own error (unknown to the group) reads as "never committed". */
        if (tp->partition >= 0 && tp->partition < b->n && strcmp(tp->topic, b->topic) == 0 &&
            tp->err == RD_KAFKA_RESP_ERR_NO_ERROR && tp->offset >= 0)
            committed[tp->partition] = tp->offset;
    }
    sl_backlog_answer(b, committed, b->n, now_ms);
    free(committed);
    return 0;
}

static void ask(sl_backlog_t *b, int64_t now_ms)
{
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(b->n);
    if (parts == NULL)
        return;
    for (int p = 0; p < b->n; p++) {
        if (b->parts[p].len > 0 || b->parts[p].overflow > 0)
            rd_kafka_topic_partition_list_add(parts, b->topic, p);
    }
    if (parts->cnt == 0) {
        /* Nothing landed unread: nothing to ask (the admin API refuses an empty list), and
         * the answer is known. */
        rd_kafka_topic_partition_list_destroy(parts);
        b->asked_ms = b->answered_ms = now_ms;
        return;
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
    if (b->answers == NULL)
        return;
    rd_kafka_event_t *ev;
    while ((ev = rd_kafka_queue_poll(b->answers, 0)) != NULL) {
        const char *why = NULL;
        if (take_answer(b, ev, now_ms, &why) == 0) {
            if (b->refused_logged) {
                sl_info("the backlog on %s is known again", b->topic);
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
    int64_t worst = 0;
    for (int p = 0; p < b->n; p++) {
        int64_t behind = b->parts[p].unread + b->parts[p].overflow;
        if (behind > worst)
            worst = behind;
    }
    if (worst == 0)
        return b->in_flight; /* nothing landed unread: what is on its way is all */
    if (b->answered_ms == 0 || now_ms - b->answered_ms > SL_BACKLOG_STALE_MS)
        return -1;
    /* Where the jobs on their way land is known only when they do: counted on the partition
     * most behind, as they would be for a single tenant's backfill. */
    return worst + b->in_flight;
}

int sl_backlog_holds(sl_backlog_t *b, int64_t max, int64_t now_ms)
{
    if (b == NULL || max <= 0)
        return 0;
    sl_backlog_step(b, now_ms);
    return sl_backlog_max(b, now_ms) > max;
}
