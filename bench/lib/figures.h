/* figures.h - every figure of one bench/compare run, computed after it from its jobs and the
 * simulator's samples: utilisation of the binding limit in the steady window, the simulator's
 * 429s, outcomes, retries, queue waits and latencies per class, throughput, Jain's index,
 * estimated against real tokens, streams, and the series the plots draw. */
#ifndef SL_BENCH_FIGURES_H
#define SL_BENCH_FIGURES_H

#include <jansson.h>

#include "run.h"

/* The figures of run as a JSON object (the "figures" of its report; the caller frees it), or
 * NULL when out of memory. */
json_t *b_figures(const b_run_t *run);

#endif
