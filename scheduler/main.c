/* sluice-scheduler: sluice.jobs (+ sluice.jobs.batch, taken with the room the others leave) +
 * sluice.usage -> SQLite ledger -> signed sluice.dispatch, and
 * terminal results to sluice.results through the SQLite outbox.
 *
 * One loop: take a slice of messages from each assigned partition (intake.h), apply them and
 * one scheduling step in one SQLite transaction, commit it, check that the database file is
 * still the one at its path, commit the Kafka offsets, then produce what the step decided. A
 * crash at any point either redelivers input (de-duplicated by job id and reservation id) or
 * leaves a lease that expires; results wait in the outbox until the broker acknowledges them.
 *
 * Exit status: 0 after SIGTERM, 2 for a bad config or start, SL_STORE_EXIT_STATUS (3) when the
 * store cannot be trusted (a database deleted, replaced, corrupted, full or failing: store.h),
 * 1 for any other failure. */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>

#include <sodium.h>

#include "admin.h"
#include "api.h"
#include "auth.h"
#include "buf.h"
#include "changelog.h"
#include "coord.h"
#include "exporter.h"
#include "history.h"
#include "intake.h"
#include "kafka.h"
#include "log.h"
#include "metrics.h"
#include "outbox.h"
#include "proc.h"
#include "restore.h"
#include "sched.h"
#include "sign.h"
#include "store.h"
#include "util.h"

/* Per loop iteration: at most INTAKE_SLICE messages of one partition and INTAKE_CAP in all
 * (about 100 us each to parse and store), so a flood in one partition delays the others' by at
 * most a slice and the scheduler ticks every few milliseconds while it takes the flood in.
 * BATCH_MAX also holds what the consumer queue itself hands out (a partition without a queue
 * of its own). */
enum { INTAKE_SLICE = 32, INTAKE_CAP = 256, BATCH_MAX = 512, STATS_EVERY_MS = 10000 };
/* The batch jobs topic is taken only with the room the jobs and usage topics leave in a take,
 * and at most LATER_CAP of it a take (about 6 ms of work): a backfill of any size delays an
 * interactive job by that much, not by itself. */
enum { LATER_CAP = 64 };
/* The database file is checked before every offset commit, and at least this often. */
enum { STORE_CHECK_EVERY_MS = 1000 };

static const char usage_text[] =
    "usage: sluice-scheduler [--config FILE] [--log-level debug|info|warn|error]\n"
    "       [--metrics-listen HOST:PORT] [--help]\n"
    "\n"
    "Stores jobs from the jobs topic and the batch jobs topic (read with the room the first\n"
    "leaves) in SQLite (scheduler.db in the config), shares capacity\n"
    "between tenants by deficit round-robin, reserves every bucket of a job before it is sent,\n"
    "leases it to a dispatcher with a signed dispatch message, reconciles usage events, retries\n"
    "after 429s and expires jobs past their deadline. Run one scheduler per database: it takes\n"
    "a lock on the file. Its signing key pair (signing.secret_key_file) is created on first\n"
    "start; it signs every dispatch and result, and acts only on jobs signed by ingest\n"
    "(signing.ingest_public_key_file) and usage events signed by a dispatcher\n"
    "(signing.dispatcher_public_key_file); others are counted in\n"
    "sluice_scheduler_messages_refused_total{topic,reason}.\n"
    "\n"
    "The admin API (scheduler.admin_listen, default 127.0.0.1:9320; see scheduler/ADMIN-API.md)\n"
    "lists buckets and queues, pauses and resumes tenants and keys, and changes limits, weights\n"
    "and guarantees at run time (stored in the database; they survive restarts).\n"
    "\n"
    "SIGHUP reloads the config file: limits, quotas, weights, tenants and keys change without\n"
    "losing queued jobs (bucket levels and counters carry over; a lowered limit applies from\n"
    "the next admission). SIGTERM/SIGINT stop it cleanly.\n"
    "\n"
    "Exit status: 0 stopped by a signal; 2 bad config or options; 3 the database cannot be\n"
    "trusted (deleted or replaced while running, corrupted, not a sluice database, of a newer\n"
    "schema, full, or failing): nothing was committed past it and the log says what to do; do\n"
    "not restart it blindly; 1 any other failure.\n";

/* What the producer's delivery reports reach. */
typedef struct {
    sl_outbox_t *ob;
    sl_changelog_t *cl;
    sl_store_t *store;
} delivery_t;

/* A delivery report: results carry their outbox row as opaque (dispatches NULL). A result the
 * broker has is the end of its job in the changelog. */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    (void)rk;
    delivery_t *d = opaque;
    if (msg->_private == NULL) {
        if (msg->err)
            sl_warn("dispatch delivery failed: %s (the lease will expire and retry)",
                    rd_kafka_err2str(msg->err));
        return;
    }
    if (msg->err)
        sl_warn("result delivery failed: %s; will produce again", rd_kafka_err2str(msg->err));
    sl_outbox_delivered(d->ob, (int64_t)(intptr_t)msg->_private, msg->err == 0);
    if (msg->err == 0 && d->cl != NULL && msg->key_len > 0 && msg->key_len <= SL_JOB_ID_MAX) {
        char job_id[SL_JOB_ID_MAX + 1];
        memcpy(job_id, msg->key, msg->key_len);
        job_id[msg->key_len] = '\0';
        sl_changelog_end(d->cl, d->store, job_id);
    }
}

/* A new database is rebuilt from the changelog: every job it names as unfinished is taken in
 * again as it first came, oldest first, RESTORE_SLICE a loop turn inside the loop's own
 * transactions, so scheduling (and the first dispatch) starts while a large queue is still being
 * taken in; the buckets start as if their limits had just been used. Until the last slice is
 * committed the store holds the note RESTORE_NOTE, so a crash in between restores again at the
 * next start (jobs already taken in are duplicates then). Otherwise only the changelog's last
 * records are read, so the writer's seq goes on above them. */
enum { RESTORE_SLICE = 2000 };
#define RESTORE_NOTE "changelog_restore"

typedef struct {
    sl_cl_replay_t *replay; /* owns the jobs' texts */
    sl_cl_live_t *jobs;     /* in the order to take them in */
    size_t n, next;
    int64_t refused;
    double t0, read_ms;
    int64_t adopted; /* leases taken over (lease records of a partition gained) */
} refeed_t;

static sl_err_t restore_from_changelog(const sl_config_t *cfg,
                                       const uint8_t mac_key[SL_MAC_KEY_BYTES], sl_store_t *store,
                                       sl_sched_t *sched, refeed_t *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->t0 = sl_mono_ms();
    char note[32];
    int pending = sl_store_meta_get(store, RESTORE_NOTE, note, sizeof note) == SL_OK;
    /* A shard restores each partition when it is assigned (shard_assign), not here. */
    int fresh = !cfg->sched_sharded && (sl_store_is_new(store) || pending);
    sl_err_t rc = sl_changelog_read(cfg, mac_key, !fresh, &f->replay, &f->refused, err, errlen);
    if (rc != SL_OK || !fresh)
        return rc;
    if (sl_cl_replay_records(f->replay) == 0 && !pending) {
        sl_info("new database and an empty changelog %s: a first start",
                cfg->kafka.topic_changelog);
        return SL_OK;
    }
    rc = sl_cl_replay_sorted(f->replay, &f->jobs, &f->n);
    if (rc == SL_OK)
        rc = sl_store_meta_put(store, RESTORE_NOTE, "taking jobs in");
    if (rc != SL_OK) {
        snprintf(err, errlen, "restoring from the changelog: %s", sl_strerror(rc));
        return rc;
    }
    if (pending)
        sl_warn("the last restore from the changelog did not finish: restoring again (jobs "
                "already taken in count as duplicates)");
    f->read_ms = sl_mono_ms() - f->t0;
    /* A database left by an unfinished restore had its buckets restored by sl_sched_new. */
    if (sl_store_is_new(store))
        rc = sl_restore_assume_worst(sched, sl_now_ms());
    if (rc != SL_OK) {
        snprintf(err, errlen, "restoring from the changelog: %s", sl_strerror(rc));
        return rc;
    }
    sl_info("new database: %zu unfinished jobs found in the changelog %s in %.0f ms; taking "
            "them in again while scheduling; per-minute buckets start empty",
            f->n, cfg->kafka.topic_changelog, f->read_ms);
    return SL_OK;
}

/* Takes the next slice of restored jobs in, inside the caller's transaction; the last slice
 * removes the store's note. */
static sl_err_t refeed_some(refeed_t *f, const sl_config_t *cfg, sl_store_t *store,
                            sl_sched_t *sched, sl_changelog_t *cl, int64_t now_ms)
{
    sl_err_t rc = SL_OK;
    size_t end = f->next + RESTORE_SLICE < f->n ? f->next + RESTORE_SLICE : f->n;
    for (; rc == SL_OK && f->next < end; f->next++) {
        const sl_cl_live_t *lj = &f->jobs[f->next];
        rc = sl_sched_on_restored_job(sched, lj->job, lj->len, now_ms);
        /* Its call in flight when its previous owner gave the partition up: taken over, so
         * its usage event settles it here and no second call is made. */
        int adopted = 0;
        if (rc == SL_OK && lj->lease != NULL)
            rc = sl_sched_adopt_lease(sched, lj->job_id, lj->lease->attempt, lj->lease->res_id,
                                      lj->lease->deployment, lj->lease->expires_ms, now_ms,
                                      &adopted);
        f->adopted += adopted;
    }
    if (rc == SL_OK && f->next == f->n)
        rc = sl_store_meta_put(store, RESTORE_NOTE, NULL);
    if (rc == SL_OK && f->next == f->n) {
        /* Their records stay where they were until a whole snapshot has them again. */
        sl_changelog_snapshot_soon(cl);
        sl_info("new database: %zu unfinished jobs restored from the changelog %s in %.0f ms "
                "(%lld records refused: without a valid MAC, unreadable or replayed); read in "
                "%.0f ms; calls in flight taken over: %lld",
                f->n, cfg->kafka.topic_changelog, sl_mono_ms() - f->t0, (long long)f->refused,
                f->read_ms, (long long)f->adopted);
        free(f->jobs);
        sl_cl_replay_free(f->replay);
        f->jobs = NULL;
        f->replay = NULL;
        f->n = f->next = 0;
    }
    return rc;
}

/* Produces one message; results carry their outbox row (seq > 0) as delivery opaque. */
static void produce(rd_kafka_t *prod, const char *topic, const char *key, const char *value,
                    int64_t seq, sl_outbox_t *ob)
{
    /* Signed in sl_kafka_produce, as every message of this process (sl_auth_signer). */
    sl_err_t rc =
        sl_kafka_produce(prod, topic, key, value, strlen(value), NULL, (void *)(intptr_t)seq);
    if (seq > 0)
        sl_outbox_sent(ob, rc == SL_OK);
}

typedef struct {
    rd_kafka_t *prod;
    sl_outbox_t *ob;
} sweep_t;

/* One loop turn's dispatches, borrowed from the messages taken, produced together. */
typedef struct {
    sl_kafka_msg_t *msgs;
    size_t n, cap;
} disp_batch_t;

/* Adds m to b; 0 when it could not grow (m then goes alone). */
static int disp_batch_add(disp_batch_t *b, const sl_sched_msg_t *m)
{
    if (sl_grow((void **)&b->msgs, sizeof *b->msgs, &b->cap, b->n + 1, INT_MAX) != SL_OK)
        return 0;
    b->msgs[b->n++] = (sl_kafka_msg_t){m->key, m->value, strlen(m->value)};
    return 1;
}

static void produce_outbox_row(int64_t seq, const char *topic, const char *key, const char *value,
                               void *arg)
{
    sweep_t *sw = arg;
    produce(sw->prod, topic, key, value, seq, sw->ob);
}

/* SIGHUP: applies the config file again without losing queued work (quotas, weights, limits,
 * tenants, keys). Kafka, database and signing settings need a restart: a change there is refused
 * and the running config stays. */
static void reload(sl_config_t **cfgp, sl_store_t *store, sl_sched_t **sched)
{
    sl_config_t *old = *cfgp, *fresh = NULL;
    char err[512] = "";
    if (sl_config_load(old->path, &fresh, err, sizeof err) != SL_OK) {
        sl_error("reload refused, keeping the running config: %s", err);
        return;
    }
    if (strcmp(fresh->db_path, old->db_path) != 0 ||
        strcmp(fresh->kafka.topic_jobs, old->kafka.topic_jobs) != 0 ||
        strcmp(fresh->kafka.topic_jobs_batch, old->kafka.topic_jobs_batch) != 0 ||
        strcmp(fresh->kafka.topic_usage, old->kafka.topic_usage) != 0 ||
        strcmp(fresh->kafka.topic_dispatch, old->kafka.topic_dispatch) != 0 ||
        strcmp(fresh->kafka.topic_results, old->kafka.topic_results) != 0 ||
        strcmp(fresh->kafka.topic_changelog, old->kafka.topic_changelog) != 0 ||
        strcmp(fresh->signing_secret_key_file, old->signing_secret_key_file) != 0 ||
        strcmp(fresh->signing_previous_secret_key_file, old->signing_previous_secret_key_file) !=
            0 ||
        strcmp(fresh->schema_dir, old->schema_dir) != 0) {
        sl_error("reload refused: the database, topics, schema or signing key changed; those "
                 "need a restart");
        sl_config_free(fresh);
        return;
    }
    int64_t now = sl_now_ms();
    sl_err_t rc = sl_store_begin(store);
    if (rc == SL_OK)
        rc = sl_sched_save(*sched, now);
    if (rc == SL_OK)
        rc = sl_store_commit(store);
    else
        sl_store_rollback(store);
    if (rc == SL_OK)
        rc = sl_sched_reload(sched, fresh, now, err, sizeof err);
    if (rc != SL_OK) {
        sl_error("reload failed, keeping the running config: %s",
                 err[0] != '\0' ? err : sl_strerror(rc));
        sl_config_free(fresh);
        return;
    }
    *cfgp = fresh;
    sl_config_free(old);
    sl_info("config reloaded from %s: %d deployments, %d routes, %d tenants", fresh->path,
            fresh->ndeployments, fresh->nroutes, fresh->ntenants);
}

/* Offsets waiting for the commit that stored their messages to be durable (store.h,
 * sl_store_durable_seq): the positions of the assigned partitions after each commit that took
 * input, oldest first. When full, the newest replaces the last: a later position covers it. */
enum { PENDING_MAX = 64 };

typedef struct {
    int64_t seq;
    rd_kafka_topic_partition_list_t *pos;
} pending_t;

typedef struct {
    pending_t v[PENDING_MAX];
    int n;
} pending_offsets_t;

/* assigned: the consumer's assignment as the last rebalance left it (NULL: none). */
static void pending_add(pending_offsets_t *p, rd_kafka_t *cons,
                        const rd_kafka_topic_partition_list_t *assigned, int64_t seq)
{
    if (assigned == NULL || assigned->cnt == 0)
        return;
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_copy(assigned);
    if (parts == NULL || rd_kafka_position(cons, parts) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_topic_partition_list_destroy(parts);
        return;
    }
    if (p->n == PENDING_MAX) {
        rd_kafka_topic_partition_list_destroy(p->v[p->n - 1].pos);
        p->n--;
    }
    p->v[p->n++] = (pending_t){seq, parts};
}

/* Commits the newest positions whose commit is durable (synchronously when sync), and drops
 * them and the older ones. Partitions without a position yet are left out. */
static void pending_commit(pending_offsets_t *p, rd_kafka_t *cons, int64_t durable, int sync)
{
    int k = -1;
    while (k + 1 < p->n && p->v[k + 1].seq <= durable)
        k++;
    if (k < 0)
        return;
    rd_kafka_topic_partition_list_t *pos = p->v[k].pos,
                                    *c = rd_kafka_topic_partition_list_new(pos->cnt);
    for (int i = 0; c != NULL && i < pos->cnt; i++) {
        if (pos->elems[i].offset >= 0)
            rd_kafka_topic_partition_list_add(c, pos->elems[i].topic, pos->elems[i].partition)
                ->offset = pos->elems[i].offset;
    }
    if (c != NULL && c->cnt > 0) {
        rd_kafka_resp_err_t cerr = rd_kafka_commit(cons, c, sync ? 0 : 1);
        if (cerr != RD_KAFKA_RESP_ERR_NO_ERROR && cerr != RD_KAFKA_RESP_ERR__NO_OFFSET)
            sl_warn("offset commit: %s", rd_kafka_err2str(cerr));
    }
    if (c != NULL)
        rd_kafka_topic_partition_list_destroy(c);
    for (int i = 0; i <= k; i++)
        rd_kafka_topic_partition_list_destroy(p->v[i].pos);
    memmove(&p->v[0], &p->v[k + 1], (size_t)(p->n - k - 1) * sizeof p->v[0]);
    p->n -= k + 1;
}

/* The newest store commit whose input may have its offsets committed: on disk, and its jobs in
 * the changelog. */
static int64_t durable_and_logged(sl_store_t *store, const sl_changelog_t *cl)
{
    return sl_changelog_safe(cl, sl_store_durable_seq(store));
}

/* ---- one shard of several (scheduler.sharded; scheduler/shard.h) ----
 *
 * The shards share the jobs topic's partitions through the consumer group "sluice-scheduler"
 * with the range strategy, which gives each member the same partition numbers of the jobs and
 * usage topics (they have as many partitions, and both are keyed by tenant): a shard hears the
 * usage of its own leases. The group's rebalances are eager: every member gives up all its
 * partitions, then gets its new ones. At the revocation a shard makes what it stored safe for
 * the next owner (results and changelog records on the broker, offsets committed) and stops
 * reading; at the assignment it hands over the jobs of the partitions it lost (charges kept, no
 * result: the new owner has them from the changelog) and restores those it gained from the
 * changelog, while it schedules the ones it kept. A shard starts owning nothing: the jobs its
 * database held are dropped, and the partitions it is assigned are restored from the changelog,
 * which has them whoever owned them while it was down. */
typedef struct {
    int on;
    int nparts;
    uint8_t *owned;         /* the partitions the core and the changelog writer have */
    int revoked;            /* revoked and not yet assigned again: nothing is read or scheduled */
    int failed;             /* a restore or a store write failed in the callback: stop */
    int64_t leases_written; /* lease records at the last revocation */
    sl_intake_t *intake;
    rd_kafka_t *prod;
    sl_changelog_t *cl;
    sl_store_t *store;
    sl_sched_t **sched;
    sl_config_t **cfg;
    pending_offsets_t *pending;
    refeed_t *refeed;
    /* The assignment the last rebalance gave (NULL: none). Kept here because asking librdkafka
     * (rd_kafka_assignment) is a round trip to its main thread, which every loop turn paid
     * twice: about 4 % of the scheduler's time at 500 jobs/s. */
    rd_kafka_topic_partition_list_t *assigned;
} shards_t;

/* A lease record for one call in flight (sl_sched_each_lease). */
static void lease_record(const char *tenant, const char *job_id, int attempt, const char *res_id,
                         const char *deployment, int64_t expires_ms, void *arg)
{
    shards_t *sh = arg;
    sl_cl_lease_t l = {.attempt = attempt, .expires_ms = expires_ms};
    snprintf(l.res_id, sizeof l.res_id, "%s", res_id);
    snprintf(l.deployment, sizeof l.deployment, "%s", deployment);
    sl_changelog_lease(sh->cl, tenant, job_id, &l);
    sh->leases_written++;
}

/* The revocation: before the partitions go, everything stored of them is made safe for the
 * next owner, and the calls in flight are written down for it to take over. */
static void shard_revoke(shards_t *sh, rd_kafka_t *cons)
{
    if (sh->revoked)
        return;
    double t0 = sl_mono_ms();
    sh->leases_written = 0;
    sl_sched_each_lease(*sh->sched, lease_record, sh);
    /* Results acknowledged now still write their jobs' end records; then every record is on
     * the broker, and the offsets of what was stored are committed. */
    rd_kafka_flush(sh->prod, 5000);
    sl_changelog_flush(sh->cl, 5000);
    if (sl_store_sync(sh->store) == SL_OK)
        pending_commit(sh->pending, cons, durable_and_logged(sh->store, sh->cl), 1);
    uint8_t *none = calloc((size_t)sh->nparts, 1);
    if (none == NULL) {
        sh->failed = 1;
        return;
    }
    sl_changelog_set_owned(sh->cl, none);
    free(none);
    sh->revoked = 1;
    sl_info("shard: partitions revoked; stored work made safe for their next owner in %.0f ms "
            "(%lld calls in flight written down for it)",
            sl_mono_ms() - t0, (long long)sh->leases_written);
}

/* Takes the rest of a restore in at once (a new one is about to start). */
static sl_err_t refeed_all(shards_t *sh, int64_t now_ms)
{
    sl_err_t rc = SL_OK;
    while (rc == SL_OK && sh->refeed->jobs != NULL) {
        rc = sl_store_begin(sh->store);
        if (rc == SL_OK)
            rc = refeed_some(sh->refeed, *sh->cfg, sh->store, *sh->sched, sh->cl, now_ms);
        if (rc == SL_OK)
            rc = sl_store_commit(sh->store);
        else
            sl_store_rollback(sh->store);
    }
    return rc;
}

/* The assignment: jobs of the partitions lost are handed over, those gained restored. */
static void shard_assign(shards_t *sh, const uint8_t *now_owned)
{
    int64_t now = sl_now_ms();
    double t0 = sl_mono_ms();
    int lost = 0, gained = 0, kept = 0, handed = 0;
    uint8_t *gain = calloc((size_t)sh->nparts, 1);
    sl_err_t rc = gain != NULL ? SL_OK : SL_ENOMEM;
    for (int p = 0; p < sh->nparts && gain != NULL; p++) {
        gain[p] = now_owned[p] && !sh->owned[p];
        gained += gain[p];
        lost += sh->owned[p] && !now_owned[p];
        kept += sh->owned[p] && now_owned[p];
    }
    if (rc == SL_OK)
        rc = refeed_all(sh, now);
    sl_sched_stats_t st0, st1;
    sl_sched_stats(*sh->sched, &st0);
    if (rc == SL_OK)
        rc = sl_store_begin(sh->store);
    for (int p = 0; rc == SL_OK && p < sh->nparts; p++) {
        int n = 0;
        if (sh->owned[p] && !now_owned[p])
            rc = sl_sched_hand_over(*sh->sched, p, now, &n);
        handed += n;
    }
    if (rc == SL_OK)
        rc = sl_sched_set_owned(*sh->sched, now_owned, now);
    if (rc == SL_OK)
        rc = sl_store_commit(sh->store);
    else
        sl_store_rollback(sh->store);
    if (rc == SL_OK) {
        memcpy(sh->owned, now_owned, (size_t)sh->nparts);
        sl_changelog_set_owned(sh->cl, sh->owned);
    }
    if (rc == SL_OK && gained > 0) {
        char err[512] = "";
        refeed_t *f = sh->refeed;
        memset(f, 0, sizeof *f);
        f->t0 = sl_mono_ms();
        rc = sl_changelog_read_partitions(sh->cl, *sh->cfg, gain, &f->replay, &f->refused, err,
                                          sizeof err);
        if (rc == SL_OK)
            rc = sl_cl_replay_sorted(f->replay, &f->jobs, &f->n);
        if (rc == SL_OK) {
            f->read_ms = sl_mono_ms() - f->t0;
            sl_changelog_adopt(sh->cl, f->replay);
            /* refeed_some takes them in from the next loop turn; its last slice (the first
             * when there are none) lets snapshots go again. */
            sl_changelog_hold_snapshots(sh->cl);
        } else {
            sl_error("shard: restoring %d partitions from the changelog: %s", gained,
                     err[0] != '\0' ? err : sl_strerror(rc));
        }
    }
    free(gain);
    if (rc != SL_OK) {
        /* Scheduling them half-known could run jobs twice or lose some: stop, and let the
         * group give them to another shard. */
        sl_error("shard: the assignment cannot be taken (%s); stopping", sl_strerror(rc));
        sh->failed = 1;
        return;
    }
    sh->revoked = 0;
    sl_sched_stats(*sh->sched, &st1);
    char share[64];
    if ((*sh->cfg)->sched_capacity_leases)
        snprintf(share, sizeof share, "shares of the shared limits leased");
    else
        snprintf(share, sizeof share, "share of the shared limits %.3f",
                 (double)(kept + gained) / sh->nparts);
    /* Which ones, for an operator reading the log (the first 64). */
    char owns[256] = "";
    size_t k = 0;
    for (int p = 0, n = 0; p < sh->nparts && n < 64 && k + 8 < sizeof owns; p++)
        if (sh->owned[p]) {
            k += (size_t)snprintf(owns + k, sizeof owns - k, "%s%d", n ? "," : "", p);
            n++;
        }
    sl_info("shard: %d partitions kept, %d gained (%zu unfinished jobs to take in from the "
            "changelog), %d lost (%d jobs handed over, %lld of them in flight); %s; %.0f ms; "
            "owns %s",
            kept, gained, sh->refeed->n, lost, handed,
            (long long)(st1.handed_over_in_flight - st0.handed_over_in_flight), share,
            sl_mono_ms() - t0, owns[0] != '\0' ? owns : "none");
}

/* Keeps the assignment a rebalance leaves: eager rebalances hand over the whole of it. */
static void remember_assignment(shards_t *sh, rd_kafka_resp_err_t err,
                                const rd_kafka_topic_partition_list_t *parts)
{
    if (sh->assigned != NULL)
        rd_kafka_topic_partition_list_destroy(sh->assigned);
    sh->assigned = NULL;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS && parts->cnt > 0) {
        sh->assigned = rd_kafka_topic_partition_list_copy(parts);
        if (sh->assigned == NULL) {
            sl_error("out of memory keeping the consumer's assignment; stopping");
            sh->failed = 1;
        }
    }
}

static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    shards_t *sh = opaque;
    remember_assignment(sh, err, parts);
    if (!sh->on || sh->failed) {
        sl_intake_rebalance(rk, err, parts, sh->intake);
        return;
    }
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        uint8_t *now_owned = calloc((size_t)sh->nparts, 1);
        if (now_owned == NULL) {
            sh->failed = 1;
        } else {
            const char *jobs = (*sh->cfg)->kafka.topic_jobs;
            for (int i = 0; i < parts->cnt; i++) {
                int p = parts->elems[i].partition;
                if (strcmp(parts->elems[i].topic, jobs) == 0 && p >= 0 && p < sh->nparts)
                    now_owned[p] = 1;
            }
            shard_assign(sh, now_owned);
            free(now_owned);
        }
    } else {
        shard_revoke(sh, rk);
    }
    sl_intake_rebalance(rk, err, parts, sh->intake);
}

/* Sharded start: the jobs topic's partitions counted (the usage topic must have as many), the
 * core's share taken from the store, and the database's unfinished jobs dropped (whichever
 * partitions are assigned come back from the changelog). SL_ECONFIG (err says) for topics or
 * settings that cannot be sharded. */
static sl_err_t shard_start(shards_t *sh, rd_kafka_t *prod, char *err, size_t errlen)
{
    const sl_config_t *cfg = *sh->cfg;
    if (sl_kafka_static_membership(cfg)) {
        snprintf(err, errlen,
                 "scheduler.sharded needs a consumer group: set kafka.membership to \"group\" "
                 "(static membership reads every partition in each scheduler)");
        return SL_ECONFIG;
    }
    int jobs = sl_kafka_partition_count(prod, cfg->kafka.topic_jobs, 30000);
    int batch = sl_kafka_partition_count(prod, cfg->kafka.topic_jobs_batch, 30000);
    int usage = sl_kafka_partition_count(prod, cfg->kafka.topic_usage, 30000);
    if (jobs <= 0 || jobs != usage || jobs != batch) {
        snprintf(err, errlen,
                 "scheduler.sharded needs topics %s, %s and %s with as many partitions (they "
                 "have %d, %d and %d): a shard reads the batch jobs and the usage of its tenants "
                 "from the same partition numbers",
                 cfg->kafka.topic_jobs, cfg->kafka.topic_jobs_batch, cfg->kafka.topic_usage, jobs,
                 batch, usage);
        return SL_ECONFIG;
    }
    sh->nparts = jobs;
    sh->owned = calloc((size_t)jobs, 1);
    if (sh->owned == NULL)
        return SL_ENOMEM;
    int64_t now = sl_now_ms();
    if (cfg->sched_capacity_leases)
        sl_sched_lease_shares(*sh->sched);
    sl_err_t rc = sl_sched_shard(*sh->sched, jobs, now);
    int dropped = 0;
    if (rc == SL_OK)
        rc = sl_store_begin(sh->store);
    for (int p = 0; rc == SL_OK && p < jobs; p++) {
        int n = 0;
        rc = sl_sched_hand_over(*sh->sched, p, now, &n);
        dropped += n;
    }
    if (rc == SL_OK)
        rc = sl_store_commit(sh->store);
    else
        sl_store_rollback(sh->store);
    if (rc != SL_OK) {
        snprintf(err, errlen, "starting as a shard: %s", sl_strerror(rc));
        return rc;
    }
    /* What the core made at its start for the jobs just dropped (dispatches of restored
     * leases) must not go out. Their results, if any, are in the outbox. */
    sl_sched_msg_t *out = NULL;
    int nout = sl_sched_take(*sh->sched, &out);
    sl_sched_msgs_free(out, nout);
    sl_changelog_set_owned(sh->cl, sh->owned);
    sl_info("shard of %d partitions: %d unfinished jobs of the database dropped; each partition "
            "assigned is restored from the changelog %s",
            jobs, dropped, cfg->kafka.topic_changelog);
    return SL_OK;
}

int main(int argc, char **argv)
{
    sl_proc_opts_t opts;
    sl_proc_parse_daemon(argc, argv, "sluice-scheduler", usage_text, &opts);
    sl_config_t *cfg = sl_proc_start("scheduler", &opts);
    char err[512] = "";
    /* Everything it produces (dispatches, results) is signed as the scheduler; jobs are
     * checked with ingest's public keys, usage events with the dispatcher's (their MACs with the
     * keys it shares with those). */
    sl_signer_t *signer = NULL;
    sl_keyring_t *keyring = NULL;
    /* With capacity leases, the other schedulers' reports and grants too. */
    unsigned readers = SL_ROLE_BIT(SL_ROLE_INGEST) | SL_ROLE_BIT(SL_ROLE_DISPATCHER) |
                       (cfg->sched_capacity_leases ? SL_ROLE_BIT(SL_ROLE_SCHEDULER) : 0);
    if (sl_auth_signer(cfg, SL_ROLE_SCHEDULER, &signer, err, sizeof err) != SL_OK ||
        sl_auth_keyring(cfg, readers, &keyring, err, sizeof err) != SL_OK) {
        fprintf(stderr, "sluice-scheduler: %s\n", err);
        return 2;
    }
    /* Jobs and usage events, which it alone reads, come with the MAC of the key it shares with
     * their writer (or signed, from a writer that has no scheduler key yet); after a rotation
     * of its key, also those made with its previous one, until they are read. */
    sl_signer_t *previous = NULL;
    if (cfg->signing_previous_secret_key_file[0] != '\0') {
        char prev_path[1024];
        sl_resolve_path(cfg->signing_previous_secret_key_file, prev_path, sizeof prev_path);
        if (sl_signer_load(prev_path, &previous) != SL_OK) {
            fprintf(stderr, "sluice-scheduler: cannot load signing.previous_secret_key_file %s\n",
                    prev_path);
            return 2;
        }
        sl_info("jobs and usage events with a MAC made for the previous key %s are taken too",
                prev_path);
    }
    sl_keyring_take_macs(keyring, signer, previous,
                         SL_ROLE_BIT(SL_ROLE_INGEST) | SL_ROLE_BIT(SL_ROLE_DISPATCHER));
    char sql_rel[1024], sql_path[1024];
    snprintf(sql_rel, sizeof sql_rel, "%s/ledger.sql", cfg->schema_dir);
    sl_resolve_path(sql_rel, sql_path, sizeof sql_path);
    sl_store_t *store = NULL;
    sl_err_t open_rc = sl_store_open(cfg->db_path, sql_path, &store, err, sizeof err);
    sl_sched_t *sched = NULL;
    int start_status = 0;
    if (open_rc != SL_OK) {
        fprintf(stderr, "sluice-scheduler: %s\n", err);
        start_status = open_rc == SL_EDB ? SL_STORE_EXIT_STATUS : 2;
    } else if (sl_sched_new(cfg, store, sl_now_ms(), &sched, err, sizeof err) != SL_OK) {
        const char *fault = NULL;
        int store_fault = sl_store_fault(store, &fault) != SL_STORE_FAULT_NONE;
        fprintf(stderr, "sluice-scheduler: %s%s%s\n", err, store_fault ? ": " : "",
                store_fault ? fault : "");
        start_status = store_fault ? SL_STORE_EXIT_STATUS : 2;
    }
    if (start_status != 0) {
        /* Freed so that a sanitizer build exits with this status, not its leak report's. */
        sl_store_close(store);
        sl_signer_free(signer);
        sl_signer_free(previous);
        sl_keyring_free(keyring);
        sl_config_free(cfg);
        free(opts.rest);
        return start_status;
    }
    sl_outbox_t *ob = sl_outbox_new();
    if (ob == NULL) {
        fprintf(stderr, "sluice-scheduler: out of memory\n");
        return 2;
    }
    sl_intake_t *intake = NULL;
    sl_intake_opts_t iopts = sl_intake_kafka_opts(INTAKE_SLICE, INTAKE_CAP);
    if (sl_intake_new(&iopts, &intake) != SL_OK ||
        sl_intake_later(intake, cfg->kafka.topic_jobs_batch, LATER_CAP) != SL_OK) {
        fprintf(stderr, "sluice-scheduler: out of memory\n");
        return 2;
    }
    /* The changelog before anything is consumed: a new database gets its jobs back first. */
    refeed_t refeed;
    sl_changelog_t *cl = NULL;
    uint8_t cl_key[SL_MAC_KEY_BYTES];
    sl_signer_derive(signer, SL_CHANGELOG_MAC_CONTEXT, cl_key);
    sl_err_t cl_rc = restore_from_changelog(cfg, cl_key, store, sched, &refeed, err, sizeof err);
    if (cl_rc == SL_OK)
        cl_rc =
            sl_changelog_open(cfg, cl_key, refeed.replay,
                              sl_store_is_new(store) && refeed.jobs == NULL && !cfg->sched_sharded,
                              &cl, err, sizeof err);
    shards_t sh = {.on = cfg->sched_sharded};
    sodium_memzero(cl_key, sizeof cl_key);
    if (cl_rc == SL_OK && refeed.jobs != NULL)
        sl_changelog_hold_snapshots(cl);
    if (refeed.jobs == NULL) {
        sl_cl_replay_free(refeed.replay);
        refeed.replay = NULL;
    }
    if (cl_rc != SL_OK) {
        fprintf(stderr, "sluice-scheduler: changelog: %s\n", err);
        return cl_rc == SL_EDB ? SL_STORE_EXIT_STATUS : 2;
    }
    delivery_t dctx = {ob, cl, store};
    rd_kafka_t *prod = NULL, *cons = NULL;
    const char *topics[] = {cfg->kafka.topic_jobs, cfg->kafka.topic_jobs_batch,
                            cfg->kafka.topic_usage};
    pending_offsets_t pending = {.n = 0};
    /* Shards: the range strategy gives a member the same partitions of all three topics. */
    const char *cons_props[20];
    int np = 0;
    for (; sl_intake_consumer_props[np] != NULL && np < 12; np++)
        cons_props[np] = sl_intake_consumer_props[np];
    if (cfg->sched_sharded) {
        cons_props[np++] = "partition.assignment.strategy";
        cons_props[np++] = "range";
        /* On the dev broker a shard that dies is noticed in 3 s, not 6: its partitions wait
         * for that long. librdkafka heartbeats from a thread of its own, so a slow loop turn (a
         * restore, a checkpoint) does not end the membership. A real broker refuses a session
         * timeout below its group.min.session.timeout.ms (6000 by default), so there the 6 s
         * stay unless kafka.properties sets less (and the brokers allow it). */
        if (sl_kafka_dev_broker(cfg)) {
            cons_props[np++] = "session.timeout.ms";
            cons_props[np++] = "3000";
        }
        cons_props[np++] = "heartbeat.interval.ms";
        cons_props[np++] = "300";
    }
    cons_props[np] = NULL;
    if (sl_kafka_producer_new(cfg, "sluice-scheduler", on_delivery, &dctx, &prod, err,
                              sizeof err) != SL_OK) {
        fprintf(stderr, "sluice-scheduler: kafka: %s\n", err);
        return 2;
    }
    sh.intake = intake;
    sh.prod = prod;
    sh.cl = cl;
    sh.store = store;
    sh.sched = &sched;
    sh.cfg = &cfg;
    sh.pending = &pending;
    sh.refeed = &refeed;
    sl_coord_t *coord = NULL;
    if (sh.on) {
        sl_err_t src = shard_start(&sh, prod, err, sizeof err);
        if (src == SL_OK && cfg->sched_capacity_leases)
            src = sl_coord_new(cfg, sched, keyring, &coord, err, sizeof err);
        if (src != SL_OK) {
            fprintf(stderr, "sluice-scheduler: %s\n", err);
            return src == SL_EDB ? SL_STORE_EXIT_STATUS : 2;
        }
    }
    if (sl_kafka_consumer_new_rebalance(cfg, "sluice-scheduler", "sluice-scheduler", topics, 3,
                                        cons_props, on_rebalance, &sh, &cons, err,
                                        sizeof err) != SL_OK) {
        fprintf(stderr, "sluice-scheduler: kafka: %s\n", err);
        return 2;
    }
    if (sl_intake_attach(intake, cons) != SL_OK) {
        fprintf(stderr, "sluice-scheduler: kafka: no consumer queue\n");
        return 2;
    }
    /* Results left in the outbox by a previous run go out first. */
    sweep_t sw = {prod, ob};
    disp_batch_t disp = {0};
    sl_outbox_sweep(ob, store, 1 /*all*/, produce_outbox_row, &sw);
    sl_info("scheduler started: db %s, %d deployments, %d routes, %d tenants", cfg->db_path,
            cfg->ndeployments, cfg->nroutes, cfg->ntenants);

    sl_metrics_t *metrics = sl_proc_metrics(&opts, cfg->sched_metrics_listen);
    sl_exporter_t *exporter =
        metrics != NULL ? sl_exporter_new(metrics, (const sl_config_t **)&cfg) : NULL;
    if (exporter == NULL) {
        fprintf(stderr, "sluice-scheduler: cannot set up metrics\n");
        return 1;
    }
    sl_exporter_observe(exporter, sched);
    int lag_family = sl_kafka_lag_family(metrics);
    int m_lost = sl_kafka_lost_family(metrics);
    int refused_family = sl_auth_refused_family(metrics, "sluice_scheduler");
    int sigs_family =
        sl_metrics_family(metrics, SL_METRIC_COUNTER, "sluice_scheduler_dispatch_signatures_total",
                          "Signatures made for dispatches: one per loop turn's batch of them "
                          "(sluice_scheduler_dispatched_total over this is the mean batch).",
                          NULL, NULL, 0);
    if (lag_family < 0 || refused_family < 0 || sigs_family < 0 ||
        sl_changelog_metrics(cl, metrics) != 0 ||
        (coord != NULL && sl_coord_metrics(coord, metrics, refused_family) != 0)) {
        fprintf(stderr, "sluice-scheduler: cannot set up metrics\n");
        return 1;
    }
    sl_admin_t *admin = NULL;
    /* The console's history hears the core's hooks after the exporter. */
    sl_history_t *history = sl_history_new();
    if (history != NULL)
        sl_exporter_chain(exporter, sl_history_observer(), history);
    sl_api_t api = {&sched, (const sl_config_t **)&cfg, store, sl_now_ms, history, coord};
    if (cfg->admin_listen[0] != '\0') {
        int port = 0;
        if (sl_admin_start(cfg->admin_listen, &admin, &port, err, sizeof err) != SL_OK) {
            /* Going on would leave the admin clients talking to whatever holds the port (a
             * second stack's scheduler). */
            sl_error("%s; not starting: stop what holds it, or set scheduler.admin_listen "
                     "(\"\" serves none)",
                     err);
            exit(2);
        }
        sl_info("admin API on http://%s/v1/ (port %d)%s", cfg->admin_listen, port,
                cfg->nadmin_keys == 0 ? "; no admin_keys in the config: every request "
                                        "is refused"
                                      : "");
    }
    int64_t last_export = 0;
    int64_t next_wait = 1;
    int64_t deaf_since = 0;
    int64_t last_stats = sl_now_ms();
    int64_t last_store_check = 0;
    sl_restore_pruner_t pruner = {0};
    int exit_code = 0, group_refused = 0;
    rd_kafka_message_t **batch = calloc(BATCH_MAX, sizeof *batch);
    void *taken[INTAKE_CAP];
    if (batch == NULL) {
        fprintf(stderr, "sluice-scheduler: out of memory\n");
        return 2;
    }
    while (!sl_stop_requested()) {
        int timeout = (int)(next_wait < 50 ? next_wait : 50);
        sl_intake_wait(intake, timeout);
        /* The consumer queue first: rebalances run inside this poll (and set up or drop the
         * partition queues), errors and messages of a partition without its own queue. */
        int n = 0;
        rd_kafka_message_t *msg = NULL;
        while (n < BATCH_MAX - INTAKE_CAP && (msg = rd_kafka_consumer_poll(cons, 0)) != NULL)
            batch[n++] = msg;
        int nt = sl_intake_take(intake, taken, INTAKE_CAP);
        for (int i = 0; i < nt; i++)
            batch[n++] = taken[i];
        if (sh.failed) {
            for (int i = 0; i < n; i++)
                rd_kafka_message_destroy(batch[i]);
            exit_code = 1;
            break;
        }
        int64_t now = sl_now_ms();
        sl_err_t rc = sl_store_begin(store);
        if (rc == SL_OK)
            rc = sl_outbox_forget_delivered(ob, store);
        if (rc == SL_OK && refeed.jobs != NULL)
            rc = refeed_some(&refeed, cfg, store, sched, cl, now);
        for (int i = 0; rc == SL_OK && i < n; i++) {
            rd_kafka_message_t *m = batch[i];
            if (m->err) {
                if (sl_kafka_consume_fatal(m))
                    group_refused = 1;
                else
                    sl_warn("consume: %s", rd_kafka_message_errstr(m));
                continue;
            }
            const char *topic = rd_kafka_topic_name(m->rkt);
            sl_auth_t auth = sl_kafka_verify(keyring, sl_auth_writers(cfg, topic), m);
            if (auth != SL_AUTH_OK) {
                sl_auth_refuse(metrics, refused_family, topic, auth);
                continue;
            }
            int jobs = sl_is_jobs_topic(&cfg->kafka, topic);
            if (jobs && sh.on && sh.revoked)
                continue; /* read before its partition was revoked: it comes again */
            if (jobs)
                rc = sl_sched_on_job(sched, m->payload, m->len, now);
            else
                rc = sl_sched_on_usage(sched, m->payload, m->len, now);
        }
        /* Capacity leases: grants applied, lost leases dropped, demand reported; and the
         * coordinator's round when this shard owns partition 0 of the jobs topic. */
        if (rc == SL_OK && coord != NULL)
            rc = sl_coord_step(coord, sched, sh.owned[0] && !sh.revoked, now);
        /* Without partitions the scheduler hears no usage events: it then neither leases nor
         * lets leases expire, and the silent time is added to the leases afterwards. */
        int assigned = sh.assigned != NULL;
        if (!assigned && deaf_since == 0)
            deaf_since = now;
        if (assigned && deaf_since != 0) {
            sl_sched_extend_leases(sched, now - deaf_since);
            deaf_since = 0;
        }
        if (rc == SL_OK && assigned)
            rc = sl_sched_tick(sched, now, &next_wait);
        else
            next_wait = 50;
        if (rc == SL_OK)
            rc = sl_restore_prune(sched, &pruner, now);
        if (rc == SL_OK)
            rc = sl_store_commit(store);
        /* What was just committed is safe only in the file at the path: a deleted or replaced
         * database takes it along at the next start. Checked before the offsets that rely on
         * it are committed. */
        if (rc == SL_OK && (n > 0 || now - last_store_check >= STORE_CHECK_EVERY_MS)) {
            rc = sl_store_check(store);
            last_store_check = now;
        }
        if (rc != SL_OK) {
            /* The transaction could not be completed or kept (database, memory): stop without
             * committing offsets, so the input is redelivered to the next run, which rebuilds
             * the core from the store. */
            const char *fault = NULL;
            if (sl_store_fault(store, &fault) != SL_STORE_FAULT_NONE) {
                sl_error("store: %s; stopping (exit status %d)", fault, SL_STORE_EXIT_STATUS);
                exit_code = SL_STORE_EXIT_STATUS;
            } else {
                sl_error("transaction failed (%s); stopping", sl_strerror(rc));
                exit_code = 1;
            }
            sl_store_rollback(store);
            for (int i = 0; i < n; i++)
                rd_kafka_message_destroy(batch[i]);
            break;
        }
        sl_outbox_committed(ob);
        for (int i = 0; i < n; i++)
            rd_kafka_message_destroy(batch[i]);
        /* Offsets go to Kafka once the commit that stored their messages is on disk, and the
         * changelog has the jobs it took in. */
        int64_t committed = sl_store_committed_seq(store);
        if (n > 0)
            pending_add(&pending, cons, sh.assigned, committed);
        sl_sched_msg_t *out = NULL;
        int nout = sl_sched_take(sched, &out);
        for (int i = 0; i < nout; i++) {
            if (out[i].kind == SL_MSG_CHANGELOG)
                sl_changelog_job(cl, out[i].key, out[i].job_id, out[i].submitted_ms, out[i].value,
                                 strlen(out[i].value), committed);
            else if (out[i].kind != SL_MSG_DISPATCH || !disp_batch_add(&disp, &out[i]))
                produce(prod, out[i].topic, out[i].key, out[i].value,
                        out[i].kind == SL_MSG_RESULT ? out[i].seq : 0, ob);
        }
        /* The turn's dispatches under one signature: a dispatcher checks one per batch. */
        if (disp.n > 0) {
            int signatures = 0;
            sl_kafka_produce_batch(prod, cfg->kafka.topic_dispatch, disp.msgs, (int)disp.n,
                                   &signatures);
            sl_metrics_add(metrics, sigs_family, NULL, signatures);
        }
        disp.n = 0;
        sl_sched_msgs_free(out, nout);
        rd_kafka_poll(prod, 0);
        sl_changelog_poll(cl);
        if (sl_changelog_step(cl, store) != SL_OK || sl_changelog_failed(cl)) {
            sl_error("changelog: stopping; offsets stay where its records were acknowledged");
            exit_code = 1;
            break;
        }
        pending_commit(&pending, cons, durable_and_logged(store, cl), 0);
        sl_outbox_sweep(ob, store, 0, produce_outbox_row, &sw);
        if (group_refused) {
            exit_code = 2; /* a setting to change: retrying would wait forever */
            break;
        }
        if (sl_reload_requested()) {
            /* before: the old config may be freed in the reload, and the history names it */
            sl_history_reset(history);
            reload(&cfg, store, &sched);
            if (coord != NULL && sl_store_begin(store) == SL_OK) {
                if (sl_coord_reapply(coord, sched, sl_now_ms()) == SL_OK)
                    sl_store_commit(store);
                else
                    sl_store_rollback(store);
            }
        }
        sl_admin_poll(admin, sl_api_handle, &api);
        if (now - last_export >= 1000) {
            sl_exporter_update(exporter, sched, cfg, now);
            if (history != NULL)
                sl_history_sample(history, sched, cfg, now);
            sl_kafka_export_lag(cons, metrics, lag_family);
            sl_kafka_export_lost(metrics, m_lost);
            sl_changelog_export(cl);
            sl_coord_export(coord, now);
            last_export = now;
            /* Heap freed since (a burst's messages, parse trees, finished jobs) goes back to
             * the system instead of staying in RSS: 1 - 5 ms a second with 100,000 jobs
             * queued, and 90 B less RSS a queued job (bench/queued). */
            malloc_trim(0);
            /* A flood that stopped still reports how many lines it held back. */
            sl_log_flush_limited();
        }
        if (now - last_stats >= STATS_EVERY_MS) {
            sl_exporter_log_stats(sched);
            last_stats = now;
        }
    }
    sl_info("scheduler stopping");
    sl_admin_stop(admin);
    if (coord != NULL && exit_code == 0 && sl_coord_leave(coord, sched, sl_now_ms()) != SL_OK)
        sl_warn("capacity: the last report did not go; this shard's part returns after its "
                "lease");
    rd_kafka_flush(prod, 10000);
    sl_changelog_flush(cl, 10000);
    /* Acknowledged results can leave the outbox now; unacknowledged ones go out next start.
     * Not into a store that cannot be trusted: they go out again instead. */
    if (exit_code != SL_STORE_EXIT_STATUS)
        sl_outbox_close(ob, store);
    /* A clean stop: everything stored is made durable, and its offsets committed. */
    if (exit_code == 0 && sl_store_sync(store) == SL_OK)
        pending_commit(&pending, cons, durable_and_logged(store, cl), 1);
    for (int i = 0; i < pending.n; i++)
        rd_kafka_topic_partition_list_destroy(pending.v[i].pos);
    pending.n = 0; /* a shard's revocation, as the consumer closes, commits what is left */
    sl_coord_free(coord);
    sl_intake_detach(intake);
    sl_kafka_consumer_close(cons);
    if (sh.assigned != NULL) /* the close's revocation normally dropped it */
        rd_kafka_topic_partition_list_destroy(sh.assigned);
    sl_intake_free(intake);
    rd_kafka_destroy(prod);
    sl_changelog_close(cl, 0);
    free(refeed.jobs); /* a stop before every restored job was taken in: the changelog has them */
    sl_cl_replay_free(refeed.replay);
    free(batch);
    sl_outbox_free(ob);
    free(disp.msgs);
    sl_exporter_free(exporter);
    sl_history_free(history);
    sl_metrics_free(metrics);
    sl_sched_free(sched);
    sl_store_close(store);
    free(sh.owned);
    sl_kafka_sign_as(NULL, SL_ROLE_SCHEDULER);
    sl_signer_free(signer);
    sl_signer_free(previous);
    sl_keyring_free(keyring);
    sl_config_free(cfg);
    free(opts.rest);
    return exit_code;
}
