/* sim_internal.h - the state the simulator's modules share: the simulator, its deployments,
 * their counters and rings, and a response under construction. Private to ops/sim; sim.h is the
 * public interface.
 *
 * The idea to hold first: one mutex (sl_sim_t.lock) guards everything mutable here (the
 * deployments' limiters, key tables, counters and rings, and the simulator's totals) except a
 * response, which belongs to the one request that builds it. The modules, lowest first: rng,
 * config, stats, respond, request, faults, admit, endpoints, and sim.c (life cycle); none calls a
 * module above it. Below them all are the parts that know nothing of the simulator: limiter.c,
 * idem.c and the API formats (wire.h).
 */
#ifndef SL_SIM_INTERNAL_H
#define SL_SIM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "idem.h"
#include "limiter.h"
#include "sim.h"
#include "wire.h"

#define SL_SIM_BODY_CAP 4096
#define SL_SIM_MAX_HEADERS 32
#define SL_SIM_RING_CAP 1000       /* 429s with a Retry-After, and arrivals, kept per deployment */
#define SL_SIM_STREAM_RING_CAP 100 /* recent streams kept */
#define SL_SIM_RING_KEY_MAX 100    /* characters of an Idempotency-Key kept in a ring entry */
#define SL_SIM_REQUEST_ID_LEN 40

/* What GET /stats counts per deployment; POST /stats/reset zeroes it. */
typedef struct {
    int64_t admitted;
    int64_t refused;
    int64_t refused_by[SL_SIM_DIM_COUNT_]; /* the dimension each refusal reported */
    int64_t refused_rolling; /* of those, refused by a rolling minute rather than a bucket */
    int64_t replayed;
    int64_t errors;
    int64_t tokens_charged;
    int64_t input_tokens_charged;  /* what ITPM is charged: prompt minus cache reads */
    int64_t output_tokens_charged; /* what OTPM is charged, net of refunds */
    int64_t prompt_tokens;
    int64_t completion_tokens;
    int64_t cached_tokens;
    int64_t first_admit_ms; /* -1 = none since the last reset */
    int64_t last_admit_ms;
    int64_t streams;               /* admitted requests answered as a stream */
    int64_t tool_calls;            /* admitted requests answered with a tool call */
    int64_t fault_429;             /* injected 429s (rate_limit_share) */
    int64_t fault_429_retry_after; /* of those, with a Retry-After */
    int64_t fault_503;             /* injected 503/529s: unavailable windows, overloaded_share */
    int64_t fault_spend_limit;     /* refusals past spend_limit_after */
    int64_t fault_acceleration;    /* 429s for growing faster than the acceleration limit */
    int64_t dropped;               /* connections closed early: drops and cut streams */
    int64_t slow;                  /* answers delayed by slow_ms */
    int64_t stalled;               /* streams silent for stream_stall_ms after a few events */
    int64_t early_retries; /* a key came back before the Retry-After it was given had passed */
    int64_t last_first_chunk_ms; /* Unix ms of the last stream's first event; -1 = none */
} sl_sim_counters_t;

/* What GET /stats counts of a deployment's batches (its "batch" object). POST /stats/reset
 * zeroes it, except enqueued_tokens_now, which is state; the peak restarts from it. */
typedef struct {
    int64_t batches_created;    /* batches given an id (OpenAI's failed ones included) */
    int64_t creates_refused;    /* creates answered 429 */
    int64_t failed_token_limit; /* creates failed or refused by the enqueued-token limit */
    int64_t lines;              /* lines of the batches enqueued (not failed at creation) */
    int64_t lines_succeeded;
    int64_t lines_errored; /* answered with an error: 500s drawn, and bodies the API refuses */
    int64_t lines_expired;
    int64_t lines_cancelled;
    int64_t lines_duplicate; /* ran although their custom id had succeeded in an earlier batch */
    int64_t enqueued_tokens_now;
    int64_t enqueued_tokens_peak;
} sl_sim_batch_counters_t;

/* A deployment's batches and uploaded files (batch.c). */
typedef struct sl_sim_batch_state sl_sim_batch_state_t;

/* A 429 that announced a Retry-After. */
typedef struct {
    int64_t sent_ms; /* Unix ms */
    int64_t retry_after_ms;
    bool fault; /* injected rather than a real refusal */
    char key[SL_SIM_RING_KEY_MAX + 1];
} sl_sim_retry_entry_t;

/* A request that reached a deployment's endpoint. */
typedef struct {
    int64_t at_ms; /* Unix ms */
    int status;
    char key[SL_SIM_RING_KEY_MAX + 1];
} sl_sim_arrival_t;

/* A streamed answer, for GET /stats' recent_streams. */
typedef struct {
    uint64_t serial; /* 0 = empty slot */
    char request_id[SL_SIM_REQUEST_ID_LEN];
    const char *deployment;
    int64_t first_chunk_ms; /* Unix ms; -1 = not sent yet */
    int64_t chunks;         /* events handed to the network so far */
    bool cut;
} sl_sim_stream_entry_t;

/* A ring of up to cap entries: next is where the next one goes, len how many are held. */
typedef struct {
    size_t next;
    size_t len;
} sl_sim_ring_t;

/* A deployment: its config and everything that changes while it serves. */
typedef struct {
    const sl_sim_dep_config_t *cfg;
    sl_sim_limiter_t *lim;
    sl_sim_idem_t *idem;
    sl_sim_idem_t *retry_keys; /* Idempotency-Key -> time (sim ms) before which it is early */
    sl_sim_counters_t count;
    int64_t in_flight;
    int64_t admitted_total;        /* since start, never reset: for spend_limit_after */
    int64_t first_request_ms;      /* of the first validated request (sim time); -1 = none yet */
    int64_t accel_window_start_ms; /* the acceleration limit's current window */
    int64_t accel_cur, accel_prev; /* admitted in it, and in the one before */
    uint64_t rng;                  /* fault draws (splitmix64 state) */
    sl_sim_retry_entry_t *retries; /* SL_SIM_RING_CAP */
    sl_sim_ring_t retries_ring;
    sl_sim_arrival_t *arrivals; /* SL_SIM_RING_CAP */
    sl_sim_ring_t arrivals_ring;
    sl_sim_batch_state_t *batch; /* its batch APIs' state */
    sl_sim_batch_counters_t batch_count;
} sl_sim_deployment_t;

/* What an admitted completion was: enough to rebuild its answer exactly for a replay. */
typedef struct {
    uint64_t seq; /* the ids derive from it */
    int64_t created_s;
    int64_t prompt_tokens;
    int64_t completion_tokens;
    int64_t cached_tokens;
    int64_t processing_ms;
    bool hit_max_tokens;
    char tool_name[SL_SIM_TOOL_NAME_MAX + 1]; /* "" = a text reply */
} sl_sim_completion_t;

/* The simulator: the config it owns, its deployments and what they share. */
struct sl_sim {
    sl_sim_config_t *cfg;
    sl_sim_deployment_t *deps;
    pthread_mutex_t lock;
    int64_t in_flight;    /* across deployments; under lock */
    uint64_t seq;         /* completions so far; under lock */
    uint64_t stats_epoch; /* POST /stats/reset calls so far; under lock */
    atomic_uint_fast64_t request_seq;
    uint64_t salt; /* makes ids differ between runs */
    int64_t origin_ms;
    int64_t origin_unix_s;
    int64_t origin_unix_ms;                                /* the wall clock at origin_ms */
    sl_sim_stream_entry_t streams[SL_SIM_STREAM_RING_CAP]; /* under lock */
    sl_sim_ring_t streams_ring;
    uint64_t stream_serial;
    char host[128]; /* host:port of the listening address, for absolute URLs; "" = unknown */
};

/* One response header. */
typedef struct {
    char name[48]; /* fits anthropic-ratelimit-output-tokens-remaining */
    char value[64];
} sl_sim_header_t;

/* A response, from sl_sim_handle to sl_sim_response_free. */
struct sl_sim_response {
    int status;
    char *body; /* SL_SIM_BODY_CAP bytes unless replaced by a larger /stats body */
    size_t body_len;
    sl_sim_header_t headers[SL_SIM_MAX_HEADERS];
    size_t n_headers;
    int64_t delay_ms;
    sl_sim_deployment_t *in_flight_on; /* set while this 200 counts as in flight */
    int64_t output_refund;             /* OTPM tokens to give back when it is finished */
    uint64_t stats_epoch;              /* of the counters its charges went to */
    char request_id[SL_SIM_REQUEST_ID_LEN];
    int api; /* the deployment's API, or -1 for the simulator's own endpoints */
    /* A stream: events to send, each at its time; then, when cut, the connection is closed. */
    sl_sim_event_t *events;
    int64_t *event_at_ms;
    size_t n_events;        /* to send: all of them, or those before the cut */
    bool dropped;           /* close the connection instead of completing the answer */
    uint64_t stream_serial; /* its recent_streams entry; 0 = none */
    sl_sim_deployment_t *stream_dep;
};

/* The Unix time in ms of a simulator time. */
static inline int64_t sl_sim_unix_ms(const sl_sim_t *sim, int64_t now_ms)
{
    return sim->origin_unix_ms + (now_ms - sim->origin_ms);
}

#endif
