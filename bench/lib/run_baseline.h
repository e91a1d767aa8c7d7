/* run_baseline.h - the baseline side of bench/compare: one bench/baseline client process per
 * tenant (the OpenAI cookbook's client-side limiter), all started at the same instant against
 * a fresh simulator, each reading its tenant's requests file and writing what became of each
 * request. */
#ifndef SL_BENCH_RUN_BASELINE_H
#define SL_BENCH_RUN_BASELINE_H

#include "run.h"

/* Runs run's workload through the baseline's clients with run->sys's share of the limits;
 * fills in the jobs, the samples and run->extra (the clients' summaries and limits, peak RSS).
 * Returns NULL, or why it could not measure (a static string). */
const char *b_run_baseline(b_run_t *run);

#endif
