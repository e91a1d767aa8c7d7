/* stats.h - the small statistics every benchmark needs: a seeded generator (so every system
 * in a comparison gets the same workload), percentiles, Jain's fairness index, and sums read
 * from a process's Prometheus metrics. */
#ifndef SL_BENCH_STATS_H
#define SL_BENCH_STATS_H

#include <jansson.h>
#include <stdint.h>

/* Seeds the generator (splitmix64); the same seed gives the same draws. */
void b_rng_seed(uint64_t seed);
/* A uniform draw in [0, 1). */
double b_rng_uniform(void);

/* qsort comparator for doubles, ascending. */
int b_cmp_double(const void *a, const void *b);
/* Nearest-rank percentile (p in 0..1) of sorted values; NAN when n is 0. */
double b_pct(const double *sorted, int n, double p);
/* Jain's index (Σx)² / (n·Σx²) over n values; NAN when all are 0. */
double b_jain(const double *x, int n);
/* A JSON number, or null for a value that is not finite (JSON has no NaN). */
json_t *b_jnum(double v);
/* The number at obj's key; NAN when it is absent or not a number. */
double b_jget(json_t *obj, const char *key);

/* The sum over every series (all label sets) of a metric in a Prometheus /metrics text; NAN
 * when the metric is not there. */
double b_metric_sum(const char *text, const char *name);

#endif
