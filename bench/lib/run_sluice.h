/* run_sluice.h - the sluice side of bench/compare: the workload through a fresh stack (the
 * five real processes), each job produced to sluice.requests at its due time, its result read
 * from sluice.results, its chunks from sluice.stream. */
#ifndef SL_BENCH_RUN_SLUICE_H
#define SL_BENCH_RUN_SLUICE_H

#include "run.h"

/* Runs run's workload through a fresh sluice stack in the temporary directory; fills in the
 * jobs, the samples and run->extra (the scheduler's counters, peak RSS, unclean stops,
 * duplicate results). Returns NULL, or why it could not measure (a static string). */
const char *b_run_sluice(b_run_t *run);

#endif
