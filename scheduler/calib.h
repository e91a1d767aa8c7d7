/* calib.h - what the scheduler learns about demand from real usage (DESIGN §5).
 *
 * Ingest counts what is deterministic (input tokens from the request, its max_tokens); the
 * scheduler sees every usage event, so it learns here and applies what it learned when it
 * reserves:
 *   - output: min(max_tokens, the larger of the p95 of the recent real outputs of the route
 *     and class and max_tokens times the p95 of their real output / max_tokens); until enough
 *     outputs were seen, max_tokens itself (the conservative default). The ratio keeps a
 *     tenant whose long answers come with a large max_tokens from being held to the outputs
 *     of the class's short answers;
 *   - input: the estimate times a correction factor per route that follows the 95th percentile
 *     of real/estimated input, moved by bounded steps so one odd request cannot skew it, and
 *     kept within [SL_CALIB_MIN_FACTOR, SL_CALIB_MAX_FACTOR].
 * It also counts estimated against real tokens, and what over-reservation held back for nothing.
 */
#ifndef SL_CALIB_H
#define SL_CALIB_H

#include <stdint.h>

typedef struct sl_calib sl_calib_t;

#define SL_CALIB_WINDOW 256       /* recent outputs kept per route and class */
#define SL_CALIB_MIN_SAMPLES 32   /* outputs needed before the p95 replaces max_tokens */
#define SL_CALIB_MIN_FACTOR 0.5
#define SL_CALIB_MAX_FACTOR 2.0

/* nroutes x nclasses cells; NULL when out of memory. Free with sl_calib_free. */
sl_calib_t *sl_calib_new(int nroutes, int nclasses);
void sl_calib_free(sl_calib_t *c);

/* The output tokens to reserve for a job of route/class asking for max_tokens. */
int64_t sl_calib_output(const sl_calib_t *c, int route, int cls, int64_t max_tokens);
/* The input tokens to reserve for a job whose deterministic estimate is est_input. */
int64_t sl_calib_input(const sl_calib_t *c, int route, int64_t est_input);
/* The current input correction factor of a route. */
double sl_calib_input_factor(const sl_calib_t *c, int route);

/* Learns from one real usage: the estimate ingest made for its input, the real input, the
 * job's max_tokens (<= 0: unknown) and its real output. Negative values are ignored. */
void sl_calib_observe(sl_calib_t *c, int route, int cls, int64_t est_input, int64_t real_input,
                      int64_t max_tokens, int64_t real_output);

#endif
