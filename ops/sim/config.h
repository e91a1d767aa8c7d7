/* config.h - the simulator's configuration as its modules read it: per deployment its API,
 * limits, counting rules, response timing, rate-limit header style and injected faults.
 *
 * The idea to hold first: the config is parsed once, strictly (config.c; its functions are
 * declared in sim.h), and never changes afterwards, so every module reads these structs without
 * taking the simulator's lock.
 */
#ifndef SL_SIM_CONFIG_H
#define SL_SIM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim.h"
#include "wire.h"

/* Which rate-limit headers a deployment sends. */
typedef enum {
    SL_SIM_HEADERS_OPENAI = 0, /* x-ratelimit-{limit,remaining,reset}-{requests,tokens} */
    SL_SIM_HEADERS_ANTHROPIC,  /* anthropic-ratelimit-* */
    SL_SIM_HEADERS_AZURE,      /* x-ratelimit-{limit,remaining}-{requests,tokens} */
    SL_SIM_HEADERS_NONE,       /* Gemini: none, the wait is in the body */
} sl_sim_header_style_t;

typedef struct {
    int64_t from_ms; /* since the simulator started, inclusive */
    int64_t to_ms;   /* exclusive */
} sl_sim_window_t;

/* Injected faults of one deployment ("faults" in the config). */
typedef struct {
    double rate_limit_share;  /* of otherwise admitted requests: 429 anyway, uncharged */
    double retry_after_share; /* of those 429s: with a Retry-After */
    int64_t retry_after_ms;
    sl_sim_window_t *windows; /* every request inside one gets 503 (Anthropic 529) */
    size_t n_windows;
    bool windows_from_first; /* windows count from the first request, not the start */
    double overloaded_share; /* of requests: 503 (529) at random */
    double slow_share;       /* of admitted requests: slow_ms later */
    int64_t slow_ms;
    double drop_share;         /* of admitted non-streamed requests: connection closed */
    double stream_cut_share;   /* of admitted streams: cut after a few events */
    double stream_stall_share; /* of admitted streams: silent after a few events, ... */
    int64_t stream_stall_ms;   /* ... for this long, then the rest */
    int64_t spend_limit_after; /* admitted requests before the spend cap is hit; -1 = never */
    /* Acceleration limit (Anthropic's "sharp increases" 429s): in each window of
     * accel_window_ms, at most max(accel_floor, admitted in the previous window x
     * (1 + accel_growth)) requests are admitted; the rest get a 429. 0 = off. */
    int64_t accel_window_ms;
    double accel_growth;
    int64_t accel_floor;
    bool has_seed;
    uint64_t seed;
} sl_sim_faults_t;

/* The batch APIs of one deployment ("batch" in the config; see batch.h). */
typedef struct {
    int64_t turnaround_ms;      /* from creation to the end of a batch */
    int64_t enqueued_tokens;    /* prompt tokens of batches not yet ended; 0 = unlimited */
    int64_t creates_per_minute; /* batch creations per minute_ms; 0 = unlimited */
    double line_error_share;    /* of lines: answered with a 500 */
    double expire_share;        /* of lines: expire instead of running */
    int64_t max_batches;        /* batches (and uploaded files) kept */
} sl_sim_batch_config_t;

typedef struct {
    char *name;  /* first URL segment: /<name>/... */
    char *model; /* echoed in bodies */
    sl_sim_api_t api;
    int64_t rpm; /* 0 = unlimited */
    int64_t tpm; /* 0 = unlimited */
    int64_t slices_per_minute;
    bool tpm_sum; /* charge prompt + max_tokens instead of their max */
    int64_t default_max_tokens;
    bool count_refused; /* refused requests still consume RPM */
    double ttft_ms;
    double ms_per_token;
    int64_t output_min;
    int64_t output_max;
    char *api_key;              /* NULL: any non-empty credential */
    int64_t itpm;               /* input tokens per minute, cache reads excluded; 0 = unlimited */
    int64_t otpm;               /* output tokens per minute; 0 = unlimited */
    bool otpm_max_tokens;       /* charge max_tokens up front, refund the unused part when sent */
    double cache_hit_share;     /* share of request bodies that hit the prompt cache */
    double cache_read_fraction; /* share of a hit's prompt that is read from the cache */
    int64_t rpd;                /* requests per day window; 0 = unlimited */
    int64_t day_ms;             /* length of a day window */
    sl_sim_header_style_t headers;
    double tool_use_share; /* share of request bodies offering tools that get a tool call */
    int64_t stream_chunks; /* text pieces of a streamed reply */
    bool rolling_minute;   /* also enforce the per-minute limits over a rolling minute */
    sl_sim_faults_t faults;
    sl_sim_batch_config_t batch;
} sl_sim_dep_config_t;

struct sl_sim_config {
    int64_t minute_ms;
    int64_t max_pending;      /* in-flight 200s across deployments before 503 */
    int64_t idempotency_keys; /* keys remembered per deployment */
    uint64_t seed;            /* of the fault draws, unless a deployment sets its own */
    size_t n_deps;
    sl_sim_dep_config_t *deps;
};

#endif
