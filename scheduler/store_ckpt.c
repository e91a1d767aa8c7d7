/* store_ckpt.c - the store's checkpointer thread, which makes the writer's commits durable
 * (see store_int.h and store.h, sl_store_durable_seq).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "log.h"
#include "store_int.h"
#include "util.h"

/* The checkpointer: a thread with its own connection that copies the WAL into the database
 * (PASSIVE: it never waits for or blocks the writer) every CKPT_EVERY_MS, and with it makes the
 * commits durable. SQLite's automatic checkpoint ran inside the commit that crossed its
 * threshold, on the writer's thread: with a flood being stored, a 40 - 200 ms stall of the
 * scheduling loop every few MB. And a synced commit (synchronous=FULL) is an fsync on that
 * thread at every commit, several a second per scheduling step. So the writer commits with
 * synchronous=NORMAL, and durability comes from the checkpoint, which syncs the WAL before it
 * copies it: every commit made before a checkpoint that ran is on disk when it returns. The
 * writer numbers its commits; the checkpointer publishes the number it made durable; the
 * scheduler commits its Kafka offsets only up to that (sl_store_durable_seq). */
enum { CKPT_EVERY_MS = 50 };

struct store_ckpt {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    atomic_llong committed; /* commits of the writer */
    atomic_llong durable;   /* of those, the ones on disk */
    char path[4096];
};

static void *ckpt_main(void *arg)
{
    store_ckpt_t *c = arg;
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(c->path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        sl_warn("store: the checkpointer cannot open %s; the WAL grows until the next start",
                c->path);
        sqlite3_close(db);
        return NULL;
    }
    /* Never checkpoint into, or delete, the files at the path on close: the writer does that,
     * and only when they are still its own. */
    sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    sqlite3_exec(db, "PRAGMA synchronous = FULL", NULL, NULL, NULL);
    atomic_store(&c->durable, -1); /* ready */
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += (long)CKPT_EVERY_MS * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&c->cv, &c->mu, &until);
        if (c->stop)
            break;
        pthread_mutex_unlock(&c->mu);
        long long seq = atomic_load(&c->committed);
        if (seq > atomic_load(&c->durable)) {
            int nlog = 0, nckpt = 0;
            if (sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, &nlog, &nckpt) ==
                SQLITE_OK)
                atomic_store(&c->durable, seq);
        }
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    sqlite3_close(db);
    return NULL;
}

/* Turns SQLite's automatic checkpoint off on the writer and starts the checkpointer; without
 * one (no thread), the automatic checkpoint stays on. */
void store_start_checkpointer(sl_store_t *s)
{
    store_ckpt_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return;
    snprintf(c->path, sizeof c->path, "%s", s->path);
    atomic_init(&c->committed, 0);
    atomic_init(&c->durable, -2); /* not ready */
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (pthread_create(&c->thread, NULL, ckpt_main, c) != 0) {
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv);
        free(c);
        return;
    }
    /* Wait until its connection is open (or it gave up): the writer's settings depend on it. */
    while (atomic_load(&c->durable) == -2) {
        struct timespec t = {0, 1000000};
        nanosleep(&t, NULL);
        if (pthread_tryjoin_np(c->thread, NULL) == 0) {
            pthread_mutex_destroy(&c->mu);
            pthread_cond_destroy(&c->cv);
            free(c);
            return; /* it could not open the file: SQLite checkpoints, commits stay FULL */
        }
    }
    atomic_store(&c->durable, 0);
    s->ckpt = c;
    sqlite3_exec(s->db, "PRAGMA wal_autocheckpoint = 0", NULL, NULL, NULL);
    sqlite3_exec(s->db, "PRAGMA synchronous = NORMAL", NULL, NULL, NULL);
}

void store_stop_checkpointer(sl_store_t *s)
{
    store_ckpt_t *c = s->ckpt;
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
    s->ckpt = NULL;
}

void store_ckpt_committed(sl_store_t *s)
{
    if (s->ckpt != NULL)
        atomic_fetch_add(&s->ckpt->committed, 1);
}

int sl_store_checkpointing(const sl_store_t *s)
{
    return s->ckpt != NULL;
}

int64_t sl_store_committed_seq(const sl_store_t *s)
{
    return s->ckpt != NULL ? (int64_t)atomic_load(&s->ckpt->committed) : s->commits;
}

int64_t sl_store_durable_seq(const sl_store_t *s)
{
    /* Without the checkpointer every commit is synced (synchronous=FULL). */
    return s->ckpt != NULL ? (int64_t)atomic_load(&s->ckpt->durable) : s->commits;
}

sl_err_t sl_store_sync(sl_store_t *s)
{
    if (s->ckpt == NULL)
        return SL_OK;
    long long seq = atomic_load(&s->ckpt->committed);
    int nlog = 0, nckpt = 0;
    if (sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_FULL, &nlog, &nckpt) != SQLITE_OK)
        return SL_EDB;
    atomic_store(&s->ckpt->durable, seq);
    return SL_OK;
}
