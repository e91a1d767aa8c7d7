/* plot.h - bench/compare's picture of one scenario, with gnuplot when it is installed: per
 * system, the tokens per second the simulator admitted against the limit, and the queue wait
 * of each class over time. */
#ifndef SL_BENCH_PLOT_H
#define SL_BENCH_PLOT_H

#include <jansson.h>

#include "scenario.h"

/* Plots the series of every report in runs into the PNG png (minute_ms: the run's minute, for
 * the limit line; xmax_s: the x axis's end). Returns 0, or -1 when gnuplot is missing or fails
 * (said on stdout). */
int b_plot(const b_scenario_t *sc, json_t *runs, double minute_ms, double xmax_s, const char *png);

#endif
