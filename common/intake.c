/* intake.c - round-robin slices over per-partition queues (see intake.h).
 *
 * The one idea: no source gives more than a slice per take, and a take the cap cuts short is
 * continued by the next one (same source, the rest of its slice), so the takes together are one
 * fair round-robin and a flood in one partition is read a slice at a time beside the others. */
#include "intake.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kafka.h"
#include "log.h"

enum { LATER_MAX = 4 };

typedef struct {
    char *topic;
    int32_t partition;
    void *src;
    int tier; /* 0: taken first; 1: a "later" topic, taken with the room left */
} source_t;

struct sl_intake {
    sl_intake_opts_t o;
    source_t *v;
    int n, cap_v;
    int next[2];            /* per tier: index the next take starts at */
    int left[2];            /* per tier: what remains of that source's slice (0: a whole one) */
    char *later[LATER_MAX]; /* topics of tier 1 */
    int nlater;
    int later_cap;            /* at most this many items of tier 1 per take */
    int later_paused;         /* sl_intake_pause_later: tier 1 is neither taken nor waited for */
    int wake[2];              /* pipe librdkafka writes to when a queue turns non-empty */
    rd_kafka_t *cons;         /* set by sl_intake_attach */
    int detached;             /* sl_intake_detach ran: assignments add no more queues */
    rd_kafka_queue_t *cons_q; /* the consumer queue's reference, watched for events */
};

sl_err_t sl_intake_new(const sl_intake_opts_t *opts, sl_intake_t **out)
{
    *out = NULL;
    if (opts == NULL || opts->take == NULL || opts->slice < 1 || opts->cap < 1)
        return SL_EINVAL;
    sl_intake_t *in = calloc(1, sizeof *in);
    if (in == NULL)
        return SL_ENOMEM;
    in->o = *opts;
    in->wake[0] = in->wake[1] = -1;
    *out = in;
    return SL_OK;
}

static void release(sl_intake_t *in, source_t *s)
{
    if (in->o.release != NULL)
        in->o.release(s->src);
    free(s->topic);
}

void sl_intake_clear(sl_intake_t *in)
{
    for (int i = 0; i < in->n; i++)
        release(in, &in->v[i]);
    in->n = 0;
    in->next[0] = in->next[1] = 0;
    in->left[0] = in->left[1] = 0;
}

void sl_intake_free(sl_intake_t *in)
{
    if (in == NULL)
        return;
    sl_intake_detach(in);
    for (int i = 0; i < 2; i++) {
        if (in->wake[i] >= 0)
            close(in->wake[i]);
    }
    for (int i = 0; i < in->nlater; i++)
        free(in->later[i]);
    free(in->v);
    free(in);
}

sl_err_t sl_intake_later(sl_intake_t *in, const char *topic, int cap)
{
    if (in->nlater == LATER_MAX || cap < 1)
        return SL_EINVAL;
    char *t = strdup(topic);
    if (t == NULL)
        return SL_ENOMEM;
    in->later[in->nlater++] = t;
    if (in->later_cap == 0 || cap < in->later_cap)
        in->later_cap = cap;
    return SL_OK;
}

static int tier_of(const sl_intake_t *in, const char *topic)
{
    for (int i = 0; i < in->nlater; i++) {
        if (strcmp(in->later[i], topic) == 0)
            return 1;
    }
    return 0;
}

static int find(const sl_intake_t *in, const char *topic, int32_t partition)
{
    for (int i = 0; i < in->n; i++) {
        if (in->v[i].partition == partition && strcmp(in->v[i].topic, topic) == 0)
            return i;
    }
    return -1;
}

sl_err_t sl_intake_add(sl_intake_t *in, const char *topic, int32_t partition, void *src)
{
    int i = find(in, topic, partition);
    if (i >= 0) {
        if (in->o.release != NULL && in->v[i].src != src)
            in->o.release(in->v[i].src);
        in->v[i].src = src;
        return SL_OK;
    }
    if (in->n == in->cap_v) {
        int cap = in->cap_v > 0 ? in->cap_v * 2 : 16;
        source_t *v = realloc(in->v, (size_t)cap * sizeof *v);
        if (v == NULL)
            return SL_ENOMEM;
        in->v = v;
        in->cap_v = cap;
    }
    char *t = strdup(topic);
    if (t == NULL)
        return SL_ENOMEM;
    in->v[in->n++] = (source_t){t, partition, src, tier_of(in, topic)};
    return SL_OK;
}

sl_err_t sl_intake_remove(sl_intake_t *in, const char *topic, int32_t partition)
{
    int i = find(in, topic, partition);
    if (i < 0)
        return SL_ENOTFOUND;
    release(in, &in->v[i]);
    memmove(&in->v[i], &in->v[i + 1], (size_t)(in->n - i - 1) * sizeof *in->v);
    in->n--;
    /* The source that was to start the next take keeps that place. */
    for (int t = 0; t < 2; t++) {
        if (i == in->next[t])
            in->left[t] = 0;
        if (i < in->next[t])
            in->next[t]--;
        if (in->next[t] >= in->n)
            in->next[t] = 0;
    }
    return SL_OK;
}

void sl_intake_pause_later(sl_intake_t *in, int paused)
{
    in->later_paused = paused != 0;
}

int sl_intake_sources(const sl_intake_t *in)
{
    return in->n;
}

/* One round-robin pass over the sources of tier t, adding to out[*got..limit). */
static void take_tier(sl_intake_t *in, int t, void **out, int *got, int limit)
{
    int start = in->next[t] % in->n;
    int quota = in->left[t] > 0 ? in->left[t] : in->o.slice;
    int first = -1; /* the first source of this tier the pass met */
    for (int k = 0; k < in->n; k++) {
        int i = (start + k) % in->n, j = 0;
        if (in->v[i].tier != t)
            continue;
        if (first < 0)
            first = i;
        void *item = NULL;
        while (j < quota && *got < limit && (item = in->o.take(in->v[i].src)) != NULL) {
            out[(*got)++] = item;
            j++;
        }
        if (*got == limit) {
            /* Cut short: the next take goes on with the rest of this slice. */
            in->next[t] = j < quota ? i : (i + 1) % in->n;
            in->left[t] = j < quota ? quota - j : 0;
            return;
        }
        quota = in->o.slice;
    }
    in->next[t] = first >= 0 ? (first + 1) % in->n : 0;
    in->left[t] = 0;
}

int sl_intake_take(sl_intake_t *in, void **out, int max)
{
    int limit = max < in->o.cap ? max : in->o.cap;
    int got = 0;
    if (in->n == 0 || limit <= 0)
        return 0;
    take_tier(in, 0, out, &got, limit);
    int later = got + in->later_cap < limit ? got + in->later_cap : limit;
    if (!in->later_paused && got < later)
        take_tier(in, 1, out, &got, later);
    return got;
}

/* ---- on a librdkafka consumer ---- */

/* Each partition has its own queue, so librdkafka's read-ahead limits apply per partition, not
 * to one shared queue: queued.max.messages.kbytes (default 64 MB) would allow 64 MB for each of
 * the 64 partitions of jobs and usage. 2 MB and 1000 messages per partition are seconds of work
 * at a slice per iteration, and one 64 KB fetch refills well before a partition runs dry. With
 * one shared queue a flood filled it and stopped every partition's fetches (in the scheduler,
 * usage events starved); now only the flood's partition waits. */
const char *const sl_intake_consumer_props[] = {"max.partition.fetch.bytes",
                                                "65536",
                                                "queued.max.messages.kbytes",
                                                "2048",
                                                "queued.min.messages",
                                                "1000",
                                                NULL};

static void *kafka_take(void *src)
{
    return rd_kafka_consume_queue(src, 0);
}

static void kafka_release(void *src)
{
    /* librdkafka keeps the partition's queue after this reference goes: it must not wake us. */
    rd_kafka_queue_io_event_enable(src, -1, NULL, 0);
    rd_kafka_queue_destroy(src);
}

static int kafka_pending(void *src)
{
    size_t n = rd_kafka_queue_length(src);
    return n > 0 ? 1 : 0;
}

sl_intake_opts_t sl_intake_kafka_opts(int slice, int cap)
{
    return (sl_intake_opts_t){slice, cap, kafka_take, kafka_release, kafka_pending};
}

/* The wake pipe, made on first use: both ends non-blocking (librdkafka's write must never
 * block its thread; a full pipe already means "wake up"). */
static int wake_fd(sl_intake_t *in)
{
    if (in->wake[1] >= 0)
        return in->wake[1];
    if (pipe(in->wake) != 0) {
        in->wake[0] = in->wake[1] = -1;
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        fcntl(in->wake[i], F_SETFL, fcntl(in->wake[i], F_GETFL) | O_NONBLOCK);
        fcntl(in->wake[i], F_SETFD, FD_CLOEXEC);
    }
    return in->wake[1];
}

static void add_partitions(sl_intake_t *in, rd_kafka_t *rk,
                           const rd_kafka_topic_partition_list_t *parts)
{
    int fd = wake_fd(in);
    if (fd < 0)
        sl_warn("intake: no wake pipe; waiting by polling");
    for (int i = 0; i < parts->cnt; i++) {
        const rd_kafka_topic_partition_t *p = &parts->elems[i];
        rd_kafka_queue_t *q = sl_kafka_partition_queue(rk, p->topic, p->partition, fd);
        if (q == NULL || sl_intake_add(in, p->topic, p->partition, q) != SL_OK) {
            /* Its messages then still reach the consumer queue, which the loop reads too. */
            sl_warn("intake: %s [%d] read from the consumer queue", p->topic, (int)p->partition);
            if (q != NULL)
                rd_kafka_queue_destroy(q);
        }
    }
}

void sl_intake_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    sl_intake_t *in = opaque;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        /* Queues first: once assigned, librdkafka starts fetching into them. Static membership
         * assigns while the consumer is being made, before sl_intake_attach. */
        if (!in->detached)
            add_partitions(in, rk, parts);
        sl_kafka_rebalance_apply(rk, err, parts);
        sl_info("intake: %d partitions assigned, %d read", parts->cnt, in->n);
        return;
    }
    sl_kafka_rebalance_apply(rk, err, parts);
    for (int i = 0; i < parts->cnt; i++)
        sl_intake_remove(in, parts->elems[i].topic, parts->elems[i].partition);
    if (err != RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS)
        sl_warn("intake: partitions dropped on %s", rd_kafka_err2name(err));
    sl_info("intake: %d partitions revoked, %d read", parts->cnt, in->n);
}

sl_err_t sl_intake_attach(sl_intake_t *in, rd_kafka_t *cons)
{
    rd_kafka_queue_t *q = rd_kafka_queue_get_consumer(cons);
    if (q == NULL)
        return SL_EKAFKA;
    int fd = wake_fd(in);
    if (fd >= 0)
        rd_kafka_queue_io_event_enable(q, fd, "1", 1);
    in->cons = cons;
    in->cons_q = q;
    return SL_OK;
}

static int pending(const sl_intake_t *in)
{
    if (in->cons_q != NULL && rd_kafka_queue_length(in->cons_q) > 0)
        return 1;
    for (int i = 0; in->o.pending != NULL && i < in->n; i++) {
        if (!(in->later_paused && in->v[i].tier == 1) && in->o.pending(in->v[i].src) > 0)
            return 1;
    }
    return 0;
}

void sl_intake_wait(sl_intake_t *in, int timeout_ms)
{
    char buf[256];
    if (in->wake[0] < 0) {
        if (!pending(in) && timeout_ms > 0)
            usleep((useconds_t)(timeout_ms < 5 ? timeout_ms : 5) * 1000);
        return;
    }
    /* Drained before looking: a queue that turns non-empty after the look writes again. */
    while (read(in->wake[0], buf, sizeof buf) > 0)
        ;
    if (timeout_ms <= 0 || pending(in))
        return;
    struct pollfd p = {.fd = in->wake[0], .events = POLLIN};
    poll(&p, 1, timeout_ms);
}

void sl_intake_detach(sl_intake_t *in)
{
    sl_intake_clear(in);
    if (in->cons_q != NULL) {
        rd_kafka_queue_io_event_enable(in->cons_q, -1, NULL, 0);
        rd_kafka_queue_destroy(in->cons_q);
    }
    in->cons_q = NULL;
    in->cons = NULL;
    in->detached = 1;
}
