/* grants.h - capacity leases between sharded schedulers: what each scheduler knows of the
 * shards' reports and the coordinator's grants, how the coordinator divides a shared limit, and
 * the messages of the capacity topic.
 *
 * The model is Doorman's. Every shard reports, twice a second, per shared bucket: the weight of
 * its backlogged flows there, the share it could use, the share it enforces, and how much of the
 * limit the bucket still counts of what it admitted (its trailing window, its quota period, its
 * calls in flight). One scheduler, the coordinator, answers with a grant table: a share of each
 * shared bucket per live shard, leased for lease_ms from the report it answers. A shard admits
 * only within its grant and drops to nothing when its lease runs out unrenewed.
 *
 * What the coordinator may grant: each shard "holds" the largest of what it was granted, what it
 * says it enforces and what it says is still counted; a grant may take a shard above its hold
 * only out of what no shard holds (1 - the sum of holds). A smaller grant lowers the hold only
 * once the shard reports that it enforces it, and what it admitted before still counts until
 * its own reports say it has left the window. A shard that stops reporting holds what it held
 * for its lease and then for the longest time its bucket counts an admission (release_ms).
 * So the shares admitted under, summed over every shard and counted as the provider counts
 * them, never pass the limit, whichever grants are lost or late.
 *
 * The topic has one partition, so every scheduler reads the same messages in the same order and
 * folds them into the same view; a scheduler that becomes the coordinator therefore already
 * knows the live grants. Grant tables carry an epoch, which a new coordinator raises: a table
 * of an older epoch (a coordinator that lost its role) is ignored, as is a report or table not
 * newer than the last one of its sender, or a report older than a lease (replays).
 *
 * Pure: no Kafka, no clock; times are caller-supplied epoch ms. Tested in tests/test_grants.c.
 */
#ifndef SL_GRANTS_H
#define SL_GRANTS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* The most shards a view keeps (a report from one more is ignored) and the longest shard id. */
enum { SL_GRANTS_MAX_SHARDS = 64, SL_GRANTS_ID_MAX = 64 };

/* One shard's report about one shared bucket; shares are fractions of the whole limit. */
typedef struct {
    double weight; /* the weights of its backlogged flows that use the bucket; 0: none */
    double want;   /* the share it could use, 0..1 */
    double held;   /* the share it enforces now */
    double used;   /* what the bucket still counts of its admissions, as a share */
} sl_want_t;

/* A grant table's entry for one shard. share[b] is -1 for a bucket the table does not name. */
typedef struct {
    int64_t epoch, echo, lease_ms;
    double *share; /* the caller's array of nb entries */
} sl_grant_t;

typedef struct sl_grants sl_grants_t;

/* A view of the nb shared buckets named in ids (copied); release_ms[b]: how long bucket b counts
 * an admission after it was made. NULL when out of memory. */
sl_grants_t *sl_grants_new(const char *const *ids, const int64_t *release_ms, int nb,
                           int64_t lease_ms);
void sl_grants_free(sl_grants_t *g);
int sl_grants_count(const sl_grants_t *g);
const char *sl_grants_id(const sl_grants_t *g, int b);
/* All nb ids, in bucket order (the view's own). */
const char *const *sl_grants_ids(const sl_grants_t *g);
int sl_grants_find(const sl_grants_t *g, const char *id);

/* One message of the capacity topic, folded into the view. 0: ignored (malformed, stale, a
 * replay); 1: a report; 2: a grant table. For a table that names self, *mine is filled and
 * *is_mine set. */
int sl_grants_fold(sl_grants_t *g, const char *json, size_t len, int64_t now_ms, const char *self,
                   sl_grant_t *mine, int *is_mine);

/* A shard's report (d: nb entries), as the message to send; caller frees. NULL: no memory.
 * left: the shard's last, sent once it enforces nothing (a clean stop): what it was granted
 * returns to the others as soon as what it admitted leaves the window, without its lease. */
char *sl_grants_report(const sl_grants_t *g, const char *self, int64_t seq, int64_t now_ms,
                       const sl_want_t *d, int left);

/* The coordinator's round: divides every bucket between the live shards, notes the grants in
 * the view, and returns the grant table to send (caller frees); NULL when no shard is live (or
 * no memory). The coordinator's own grant, when it reported as a shard, is in *mine. */
char *sl_grants_round(sl_grants_t *g, const char *self, int64_t epoch, int64_t now_ms,
                      sl_grant_t *mine, int *is_mine);

/* The newest epoch seen, and the shards heard from within a lease. */
int64_t sl_grants_epoch(const sl_grants_t *g);
int sl_grants_live(const sl_grants_t *g, int64_t now_ms);
/* The sum of what every shard holds of bucket b now (at most 1 when the rules held). */
double sl_grants_held(const sl_grants_t *g, int b, int64_t now_ms);

/* One bucket's division (weighted max-min): n live shards with weights w (> 0) and wants (caps)
 * get target shares summing to at most 1. Then each gets its target where that is within its
 * hold, and above its hold only what is free (1 - their holds - others, what departed shards
 * still hold), split in proportion to what they lack. out[i]: the grant. */
void sl_grants_divide(int n, const double *w, const double *want, const double *hold, double others,
                      double *out);

#endif
