/* sim.c - the simulator's life cycle: sl_sim_new sets up each deployment's limiter, key tables,
 * rings and seeded fault sequence; sl_sim_finish ends a response's time in flight; sl_sim_free
 * undoes sl_sim_new.
 *
 * The rest of sim.h is implemented where its concept lives: the config reader in config.c, the
 * endpoints (sl_sim_handle) in endpoints.c, responses and their accessors in respond.c, the
 * stream bookkeeping (sl_sim_chunk_sent) in stats.c and the prompt estimate in request.c.
 */
#include "sim.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "batch.h"
#include "rng.h"
#include "sim_internal.h"
#include "stats.h"

static void deployment_free(sl_sim_deployment_t *dep)
{
    sl_sim_limiter_free(dep->lim);
    sl_sim_idem_free(dep->idem);
    sl_sim_idem_free(dep->retry_keys);
    free(dep->retries);
    free(dep->arrivals);
    sl_sim_batch_state_free(dep->batch);
}

sl_err_t sl_sim_new(sl_sim_config_t *cfg, int64_t now_ms, sl_sim_t **out)
{
    *out = NULL;
    if (cfg == NULL || cfg->n_deps == 0)
        return SL_EINVAL;
    sl_sim_t *sim = calloc(1, sizeof *sim);
    if (sim == NULL)
        return SL_ENOMEM;
    sim->deps = calloc(cfg->n_deps, sizeof *sim->deps);
    if (sim->deps == NULL) {
        free(sim);
        return SL_ENOMEM;
    }
    sl_err_t rc = SL_OK;
    for (size_t i = 0; i < cfg->n_deps && rc == SL_OK; i++) {
        const sl_sim_dep_config_t *dc = &cfg->deps[i];
        sl_sim_deployment_t *dep = &sim->deps[i];
        dep->cfg = dc;
        sl_sim_stats_counters_reset(&dep->count);
        dep->first_request_ms = -1;
        /* A fixed sequence per deployment: the seed mixed with its name. */
        uint64_t seed = dc->faults.has_seed ? dc->faults.seed : cfg->seed;
        dep->rng =
            sl_sim_rng_mix64(seed ^ sl_sim_rng_mix64(sl_sim_rng_fnv1a(dc->name, strlen(dc->name))));
        sl_sim_limits_t limits = {
            .limit =
                {
                    [SL_SIM_DIM_REQUESTS] = dc->rpm,
                    [SL_SIM_DIM_TOKENS] = dc->tpm,
                    [SL_SIM_DIM_INPUT_TOKENS] = dc->itpm,
                    [SL_SIM_DIM_OUTPUT_TOKENS] = dc->otpm,
                    [SL_SIM_DIM_REQUESTS_DAY] = dc->rpd,
                },
            .slices_per_minute = dc->slices_per_minute,
            .minute_ms = cfg->minute_ms,
            .day_ms = dc->day_ms,
            .rolling_minute = dc->rolling_minute,
        };
        rc = sl_sim_limiter_new_limits(&limits, now_ms, &dep->lim);
        if (rc == SL_OK)
            rc = sl_sim_idem_new((size_t)cfg->idempotency_keys, sizeof(sl_sim_completion_t),
                                 &dep->idem);
        if (rc == SL_OK)
            rc = sl_sim_idem_new((size_t)cfg->idempotency_keys, sizeof(int64_t), &dep->retry_keys);
        if (rc == SL_OK)
            /* The batch draws: the same seed, a sequence of their own, so batches never shift
             * the online fault draws. */
            rc = sl_sim_batch_state_new(dc, sl_sim_rng_mix64(dep->rng ^ 0x6261746368ULL),
                                        &dep->batch);
        if (rc == SL_OK) {
            dep->retries = calloc(SL_SIM_RING_CAP, sizeof *dep->retries);
            dep->arrivals = calloc(SL_SIM_RING_CAP, sizeof *dep->arrivals);
            if (dep->retries == NULL || dep->arrivals == NULL)
                rc = SL_ENOMEM;
        }
    }
    if (rc == SL_OK && pthread_mutex_init(&sim->lock, NULL) != 0)
        rc = SL_ENOMEM;
    if (rc != SL_OK) {
        for (size_t i = 0; i < cfg->n_deps; i++)
            deployment_free(&sim->deps[i]);
        free(sim->deps);
        free(sim);
        return rc;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    sim->cfg = cfg;
    sim->origin_ms = now_ms;
    sim->origin_unix_s = (int64_t)ts.tv_sec;
    sim->origin_unix_ms = (int64_t)ts.tv_sec * 1000 + (int64_t)ts.tv_nsec / 1000000;
    sim->salt =
        sl_sim_rng_mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid());
    atomic_init(&sim->request_seq, 0);
    *out = sim;
    return SL_OK;
}

void sl_sim_free(sl_sim_t *sim)
{
    if (sim == NULL)
        return;
    for (size_t i = 0; i < sim->cfg->n_deps; i++)
        deployment_free(&sim->deps[i]);
    free(sim->deps);
    pthread_mutex_destroy(&sim->lock);
    sl_sim_config_free(sim->cfg);
    free(sim);
}

/* ---- Response building ------------------------------------------------------------------ */

/* ---- Requests --------------------------------------------------------------------------- */

/* ---- Decisions -------------------------------------------------------------------------- */

void sl_sim_finish(sl_sim_t *sim, sl_sim_response_t *resp)
{
    if (resp == NULL || resp->in_flight_on == NULL)
        return;
    pthread_mutex_lock(&sim->lock);
    sl_sim_deployment_t *dep = resp->in_flight_on;
    dep->in_flight--;
    sim->in_flight--;
    if (resp->output_refund > 0) {
        sl_sim_limiter_refund(dep->lim, SL_SIM_DIM_OUTPUT_TOKENS, resp->output_refund);
        /* A refund for a charge made before POST /stats/reset belongs to the zeroed counters. */
        if (resp->stats_epoch == sim->stats_epoch)
            dep->count.output_tokens_charged -= resp->output_refund;
    }
    pthread_mutex_unlock(&sim->lock);
    resp->in_flight_on = NULL;
}

/* ---- Response accessors ----------------------------------------------------------------- */

/* ---- Helpers ---------------------------------------------------------------------------- */
