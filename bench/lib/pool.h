/* pool.h - the configs of a benchmark against one simulated deployment, "pool": the
 * simulator's, and sluice's with one route "chat" to that deployment, the benchmark's tenants,
 * a key for each, and the tenant "warm" for the warm-up jobs.
 *
 * The idea to hold first: both sides get the same limits (RPM, and either TPM counted as
 * prompt + max_tokens or, Anthropic-style, ITPM and OTPM counting the generated output;
 * enforcement slices, a daily quota, a rolling minute), so sluice's ledger plans against what
 * the simulator enforces. bench/compare and bench/scenarios write their configs here. */
#ifndef SL_BENCH_POOL_H
#define SL_BENCH_POOL_H

#include <stdint.h>

enum { B_POOL_MAX_TENANTS = 8 };

typedef struct {
    const char *name;
    int64_t weight;
    double guarantee; /* share of the pool guaranteed; 0: none (the key is not written) */
} b_pool_tenant_t;

typedef struct {
    const char *bench; /* names the keys: "sk-<bench>-<tenant>", "<bench>-provider-key" */
    double minute_ms;
    int rpm, tpm, slices_per_minute;
    /* Anthropic-style when either is set: input and output tokens per minute (OTPM counting
     * the generated output, Anthropic's rate-limit headers) instead of TPM. */
    int itpm, otpm;
    long rpd;           /* a daily request quota; 0: none */
    int rolling_minute; /* the simulator also refuses what would take the exact trailing
                         * minute over a limit ("rolling_minute"); sluice is not told */
    /* The simulator's replies. */
    double ms_per_token;
    int output_min, output_max;
    char faults[256]; /* the simulator's "faults" object as JSON text; "": none */
    /* sluice */
    int sim_port;
    int interactive_deadline_ms;
    int metrics_port; /* the scheduler's /metrics, and the other daemons' on free ports (the
                       * admin API off); 0: the config's defaults */
    int ntenants;
    b_pool_tenant_t tenants[B_POOL_MAX_TENANTS];
} b_pool_t;

/* Writes the simulator's config into the temporary directory; returns its path (caller
 * frees). */
char *b_pool_sim_config(const b_pool_t *pool);

/* Writes sluice's config (and the provider key file it names) into the temporary directory;
 * returns its path (caller frees). */
char *b_pool_sluice_config(const b_pool_t *pool);

#endif
