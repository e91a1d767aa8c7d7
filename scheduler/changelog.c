/* changelog.c - the scheduler's queued jobs kept in Kafka (see changelog.h).
 */
#include "changelog.h"

#include <inttypes.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "hmap.h"
#include "kafka.h"
#include "log.h"
#include "util.h"

/* A snapshot writes this many jobs a loop turn, so a large queue is written over many turns
 * while the scheduler goes on scheduling. */
enum { SNAPSHOT_PAGE = 256 };
/* The delivery opaque of a snapshot's job records (job records taken in carry their store
 * commit, others 0). */
enum { SNAPSHOT_TAG = -1 };
enum { SL_CL_FAMILIES = 6 };
/* Reading the changelog back gives up after this long without a record. */
enum { READ_IDLE_MS = 15000 };

static const char *const kind_names[] = {[SL_CL_JOB] = "job",
                                         [SL_CL_END] = "end",
                                         [SL_CL_BEGIN] = "begin",
                                         [SL_CL_CLOSE] = "close",
                                         [SL_CL_LEASE] = "lease"};

/* ---- records ---- */

/* A job record begins with this, then its seq, id, submission time and the job message. */
#define JOB_HEAD "{\"v\":1,\"t\":\"job\",\"seq\":"

/* Job ids are ingest's: 1 to SL_JOB_ID_MAX of A-Z a-z 0-9 _ - (schema/job.json). */
static int id_ok(const char *id, size_t n)
{
    if (n == 0 || n > SL_JOB_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* Reads a decimal of 1 to 18 digits at *p (below end), moving *p past it; -1 when none. */
static int64_t read_digits(const char **p, const char *end)
{
    int64_t v = 0;
    int n = 0;
    while (*p < end && **p >= '0' && **p <= '9' && n < 18) {
        v = v * 10 + (**p - '0');
        (*p)++;
        n++;
    }
    return n > 0 && (*p >= end || **p < '0' || **p > '9') ? v : -1;
}

/* Whether end - *p starts with lit, moving *p past it. */
static int read_lit(const char **p, const char *end, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(end - *p) < n || memcmp(*p, lit, n) != 0)
        return 0;
    *p += n;
    return 1;
}

/* A job record in its one shape (sl_cl_encode); SL_EINVAL otherwise. The job message is not
 * parsed here: the record's MAC says the scheduler wrote it, and taking it in validates it. */
static sl_err_t decode_job(const char *buf, size_t len, sl_cl_rec_t *rec)
{
    const char *p = buf, *end = buf + len;
    if (!read_lit(&p, end, JOB_HEAD))
        return SL_EINVAL;
    rec->seq = read_digits(&p, end);
    if (rec->seq <= 0 || !read_lit(&p, end, ",\"id\":\""))
        return SL_EINVAL;
    const char *id = p;
    while (p < end && *p != '"')
        p++;
    if (p >= end || !id_ok(id, (size_t)(p - id)))
        return SL_EINVAL;
    memcpy(rec->job_id, id, (size_t)(p - id));
    rec->job_id[p - id] = '\0';
    if (!read_lit(&p, end, "\",\"sub\":"))
        return SL_EINVAL;
    rec->submitted_ms = read_digits(&p, end);
    if (rec->submitted_ms < 0 || !read_lit(&p, end, ",\"job\":"))
        return SL_EINVAL;
    /* the message: an object, then the record's closing brace */
    if (end - p < 3 || *p != '{' || end[-1] != '}' || end[-2] != '}')
        return SL_EINVAL;
    rec->job_len = (size_t)(end - 1 - p);
    if (memchr(p, '\0', rec->job_len) != NULL) /* no JSON text holds one (fuzz_changelog) */
        return SL_EINVAL;
    rec->job = strndup(p, rec->job_len);
    if (rec->job == NULL)
        return SL_ENOMEM;
    rec->kind = SL_CL_JOB;
    return SL_OK;
}

char *sl_cl_encode(sl_cl_kind_t kind, int64_t seq, int64_t epoch, const char *job_id,
                   int64_t submitted_ms, const char *job, size_t job_len, size_t *len)
{
    char *text = NULL;
    if (kind == SL_CL_LEASE) /* sl_cl_encode_lease */
        return NULL;
    if ((kind == SL_CL_JOB || kind == SL_CL_END) &&
        (job_id == NULL || !id_ok(job_id, strlen(job_id))))
        return NULL;
    if (kind == SL_CL_JOB) {
        /* The header first, in one fixed shape a restore reads without a JSON parser; the job
         * message goes in as it came, not parsed and written again. */
        sl_buf_t b;
        sl_buf_init(&b, job_len + 160);
        if (sl_buf_addf(&b, JOB_HEAD "%" PRId64 ",\"id\":\"%s\",\"sub\":%" PRId64 ",\"job\":", seq,
                        job_id, submitted_ms > 0 ? submitted_ms : 0) != SL_OK ||
            sl_buf_add(&b, job, job_len) != SL_OK || sl_buf_adds(&b, "}") != SL_OK) {
            sl_buf_free(&b);
            return NULL;
        }
        return sl_buf_take(&b, len);
    }
    json_t *doc = kind == SL_CL_END
                      ? json_pack("{s:i, s:s, s:I, s:s}", "v", 1, "t", kind_names[kind], "seq",
                                  (json_int_t)seq, "id", job_id)
                      : json_pack("{s:i, s:s, s:I, s:I}", "v", 1, "t", kind_names[kind], "seq",
                                  (json_int_t)seq, "epoch", (json_int_t)epoch);
    text = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (text != NULL)
        *len = strlen(text);
    return text;
}

/* A reservation id or deployment name a lease record may carry: 1 to max - 1 bytes of
 * printable ASCII without quotes or backslashes. */
static int text_ok(const char *t, size_t max)
{
    size_t n = t != NULL ? strlen(t) : 0;
    if (n == 0 || n >= max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (t[i] < 0x21 || t[i] > 0x7e || t[i] == '"' || t[i] == '\\')
            return 0;
    return 1;
}

char *sl_cl_encode_lease(int64_t seq, const char *job_id, const sl_cl_lease_t *lease, size_t *len)
{
    if (job_id == NULL || !id_ok(job_id, strlen(job_id)) || lease->attempt <= 0 ||
        !text_ok(lease->res_id, sizeof lease->res_id) ||
        !text_ok(lease->deployment, sizeof lease->deployment) || lease->expires_ms <= 0)
        return NULL;
    json_t *doc =
        json_pack("{s:i, s:s, s:I, s:s, s:i, s:s, s:s, s:I}", "v", 1, "t", "lease", "seq",
                  (json_int_t)seq, "id", job_id, "att", lease->attempt, "res", lease->res_id, "dep",
                  lease->deployment, "exp", (json_int_t)lease->expires_ms);
    char *text = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (text != NULL)
        *len = strlen(text);
    return text;
}

void sl_cl_rec_clear(sl_cl_rec_t *rec)
{
    free(rec->job);
    memset(rec, 0, sizeof *rec);
}

static int copy_id(char *dst, const char *id)
{
    if (id == NULL || !id_ok(id, strlen(id)))
        return -1;
    strcpy(dst, id);
    return 0;
}

sl_err_t sl_cl_decode(const char *buf, size_t len, sl_cl_rec_t *rec)
{
    memset(rec, 0, sizeof *rec);
    if (len >= strlen(JOB_HEAD) && memcmp(buf, JOB_HEAD, strlen(JOB_HEAD)) == 0) {
        sl_err_t jrc = decode_job(buf, len, rec);
        if (jrc != SL_OK)
            sl_cl_rec_clear(rec);
        return jrc;
    }
    json_t *doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
    json_t *t = json_object_get(doc, "t"), *seq = json_object_get(doc, "seq");
    sl_err_t rc = SL_EINVAL;
    if (json_integer_value(json_object_get(doc, "v")) != 1 || !json_is_string(t) ||
        !json_is_integer(seq) || json_integer_value(seq) <= 0)
        goto out;
    rec->seq = json_integer_value(seq);
    const char *name = json_string_value(t);
    for (int k = SL_CL_JOB; k <= SL_CL_LEASE; k++)
        if (strcmp(name, kind_names[k]) == 0)
            rec->kind = (sl_cl_kind_t)k;
    switch (rec->kind) {
    case SL_CL_BEGIN:
    case SL_CL_CLOSE: {
        json_t *e = json_object_get(doc, "epoch");
        if (!json_is_integer(e) || json_integer_value(e) <= 0)
            goto out;
        rec->epoch = json_integer_value(e);
        rc = SL_OK;
        break;
    }
    case SL_CL_END:
        if (copy_id(rec->job_id, json_string_value(json_object_get(doc, "id"))) == 0)
            rc = SL_OK;
        break;
    case SL_CL_LEASE: {
        json_t *att = json_object_get(doc, "att"), *exp = json_object_get(doc, "exp");
        const char *res = json_string_value(json_object_get(doc, "res"));
        const char *dep = json_string_value(json_object_get(doc, "dep"));
        if (copy_id(rec->job_id, json_string_value(json_object_get(doc, "id"))) != 0 ||
            !json_is_integer(att) || json_integer_value(att) <= 0 ||
            json_integer_value(att) > 1000000 || !json_is_integer(exp) ||
            json_integer_value(exp) <= 0 || !text_ok(res, sizeof rec->lease.res_id) ||
            !text_ok(dep, sizeof rec->lease.deployment))
            break;
        rec->lease.attempt = (int)json_integer_value(att);
        rec->lease.expires_ms = json_integer_value(exp);
        strcpy(rec->lease.res_id, res);
        strcpy(rec->lease.deployment, dep);
        rc = SL_OK;
        break;
    }
    default: /* a job record in any other shape, or an unknown kind */
        break;
    }
out:
    json_decref(doc);
    if (rc != SL_OK)
        sl_cl_rec_clear(rec);
    return rc;
}

/* ---- replay ---- */

typedef struct {
    int64_t offset;
    sl_cl_rec_t rec;
} entry_t;

typedef struct {
    entry_t *v;
    size_t n, cap;
    int64_t last_seq;
} part_t;

typedef struct {
    char *job;
    size_t len;
    int64_t submitted_ms, first_seq; /* the order jobs are taken in again */
    int leased;                      /* a lease record came after its job record */
    sl_cl_lease_t lease;
} live_t;

struct sl_cl_replay {
    int nparts;
    part_t *parts;
    sl_hmap_t *live; /* job id -> live_t */
    int64_t refused, records;
};

sl_cl_replay_t *sl_cl_replay_new(int nparts)
{
    sl_cl_replay_t *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->nparts = nparts;
    r->parts = calloc((size_t)(nparts > 0 ? nparts : 1), sizeof *r->parts);
    r->live = sl_hmap_new();
    if (r->parts == NULL || r->live == NULL) {
        sl_cl_replay_free(r);
        return NULL;
    }
    return r;
}

static void free_part_entries(part_t *p)
{
    for (size_t i = 0; i < p->n; i++)
        sl_cl_rec_clear(&p->v[i].rec);
    free(p->v);
    p->v = NULL;
    p->n = p->cap = 0;
}

static void free_live(const char *key, void *value, void *arg)
{
    (void)key;
    (void)arg;
    live_t *l = value;
    free(l->job);
    free(l);
}

void sl_cl_replay_free(sl_cl_replay_t *r)
{
    if (r == NULL)
        return;
    for (int p = 0; r->parts != NULL && p < r->nparts; p++)
        free_part_entries(&r->parts[p]);
    free(r->parts);
    if (r->live != NULL)
        sl_hmap_each(r->live, free_live, NULL);
    sl_hmap_free(r->live);
    free(r);
}

int sl_cl_replay_add(sl_cl_replay_t *r, int part, int64_t offset, sl_cl_rec_t *rec)
{
    part_t *p = &r->parts[part];
    if (rec->seq <= p->last_seq) {
        r->refused++;
        sl_cl_rec_clear(rec);
        return 0;
    }
    if (p->n == p->cap) {
        size_t ncap = p->cap ? p->cap * 2 : 64;
        entry_t *nv = realloc(p->v, ncap * sizeof *nv);
        if (nv == NULL) {
            /* counted as refused: the apply then finds the partition incomplete */
            r->refused++;
            sl_cl_rec_clear(rec);
            return 0;
        }
        p->v = nv;
        p->cap = ncap;
    }
    p->last_seq = rec->seq;
    r->records++;
    p->v[p->n].offset = offset;
    p->v[p->n].rec = *rec;
    p->n++;
    memset(rec, 0, sizeof *rec);
    return 1;
}

/* The index of the begin of the newest snapshot closed in p, or -1. */
static long newest_snapshot(const part_t *p)
{
    for (size_t i = p->n; i-- > 0;) {
        if (p->v[i].rec.kind != SL_CL_CLOSE)
            continue;
        for (size_t b = i; b-- > 0;)
            if (p->v[b].rec.kind == SL_CL_BEGIN && p->v[b].rec.epoch == p->v[i].rec.epoch)
                return (long)b;
    }
    return -1;
}

sl_err_t sl_cl_replay_apply(sl_cl_replay_t *r, int part, int64_t low, char *err, size_t errlen)
{
    part_t *p = &r->parts[part];
    long start = newest_snapshot(p);
    if (start < 0 && low > 0 && p->n > 0) {
        snprintf(err, errlen,
                 "changelog partition %d: records before offset %" PRId64 " were deleted and no "
                 "snapshot after them is whole, so its queued jobs cannot be known",
                 part, low);
        return SL_EDB;
    }
    for (size_t i = start < 0 ? 0 : (size_t)start; i < p->n; i++) {
        sl_cl_rec_t *rec = &p->v[i].rec;
        if (rec->kind == SL_CL_JOB) {
            live_t *l = sl_hmap_get(r->live, rec->job_id);
            if (l == NULL) {
                l = calloc(1, sizeof *l);
                if (l == NULL || sl_hmap_put(r->live, rec->job_id, l) != SL_OK) {
                    free(l);
                    return SL_ENOMEM;
                }
                l->submitted_ms = rec->submitted_ms;
                l->first_seq = rec->seq;
            } else {
                free(l->job);
            }
            l->job = rec->job;
            l->len = rec->job_len;
            rec->job = NULL;
            /* A job record (a snapshot's) after a lease record: the lease may be over. */
            l->leased = 0;
        } else if (rec->kind == SL_CL_LEASE) {
            live_t *l = sl_hmap_get(r->live, rec->job_id);
            if (l != NULL) {
                l->leased = 1;
                l->lease = rec->lease;
            }
        } else if (rec->kind == SL_CL_END) {
            live_t *l = sl_hmap_del(r->live, rec->job_id);
            if (l != NULL)
                free_live(NULL, l, NULL);
        }
    }
    int64_t last = p->last_seq;
    free_part_entries(p);
    p->last_seq = last;
    return SL_OK;
}

typedef struct {
    sl_cl_live_t *v;
    size_t n;
} sorted_t;

static void add_live(const char *key, void *value, void *arg)
{
    sorted_t *o = arg;
    live_t *l = value;
    o->v[o->n++] = (sl_cl_live_t){
        key, l->job, l->len, l->submitted_ms, l->first_seq, l->leased ? &l->lease : NULL};
}

static int by_order(const void *a, const void *b)
{
    const sl_cl_live_t *x = a, *y = b;
    /* Calls in flight first: taken over in the first slice, before their usage events (read
     * from the same turn on) find no job. */
    if ((x->lease != NULL) != (y->lease != NULL))
        return x->lease != NULL ? -1 : 1;
    if (x->submitted_ms != y->submitted_ms)
        return x->submitted_ms < y->submitted_ms ? -1 : 1;
    return x->first_seq < y->first_seq ? -1 : x->first_seq > y->first_seq;
}

sl_err_t sl_cl_replay_sorted(const sl_cl_replay_t *r, sl_cl_live_t **out, size_t *n)
{
    size_t len = sl_hmap_len(r->live);
    sorted_t o = {calloc(len + 1, sizeof *o.v), 0};
    *out = NULL;
    *n = 0;
    if (o.v == NULL)
        return SL_ENOMEM;
    sl_hmap_each(r->live, add_live, &o);
    qsort(o.v, o.n, sizeof *o.v, by_order);
    *out = o.v;
    *n = o.n;
    return SL_OK;
}

size_t sl_cl_replay_live(const sl_cl_replay_t *r)
{
    return sl_hmap_len(r->live);
}

int64_t sl_cl_replay_last_seq(const sl_cl_replay_t *r, int part)
{
    return r != NULL && part >= 0 && part < r->nparts ? r->parts[part].last_seq : 0;
}

int64_t sl_cl_replay_refused(const sl_cl_replay_t *r)
{
    return r->refused;
}

int64_t sl_cl_replay_records(const sl_cl_replay_t *r)
{
    return r != NULL ? r->records : 0;
}

/* ---- reading it back ---- */

/* sl_changelog_read of the partitions p with only[p] != 0 (only_n entries; NULL: all). */
static sl_err_t read_some(const sl_config_t *cfg, const uint8_t mac_key[SL_MAC_KEY_BYTES],
                          int tail_only, const uint8_t *only, int only_n, sl_cl_replay_t **out,
                          int64_t *refused, char *err, size_t errlen)
{
    *out = NULL;
    *refused = 0;
    const char *topic = cfg->kafka.topic_changelog;
    rd_kafka_t *rk = NULL;
    sl_err_t rc = sl_kafka_consumer_new(cfg, "sluice-scheduler-restore", "sluice-scheduler", NULL,
                                        0, NULL, &rk, err, errlen);
    if (rc != SL_OK)
        return rc;
    int nparts = sl_kafka_partition_count(rk, topic, 30000);
    sl_cl_replay_t *r = nparts > 0 ? sl_cl_replay_new(nparts) : NULL;
    int64_t *low = calloc((size_t)(nparts > 0 ? nparts : 1), sizeof *low);
    int64_t *high = calloc((size_t)(nparts > 0 ? nparts : 1), sizeof *high);
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(nparts + 1);
    if (nparts <= 0) {
        snprintf(err, errlen, "topic %s has no partitions on the broker (does it exist?)", topic);
        rc = SL_EKAFKA;
        goto done;
    }
    if (r == NULL || low == NULL || high == NULL || parts == NULL) {
        rc = SL_ENOMEM;
        goto done;
    }
    if (only != NULL && only_n != nparts) {
        snprintf(err, errlen, "topic %s has %d partitions, not %d", topic, nparts, only_n);
        rc = SL_ECONFIG;
        goto done;
    }
    int waiting = 0;
    for (int p = 0; p < nparts; p++) {
        if (only != NULL && !only[p])
            continue;
        rd_kafka_resp_err_t kerr =
            rd_kafka_query_watermark_offsets(rk, topic, p, &low[p], &high[p], 10000);
        if (kerr != RD_KAFKA_RESP_ERR_NO_ERROR) {
            snprintf(err, errlen, "%s [%d]: offsets: %s", topic, p, rd_kafka_err2str(kerr));
            rc = SL_EKAFKA;
            goto done;
        }
        if (high[p] > low[p]) {
            rd_kafka_topic_partition_list_add(parts, topic, p)->offset =
                tail_only ? high[p] - 1 : low[p];
            waiting++;
        }
    }
    if (waiting > 0 && rd_kafka_assign(rk, parts) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "%s: cannot assign its partitions", topic);
        rc = SL_EKAFKA;
        goto done;
    }
    double idle_until = sl_mono_ms() + READ_IDLE_MS;
    while (waiting > 0) {
        if (sl_stop_requested()) {
            snprintf(err, errlen, "stopped while reading %s", topic);
            rc = SL_EKAFKA;
            goto done;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (m == NULL) {
            if (sl_mono_ms() > idle_until) {
                snprintf(err, errlen, "%s: no record for %d s with %d partitions unread", topic,
                         READ_IDLE_MS / 1000, waiting);
                rc = SL_EKAFKA;
                goto done;
            }
            continue;
        }
        idle_until = sl_mono_ms() + READ_IDLE_MS;
        int p = m->partition;
        if (m->err || p < 0 || p >= nparts) {
            if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                sl_warn("reading %s: %s", topic, rd_kafka_message_errstr(m));
            rd_kafka_message_destroy(m);
            continue;
        }
        sl_cl_rec_t rec;
        if (m->offset < high[p]) {
            if (sl_kafka_verify_mac(mac_key, m) != SL_AUTH_OK ||
                sl_cl_decode(m->payload, m->len, &rec) != SL_OK)
                (*refused)++;
            else if (!sl_cl_replay_add(r, p, m->offset, &rec))
                (*refused)++;
            if (m->offset >= high[p] - 1)
                waiting--;
        }
        rd_kafka_message_destroy(m);
    }
    for (int p = 0; p < nparts && rc == SL_OK && !tail_only; p++) {
        if (only != NULL && !only[p])
            continue;
        if (high[p] == low[p] && low[p] > 0)
            sl_warn("changelog partition %d: every record was deleted (retention); nothing to "
                    "restore there",
                    p);
        rc = sl_cl_replay_apply(r, p, low[p], err, errlen);
    }
done:
    if (parts != NULL)
        rd_kafka_topic_partition_list_destroy(parts);
    free(low);
    free(high);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    if (rc != SL_OK) {
        sl_cl_replay_free(r);
        return rc;
    }
    *out = r;
    return SL_OK;
}

sl_err_t sl_changelog_read(const sl_config_t *cfg, const uint8_t mac_key[SL_MAC_KEY_BYTES],
                           int tail_only, sl_cl_replay_t **out, int64_t *refused, char *err,
                           size_t errlen)
{
    return read_some(cfg, mac_key, tail_only, NULL, 0, out, refused, err, errlen);
}

/* ---- the topic's settings ---- */

/* The dev broker's fixed retention of a partition (docs/dev-kafka.md). */
enum { DEV_BROKER_RETENTION_BYTES = 5 << 20 };

sl_err_t sl_cl_check_retention(const sl_config_t *cfg, const char *cleanup_policy,
                               int64_t retention_ms, int64_t retention_bytes, char *err,
                               size_t errlen)
{
    const char *topic = cfg->kafka.topic_changelog;
    if (cleanup_policy != NULL && strstr(cleanup_policy, "compact") != NULL) {
        snprintf(err, errlen,
                 "topic %s has cleanup.policy=%s: its records are keyed by tenant, so compaction "
                 "would keep one a tenant and lose the others' jobs; set cleanup.policy=delete",
                 topic, cleanup_policy);
        return SL_ECONFIG;
    }
    int64_t planned = cfg->changelog_retention_bytes;
    if (retention_bytes > 0 && (planned <= 0 || planned > retention_bytes)) {
        snprintf(err, errlen,
                 "topic %s keeps %lld bytes a partition (retention.bytes) but "
                 "scheduler.changelog_retention_bytes is %lld: snapshots would come too late to "
                 "keep a whole one; set it to at most %lld",
                 topic, (long long)retention_bytes, (long long)planned, (long long)retention_bytes);
        return SL_ECONFIG;
    }
    int64_t every = cfg->changelog_snapshot_ms;
    if (retention_ms > 0 && (every <= 0 || 2 * every > retention_ms)) {
        snprintf(err, errlen,
                 "topic %s keeps records for %lld ms (retention.ms) but a snapshot is written "
                 "every %lld ms (scheduler.changelog_snapshot_ms; 0: never by time): the newest "
                 "whole snapshot could be deleted; keep at least twice the interval, plus the "
                 "longest time a scheduler may stay down",
                 topic, (long long)retention_ms, (long long)every);
        return SL_ECONFIG;
    }
    return SL_OK;
}

/* The topic's settings as the broker has them, checked (sl_cl_check_retention). The dev broker
 * cannot be asked: its retention is known. A broker that does not answer is warned about, not
 * refused: the scheduler may lack the right to describe topics. */
static sl_err_t check_topic(const sl_config_t *cfg, rd_kafka_t *rk, char *err, size_t errlen)
{
    if (sl_kafka_dev_broker(cfg))
        return sl_cl_check_retention(cfg, "delete", -1, DEV_BROKER_RETENTION_BYTES, err, errlen);
    static const char *const names[] = {"cleanup.policy", "retention.ms", "retention.bytes"};
    char values[3][SL_KAFKA_CONFIG_VALUE_MAX];
    char why[256] = "";
    if (sl_kafka_topic_config(rk, cfg->kafka.topic_changelog, names, 3, values, 10000, why,
                              sizeof why) != SL_OK) {
        sl_warn("cannot read the settings of topic %s (%s): not checked that its retention "
                "keeps a whole snapshot (README, \"The changelog\")",
                cfg->kafka.topic_changelog, why);
        return SL_OK;
    }
    int64_t ms = values[1][0] != '\0' ? strtoll(values[1], NULL, 10) : -1;
    int64_t bytes = values[2][0] != '\0' ? strtoll(values[2], NULL, 10) : -1;
    return sl_cl_check_retention(cfg, values[0], ms, bytes, err, errlen);
}

/* ---- writing it ---- */

typedef struct {
    int64_t commit, left;
} gate_t;

struct sl_changelog {
    /* What it needs of the config, copied: a reload frees the config it was opened with (the
     * changelog's settings take effect at the next start). */
    char *topic;
    int64_t retention_bytes, snapshot_ms;
    uint8_t mac_key[SL_MAC_KEY_BYTES];
    rd_kafka_t *prod;
    int nparts;
    int64_t last_seq;     /* of any record: seq grows across partitions too */
    int64_t *since_begin; /* bytes acknowledged per partition since its last snapshot began */
    int64_t *snap_bytes;  /* of them, the snapshot's own */
    int64_t snap_began_ms;
    int64_t warned_epoch; /* the snapshot whose size was last warned about */
    gate_t *gates;        /* commits whose job records are not all acknowledged, oldest first */
    int ngates, capgates;
    int failed;
    int snap_due, snap_active;
    uint8_t *owned; /* the partitions written to (a shard's); NULL: every one */
    int held;       /* no snapshot starts (a restore is taking jobs in) */
    int64_t snap_epoch, snap_after, snap_count;
    sl_changelog_stats_t st, exported;
    sl_metrics_t *metrics; /* NULL: not exported */
    int fam[SL_CL_FAMILIES];
};

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    (void)rk;
    sl_changelog_t *cl = opaque;
    int64_t commit = (int64_t)(intptr_t)msg->_private;
    cl->st.in_flight--;
    if (msg->err) {
        if (!cl->failed)
            sl_error("changelog record not delivered: %s; stopping so that no offset is "
                     "committed past it",
                     rd_kafka_err2str(msg->err));
        cl->failed = 1;
        return;
    }
    if (msg->partition >= 0 && msg->partition < cl->nparts) {
        cl->since_begin[msg->partition] += (int64_t)msg->len;
        if (commit == SNAPSHOT_TAG)
            cl->snap_bytes[msg->partition] += (int64_t)msg->len;
    }
    if (commit <= 0)
        return;
    for (int i = 0; i < cl->ngates; i++) {
        if (cl->gates[i].commit == commit) {
            cl->gates[i].left--;
            break;
        }
    }
}

sl_err_t sl_changelog_open(const sl_config_t *cfg, const uint8_t mac_key[SL_MAC_KEY_BYTES],
                           const sl_cl_replay_t *last_seq, int snapshot_now, sl_changelog_t **out,
                           char *err, size_t errlen)
{
    *out = NULL;
    sl_changelog_t *cl = calloc(1, sizeof *cl);
    if (cl == NULL)
        return SL_ENOMEM;
    cl->topic = strdup(cfg->kafka.topic_changelog);
    cl->retention_bytes = cfg->changelog_retention_bytes;
    cl->snapshot_ms = cfg->changelog_snapshot_ms;
    if (cl->topic == NULL) {
        free(cl);
        return SL_ENOMEM;
    }
    memcpy(cl->mac_key, mac_key, SL_MAC_KEY_BYTES);
    /* Nobody waits on a record but the offset commit, which may come a few milliseconds
     * later: records travel in batches rather than a request each. What waits for the broker
     * is bounded (64 MiB; a full queue makes the loop wait: sl_kafka_produce). */
    static const char *const props[] = {"linger.ms", "10", "queue.buffering.max.kbytes", "65536",
                                        NULL};
    sl_err_t rc = sl_kafka_producer_new_props(cfg, "sluice-scheduler-changelog", on_delivery, cl,
                                              props, &cl->prod, err, errlen);
    if (rc != SL_OK) {
        sl_changelog_close(cl, 0);
        return rc;
    }
    cl->nparts = sl_kafka_partition_count(cl->prod, cfg->kafka.topic_changelog, 30000);
    int jobs = sl_kafka_partition_count(cl->prod, cfg->kafka.topic_jobs, 30000);
    if (cl->nparts <= 0 || cl->nparts != jobs) {
        snprintf(err, errlen,
                 "topic %s has %d partitions and %s %d: the changelog must exist with as many "
                 "partitions as the jobs topic (its partition p holds the jobs of p)",
                 cfg->kafka.topic_changelog, cl->nparts, cfg->kafka.topic_jobs, jobs);
        sl_changelog_close(cl, 0);
        return SL_ECONFIG;
    }
    rc = check_topic(cfg, cl->prod, err, errlen);
    if (rc != SL_OK) {
        sl_changelog_close(cl, 0);
        return rc;
    }
    cl->since_begin = calloc((size_t)cl->nparts, sizeof *cl->since_begin);
    cl->snap_bytes = calloc((size_t)cl->nparts, sizeof *cl->snap_bytes);
    if (cl->since_begin == NULL || cl->snap_bytes == NULL) {
        sl_changelog_close(cl, 0);
        return SL_ENOMEM;
    }
    sl_changelog_adopt(cl, last_seq);
    /* snapshot_now (a first start) and a changelog without records (a database older than
     * the changelog) start with a whole snapshot; a restore asks for one once its jobs are in
     * (sl_changelog_snapshot_soon); otherwise the next is due by size or time. A job whose
     * record a crash kept from the broker needs none: its offset was not committed, so it comes
     * again and is written again (sched.c). */
    cl->snap_due = snapshot_now || sl_cl_replay_records(last_seq) == 0;
    cl->snap_began_ms = sl_now_ms();
    *out = cl;
    return SL_OK;
}

void sl_changelog_close(sl_changelog_t *cl, int timeout_ms)
{
    if (cl == NULL)
        return;
    if (cl->prod != NULL) {
        if (timeout_ms > 0)
            rd_kafka_flush(cl->prod, timeout_ms);
        rd_kafka_destroy(cl->prod);
    }
    free(cl->topic);
    free(cl->since_begin);
    free(cl->snap_bytes);
    free(cl->owned);
    free(cl->gates);
    sodium_memzero(cl->mac_key, sizeof cl->mac_key);
    free(cl);
}

/* The next seq: above every seq written or read back, and the wall clock's microseconds, so a
 * restart with its database (which reads nothing back) still writes above its last run. */
static int64_t next_seq(sl_changelog_t *cl)
{
    int64_t seq = sl_now_ms() * 1000;
    if (cl->last_seq + 1 > seq)
        seq = cl->last_seq + 1;
    cl->last_seq = seq;
    return seq;
}

static void produce(sl_changelog_t *cl, int32_t part, const char *key, char *value, size_t len,
                    int64_t commit)
{
    if (value == NULL) {
        cl->failed = 1;
        sl_error("changelog: out of memory; stopping");
        return;
    }
    if (sl_kafka_produce_mac(cl->prod, cl->topic, part, key, value, len, cl->mac_key,
                             (void *)(intptr_t)commit) != SL_OK) {
        cl->failed = 1;
    } else {
        cl->st.records++;
        cl->st.bytes += (int64_t)len;
        cl->st.in_flight++;
    }
    free(value);
}

static int owns(const sl_changelog_t *cl, int p)
{
    return cl->owned == NULL || (p >= 0 && p < cl->nparts && cl->owned[p]);
}

/* Whether records keyed by tenant go to a partition this writer owns (counted when not). */
static int owns_tenant(sl_changelog_t *cl, const char *tenant)
{
    if (cl->owned == NULL || owns(cl, sl_kafka_key_partition(tenant, cl->nparts)))
        return 1;
    cl->st.not_owned++;
    return 0;
}

void sl_changelog_set_owned(sl_changelog_t *cl, const uint8_t *owned)
{
    if (owned == NULL) {
        free(cl->owned);
        cl->owned = NULL;
    } else {
        if (cl->owned == NULL && (cl->owned = malloc((size_t)cl->nparts)) == NULL) {
            cl->failed = 1;
            sl_error("changelog: out of memory; stopping");
            return;
        }
        memcpy(cl->owned, owned, (size_t)cl->nparts);
    }
    if (cl->snap_active) {
        cl->snap_active = 0;
        sl_info("changelog: the partitions owned changed; the snapshot under way is dropped "
                "and a new one is due");
    }
    cl->snap_due = 1;
}

void sl_changelog_adopt(sl_changelog_t *cl, const sl_cl_replay_t *r)
{
    for (int p = 0; p < cl->nparts; p++)
        if (sl_cl_replay_last_seq(r, p) > cl->last_seq)
            cl->last_seq = sl_cl_replay_last_seq(r, p);
}

sl_err_t sl_changelog_read_partitions(const sl_changelog_t *cl, const sl_config_t *cfg,
                                      const uint8_t *only, sl_cl_replay_t **out, int64_t *refused,
                                      char *err, size_t errlen)
{
    return read_some(cfg, cl->mac_key, 0, only, cl->nparts, out, refused, err, errlen);
}

/* Keyed records go where the tenant's jobs go. */
static void produce_keyed(sl_changelog_t *cl, sl_cl_kind_t kind, const char *tenant,
                          const char *job_id, int64_t submitted_ms, const char *job, size_t len,
                          int64_t commit)
{
    size_t n = 0;
    char *v = sl_cl_encode(kind, next_seq(cl), 0, job_id, submitted_ms, job, len, &n);
    produce(cl, RD_KAFKA_PARTITION_UA, tenant, v, n, commit);
}

void sl_changelog_job(sl_changelog_t *cl, const char *tenant, const char *job_id,
                      int64_t submitted_ms, const char *job, size_t len, int64_t commit)
{
    if (!owns_tenant(cl, tenant))
        return;
    if (cl->ngates == 0 || cl->gates[cl->ngates - 1].commit != commit) {
        if (cl->ngates == cl->capgates) {
            int ncap = cl->capgates ? cl->capgates * 2 : 16;
            gate_t *ng = realloc(cl->gates, (size_t)ncap * sizeof *ng);
            if (ng == NULL) {
                cl->failed = 1;
                return;
            }
            cl->gates = ng;
            cl->capgates = ncap;
        }
        cl->gates[cl->ngates++] = (gate_t){commit, 0};
    }
    cl->gates[cl->ngates - 1].left++;
    produce_keyed(cl, SL_CL_JOB, tenant, job_id, submitted_ms, job, len, commit);
}

void sl_changelog_end(sl_changelog_t *cl, sl_store_t *store, const char *job_id)
{
    char tenant[256];
    /* A job refused at the door is not stored, and was never in the changelog. */
    if (sl_store_job_tenant(store, job_id, tenant, sizeof tenant) != SL_OK ||
        !owns_tenant(cl, tenant))
        return;
    produce_keyed(cl, SL_CL_END, tenant, job_id, 0, NULL, 0, 0);
}

void sl_changelog_lease(sl_changelog_t *cl, const char *tenant, const char *job_id,
                        const sl_cl_lease_t *lease)
{
    if (!owns_tenant(cl, tenant))
        return;
    size_t n = 0;
    char *v = sl_cl_encode_lease(next_seq(cl), job_id, lease, &n);
    if (v == NULL) {
        sl_warn("changelog: the lease of job %s cannot be written (reservation \"%.40s\", "
                "deployment \"%.60s\"); its next owner calls again",
                job_id, lease->res_id, lease->deployment);
        return;
    }
    produce(cl, RD_KAFKA_PARTITION_UA, tenant, v, n, 0);
}

static void mark_all(sl_changelog_t *cl, sl_cl_kind_t kind, int64_t epoch)
{
    int64_t seq = next_seq(cl);
    for (int p = 0; p < cl->nparts; p++) {
        if (!owns(cl, p))
            continue;
        size_t n = 0;
        char *v = sl_cl_encode(kind, seq, epoch, NULL, 0, NULL, 0, &n);
        produce(cl, p, NULL, v, n, 0);
    }
}

static void snapshot_row(const sl_store_page_row_t *row, void *arg)
{
    sl_changelog_t *cl = arg;
    cl->snap_after = row->rowid;
    if (!owns_tenant(cl, row->tenant))
        return;
    cl->snap_count++;
    produce_keyed(cl, SL_CL_JOB, row->tenant, row->job_id, row->submitted_ms, row->job_json,
                  row->len, SNAPSHOT_TAG);
}

/* Whether a snapshot is due: records other than the last snapshot's own filled a quarter of
 * what the broker keeps of a partition since it began (so its begin is still in the newer half),
 * or changelog_snapshot_ms went by. A partition whose snapshot alone took more than half of what
 * the broker keeps cannot be kept whole there: it is reported (at_risk, a warning per snapshot)
 * and does not start snapshots by size, which would only follow each other without end. */
static int snapshot_due(sl_changelog_t *cl, int64_t now_ms)
{
    int64_t keep = cl->retention_bytes;
    int due = cl->snapshot_ms > 0 && now_ms - cl->snap_began_ms >= cl->snapshot_ms;
    int risk = 0;
    for (int p = 0; keep > 0 && p < cl->nparts; p++) {
        if (cl->snap_bytes[p] > keep / 2) {
            risk++;
            if (cl->warned_epoch != cl->snap_epoch) {
                cl->warned_epoch = cl->snap_epoch;
                sl_warn("changelog partition %d: its unfinished jobs take %lld bytes, more than "
                        "half of the %lld the broker keeps (scheduler.changelog_retention_bytes): "
                        "a scheduler that loses its database could not restore them. Raise the "
                        "topic's retention.bytes (and the setting), or spread the tenants over "
                        "more partitions",
                        p, (long long)cl->snap_bytes[p], (long long)keep);
            }
        } else if (cl->since_begin[p] - cl->snap_bytes[p] > keep / 4) {
            due = 1;
        }
    }
    cl->st.at_risk = risk;
    return due;
}

sl_err_t sl_changelog_step(sl_changelog_t *cl, sl_store_t *store)
{
    int64_t now_ms = sl_now_ms();
    int any = cl->owned == NULL;
    for (int p = 0; !any && p < cl->nparts; p++)
        any = cl->owned[p] != 0;
    if (!any)
        return SL_OK; /* a shard between assignments: nothing of its own to snapshot */
    if (!cl->snap_active && !cl->held && (cl->snap_due || snapshot_due(cl, now_ms))) {
        cl->snap_due = 0;
        cl->snap_active = 1;
        cl->snap_after = 0;
        cl->snap_count = 0;
        cl->snap_epoch = next_seq(cl);
        cl->snap_began_ms = now_ms;
        for (int p = 0; p < cl->nparts; p++)
            cl->since_begin[p] = cl->snap_bytes[p] = 0;
        mark_all(cl, SL_CL_BEGIN, cl->snap_epoch);
    }
    if (!cl->snap_active)
        return SL_OK;
    int n = 0;
    sl_err_t rc =
        sl_store_unfinished_page(store, cl->snap_after, SNAPSHOT_PAGE, snapshot_row, cl, &n);
    if (rc != SL_OK || n == SNAPSHOT_PAGE)
        return rc;
    mark_all(cl, SL_CL_CLOSE, cl->snap_epoch);
    cl->snap_active = 0;
    cl->st.snapshots++;
    cl->st.snapshot_jobs = cl->snap_count;
    sl_info("changelog snapshot %" PRId64 " written: %" PRId64 " unfinished jobs", cl->snap_epoch,
            cl->snap_count);
    return SL_OK;
}

void sl_changelog_poll(sl_changelog_t *cl)
{
    rd_kafka_poll(cl->prod, 0);
    int k = 0;
    while (k < cl->ngates && cl->gates[k].left <= 0)
        k++;
    if (k > 0) {
        memmove(cl->gates, cl->gates + k, (size_t)(cl->ngates - k) * sizeof *cl->gates);
        cl->ngates -= k;
    }
}

void sl_changelog_hold_snapshots(sl_changelog_t *cl)
{
    cl->held = 1;
}

void sl_changelog_snapshot_soon(sl_changelog_t *cl)
{
    cl->held = 0;
    cl->snap_due = 1;
}

void sl_changelog_flush(sl_changelog_t *cl, int timeout_ms)
{
    rd_kafka_flush(cl->prod, timeout_ms);
    sl_changelog_poll(cl);
}

int64_t sl_changelog_safe(const sl_changelog_t *cl, int64_t committed)
{
    for (int i = 0; i < cl->ngates; i++)
        if (cl->gates[i].left > 0)
            return cl->gates[i].commit - 1 < committed ? cl->gates[i].commit - 1 : committed;
    return committed;
}

int sl_changelog_failed(const sl_changelog_t *cl)
{
    return cl->failed;
}

int sl_changelog_metrics(sl_changelog_t *cl, sl_metrics_t *m)
{
    static const struct {
        sl_metric_kind_t kind;
        const char *name, *help;
    } fam[SL_CL_FAMILIES] = {
        {SL_METRIC_COUNTER, "sluice_scheduler_changelog_records_total",
         "Records written to the changelog topic (jobs taken in, ends, snapshots)."},
        {SL_METRIC_COUNTER, "sluice_scheduler_changelog_bytes_total",
         "Bytes of the records written to the changelog topic."},
        {SL_METRIC_COUNTER, "sluice_scheduler_changelog_snapshots_total",
         "Snapshots of the unfinished jobs written whole to the changelog."},
        {SL_METRIC_GAUGE, "sluice_scheduler_changelog_snapshot_jobs",
         "Unfinished jobs in the last whole snapshot."},
        {SL_METRIC_GAUGE, "sluice_scheduler_changelog_in_flight",
         "Changelog records not yet acknowledged by the broker."},
        {SL_METRIC_GAUGE, "sluice_scheduler_changelog_partitions_at_risk",
         "Changelog partitions whose unfinished jobs take more than half of what the broker "
         "keeps (scheduler.changelog_retention_bytes): a lost database could not be restored "
         "there."},
    };
    for (int i = 0; i < SL_CL_FAMILIES; i++) {
        cl->fam[i] = sl_metrics_family(m, fam[i].kind, fam[i].name, fam[i].help, NULL, NULL, 0);
        if (cl->fam[i] < 0)
            return -1;
    }
    cl->metrics = m;
    return 0;
}

void sl_changelog_export(sl_changelog_t *cl)
{
    if (cl->metrics == NULL)
        return;
    const sl_changelog_stats_t *st = &cl->st;
    sl_metrics_add(cl->metrics, cl->fam[0], NULL, (double)(st->records - cl->exported.records));
    sl_metrics_add(cl->metrics, cl->fam[1], NULL, (double)(st->bytes - cl->exported.bytes));
    sl_metrics_add(cl->metrics, cl->fam[2], NULL, (double)(st->snapshots - cl->exported.snapshots));
    sl_metrics_set(cl->metrics, cl->fam[3], NULL, (double)st->snapshot_jobs);
    sl_metrics_set(cl->metrics, cl->fam[4], NULL, (double)st->in_flight);
    sl_metrics_set(cl->metrics, cl->fam[5], NULL, (double)st->at_risk);
    cl->exported = *st;
}
