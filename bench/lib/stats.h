/* stats.h - the small statistics every benchmark needs: a seeded generator (so every system
 * in a comparison gets the same workload), percentiles and Jain's fairness index. */
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

#endif
