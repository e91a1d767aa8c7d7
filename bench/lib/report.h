/* report.h - what bench/compare prints and writes for one scenario: the table of every
 * system's figures (one line each, and a second line for the figures some scenarios add), and
 * the JSON document with the setup and every run's report. */
#ifndef SL_BENCH_REPORT_H
#define SL_BENCH_REPORT_H

#include <jansson.h>

#include "run.h"
#include "scenario.h"

/* Prints sc's table on stdout: one row per report in runs (b_run_child's), and the legend. */
void b_report_table(const b_scenario_t *sc, json_t *runs);

/* Writes sc's document to path: the scenario, when it started and how long it took, the setup
 * (limits, minute, slices, the baseline's split) and runs (not taken over). Returns 0, or -1
 * when it cannot be written. */
int b_report_write(const char *path, const b_scenario_t *sc, const b_setup_t *setup,
                   const char *split, long long started_unix, double wall_s, json_t *runs);

#endif
