/* test_grants.c - capacity leases between sharded schedulers (scheduler/grants.h): the weighted
 * division, what a grant may take from what others hold, the view folded from reports and grant
 * tables (epochs, replays, malformed messages), and a randomised run with lost messages and a
 * dead shard in which the shares enforced, counted as a provider counts them, never pass the
 * limit. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../scheduler/grants.h"

static const double EPS = 1e-9;
enum { LEASE = 1000, RELEASE = 2000 };
static const int64_t T0 = 1700000000000LL;

static sl_grants_t *view(void)
{
    const char *ids[] = {"deployment:d:tpm"};
    int64_t release[] = {RELEASE};
    sl_grants_t *g = sl_grants_new(ids, release, 1, LEASE);
    ck_assert_ptr_nonnull(g);
    return g;
}

/* A report sent at `at` as shard id would send it from its own view v (its acknowledgement
 * included), read by into at now. */
static int report_read(sl_grants_t *into, sl_grants_t *v, const char *id, int64_t seq, int64_t at,
                       int64_t now, double weight, double want, double held, double used)
{
    sl_want_t d = {weight, want, held, used};
    char *text = sl_grants_report(v, id, seq, at, &d, 0);
    ck_assert_ptr_nonnull(text);
    int kind = sl_grants_fold(into, text, strlen(text), now, NULL, NULL, NULL);
    free(text);
    return kind;
}

static int report(sl_grants_t *into, sl_grants_t *v, const char *id, int64_t seq, int64_t at,
                  double weight, double want, double held, double used)
{
    return report_read(into, v, id, seq, at, at, weight, want, held, used);
}

/* Folds a table into shard id's view v; the share it names for id (-1: none; -2: ignored), and
 * in *echo (may be NULL) the report it answers. */
static double receive_echo(sl_grants_t *v, const char *table, const char *id, int64_t now,
                           int64_t *echo)
{
    double share = -1;
    sl_grant_t mine = {.share = &share};
    int is_mine = 0;
    int kind = sl_grants_fold(v, table, strlen(table), now, id, &mine, &is_mine);
    if (kind != 2)
        return -2;
    if (echo != NULL)
        *echo = is_mine ? mine.echo : -1;
    return is_mine ? share : -1;
}

static double receive(sl_grants_t *v, const char *table, const char *id, int64_t now)
{
    return receive_echo(v, table, id, now, NULL);
}

/* a and b, of equal weight, both report at T0 and read the coordinator's first table: a half
 * each. */
static void two_halves(sl_grants_t *coord, sl_grants_t *a, sl_grants_t *b)
{
    report(coord, a, "a", 1, T0, 1, 1, 0, 0);
    report(coord, b, "b", 1, T0, 1, 1, 0, 0);
    char *t = sl_grants_round(coord, "c", 1, T0, NULL, NULL);
    ck_assert_double_eq_tol(receive(a, t, "a", T0), 0.5, EPS);
    ck_assert_double_eq_tol(receive(b, t, "b", T0), 0.5, EPS);
    free(t);
}

START_TEST(division_is_weighted_max_min)
{
    double w[] = {2, 1, 1}, want[] = {1, 1, 1}, hold[] = {0, 0, 0}, out[3];
    sl_grants_divide(3, w, want, hold, 0, out);
    ck_assert_double_eq_tol(out[0], 0.5, EPS);
    ck_assert_double_eq_tol(out[1], 0.25, EPS);
    ck_assert_double_eq_tol(out[2], 0.25, EPS);
    /* One that wants little gets what it wants; the others divide the rest. */
    double w2[] = {1, 1, 1}, want2[] = {0.1, 1, 1};
    sl_grants_divide(3, w2, want2, hold, 0, out);
    ck_assert_double_eq_tol(out[0], 0.1, EPS);
    ck_assert_double_eq_tol(out[1], 0.45, EPS);
    ck_assert_double_eq_tol(out[2], 0.45, EPS);
    /* What departed shards still hold is not divided. */
    sl_grants_divide(3, w, want, hold, 0.2, out);
    ck_assert_double_eq_tol(out[0] + out[1] + out[2], 0.8, EPS);
    ck_assert_double_eq_tol(out[0], 0.4, EPS);
}
END_TEST

START_TEST(a_raise_takes_only_what_nobody_holds)
{
    /* Shard 0 still holds 0.9 (its smaller grant not yet acknowledged): the others may rise
     * only into the 0.1 nobody holds, in proportion to what they lack. */
    double w[] = {1, 1, 1}, want[] = {1, 1, 1}, hold[] = {0.9, 0, 0}, out[3];
    sl_grants_divide(3, w, want, hold, 0, out);
    ck_assert_double_eq_tol(out[0], 1.0 / 3, EPS);
    ck_assert_double_eq_tol(out[1], 0.05, EPS);
    ck_assert_double_eq_tol(out[2], 0.05, EPS);
    double sum = 0;
    for (int i = 0; i < 3; i++)
        sum += out[i] > hold[i] ? out[i] : hold[i];
    ck_assert(sum <= 1 + EPS);
    /* Nothing free: no raise at all. */
    double hold2[] = {0.5, 0.5, 0};
    sl_grants_divide(3, w, want, hold2, 0, out);
    ck_assert_double_eq_tol(out[2], 0, EPS);
    /* Within its own hold a shard gets its target at once. */
    double hold3[] = {0.2, 0.5, 0.3}, want3[] = {1, 0.1, 1};
    sl_grants_divide(3, w, want3, hold3, 0, out);
    ck_assert_double_eq_tol(out[1], 0.1, EPS);
    ck_assert(out[0] > 0.2 && out[0] <= 0.2 + 0.0 + 0.4 + EPS);
}
END_TEST

START_TEST(a_round_answers_every_live_shard)
{
    sl_grants_t *coord = view(), *a = view(), *b = view();
    ck_assert_int_eq(report(coord, a, "a", 1, T0, 2, 1, 0, 0), 1);
    ck_assert_int_eq(report(coord, b, "b", 1, T0, 1, 1, 0, 0), 1);
    ck_assert_int_eq(sl_grants_live(coord, T0), 2);
    char *table = sl_grants_round(coord, "c", 1, T0 + 10, NULL, NULL);
    ck_assert_ptr_nonnull(table);
    ck_assert_double_eq_tol(receive(a, table, "a", T0 + 20), 2.0 / 3, EPS);
    ck_assert_double_eq_tol(receive(b, table, "b", T0 + 20), 1.0 / 3, EPS);
    ck_assert_double_eq_tol(sl_grants_held(coord, 0, T0 + 20), 1, EPS);
    ck_assert_int_eq(sl_grants_epoch(a), 1);
    /* The same table again (a replay) changes nothing. */
    ck_assert_double_eq_tol(receive(a, table, "a", T0 + 30), -2, EPS);
    free(table);
    sl_grants_free(coord);
    sl_grants_free(a);
    sl_grants_free(b);
}
END_TEST

/* A smaller grant frees what it gave up only once the shard says it enforces it, and what it
 * admitted before still counts until its reports say it has left the window. */
START_TEST(a_smaller_grant_counts_until_acknowledged_and_used_up)
{
    sl_grants_t *coord = view(), *a = view(), *b = view();
    report(coord, a, "a", 1, T0, 1, 1, 0, 0);
    char *t1 = sl_grants_round(coord, "c", 1, T0, NULL, NULL);
    ck_assert_double_eq_tol(receive(a, t1, "a", T0), 1, EPS);
    free(t1);
    /* b arrives: a is lowered to a half, b gets nothing yet (a holds everything). */
    report(coord, b, "b", 1, T0 + 100, 1, 1, 0, 0);
    char *t2 = sl_grants_round(coord, "c", 1, T0 + 100, NULL, NULL);
    ck_assert_double_eq_tol(receive(b, t2, "b", T0 + 100), 0, EPS);
    /* a has not read t2 yet: still nothing for b. */
    report(coord, a, "a", 2, T0 + 150, 1, 1, 1, 0.9);
    char *t3 = sl_grants_round(coord, "c", 1, T0 + 200, NULL, NULL);
    ck_assert_double_eq_tol(receive(b, t3, "b", T0 + 200), 0, EPS);
    /* a reads t2 and t3 and says so; what it admitted still counts 0.7. */
    ck_assert_double_eq_tol(receive(a, t2, "a", T0 + 210), 0.5, EPS);
    ck_assert_double_eq_tol(receive(a, t3, "a", T0 + 210), 0.5, EPS);
    report(coord, a, "a", 3, T0 + 220, 1, 1, 0.5, 0.7);
    char *t4 = sl_grants_round(coord, "c", 1, T0 + 300, NULL, NULL);
    ck_assert_double_eq_tol(receive(b, t4, "b", T0 + 300), 0.3, EPS);
    receive(a, t4, "a", T0 + 300);
    /* Its use leaves the window: b gets its half. */
    report(coord, a, "a", 4, T0 + 400, 1, 1, 0.5, 0.4);
    char *t5 = sl_grants_round(coord, "c", 1, T0 + 500, NULL, NULL);
    ck_assert_double_eq_tol(receive(b, t5, "b", T0 + 500), 0.5, EPS);
    free(t2);
    free(t3);
    free(t4);
    free(t5);
    sl_grants_free(coord);
    sl_grants_free(a);
    sl_grants_free(b);
}
END_TEST

/* A larger grant a shard may already enforce, with no report saying so yet, counts as its
 * hold even when the next table lowers it again. */
START_TEST(a_grant_not_yet_acknowledged_counts_at_its_largest)
{
    sl_grants_t *coord = view(), *a = view(), *b = view();
    two_halves(coord, a, b);
    report(coord, a, "a", 2, T0 + 100, 1, 1, 0.5, 0);
    report(coord, b, "b", 2, T0 + 100, 0, 0.02, 0.5, 0); /* b goes idle */
    char *t2 = sl_grants_round(coord, "c", 1, T0 + 200, NULL, NULL);
    ck_assert_double_eq_tol(receive(a, t2, "a", T0 + 200), 0.5, EPS); /* nothing free yet */
    ck_assert_double_eq_tol(receive(b, t2, "b", T0 + 200), 0.02, EPS);
    report(coord, b, "b", 3, T0 + 300, 0, 0.02, 0.02, 0);
    char *t3 = sl_grants_round(coord, "c", 1, T0 + 400, NULL, NULL);
    ck_assert_double_eq_tol(receive(a, t3, "a", T0 + 400), 0.98, EPS);
    /* a enforces 0.98 now, but the coordinator has not heard it; b wants everything again. */
    report(coord, b, "b", 4, T0 + 500, 1, 1, 0.02, 0);
    char *t4 = sl_grants_round(coord, "c", 1, T0 + 600, NULL, NULL);
    ck_assert_double_eq_tol(receive(b, t4, "b", T0 + 600), 0.02, EPS);
    /* t4 lowers a to a half, but until a says it read it, a may still enforce 0.98. */
    char *t5 = sl_grants_round(coord, "c", 1, T0 + 700, NULL, NULL);
    ck_assert_double_eq_tol(receive(b, t5, "b", T0 + 700), 0.02, EPS);
    ck_assert_double_eq_tol(receive(a, t4, "a", T0 + 750), 0.5, EPS);
    ck_assert_double_eq_tol(receive(a, t5, "a", T0 + 750), 0.5, EPS);
    report(coord, a, "a", 3, T0 + 800, 1, 1, 0.5, 0);
    char *t6 = sl_grants_round(coord, "c", 1, T0 + 900, NULL, NULL);
    ck_assert_double_eq_tol(receive(b, t6, "b", T0 + 900), 0.5, EPS);
    free(t2);
    free(t3);
    free(t4);
    free(t5);
    free(t6);
    sl_grants_free(coord);
    sl_grants_free(a);
    sl_grants_free(b);
}
END_TEST

/* A shard that stops reporting holds what it held for its lease and then as long as the
 * bucket counts what it admitted; only then is its part granted again. */
START_TEST(a_dead_shards_part_is_granted_again_only_after_lease_and_window)
{
    sl_grants_t *coord = view(), *a = view(), *b = view();
    two_halves(coord, a, b);
    report(coord, a, "a", 2, T0 + 50, 1, 1, 0.5, 0.5);
    char *t = NULL;
    /* a dies; b goes on reporting. */
    int64_t now = T0 + 100;
    double last = 0;
    for (int64_t seq = 2; now < T0 + LEASE + RELEASE + 500; seq++, now += 100) {
        report(coord, b, "b", seq, now, 1, 1, last, last);
        t = sl_grants_round(coord, "c", 1, now, NULL, NULL);
        double got = receive(b, t, "b", now);
        free(t);
        if (now < T0 + 50 + LEASE + RELEASE)
            ck_assert_msg(got <= 0.5 + EPS, "b got %.3f at +%lld ms", got, (long long)(now - T0));
        last = got;
    }
    ck_assert_double_eq_tol(last, 1, EPS);
    ck_assert_int_eq(sl_grants_live(coord, now), 1);
    sl_grants_free(coord);
    sl_grants_free(a);
    sl_grants_free(b);
}
END_TEST

/* A shard that stops cleanly says so: its part returns as its use leaves the window, without
 * waiting for its lease, and whatever was sent to it after does not count. */
START_TEST(a_shard_that_left_holds_only_what_it_used)
{
    sl_grants_t *coord = view(), *a = view(), *b = view();
    two_halves(coord, a, b);
    /* a table a never applies, then a's last report (it enforces nothing; 0.3 still counted) */
    char *t = sl_grants_round(coord, "c", 1, T0 + 50, NULL, NULL);
    free(t);
    sl_want_t d = {2, 1, 0, 0.3};
    char *text = sl_grants_report(a, "a", 2, T0 + 100, &d, 1);
    ck_assert_int_eq(sl_grants_fold(coord, text, strlen(text), T0 + 100, NULL, NULL, NULL), 1);
    /* the same report again, or any later one of a, changes nothing */
    ck_assert_int_eq(sl_grants_fold(coord, text, strlen(text), T0 + 110, NULL, NULL, NULL), 0);
    free(text);
    ck_assert_int_eq(sl_grants_live(coord, T0 + 150), 1);
    report(coord, b, "b", 2, T0 + 150, 1, 1, 0.5, 0.5);
    t = sl_grants_round(coord, "c", 1, T0 + 200, NULL, NULL);
    ck_assert_double_eq_tol(receive(b, t, "b", T0 + 200), 0.7, EPS);
    free(t);
    /* after its use's window (no lease), all of it */
    report(coord, b, "b", 3, T0 + 100 + RELEASE, 1, 1, 0.7, 0.6);
    t = sl_grants_round(coord, "c", 1, T0 + 100 + RELEASE, NULL, NULL);
    ck_assert_double_eq_tol(receive(b, t, "b", T0 + 100 + RELEASE), 1, EPS);
    free(t);
    sl_grants_free(coord);
    sl_grants_free(a);
    sl_grants_free(b);
}
END_TEST

/* A coordinator that read only the newest table (started long after a shard died) still counts
 * what the dead shard holds, until when the old view said. */
START_TEST(a_table_carries_what_silent_shards_still_hold)
{
    sl_grants_t *old = view(), *a = view(), *b = view();
    two_halves(old, a, b);
    report(old, a, "a", 2, T0 + 100, 1, 1, 0.5, 0.5);
    int64_t now = T0 + LEASE + 500; /* a is silent past its lease */
    report(old, b, "b", 2, now, 1, 1, 0.5, 0.5);
    char *t = sl_grants_round(old, "c", 1, now, NULL, NULL);
    ck_assert_ptr_nonnull(strstr(t, "\"departed\":{\"a\""));
    /* The new coordinator's view: that table and b's next report, nothing older. */
    sl_grants_t *fresh = view();
    ck_assert_int_eq(sl_grants_fold(fresh, t, strlen(t), now, NULL, NULL, NULL), 2);
    free(t);
    report(fresh, b, "b", 3, now + 100, 1, 1, 0.5, 0.5);
    char *t2 = sl_grants_round(fresh, "c2", 2, now + 200, NULL, NULL);
    ck_assert_double_le(receive(b, t2, "b", now + 200), 0.5 + EPS);
    free(t2);
    ck_assert_double_ge(sl_grants_held(fresh, 0, now + 200), 1 - EPS);
    /* Once a's window is over, b may have it all. */
    int64_t later = T0 + 100 + LEASE + RELEASE + 10;
    report(fresh, b, "b", 4, later, 1, 1, 0.5, 0.5);
    char *t3 = sl_grants_round(fresh, "c2", 2, later, NULL, NULL);
    ck_assert_double_eq_tol(receive(b, t3, "b", later), 1, EPS);
    free(t3);
    sl_grants_free(fresh);
    sl_grants_free(old);
    sl_grants_free(a);
    sl_grants_free(b);
}
END_TEST

START_TEST(older_epochs_replays_and_malformed_messages_change_nothing)
{
    sl_grants_t *coord = view(), *a = view();
    report(coord, a, "a", 5, T0, 1, 1, 0, 0);
    char *old = sl_grants_round(coord, "c", 1, T0, NULL, NULL);
    char *newer = sl_grants_round(coord, "c", 2, T0 + 10, NULL, NULL);
    ck_assert_double_eq_tol(receive(a, newer, "a", T0 + 20), 1, EPS);
    /* The deposed coordinator's table, read late, is ignored. */
    ck_assert_double_eq_tol(receive(a, old, "a", T0 + 30), -2, EPS);
    free(old);
    free(newer);
    /* A report not newer than the last of its shard, or older than lease and window. */
    ck_assert_int_eq(report(coord, a, "a", 5, T0 + 40, 9, 1, 0, 0), 0);
    ck_assert_int_eq(report_read(coord, a, "z", 1, T0 - LEASE - RELEASE - 1, T0, 9, 1, 0, 0), 0);
    ck_assert_int_eq(report_read(coord, a, "z", 1, T0 - LEASE, T0, 9, 1, 0, 0), 1);
    const char *bad[] = {
        "",
        "null",
        "[]",
        "{\"v\":2,\"type\":\"report\"}",
        "{\"v\":1,\"type\":\"report\",\"shard\":\"a\",\"seq\":9,\"at\":1,\"ack\":-1}",
        "{\"v\":1,\"type\":\"report\",\"shard\":\"q\",\"seq\":1,\"at\":1700000000000,\"ack\":-1,"
        "\"b\":{\"deployment:d:tpm\":[1,1,1]}}",
        "{\"v\":1,\"type\":\"report\",\"shard\":\"q\",\"seq\":1,\"at\":1700000000000,\"ack\":-1,"
        "\"b\":{\"deployment:d:tpm\":[1,\"x\",1,1]}}",
        "{\"v\":1,\"type\":\"grants\",\"epoch\":9,\"seq\":1,\"at\":1,\"lease_ms\":5,"
        "\"shards\":{\"a\":{\"echo\":1,\"b\":{\"deployment:d:tpm\":2}}}}",
        "{\"v\":1,\"type\":\"grants\",\"epoch\":0,\"seq\":1,\"at\":1,\"lease_ms\":5,"
        "\"shards\":{}}",
        "{\"v\":1,\"type\":\"grants\",\"epoch\":9,\"seq\":1,\"at\":1,\"lease_ms\":5,"
        "\"shards\":{\"a\":{\"b\":{}}}}",
        "{\"v\":1,\"type\":\"report\",\"shard\":\"a\",\"shard\":\"b\"}",
        "{\"v\":1,\"type\":\"report\",\"shard\":\"q\",\"seq\":1,\"at\":1700000000000,\"ack\":-1,"
        "\"left\":\"yes\",\"b\":{}}",
        "{\"v\":1,\"type\":\"grants\",\"epoch\":9,\"seq\":1,\"at\":1,\"lease_ms\":5,"
        "\"shards\":{},\"departed\":{\"x\":{\"b\":{\"deployment:d:tpm\":[0.5]}}}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(sl_grants_fold(coord, bad[i], strlen(bad[i]), T0 + 50, "a", NULL, NULL) == 0,
                      "message %zu was taken", i);
    ck_assert_int_eq(sl_grants_epoch(coord), 2);
    sl_grants_free(coord);
    sl_grants_free(a);
}
END_TEST

/* Shards that report what they enforce and, as their use, the most they enforced over the
 * window (they used everything they were given); reports and tables each lost with a chance of
 * 30 %; one shard dies midway, another joins. The sum over shards of the most each enforced
 * over the trailing window (what a provider may still count) never passes the limit. */
enum { SHARDS = 4, STEPS = 3000, STEP_MS = 50, WINDOW_STEPS = RELEASE / STEP_MS };

typedef struct {
    sl_grants_t *v;
    char id[16];
    int64_t seq;
    int64_t sent_at[STEPS + 1]; /* per report: when it was sent (a lease counts from it) */
    double enforce;
    double hist[WINDOW_STEPS];
    int64_t lease_until;
    int dead, joined;
} sim_shard_t;

static double window_max(const sim_shard_t *s)
{
    double m = 0;
    for (int i = 0; i < WINDOW_STEPS; i++)
        if (s->hist[i] > m)
            m = s->hist[i];
    return m;
}

START_TEST(shares_enforced_never_pass_the_limit_with_lost_messages)
{
    srand(12345);
    sl_grants_t *coord = view();
    static sim_shard_t sh[SHARDS];
    memset(sh, 0, sizeof sh);
    for (int i = 0; i < SHARDS; i++) {
        sh[i].v = view();
        snprintf(sh[i].id, sizeof sh[i].id, "s%d", i);
        sh[i].joined = i < SHARDS - 1; /* the last joins later */
    }
    double worst = 0;
    for (int step = 0; step < STEPS; step++) {
        int64_t now = T0 + (int64_t)step * STEP_MS;
        if (step == STEPS / 3)
            sh[0].dead = 1;
        if (step == STEPS / 2)
            sh[SHARDS - 1].joined = 1;
        for (int i = 0; i < SHARDS; i++) {
            sim_shard_t *s = &sh[i];
            if (!s->joined)
                continue;
            if (!s->dead && s->lease_until != 0 && now >= s->lease_until)
                s->enforce = 0;
            if (s->dead && now >= s->lease_until)
                s->enforce = 0;
            if (s->dead || rand() % 100 < 30)
                continue;
            double weight = (double)(1 + (step / 200 + i) % 3);
            double want = rand() % 5 == 0 ? 0.02 : 1;
            sl_want_t d = {weight, want, s->enforce, window_max(s)};
            s->sent_at[++s->seq] = now;
            char *text = sl_grants_report(s->v, s->id, s->seq, now, &d, 0);
            sl_grants_fold(coord, text, strlen(text), now, NULL, NULL, NULL);
            free(text);
        }
        if (step % 2 == 0) {
            char *t = sl_grants_round(coord, "c", 1, now, NULL, NULL);
            for (int i = 0; t != NULL && i < SHARDS; i++) {
                sim_shard_t *s = &sh[i];
                if (!s->joined || s->dead || rand() % 100 < 30)
                    continue;
                int64_t echo = -1;
                double got = receive_echo(s->v, t, s->id, now, &echo);
                if (got >= 0 && echo >= 1 && echo <= s->seq && s->sent_at[echo] + LEASE > now) {
                    s->enforce = got;
                    s->lease_until = s->sent_at[echo] + LEASE;
                }
            }
            free(t);
        }
        double sum = 0;
        for (int i = 0; i < SHARDS; i++) {
            sim_shard_t *s = &sh[i];
            s->hist[step % WINDOW_STEPS] = s->enforce;
            sum += window_max(s);
        }
        if (sum > worst)
            worst = sum;
        ck_assert_msg(sum <= 1 + 1e-6, "step %d: the shards may be counted for %.4f", step, sum);
        ck_assert(sl_grants_held(coord, 0, now) <= 1 + 1e-6);
    }
    /* And the limit was used: the live shards ended up enforcing most of it. */
    double end = 0;
    for (int i = 1; i < SHARDS; i++)
        end += sh[i].enforce;
    ck_assert_msg(end > 0.8, "the live shards enforce only %.3f at the end", end);
    ck_assert(worst > 0.9);
    for (int i = 0; i < SHARDS; i++)
        sl_grants_free(sh[i].v);
    sl_grants_free(coord);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("grants");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, division_is_weighted_max_min);
    tcase_add_test(tc, a_raise_takes_only_what_nobody_holds);
    tcase_add_test(tc, a_round_answers_every_live_shard);
    tcase_add_test(tc, a_smaller_grant_counts_until_acknowledged_and_used_up);
    tcase_add_test(tc, a_grant_not_yet_acknowledged_counts_at_its_largest);
    tcase_add_test(tc, a_dead_shards_part_is_granted_again_only_after_lease_and_window);
    tcase_add_test(tc, a_shard_that_left_holds_only_what_it_used);
    tcase_add_test(tc, a_table_carries_what_silent_shards_still_hold);
    tcase_add_test(tc, older_epochs_replays_and_malformed_messages_change_nothing);
    tcase_add_test(tc, shares_enforced_never_pass_the_limit_with_lost_messages);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
