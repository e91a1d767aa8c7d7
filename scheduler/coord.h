/* coord.h - capacity leases over Kafka: a shard's reports and grants, and the coordinator.
 *
 * With scheduler.capacity_leases (the default for sharded schedulers), every scheduler reads the
 * capacity topic's partition 0 whole (no group: each reads every message), folds it into its view
 * (grants.h), and:
 *   - as a shard, reports its demand every 60th of a minute (100 to 500 ms), enforces the
 *     shares its grant names as soon as it reads it, and drops every shared share to none when
 *     its lease (counted from the report the grant answers, on its own clock) runs out
 *     unrenewed;
 *   - as the coordinator, answers all live shards with a grant table as often.
 * The coordinator is the scheduler that owns partition 0 of the jobs topic: the schedulers'
 * consumer group elects it, and moves the role when it dies or leaves. A new coordinator raises
 * the epoch; tables of an older epoch are ignored by every shard. It coordinates only once it
 * has read the capacity topic up to where it was when it started, so it knows the live grants.
 *
 * The scheduler's loop calls sl_coord_step once a turn, inside its transaction.
 */
#ifndef SL_COORD_H
#define SL_COORD_H

#include <librdkafka/rdkafka.h>
#include <stdint.h>

#include "config.h"
#include "err.h"
#include "metrics.h"
#include "sched.h"
#include "sign.h"

typedef struct sl_coord sl_coord_t;

/* What operators see (metrics, admin API, sluice status). */
typedef struct {
    int coordinator;         /* this scheduler coordinates now */
    int64_t epoch;           /* the newest epoch seen */
    int live;                /* shards heard from within a lease */
    int64_t lease_left_ms;   /* of this shard's lease; 0: none */
    int64_t reports, tables; /* sent by this scheduler */
    int64_t received;        /* capacity messages folded */
    int64_t expiries;        /* leases of this shard that ran out */
} sl_coord_info_t;

/* Reads the capacity topic (cfg->kafka.topic_capacity) from what the live grants may still
 * need (its newest messages), with its own consumer and producer. keyring must hold the
 * scheduler's public key. */
sl_err_t sl_coord_new(const sl_config_t *cfg, sl_sched_t *sched, sl_keyring_t *keyring,
                      sl_coord_t **out, char *err, size_t errlen);
void sl_coord_free(sl_coord_t *c);

/* One loop turn: messages read and folded, this shard's grant applied or its lease dropped,
 * its report sent when due, and a round when coordinate (this scheduler owns partition 0 and
 * is not between a revocation and an assignment). */
sl_err_t sl_coord_step(sl_coord_t *c, sl_sched_t *sched, int coordinate, int64_t now_ms);

/* A clean stop: this shard's shares dropped to none, and a last report saying so sent. */
sl_err_t sl_coord_leave(sl_coord_t *c, sl_sched_t *sched, int64_t now_ms);

/* The core was rebuilt (a reload): the shares it enforces are re-applied from the last grant. */
sl_err_t sl_coord_reapply(sl_coord_t *c, sl_sched_t *sched, int64_t now_ms);

void sl_coord_info(const sl_coord_t *c, int64_t now_ms, sl_coord_info_t *out);

/* Metrics families, exported from sl_coord_export; refused messages of the capacity topic are
 * counted in refused_family (sl_auth_refused_family). */
int sl_coord_metrics(sl_coord_t *c, sl_metrics_t *m, int refused_family);
void sl_coord_export(sl_coord_t *c, int64_t now_ms);

#endif
