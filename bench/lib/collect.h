/* collect.h - what the benchmarks read from outside the systems they measure: the simulator's
 * counters (GET /stats) and a daemon's Prometheus counters (GET /metrics).
 *
 * The idea to hold first: a figure that says what the provider admitted or refused comes from
 * the simulator, never from the system measured; the scheduler's own counters are read only
 * for what only it knows (what it reserved and settled). */
#ifndef SL_BENCH_COLLECT_H
#define SL_BENCH_COLLECT_H

#include <stdint.h>

/* The simulator's counters at one instant, each summed over its deployments. */
typedef struct {
    double sim_ms;  /* the simulator's clock (now_ms) */
    int64_t tokens; /* tokens_charged: what its TPM counted */
    int64_t admitted, refused, fault_429, fault_503, errors, replayed, dropped, in_flight;
    int64_t refused_rolling; /* of refused: by the rolling minute (sim "rolling_minute") */
    /* The batch APIs (sim "batch"): batches created, lines that succeeded, lines of a job that
     * had already succeeded (run twice) */
    int64_t batches, batch_lines_ok, batch_lines_duplicate;
} b_sim_stats_t;

/* Reads the simulator's /stats at url into s. Returns 0, or -1 when it does not answer (s is
 * then left as it was). */
int b_sim_stats_read(const char *url, b_sim_stats_t *s);

/* Reads http://127.0.0.1:<port>/metrics and sets out[i] to the sum over every series of
 * names[i] (NAN when the metric is not there). Returns 0, or -1 when nothing answered (out is
 * then all NAN). */
int b_metrics_scrape(int port, const char *const names[], int n, double out[]);

#endif
