/* stats.h - what GET /stats reports: per-deployment counters, the rings of recent 429s with a
 * wait and of arrivals, and the recent streams; and POST /stats/reset.
 *
 * The idea to hold first: counting is bookkeeping, never a decision. Admission, faults and
 * responses call these to record what they did; nothing here changes what a client is sent.
 * Unless a function says it takes the lock, the caller holds the simulator's lock.
 */
#ifndef SL_SIM_STATS_H
#define SL_SIM_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "sim_internal.h"

/* Zeroes count, with no admission and no first stream event seen (times of -1). */
void sl_sim_stats_counters_reset(sl_sim_counters_t *count);

/* Records an answered request (its Idempotency-Key, or NULL, and status) in the deployment's
 * arrivals ring. Takes the lock. */
void sl_sim_stats_note_arrival(sl_sim_t *sim, sl_sim_deployment_t *dep, const char *key, int status,
                               int64_t now_ms);

/* Registers the stream resp in recent_streams (its request id, whether it is cut) and ties resp
 * to that entry for sl_sim_chunk_sent. Caller holds the lock. */
void sl_sim_stats_open_stream(sl_sim_t *sim, sl_sim_deployment_t *dep, sl_sim_response_t *resp);

/* Remembers a 429 that announced a wait: in the ring for /stats, and under its Idempotency-Key
 * so that the key coming back early counts as an early retry. Caller holds the lock. */
void sl_sim_stats_note_retry_after(sl_sim_t *sim, sl_sim_deployment_t *dep, const char *key,
                                   int64_t now_ms, int64_t wait_ms, bool fault);

/* The body of GET /stats at now_ms into *out (NUL-terminated, freed with free()). Returns SL_OK,
 * or SL_ENOMEM with *out NULL. Takes the lock. */
sl_err_t sl_sim_stats_json(sl_sim_t *sim, int64_t now_ms, char **out);

/* Zeroes the counters and rings; the buckets, day windows and in-flight counts stay. Caller
 * holds the lock. */
void sl_sim_stats_reset(sl_sim_t *sim);

#endif
