/* workload.h - the jobs of a bench/compare run: made from the scenario with a seeded
 * generator, so that every system gets the same jobs at the same times, and written out as the
 * baseline's request files.
 *
 * The idea to hold first: the workload is made before the run starts and is fixed: a system
 * decides when a job starts, never when it is submitted or what it asks for. */
#ifndef SL_BENCH_WORKLOAD_H
#define SL_BENCH_WORKLOAD_H

#include "run.h"

/* Makes every job of run's scenario into run->jobs (run->njobs of them; the caller frees
 * run->jobs), sorted by due time: backlogs at 0, round-robin over the tenants, then each
 * tenant's Poisson arrivals, with the rate of the burst window inside it. Draws from the
 * generator as seeded by the caller. Returns 0, or -1 when out of memory or when the workload
 * would be too large (said on stderr). */
int b_workload_make(b_run_t *run);

/* The jobs whose clients give up, in the order of their cancels (a malloc'd array of job
 * indices, the caller frees it; NULL when out of memory); *n gets their number. */
int *b_workload_cancel_order(const b_run_t *run, int *n);

/* Writes each tenant's requests file for the baseline (its jobs due in the measurement, in
 * due order, with the same bodies sluice gets) into the temporary directory; paths[t] gets
 * tenant t's. Returns 0, or -1 on a write error. */
int b_workload_write_requests(const b_run_t *run, char paths[][512]);

#endif
