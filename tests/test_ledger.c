/* test_ledger.c - behaviour of the capacity ledger (scheduler/ledger.h): continuous refill, the
 * margin, the oversize rule, exact wait times, all-or-nothing reservations, credits, and a
 * randomised property test over long reserve/refund/time sequences.
 *
 * Every call takes an explicit now_ms, so nothing sleeps.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../scheduler/ledger.h"
#include "sign.h"

#define EPS 1e-9

static sl_ledger_t *new_ledger(void)
{
    sl_ledger_t *l = sl_ledger_new();
    ck_assert_ptr_nonnull(l);
    return l;
}

/* A ledger holding one bucket (index 0). */
static sl_ledger_t *one_bucket(double capacity, double rate_per_ms, double margin, double level,
                               int64_t now_ms)
{
    sl_ledger_t *l = new_ledger();
    ck_assert_int_eq(sl_ledger_add(l, "b", capacity, rate_per_ms, margin, level, now_ms), 0);
    return l;
}

static sl_err_t reserve1(sl_ledger_t *l, int bucket, double amount, int64_t now_ms)
{
    sl_charge_t c = {bucket, amount};
    return sl_ledger_reserve(l, &c, 1, now_ms, NULL);
}

/* ---- buckets ------------------------------------------------------------------------------ */

START_TEST(add_find_and_reject_bad_buckets)
{
    sl_ledger_t *l = new_ledger();
    ck_assert_int_eq(sl_ledger_count(l), 0);
    ck_assert_int_eq(sl_ledger_add(l, "deployment:a:rpm", 10, 0.01, 1, 10, 0), 0);
    ck_assert_int_eq(sl_ledger_add(l, "deployment:a:tpm", 1000, 1, 100, 1000, 0), 1);
    ck_assert_int_eq(sl_ledger_count(l), 2);
    ck_assert_int_eq(sl_ledger_find(l, "deployment:a:tpm"), 1);
    ck_assert_int_eq(sl_ledger_find(l, "nope"), -1);
    ck_assert_str_eq(sl_ledger_id(l, 0), "deployment:a:rpm");
    ck_assert_double_eq(sl_ledger_capacity(l, 1), 1000);
    /* duplicate id, capacity <= 0, negative rate, margin outside [0, capacity) */
    ck_assert_int_eq(sl_ledger_add(l, "deployment:a:rpm", 10, 0.01, 1, 10, 0), -1);
    ck_assert_int_eq(sl_ledger_add(l, "x", 0, 0.01, 0, 0, 0), -1);
    ck_assert_int_eq(sl_ledger_add(l, "x", 10, -1, 0, 0, 0), -1);
    ck_assert_int_eq(sl_ledger_add(l, "x", 10, 1, 10, 0, 0), -1);
    ck_assert_int_eq(sl_ledger_add(l, "x", 10, 1, -1, 0, 0), -1);
    ck_assert_int_eq(sl_ledger_count(l), 2);
    /* a starting level above capacity is clamped */
    int b = sl_ledger_add(l, "x", 10, 1, 0, 50, 0);
    ck_assert_int_eq(b, 2);
    ck_assert_double_eq(sl_ledger_level(l, b, 0), 10);
    sl_ledger_free(l);
    sl_ledger_free(NULL);
}
END_TEST

START_TEST(refill_is_continuous_and_capped)
{
    sl_ledger_t *l = one_bucket(100, 0.1, 0, 0, 1000);
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 1000), 0, EPS);
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 1001), 0.1, EPS);
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 1250), 25, EPS);
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 1500), 50, EPS);
    /* refilling in many small steps gives the same level as one big step */
    for (int64_t t = 1500; t <= 1900; t += 7)
        sl_ledger_level(l, 0, t);
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 1900), 90, 1e-6);
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 2000), 100, EPS);
    ck_assert_double_eq(sl_ledger_level(l, 0, 5000), 100);
    ck_assert_double_eq(sl_ledger_level(l, 0, 1000000), 100);
    /* a zero-rate bucket never refills */
    sl_ledger_t *z = one_bucket(10, 0, 0, 3, 0);
    ck_assert_double_eq(sl_ledger_level(z, 0, 1000000), 3);
    ck_assert_int_eq(sl_ledger_wait_ms(z, 0, 5, 1000000), INT64_MAX);
    sl_ledger_free(z);
    sl_ledger_free(l);
}
END_TEST

START_TEST(margin_is_kept_unused)
{
    /* capacity 100, margin 20: an amount fits when level >= amount + 20 */
    sl_ledger_t *l = one_bucket(100, 0, 20, 90, 0);
    ck_assert_int_eq(reserve1(l, 0, 71, 0), SL_ENOROOM);
    ck_assert_double_eq(sl_ledger_level(l, 0, 0), 90);
    ck_assert_int_eq(reserve1(l, 0, 70, 0), SL_OK);
    ck_assert_double_eq(sl_ledger_level(l, 0, 0), 20);
    ck_assert_int_eq(reserve1(l, 0, 1, 0), SL_ENOROOM);
    ck_assert_double_eq(sl_ledger_level(l, 0, 0), 20);
    ck_assert_int_eq(reserve1(l, 0, 0, 0), SL_OK); /* needs exactly the margin */
    sl_ledger_free(l);

    l = one_bucket(100, 0, 20, 50, 0);
    ck_assert_int_eq(reserve1(l, 0, 31, 0), SL_ENOROOM);
    ck_assert_int_eq(reserve1(l, 0, 30, 0), SL_OK);
    ck_assert_double_eq(sl_ledger_level(l, 0, 0), 20);
    sl_ledger_free(l);
}
END_TEST

START_TEST(oversize_request_passes_only_on_a_full_bucket_into_debt)
{
    /* capacity 10, margin 2: 50 needs min(52, 10) = 10, i.e. a full bucket */
    sl_ledger_t *l = one_bucket(10, 0.01, 2, 9.9, 0);
    ck_assert_int_eq(reserve1(l, 0, 50, 0), SL_ENOROOM);
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 0), 9.9, EPS);
    int64_t full = sl_ledger_wait_ms(l, 0, 50, 0); /* 0.1 missing at 0.01/ms: ~10 ms */
    ck_assert_int_ge(full, 10);
    ck_assert_int_le(full, 11);
    ck_assert_int_eq(reserve1(l, 0, 50, full), SL_OK);
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, full), -40, 1e-6);
    /* the debt delays what follows: 1 more needs level 3, i.e. 43 more tokens */
    ck_assert_int_eq(reserve1(l, 0, 1, full), SL_ENOROOM);
    int64_t w = sl_ledger_wait_ms(l, 0, 1, full);
    ck_assert_int_ge(w, 4300);
    ck_assert_int_le(w, 4301);
    ck_assert_int_eq(reserve1(l, 0, 1, full + w - 2), SL_ENOROOM);
    ck_assert_int_eq(reserve1(l, 0, 1, full + w), SL_OK);
    sl_ledger_free(l);
}
END_TEST

START_TEST(small_limit_admits_its_first_request)
{
    /* LiteLLM #29193: a 1 rpm limit (burst 1, half kept as margin) and a 100 tpm limit must still
     * admit a first request of 1 request / 500 tokens. */
    sl_ledger_t *l = new_ledger();
    int rpm = sl_ledger_add(l, "rpm", 1, 1.0 / 60000, 0.5, 1, 0);
    int tpm = sl_ledger_add(l, "tpm", 100, 100.0 / 60000, 50, 100, 0);
    sl_charge_t ch[2] = {{rpm, 1}, {tpm, 500}};
    sl_refusal_t why = {-1, -1};
    ck_assert_int_eq(sl_ledger_reserve(l, ch, 2, 0, &why), SL_OK);
    ck_assert_double_eq_tol(sl_ledger_level(l, rpm, 0), 0, EPS);
    ck_assert_double_eq_tol(sl_ledger_level(l, tpm, 0), -400, EPS);
    /* the second one waits until both are full again; the tpm debt is the longer wait */
    ck_assert_int_eq(sl_ledger_reserve(l, ch, 2, 1000, &why), SL_ENOROOM);
    ck_assert_int_eq(why.bucket, tpm);
    ck_assert_int_ge(why.wait_ms, 300000 - 1000 - 2);
    ck_assert_int_le(why.wait_ms, 300000 - 1000 + 2);
    sl_ledger_free(l);
}
END_TEST

/* Checks wait_ms for one (bucket, amount) on fresh copies so each probe starts from the same
 * state: admission at now + wait succeeds, at now + wait - 2 it does not. */
static void check_wait(double capacity, double rate, double margin, double level, double amount)
{
    const int64_t now = 5000;
    sl_ledger_t *l = one_bucket(capacity, rate, margin, level, now);
    int64_t w = sl_ledger_wait_ms(l, 0, amount, now);
    sl_refusal_t why = {-1, -1};
    sl_charge_t c = {0, amount};
    sl_err_t rc = sl_ledger_reserve(l, &c, 1, now, &why);
    sl_ledger_free(l);
    if (w == 0) {
        ck_assert_int_eq(rc, SL_OK);
        return;
    }
    ck_assert_int_eq(rc, SL_ENOROOM);
    ck_assert_int_eq(why.bucket, 0);
    ck_assert_int_eq(why.wait_ms, w);
    ck_assert_int_gt(w, 0);
    ck_assert_int_lt(w, INT64_MAX);
    l = one_bucket(capacity, rate, margin, level, now);
    ck_assert_msg(reserve1(l, 0, amount, now + w) == SL_OK,
                  "cap %g rate %g margin %g level %g amount %g: refused at now+wait (%lld)",
                  capacity, rate, margin, level, amount, (long long)w);
    sl_ledger_free(l);
    if (w >= 2) {
        l = one_bucket(capacity, rate, margin, level, now);
        ck_assert_msg(reserve1(l, 0, amount, now + w - 2) == SL_ENOROOM,
                      "cap %g rate %g margin %g level %g amount %g: admitted at now+wait-2",
                      capacity, rate, margin, level, amount);
        sl_ledger_free(l);
    }
}

START_TEST(wait_ms_is_exact)
{
    check_wait(100, 0.1, 0, 0, 10);    /* 100 ms */
    check_wait(100, 0.1, 10, 0, 10);   /* 200 ms */
    check_wait(100, 0.1, 10, 95, 10);  /* 0 */
    check_wait(100, 0.1, 10, -50, 500); /* oversize from debt: needs 100 */
    check_wait(10, 10.0 / 60000, 5, 0, 1);
    check_wait(1, 1.0 / 60000, 0.5, 0.25, 1);
    check_wait(60000, 60000.0 * 0.97 / 60000, 30000, 12345.678, 4096);
    check_wait(3, 0.0001, 1.5, -7.3, 2);
    for (int i = 1; i < 200; i++)
        check_wait(1000, 0.37, 123, 1000 - 7.1 * i, 3.3 * i);
}
END_TEST

/* ---- reservations ------------------------------------------------------------------------- */

START_TEST(reserve_is_all_or_nothing)
{
    sl_ledger_t *l = new_ledger();
    int a = sl_ledger_add(l, "a", 100, 0.1, 0, 100, 0);
    int b = sl_ledger_add(l, "b", 10, 0.01, 0, 10, 0);
    int c = sl_ledger_add(l, "c", 1000, 1, 0, 5, 0);
    sl_charge_t ch[3] = {{a, 60}, {b, 5}, {c, 10}}; /* c refuses: 5 short */
    sl_refusal_t why = {-1, -1};
    ck_assert_int_eq(sl_ledger_reserve(l, ch, 3, 0, &why), SL_ENOROOM);
    ck_assert_int_eq(why.bucket, c);
    ck_assert_int_eq(why.wait_ms, sl_ledger_wait_ms(l, c, 10, 0));
    ck_assert_double_eq(sl_ledger_level(l, a, 0), 100);
    ck_assert_double_eq(sl_ledger_level(l, b, 0), 10);
    ck_assert_double_eq(sl_ledger_level(l, c, 0), 5);
    /* several refuse: the longest wait is reported (b: 10 short at 0.01/ms = 1000 ms; c: 5 ms) */
    sl_charge_t ch2[3] = {{c, 10}, {b, 18}, {a, 60}};
    sl_ledger_set_level(l, b, 10, 0);
    ck_assert_int_eq(reserve1(l, b, 10, 0), SL_OK); /* b now 0 */
    ck_assert_int_eq(sl_ledger_reserve(l, ch2, 3, 0, &why), SL_ENOROOM);
    ck_assert_int_eq(why.bucket, b);
    ck_assert_int_eq(why.wait_ms, sl_ledger_wait_ms(l, b, 18, 0));
    ck_assert_double_eq(sl_ledger_level(l, a, 0), 100);
    ck_assert_double_eq(sl_ledger_level(l, b, 0), 0);
    ck_assert_double_eq(sl_ledger_level(l, c, 0), 5);
    /* once everything fits, every bucket is charged */
    ck_assert_int_eq(sl_ledger_reserve(l, ch, 3, 1000, &why), SL_OK);
    ck_assert_double_eq_tol(sl_ledger_level(l, a, 1000), 40, EPS);
    ck_assert_double_eq_tol(sl_ledger_level(l, b, 1000), 5, EPS);
    ck_assert_double_eq_tol(sl_ledger_level(l, c, 1000), 990, EPS); /* full, then 10 */
    /* an empty reservation trivially succeeds */
    ck_assert_int_eq(sl_ledger_reserve(l, NULL, 0, 1000, NULL), SL_OK);
    sl_ledger_free(l);
}
END_TEST

START_TEST(duplicate_bucket_in_one_reservation_is_invalid_and_changes_nothing)
{
    sl_ledger_t *l = new_ledger();
    int a = sl_ledger_add(l, "a", 100, 0.1, 0, 100, 0);
    int b = sl_ledger_add(l, "b", 100, 0.1, 0, 100, 0);
    sl_charge_t ch[3] = {{a, 10}, {b, 10}, {a, 10}};
    ck_assert_int_eq(sl_ledger_reserve(l, ch, 3, 0, NULL), SL_EINVAL);
    ck_assert_double_eq(sl_ledger_level(l, a, 0), 100);
    ck_assert_double_eq(sl_ledger_level(l, b, 0), 100);
    /* so are unknown buckets and negative amounts */
    sl_charge_t bad1[2] = {{a, 10}, {7, 1}};
    sl_charge_t bad2[2] = {{b, 10}, {a, -5}};
    sl_charge_t bad3[1] = {{-1, 1}};
    ck_assert_int_eq(sl_ledger_reserve(l, bad1, 2, 0, NULL), SL_EINVAL);
    ck_assert_int_eq(sl_ledger_reserve(l, bad2, 2, 0, NULL), SL_EINVAL);
    ck_assert_int_eq(sl_ledger_reserve(l, bad3, 1, 0, NULL), SL_EINVAL);
    ck_assert_double_eq(sl_ledger_level(l, a, 0), 100);
    ck_assert_double_eq(sl_ledger_level(l, b, 0), 100);
    sl_ledger_free(l);
}
END_TEST

START_TEST(credit_never_exceeds_capacity)
{
    sl_ledger_t *l = one_bucket(100, 0.1, 0, 100, 0);
    ck_assert_int_eq(reserve1(l, 0, 30, 0), SL_OK);
    sl_ledger_credit(l, 0, 50, 0); /* more than was taken */
    ck_assert_double_eq(sl_ledger_level(l, 0, 0), 100);
    ck_assert_int_eq(reserve1(l, 0, 30, 0), SL_OK);
    sl_ledger_credit(l, 0, 10, 0);
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 0), 80, EPS);
    /* the credit counts the refill up to now first, then caps */
    sl_ledger_credit(l, 0, 15, 100); /* 80 + 10 refill + 15 -> 100 */
    ck_assert_double_eq(sl_ledger_level(l, 0, 100), 100);
    /* a negative credit (overage) makes debt, which refills like anything else */
    sl_ledger_credit(l, 0, -150, 100);
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 100), -50, EPS);
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 600), 0, 1e-6);
    sl_ledger_free(l);
}
END_TEST

START_TEST(clock_going_backwards_refills_nothing)
{
    sl_ledger_t *l = one_bucket(100, 0.1, 0, 0, 1000);
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 1500), 50, EPS);
    /* earlier times see the latest level: no refill and no loss */
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 1200), 50, EPS);
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 0), 50, EPS);
    ck_assert_int_eq(reserve1(l, 0, 20, 1100), SL_OK);
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 1100), 30, EPS);
    /* coming back to the latest time refills nothing for the step back ... */
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 1500), 30, EPS);
    /* ... and time after it refills normally */
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 1600), 40, EPS);
    ck_assert_int_eq(sl_ledger_wait_ms(l, 0, 40, 1000), 0);
    sl_ledger_free(l);
}
END_TEST

START_TEST(set_limits_keeps_the_level_clamped)
{
    sl_ledger_t *l = one_bucket(100, 0.1, 10, 0, 0);
    /* the old rate applies up to the change */
    sl_ledger_set_limits(l, 0, 200, 1, 20, 500); /* level 50 at 500 */
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 500), 50, EPS);
    ck_assert_double_eq(sl_ledger_capacity(l, 0), 200);
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 600), 150, EPS);
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 700), 200, EPS);
    /* the new margin applies: 170 needs 190 */
    sl_ledger_set_level(l, 0, 189, 700);
    ck_assert_int_eq(reserve1(l, 0, 170, 700), SL_ENOROOM);
    sl_ledger_set_level(l, 0, 190, 700);
    ck_assert_int_eq(reserve1(l, 0, 170, 700), SL_OK);
    /* shrinking clamps the level */
    sl_ledger_set_level(l, 0, 180, 700);
    sl_ledger_set_limits(l, 0, 50, 0.01, 5, 700);
    ck_assert_double_eq(sl_ledger_level(l, 0, 700), 50);
    ck_assert_double_eq(sl_ledger_level(l, 0, 10000), 50);
    /* set_level clamps too */
    sl_ledger_set_level(l, 0, 500, 10000);
    ck_assert_double_eq(sl_ledger_level(l, 0, 10000), 50);
    sl_ledger_set_level(l, 0, -20, 10000);
    ck_assert_double_eq_tol(sl_ledger_level(l, 0, 11000), -10, EPS);
    sl_ledger_free(l);
}
END_TEST

/* ---- property test ------------------------------------------------------------------------ */

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

enum { NB = 5, MAX_RES = 20000, MAX_EV = 60000 };

typedef struct {
    int64_t t;
    double amount; /* admitted (positive) or refunded (negative) */
} event_t;

typedef struct {
    int n;
    sl_charge_t ch[NB];
    double refundable[NB];
} res_t;

static void property_run(uint64_t seed, int steps)
{
    rng_state = seed;
    sl_ledger_t *l = new_ledger();
    double cap[NB], rate[NB], margin[NB], max_charge[NB];
    static event_t ev[NB][MAX_EV];
    int nev[NB] = {0};
    static res_t res[MAX_RES];
    int nres = 0;
    int64_t now = 1000000;
    for (int b = 0; b < NB; b++) {
        char id[16];
        snprintf(id, sizeof id, "b%d", b);
        cap[b] = 1 + (double)(rnd() % 2000);
        rate[b] = cap[b] / (double)(500 + rnd() % 60000);
        margin[b] = (b % 2 == 0) ? 0 : cap[b] * rnd_unit() * 0.5;
        max_charge[b] = 0;
        double start = cap[b] * rnd_unit();
        ck_assert_int_eq(sl_ledger_add(l, id, cap[b], rate[b], margin[b], start, now), b);
    }
    int refused = 0, admitted = 0;
    for (int step = 0; step < steps; step++) {
        unsigned action = (unsigned)(rnd() % 10);
        if (action < 3) {
            now += (int64_t)(rnd() % 300);
        } else if (action < 8) {
            /* reserve on 1..3 distinct buckets; amounts sometimes larger than the capacity */
            res_t r = {0};
            int want = 1 + (int)(rnd() % 3);
            int used[NB] = {0};
            while (r.n < want) {
                int b = (int)(rnd() % NB);
                if (used[b])
                    continue;
                used[b] = 1;
                double amount = rnd() % 20 == 0 ? cap[b] * (1 + 2 * rnd_unit())
                                                : cap[b] * 0.3 * rnd_unit();
                if (rnd() % 4 == 0)
                    amount = (double)(int64_t)amount; /* whole numbers too */
                r.ch[r.n].bucket = b;
                r.ch[r.n].amount = amount;
                r.n++;
            }
            double before[NB];
            for (int b = 0; b < NB; b++)
                before[b] = sl_ledger_level(l, b, now);
            int fits = 1;
            for (int i = 0; i < r.n; i++) {
                int b = r.ch[i].bucket;
                double need = fmin(r.ch[i].amount + margin[b], cap[b]);
                if (before[b] < need)
                    fits = 0;
            }
            sl_refusal_t why = {-1, -1};
            sl_err_t rc = sl_ledger_reserve(l, r.ch, r.n, now, &why);
            ck_assert_int_eq(rc, fits ? SL_OK : SL_ENOROOM);
            if (rc == SL_OK) {
                admitted++;
                for (int b = 0; b < NB; b++) {
                    double expect = before[b];
                    for (int i = 0; i < r.n; i++) {
                        if (r.ch[i].bucket == b)
                            expect -= r.ch[i].amount;
                    }
                    ck_assert_double_eq(sl_ledger_level(l, b, now), expect);
                }
                for (int i = 0; i < r.n; i++) {
                    int b = r.ch[i].bucket;
                    r.refundable[i] = r.ch[i].amount;
                    if (r.ch[i].amount > max_charge[b])
                        max_charge[b] = r.ch[i].amount;
                    ck_assert_int_lt(nev[b], MAX_EV);
                    ev[b][nev[b]++] = (event_t){now, r.ch[i].amount};
                }
                if (nres < MAX_RES)
                    res[nres++] = r;
            } else {
                /* (a) a refusal leaves every level exactly as it was */
                refused++;
                for (int b = 0; b < NB; b++)
                    ck_assert_double_eq(sl_ledger_level(l, b, now), before[b]);
                ck_assert_int_ge(why.bucket, 0);
                ck_assert_int_gt(why.wait_ms, 0);
                int64_t longest = 0;
                for (int i = 0; i < r.n; i++) {
                    int64_t w = sl_ledger_wait_ms(l, r.ch[i].bucket, r.ch[i].amount, now);
                    if (w > longest)
                        longest = w;
                }
                ck_assert_int_eq(why.wait_ms, longest);
            }
        } else if (nres > 0) {
            /* refund part of an earlier reservation (reconciliation found less usage) */
            res_t *r = &res[rnd() % (uint64_t)nres];
            int i = (int)(rnd() % (uint64_t)r->n);
            double part = r->refundable[i] * rnd_unit();
            if (part > 0) {
                int b = r->ch[i].bucket;
                r->refundable[i] -= part;
                sl_ledger_credit(l, b, part, now);
                ck_assert_int_lt(nev[b], MAX_EV);
                ev[b][nev[b]++] = (event_t){now, -part};
            }
        }
        /* (c) no level ever exceeds its capacity */
        for (int b = 0; b < NB; b++)
            ck_assert_double_le(sl_ledger_level(l, b, now), cap[b]);
    }
    /* the run must have exercised both outcomes */
    ck_assert_int_gt(admitted, steps / 20);
    ck_assert_int_gt(refused, steps / 20);
    /* (b) in every window [t, t + W], admitted minus refunded <= capacity + rate * W + the
     * largest single charge (the oversize rule lets one charge go into debt). */
    static const int64_t windows[] = {0, 100, 1000, 10000, 60000, 600000};
    for (int b = 0; b < NB; b++) {
        for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++) {
            double bound = cap[b] + rate[b] * (double)windows[w] + max_charge[b] + 1e-6;
            double sum = 0;
            int hi = 0;
            for (int lo = 0; lo < nev[b]; lo++) {
                if (hi < lo) {
                    hi = lo;
                    sum = 0;
                }
                while (hi < nev[b] && ev[b][hi].t <= ev[b][lo].t + windows[w])
                    sum += ev[b][hi++].amount;
                ck_assert_msg(sum <= bound,
                              "seed %llu bucket %d window %lld ms from %lld: %.3f > bound %.3f",
                              (unsigned long long)seed, b, (long long)windows[w],
                              (long long)ev[b][lo].t, sum, bound);
                sum -= ev[b][lo].amount;
            }
        }
    }
    sl_ledger_free(l);
}

START_TEST(random_sequences_keep_the_ledger_invariants)
{
    static const uint64_t seeds[] = {1, 42, 0x5eed5eed, 123456789, 0xdeadbeefcafe};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        property_run(seeds[i], 8000);
}
END_TEST

/* Regression: lookups by id were a linear scan, so adding 100,000 tenant buckets took
 * quadratic time. Now an index answers; this checks it answers right at that size. */
START_TEST(find_resolves_every_id_among_100000_buckets)
{
    sl_ledger_t *l = sl_ledger_new();
    char id[64];
    for (int i = 0; i < 100000; i++) {
        snprintf(id, sizeof id, "tenant:t%d:tokens", i);
        ck_assert_int_eq(sl_ledger_add(l, id, 100, 1, 0, 100, 0), i);
    }
    for (int i = 0; i < 100000; i += 7) {
        snprintf(id, sizeof id, "tenant:t%d:tokens", i);
        ck_assert_int_eq(sl_ledger_find(l, id), i);
        ck_assert_str_eq(sl_ledger_id(l, i), id);
    }
    ck_assert_int_eq(sl_ledger_find(l, "tenant:t100000:tokens"), -1);
    ck_assert_int_eq(sl_ledger_add(l, "tenant:t5:tokens", 100, 1, 0, 100, 0), -1);
    ck_assert_int_eq(sl_ledger_count(l), 100000);
    sl_ledger_free(l);
}
END_TEST

static Suite *ledger_suite(void)
{
    Suite *s = suite_create("ledger");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, add_find_and_reject_bad_buckets);
    tcase_add_test(tc, refill_is_continuous_and_capped);
    tcase_add_test(tc, margin_is_kept_unused);
    tcase_add_test(tc, oversize_request_passes_only_on_a_full_bucket_into_debt);
    tcase_add_test(tc, small_limit_admits_its_first_request);
    tcase_add_test(tc, wait_ms_is_exact);
    tcase_add_test(tc, reserve_is_all_or_nothing);
    tcase_add_test(tc, duplicate_bucket_in_one_reservation_is_invalid_and_changes_nothing);
    tcase_add_test(tc, credit_never_exceeds_capacity);
    tcase_add_test(tc, clock_going_backwards_refills_nothing);
    tcase_add_test(tc, set_limits_keeps_the_level_clamped);
    tcase_add_test(tc, find_resolves_every_id_among_100000_buckets);
    suite_add_tcase(s, tc);
    TCase *prop = tcase_create("property");
    tcase_set_timeout(prop, 30);
    tcase_add_test(prop, random_sequences_keep_the_ledger_invariants);
    suite_add_tcase(s, prop);
    return s;
}

int main(void)
{
    if (sl_crypto_init() != SL_OK)
        return 1;
    SRunner *sr = srunner_create(ledger_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
