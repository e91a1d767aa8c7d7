/* test_calib.c - behaviour of what the scheduler learns from real usage (scheduler/calib.h): the
 * output reservation (max_tokens until enough outputs were seen, then the p95 of the recent
 * ones), the input correction factor (bounded steps, bounded range, settling at the 95th
 * percentile of real/estimated input), and cells that do not exist.
 *
 * Randomness comes from a fixed-seed generator, so every run sees the same numbers.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "../scheduler/calib.h"

static uint64_t rng_state;

static uint64_t rnd(void)
{
    /* xorshift64*: deterministic for a seed */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static double rnd_unit(void)
{
    return (double)(rnd() >> 11) / 9007199254740992.0;
}

static sl_calib_t *new_calib(int nroutes, int nclasses)
{
    sl_calib_t *c = sl_calib_new(nroutes, nclasses);
    ck_assert_ptr_nonnull(c);
    return c;
}

/* An output observation only (no input estimate). */
static void observe_output(sl_calib_t *c, int route, int cls, int64_t output)
{
    sl_calib_observe(c, route, cls, 0 /*est_input*/, -1 /*real_input*/, 0 /*max_tokens*/,
                     output);
}

/* An input observation only. */
static void observe_input(sl_calib_t *c, int route, int64_t est, int64_t real)
{
    sl_calib_observe(c, route, 0, est, real, 0, -1 /*real_output*/);
}

/* ---- output ------------------------------------------------------------------------------- */

START_TEST(output_is_max_tokens_until_enough_outputs_were_seen)
{
    sl_calib_t *c = new_calib(2, 2);
    ck_assert_int_eq(sl_calib_output(c, 0, 0, 4096), 4096);
    for (int i = 1; i < SL_CALIB_MIN_SAMPLES; i++) {
        observe_output(c, 0, 0, 100);
        ck_assert_msg(sl_calib_output(c, 0, 0, 4096) == 4096, "after %d outputs: %lld", i,
                      (long long)sl_calib_output(c, 0, 0, 4096));
    }
    observe_output(c, 0, 0, 100);
    ck_assert_int_eq(sl_calib_output(c, 0, 0, 4096), 100);
    /* never more than the job asked for */
    ck_assert_int_eq(sl_calib_output(c, 0, 0, 64), 64);
    ck_assert_int_eq(sl_calib_output(c, 0, 0, 100), 100);
    /* the other cells learned nothing */
    ck_assert_int_eq(sl_calib_output(c, 0, 1, 4096), 4096);
    ck_assert_int_eq(sl_calib_output(c, 1, 0, 4096), 4096);
    sl_calib_free(c);
}
END_TEST

START_TEST(output_is_the_p95_of_the_recent_window)
{
    sl_calib_t *c = new_calib(1, 1);
    /* 1..SL_CALIB_WINDOW in a shuffled order: the p95 is about 0.95 x SL_CALIB_WINDOW */
    int64_t v[SL_CALIB_WINDOW];
    for (int i = 0; i < SL_CALIB_WINDOW; i++)
        v[i] = i + 1;
    rng_state = 12345;
    for (int i = SL_CALIB_WINDOW - 1; i > 0; i--) {
        int j = (int)(rnd() % (uint64_t)(i + 1));
        int64_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    for (int i = 0; i < SL_CALIB_WINDOW; i++)
        observe_output(c, 0, 0, v[i]);
    int64_t p95 = sl_calib_output(c, 0, 0, INT64_MAX);
    ck_assert_int_ge(p95, (int64_t)(0.94 * SL_CALIB_WINDOW));
    ck_assert_int_le(p95, (int64_t)ceil(0.96 * SL_CALIB_WINDOW));
    /* one rare huge output does not move it */
    observe_output(c, 0, 0, 1000000);
    for (int i = 0; i < SL_CALIB_MIN_SAMPLES; i++)
        observe_output(c, 0, 0, v[i]);
    ck_assert_int_le(sl_calib_output(c, 0, 0, INT64_MAX), (int64_t)ceil(0.96 * SL_CALIB_WINDOW));
    /* outputs too large for the window's counters are held as the largest they can */
    sl_calib_t *big = new_calib(1, 1);
    for (int i = 0; i < SL_CALIB_MIN_SAMPLES; i++)
        observe_output(big, 0, 0, INT64_C(1) << 40);
    ck_assert_int_eq(sl_calib_output(big, 0, 0, INT64_MAX), INT32_MAX);
    ck_assert_int_eq(sl_calib_output(big, 0, 0, 4096), 4096);
    sl_calib_free(big);
    sl_calib_free(c);
}
END_TEST

START_TEST(p95_follows_a_shift_in_outputs_within_a_window)
{
    sl_calib_t *c = new_calib(1, 1);
    rng_state = 777;
    for (int i = 0; i < SL_CALIB_WINDOW; i++)
        observe_output(c, 0, 0, 90 + (int64_t)(rnd() % 21)); /* 90..110 */
    int64_t before = sl_calib_output(c, 0, 0, INT64_MAX);
    ck_assert_int_ge(before, 100);
    ck_assert_int_le(before, 110);
    /* outputs grow tenfold: within SL_CALIB_MIN_SAMPLES (an eighth of the window, well over 5 %)
     * the p95 is among the new ones */
    for (int i = 0; i < SL_CALIB_MIN_SAMPLES; i++)
        observe_output(c, 0, 0, 990 + (int64_t)(rnd() % 21));
    int64_t up = sl_calib_output(c, 0, 0, INT64_MAX);
    ck_assert_msg(up >= 990 && up <= 1010, "p95 %lld after the shift up", (long long)up);
    /* and back down: once a whole window of small outputs was seen, the large ones are gone */
    for (int i = 0; i < SL_CALIB_WINDOW; i++)
        observe_output(c, 0, 0, 90 + (int64_t)(rnd() % 21));
    int64_t down = sl_calib_output(c, 0, 0, INT64_MAX);
    ck_assert_msg(down >= 100 && down <= 110, "p95 %lld after the shift down", (long long)down);
    sl_calib_free(c);
}
END_TEST

/* ---- input -------------------------------------------------------------------------------- */

/* The shapes benchmark's class: two thirds of the jobs ask for 50 - 200 tokens and use them
 * all, a third ask for 2,000 - 4,000 and use about 80 % (at most 4,000). The p95 of outputs
 * alone (about 3,500) would hold a 4,000-token job below what it generates (the provider's
 * OTPM then refuses calls); with the ratio it is reserved what such jobs use. */
START_TEST(a_long_answer_is_not_held_to_the_class_s_short_outputs)
{
    sl_calib_t *c = new_calib(1, 1);
    for (int i = 0; i < SL_CALIB_WINDOW; i++) {
        int64_t max = i % 3 == 2 ? 2000 + (i * 37) % 2000 : 50 + (i * 13) % 150;
        int64_t out = i % 3 == 2 ? (int64_t)(0.8 * (double)max) + (i % 5) * 90 : max;
        sl_calib_observe(c, 0, 0, 0, -1, max, out > max ? max : out);
    }
    int64_t big = sl_calib_output(c, 0, 0, 4000);
    ck_assert_msg(big >= 3900, "a 4,000-token job is reserved %lld", (long long)big);
    /* Small jobs still get their max_tokens (they use it), never more. */
    ck_assert_int_eq(sl_calib_output(c, 0, 0, 120), 120);
    /* A class whose outputs are a small part of max_tokens keeps its p95. */
    sl_calib_t *d = new_calib(1, 1);
    for (int i = 0; i < SL_CALIB_WINDOW; i++)
        sl_calib_observe(d, 0, 0, 0, -1, 4096, 150 + i % 50);
    ck_assert_int_le(sl_calib_output(d, 0, 0, 4096), 200);
    ck_assert_int_ge(sl_calib_output(d, 0, 0, 4096), 190);
    sl_calib_free(c);
    sl_calib_free(d);
}
END_TEST

START_TEST(input_factor_moves_by_bounded_steps)
{
    sl_calib_t *huge = new_calib(1, 1);
    sl_calib_t *slight = new_calib(1, 1);
    ck_assert_double_eq(sl_calib_input_factor(huge, 0), 1.0);
    ck_assert_int_eq(sl_calib_input(huge, 0, 1000), 1000);
    /* one enormous outlier moves the factor exactly as far as a ratio just above it */
    observe_input(huge, 0, 100, 1000000000);
    observe_input(slight, 0, 100, 101);
    double step_up = sl_calib_input_factor(huge, 0) - 1.0;
    ck_assert_double_gt(step_up, 0);
    ck_assert_double_le(step_up, 0.05);
    ck_assert_double_eq(sl_calib_input_factor(huge, 0), sl_calib_input_factor(slight, 0));
    /* and down: a request that used nothing moves it one small step */
    sl_calib_t *zero = new_calib(1, 1);
    observe_input(zero, 0, 100, 0);
    double step_down = 1.0 - sl_calib_input_factor(zero, 0);
    ck_assert_double_gt(step_down, 0);
    ck_assert_double_lt(step_down, step_up); /* it follows a high percentile: up is faster */
    /* the reservation is the estimate times the factor, rounded up */
    double f = sl_calib_input_factor(huge, 0);
    ck_assert_int_eq(sl_calib_input(huge, 0, 1000), (int64_t)ceil(1000 * f));
    ck_assert_int_ge(sl_calib_input(zero, 0, 1000), (int64_t)(1000 * (1.0 - step_down)));
    sl_calib_free(zero);
    sl_calib_free(slight);
    sl_calib_free(huge);
}
END_TEST

START_TEST(input_factor_stays_within_its_bounds)
{
    sl_calib_t *c = new_calib(2, 1);
    for (int i = 0; i < 5000; i++) {
        observe_input(c, 0, 10, 100000); /* always far more */
        observe_input(c, 1, 100000, 0);  /* always nothing */
        double hi = sl_calib_input_factor(c, 0);
        double lo = sl_calib_input_factor(c, 1);
        ck_assert_double_le(hi, SL_CALIB_MAX_FACTOR);
        ck_assert_double_ge(hi, SL_CALIB_MIN_FACTOR);
        ck_assert_double_le(lo, SL_CALIB_MAX_FACTOR);
        ck_assert_double_ge(lo, SL_CALIB_MIN_FACTOR);
    }
    ck_assert_double_eq_tol(sl_calib_input_factor(c, 0), SL_CALIB_MAX_FACTOR, 1e-9);
    ck_assert_double_eq_tol(sl_calib_input_factor(c, 1), SL_CALIB_MIN_FACTOR, 1e-9);
    /* from the ceiling it comes back down */
    for (int i = 0; i < 5000; i++)
        observe_input(c, 0, 1000, 1000);
    ck_assert_double_lt(sl_calib_input_factor(c, 0), 1.1);
    sl_calib_free(c);
}
END_TEST

/* Feeds n ratios drawn uniformly from [lo, hi] (estimate 1000) and returns the mean factor over
 * the last quarter of them. */
static double settle_factor(sl_calib_t *c, int route, double lo, double hi, int n)
{
    double sum = 0;
    int counted = 0;
    for (int i = 0; i < n; i++) {
        double ratio = lo + (hi - lo) * rnd_unit();
        observe_input(c, route, 1000, (int64_t)llround(ratio * 1000));
        if (i >= n - n / 4) {
            sum += sl_calib_input_factor(c, route);
            counted++;
        }
    }
    return sum / counted;
}

START_TEST(input_factor_settles_near_the_95th_percentile_of_real_over_estimate)
{
    static const struct {
        double lo, hi;
    } dist[] = {{0.8, 1.2}, {0.5, 1.0}, {1.0, 1.6}, {0.95, 1.05}};
    rng_state = 0x5eed;
    for (size_t i = 0; i < sizeof dist / sizeof dist[0]; i++) {
        sl_calib_t *c = new_calib(1, 1);
        double p95 = dist[i].lo + 0.95 * (dist[i].hi - dist[i].lo);
        double f = settle_factor(c, 0, dist[i].lo, dist[i].hi, 20000);
        ck_assert_msg(fabs(f - p95) <= 0.1, "ratios in [%g, %g]: factor %.4f, p95 %.4f", dist[i].lo,
                      dist[i].hi, f, p95);
        /* and about 5 % of what follows lies above it */
        double now = sl_calib_input_factor(c, 0);
        int above = 0;
        for (int k = 0; k < 10000; k++)
            above += dist[i].lo + (dist[i].hi - dist[i].lo) * rnd_unit() > now;
        ck_assert_msg(above <= 2000, "ratios in [%g, %g]: %d of 10000 above the factor %.4f",
                      dist[i].lo, dist[i].hi, above, now);
        sl_calib_free(c);
    }
}
END_TEST

/* ---- cells -------------------------------------------------------------------------------- */

START_TEST(unknown_route_or_class_is_safe)
{
    sl_calib_t *c = new_calib(2, 3);
    static const int bad_routes[] = {-1, 2, 1000, INT32_MIN};
    static const int bad_classes[] = {-1, 3, 1000, INT32_MIN};
    for (size_t i = 0; i < 4; i++) {
        for (int k = 0; k < SL_CALIB_MIN_SAMPLES + 1; k++) {
            sl_calib_observe(c, bad_routes[i], 0, 100, 1000, 10, 7);
            sl_calib_observe(c, 0, bad_classes[i], 100, 1000, 10, 7);
            sl_calib_observe(c, bad_routes[i], bad_classes[i], 100, 1000, 10, 7);
        }
        ck_assert_int_eq(sl_calib_output(c, bad_routes[i], 0, 4096), 4096);
        ck_assert_int_eq(sl_calib_output(c, 0, bad_classes[i], 4096), 4096);
        ck_assert_double_eq(sl_calib_input_factor(c, bad_routes[i]), 1.0);
        ck_assert_int_eq(sl_calib_input(c, bad_routes[i], 1000), 1000);
    }
    /* the known cells learned nothing from them */
    for (int r = 0; r < 2; r++) {
        for (int k = 0; k < 3; k++)
            ck_assert_int_eq(sl_calib_output(c, r, k, 4096), 4096);
    }
    ck_assert_double_eq(sl_calib_input_factor(c, 1), 1.0);
    /* negative values and an estimate of 0 are ignored */
    for (int k = 0; k < SL_CALIB_MIN_SAMPLES; k++) {
        sl_calib_observe(c, 1, 1, 100, -5, 0, -1);
        sl_calib_observe(c, 1, 1, 0, 1000, 0, -7);
        sl_calib_observe(c, 1, 1, -100, 1000, 0, -1);
    }
    ck_assert_double_eq(sl_calib_input_factor(c, 1), 1.0);
    ck_assert_int_eq(sl_calib_output(c, 1, 1, 4096), 4096);
    sl_calib_free(c);
    sl_calib_free(NULL);
    /* a calibrator without routes or classes answers the defaults */
    c = new_calib(0, 0);
    sl_calib_observe(c, 0, 0, 100, 200, 0, 300);
    ck_assert_int_eq(sl_calib_output(c, 0, 0, 4096), 4096);
    ck_assert_double_eq(sl_calib_input_factor(c, 0), 1.0);
    sl_calib_free(c);
}
END_TEST

START_TEST(cells_learn_independently)
{
    sl_calib_t *c = new_calib(2, 2);
    for (int k = 0; k < SL_CALIB_MIN_SAMPLES; k++) {
        sl_calib_observe(c, 0, 0, 100, 150, 0, 10);
        sl_calib_observe(c, 0, 1, 100, 150, 0, 20);
        sl_calib_observe(c, 1, 0, 100, 50, 0, 30);
    }
    ck_assert_int_eq(sl_calib_output(c, 0, 0, 4096), 10);
    ck_assert_int_eq(sl_calib_output(c, 0, 1, 4096), 20);
    ck_assert_int_eq(sl_calib_output(c, 1, 0, 4096), 30);
    ck_assert_int_eq(sl_calib_output(c, 1, 1, 4096), 4096);
    /* the input factor is per route, over all its classes */
    ck_assert_double_gt(sl_calib_input_factor(c, 0), 1.0);
    ck_assert_double_lt(sl_calib_input_factor(c, 1), 1.0);
    sl_calib_free(c);
}
END_TEST

static Suite *calib_suite(void)
{
    Suite *s = suite_create("calib");
    TCase *out = tcase_create("output");
    tcase_add_test(out, output_is_max_tokens_until_enough_outputs_were_seen);
    tcase_add_test(out, output_is_the_p95_of_the_recent_window);
    tcase_add_test(out, p95_follows_a_shift_in_outputs_within_a_window);
    tcase_add_test(out, a_long_answer_is_not_held_to_the_class_s_short_outputs);
    suite_add_tcase(s, out);
    TCase *in = tcase_create("input");
    tcase_add_test(in, input_factor_moves_by_bounded_steps);
    tcase_add_test(in, input_factor_stays_within_its_bounds);
    tcase_add_test(in, input_factor_settles_near_the_95th_percentile_of_real_over_estimate);
    suite_add_tcase(s, in);
    TCase *cells = tcase_create("cells");
    tcase_add_test(cells, unknown_route_or_class_is_safe);
    tcase_add_test(cells, cells_learn_independently);
    suite_add_tcase(s, cells);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(calib_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
