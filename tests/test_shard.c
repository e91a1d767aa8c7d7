/* test_shard.c - one scheduler among several (scheduler/shard.c): the share of the shared limits
 * that the partitions owned give, applied at once when it shrinks and only when due when it
 * grows, kept across a restart and a reload; and a partition's jobs handed over. The core runs
 * with the real store and ledger (tests/lib/sched_env.h: dep-a's token bucket holds 600 tokens
 * with a margin of 300, so a cold start at the whole limit takes two jobs of 150). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "../scheduler/store.h"
#include "kafka.h"
#include "lib/sched_env.h"

static const int64_t MINUTE = 60000;

static void feed_n(env_t *e, const char *tenant, int n, int64_t now_ms)
{
    for (int i = 0; i < n; i++) {
        char id[64];
        snprintf(id, sizeof id, "%s-%02d", tenant, i);
        feed_job(e, id, tenant, now_ms);
    }
}

static int dispatches_at(env_t *e, int64_t now_ms)
{
    batch_t b = step(e, now_ms);
    int n = count_kind(&b, SL_MSG_DISPATCH);
    batch_free(&b);
    return n;
}

/* Steps every `every` ms from `from` to `to`; the dispatches of all those steps. */
static int dispatches_over(env_t *e, int64_t from, int64_t to, int64_t every)
{
    int n = 0;
    for (int64_t t = from; t <= to; t += every)
        n += dispatches_at(e, t);
    return n;
}

/* Owns `own` of nparts partitions, acme's first (its jobs are another shard's otherwise). */
static void own_first(env_t *e, int nparts, int own, int64_t now_ms)
{
    uint8_t owned[64] = {0};
    int acme = sl_kafka_key_partition("acme", nparts), n = 0;
    if (own > 0) {
        owned[acme] = 1;
        n = 1;
    }
    for (int p = 0; n < own && p < nparts; p++) {
        if (!owned[p]) {
            owned[p] = 1;
            n++;
        }
    }
    ck_assert_int_eq(sl_sched_set_owned(e->sched, owned, now_ms), SL_OK);
}

/* A database that ran before, its buckets full again: a restart (which starts them empty),
 * then ten quiet minutes. */
static void env_with_history_globex(env_t *e, int64_t globex_tokens_per_min, int64_t *now_ms)
{
    opts_t o = {"'dep-a'", globex_tokens_per_min, 0, 0, 0, NULL, NULL};
    env_init(e, &o, T0);
    close_core(e);
    open_core(e, T0 + MINUTE);
    *now_ms = T0 + 11 * MINUTE;
}

static void env_with_history(env_t *e, int64_t *now_ms)
{
    env_with_history_globex(e, 0, now_ms);
}

/* A shard of 4 partitions owning them all, on a database that ran (globex's own tokens a
 * minute: globex_tokens_per_min), with capacity leases when leased. */
static void shard_owning_all(env_t *e, int64_t globex_tokens_per_min, int leased, int64_t *now_ms)
{
    env_with_history_globex(e, globex_tokens_per_min, now_ms);
    if (leased)
        sl_sched_lease_shares(e->sched);
    ck_assert_int_eq(sl_sched_shard(e->sched, 4, *now_ms), SL_OK);
    own_first(e, 4, 4, *now_ms);
}

/* A new database knows nothing of what the partitions' last owners admitted: a shard starts
 * with no share, and the one its partitions give applies only once a minute (the provider's
 * trailing window) has passed. */
START_TEST(a_new_shard_admits_nothing_until_its_gained_share_is_due)
{
    env_t e;
    opts_t o = {"'dep-a'", 0, 0, 0, 0, NULL, NULL};
    env_init(&e, &o, T0);
    ck_assert_int_eq(sl_sched_shard(e.sched, 4, T0), SL_OK);
    own_first(&e, 4, 4, T0);
    feed_n(&e, "acme", 10, T0);
    /* nothing for the whole minute, then the limit's rate */
    ck_assert_int_eq(dispatches_over(&e, T0, T0 + MINUTE - 1000, 1000), 0);
    ck_assert_int_gt(dispatches_over(&e, T0 + MINUTE, T0 + 3 * MINUTE, 1000), 0);
    env_done(&e);
}
END_TEST

/* Half of the partitions, half of the limit: one job of 150 where the whole bucket takes two;
 * the smaller share applies at once. */
START_TEST(half_the_partitions_admit_half_at_once)
{
    env_t e;
    int64_t now;
    env_with_history(&e, &now);
    ck_assert_int_eq(sl_sched_shard(e.sched, 4, now), SL_OK);
    own_first(&e, 4, 2, now);
    feed_n(&e, "acme", 10, now);
    ck_assert_int_eq(dispatches_at(&e, now), 1);
    env_done(&e);
}
END_TEST

START_TEST(the_whole_limit_on_a_database_that_was_not_sharded)
{
    env_t e;
    int64_t now;
    shard_owning_all(&e, 0, 0, &now);
    feed_n(&e, "acme", 10, now);
    ck_assert_int_eq(dispatches_at(&e, now), 2);
    env_done(&e);
}
END_TEST

/* A shard that gives partitions away and gets them back waits again: meanwhile another shard
 * may have used their share. */
START_TEST(a_share_given_away_and_taken_back_waits_again)
{
    env_t e;
    int64_t now;
    shard_owning_all(&e, 0, 0, &now);
    own_first(&e, 4, 2, now);
    own_first(&e, 4, 4, now + 1000);
    feed_n(&e, "acme", 40, now + 1000);
    ck_assert_int_eq(dispatches_at(&e, now + 1000), 1);
    /* for the next minute at half the rate: 0.09 tokens/ms, about 36 jobs of 150 in a minute,
     * plus what the full half bucket held; the whole rate would take about twice that */
    int half = dispatches_over(&e, now + 2000, now + 61000, 1000);
    ck_assert_int_le(half, 38);
    ck_assert_int_ge(half, 30);
    env_done(&e);
}
END_TEST

/* Once due, the whole limit again: a quiet bucket holds its whole burst (two jobs). */
START_TEST(a_share_taken_back_applies_once_due)
{
    env_t e;
    int64_t now;
    shard_owning_all(&e, 0, 0, &now);
    own_first(&e, 4, 2, now);
    own_first(&e, 4, 4, now + 1000);
    /* applied at the first tick after it is due, then refilled */
    ck_assert_int_eq(dispatches_at(&e, now + 5 * MINUTE), 0);
    feed_n(&e, "acme", 10, now + 6 * MINUTE);
    ck_assert_int_eq(dispatches_at(&e, now + 6 * MINUTE), 2);
    env_done(&e);
}
END_TEST

/* The share is stored with the buckets: a restart on the same database starts from it (not from
 * the whole, which its counts were not made under), and a reload keeps it. */
START_TEST(the_share_survives_a_restart_and_a_reload)
{
    env_t e;
    int64_t now;
    env_with_history(&e, &now);
    ck_assert_int_eq(sl_sched_shard(e.sched, 4, now), SL_OK);
    own_first(&e, 4, 2, now);
    close_core(&e);
    open_core(&e, now + MINUTE);
    ck_assert_int_eq(sl_sched_shard(e.sched, 4, now + MINUTE), SL_OK);
    now += 11 * MINUTE;
    /* owning all four now: the half it had applies, the rest is not due yet */
    own_first(&e, 4, 4, now);
    feed_n(&e, "acme", 60, now);
    ck_assert_int_eq(dispatches_at(&e, now), 1);
    char err[256] = "";
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    ck_assert_int_eq(sl_sched_save(e.sched, now), SL_OK);
    ck_assert_int_eq(sl_store_commit(e.store), SL_OK);
    ck_assert_msg(sl_sched_reload(&e.sched, e.cfg, now, err, sizeof err) == SL_OK, "%s", err);
    /* still half after the reload: 30 to 38 jobs in the next minute (see above) */
    int half = dispatches_over(&e, now + 1000, now + 60000, 1000);
    ck_assert_int_le(half, 38);
    ck_assert_int_ge(half, 30);
    env_done(&e);
}
END_TEST

/* Two tenants in two partitions (of nparts): giving acme's away takes its jobs out of the core
 * and the store, without a result, and keeps its lease's charges; globex's stay. */
START_TEST(hand_over_takes_out_the_partition_s_jobs_only)
{
    int nparts = 2;
    while (nparts < 64 &&
           sl_kafka_key_partition("acme", nparts) == sl_kafka_key_partition("globex", nparts))
        nparts++;
    ck_assert_int_lt(nparts, 64);
    env_t e;
    int64_t now;
    env_with_history(&e, &now);
    ck_assert_int_eq(sl_sched_shard(e.sched, nparts, now), SL_OK);
    own_first(&e, nparts, nparts, now);
    int acme_p = sl_sched_partition(e.sched, "acme");
    ck_assert_int_eq(acme_p, sl_kafka_key_partition("acme", nparts));
    feed_n(&e, "acme", 3, now);
    feed_n(&e, "globex", 2, now);
    batch_t b = step(&e, now);
    int leased = count_kind(&b, SL_MSG_DISPATCH);
    ck_assert_int_gt(leased, 0);
    json_t *d = find(&b, SL_MSG_DISPATCH, "acme-00");
    ck_assert_ptr_nonnull(d);
    lease_t l = lease_of(d, now);
    batch_free(&b);
    double before = bucket_level(&e, "deployment:dep-a:tpm", now);
    int n = -1;
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    ck_assert_int_eq(sl_sched_hand_over(e.sched, acme_p, now, &n), SL_OK);
    ck_assert_int_eq(sl_store_commit(e.store), SL_OK);
    ck_assert_int_eq(n, 3);
    ck_assert_str_eq(peek_sql(&e, "SELECT count(*) FROM jobs WHERE tenant = '%s'", "acme"), "0");
    ck_assert_str_eq(peek_sql(&e, "SELECT count(*) FROM jobs WHERE tenant = '%s'", "globex"), "2");
    ck_assert_str_eq(
        peek_sql(&e, "SELECT state FROM reservations WHERE reservation_id = '%s'", l.res),
        "expired");
    /* the call may still count at the provider: its charge stays */
    ck_assert_double_le(bucket_level(&e, "deployment:dep-a:tpm", now), before + 1e-6);
    /* its usage, arriving later, finds nothing: no result */
    usagespec_t u = OK_USAGE;
    feed_usage(&e, l.job, l.attempt, l.res, l.dep, &u, now + 10);
    batch_t after = step(&e, now + 10);
    ck_assert_int_eq(count_kind(&after, SL_MSG_RESULT), 0);
    batch_free(&after);
    env_done(&e);
}
END_TEST

/* A job whose tenant hashes to a partition another shard owns (a producer with another
 * partitioner, or one read after its partition was revoked) is counted and left alone. */
START_TEST(a_job_of_another_shard_s_partition_is_not_taken)
{
    env_t e;
    int64_t now;
    env_with_history(&e, &now);
    ck_assert_int_eq(sl_sched_shard(e.sched, 4, now), SL_OK);
    uint8_t owned[4] = {1, 1, 1, 1};
    owned[sl_kafka_key_partition("acme", 4)] = 0;
    ck_assert_int_eq(sl_sched_set_owned(e.sched, owned, now), SL_OK);
    feed_n(&e, "acme", 3, now);
    ck_assert_int_eq(dispatches_at(&e, now), 0);
    sl_sched_stats_t st;
    sl_sched_stats(e.sched, &st);
    ck_assert_int_eq(st.not_owned, 3);
    ck_assert_int_eq(st.jobs_received, 0);
    ck_assert_int_eq(st.partitions_owned, 3);
    ck_assert_str_eq(peek_sql(&e, "SELECT count(*) FROM jobs WHERE tenant = '%s'", "acme"), "0");
    env_done(&e);
}
END_TEST

/* A tenant whose partition comes from another shard: what that shard admitted under the
 * tenant's own per-minute limit is not known here, so the limit starts as if just used. */
START_TEST(a_tenant_taken_over_starts_its_own_limits_used)
{
    env_t e;
    int64_t now;
    env_with_history_globex(&e, 6000, &now);
    ck_assert_int_eq(sl_sched_shard(e.sched, 4, now), SL_OK);
    int globex = sl_kafka_key_partition("globex", 4);
    uint8_t owned[4] = {1, 1, 1, 1};
    owned[globex] = 0;
    ck_assert_int_eq(sl_sched_set_owned(e.sched, owned, now), SL_OK);
    double before = bucket_level(&e, "tenant:globex:tokens", now);
    ck_assert_double_gt(before, 150);
    owned[globex] = 1;
    ck_assert_int_eq(sl_sched_set_owned(e.sched, owned, now + 10), SL_OK);
    ck_assert_double_le(bucket_level(&e, "tenant:globex:tokens", now + 10), 0);
    feed_n(&e, "globex", 5, now + 10);
    ck_assert_int_eq(dispatches_at(&e, now + 10), 0);
    /* it refills at the limit's rate: jobs go within the minute */
    ck_assert_int_gt(dispatches_over(&e, now + 1000, now + MINUTE, 1000), 0);
    env_done(&e);
}
END_TEST

/* Every shared bucket granted share. */
static void grant_all(env_t *e, double share, int64_t now_ms)
{
    const char *ids[32];
    int64_t release[32];
    int n = sl_sched_shared_buckets(e->sched, now_ms, ids, release, 32);
    ck_assert_int_gt(n, 0);
    ck_assert_int_le(n, 32);
    for (int i = 0; i < n; i++) {
        ck_assert_int_ge(release[i], 0);
        ck_assert_int_eq(sl_sched_grant_share(e->sched, ids[i], share, now_ms), SL_OK);
    }
}

/* dep-a's per-minute token bucket, as a demand report says it. */
static sl_want_t demand_tpm(env_t *e, int64_t now_ms)
{
    const char *id = "deployment:dep-a:tpm";
    sl_want_t d;
    ck_assert_int_eq(sl_sched_demand(e->sched, now_ms, &id, 1, &d), SL_OK);
    return d;
}

/* A shard with capacity leases over 4 partitions, owning them all, on a database that ran. */
static void leased_shard(env_t *e, int64_t *now)
{
    shard_owning_all(e, 0, 1, now);
}

/* With capacity leases the coordinator's grants set the shares: none at the start whatever the
 * store says, the partitions owned change nothing, and a grant applies at once. A report says
 * the weight of the backlog, the share enforced and how much of the limit is still counted. */
START_TEST(leased_shares_come_from_grants_alone)
{
    env_t e;
    int64_t now;
    leased_shard(&e, &now);
    feed_n(&e, "acme", 60, now);
    ck_assert_int_eq(dispatches_over(&e, now, now + 5000, 1000), 0);
    sl_want_t d = demand_tpm(&e, now + 5000);
    ck_assert_double_gt(d.weight, 0);
    ck_assert_double_eq(d.want, 1);
    ck_assert_double_eq(d.held, 0);
    ck_assert_double_eq(d.used, 0);
    ck_assert_int_eq(sl_sched_grant_share(e.sched, "tenant:acme:nothing", 0.5, now), SL_ENOTFOUND);
    grant_all(&e, 0.5, now + 5000);
    /* Half the rate from an empty bucket (0.09 tokens/ms: at most about 36 jobs of 150 a
     * minute; the whole rate would take twice that). */
    int half = dispatches_over(&e, now + 6000, now + 65000, 1000);
    ck_assert_int_le(half, 38);
    ck_assert_int_ge(half, 25);
    d = demand_tpm(&e, now + 65000);
    ck_assert_double_eq(d.held, 0.5);
    ck_assert_double_gt(d.used, 0.3);
    ck_assert_double_le(d.used, 0.5 + 1e-9);
    /* Losing partitions changes no leased share. */
    own_first(&e, 4, 1, now + 65000);
    ck_assert_double_eq(demand_tpm(&e, now + 65000).held, 0.5);
    /* A lease run out: nothing more goes. */
    grant_all(&e, 0, now + 66000);
    ck_assert_int_eq(dispatches_over(&e, now + 66000, now + 90000, 1000), 0);
    env_done(&e);
}
END_TEST

/* A shard whose queue is empty asks only for a little: the rest is the others'. */
START_TEST(an_idle_shard_wants_little)
{
    env_t e;
    int64_t now;
    leased_shard(&e, &now);
    sl_want_t d = demand_tpm(&e, now);
    ck_assert_double_eq(d.weight, 0);
    ck_assert_double_lt(d.want, 0.1);
    ck_assert_double_gt(d.want, 0);
    env_done(&e);
}
END_TEST

/* A shard whose waiting tenants are held back by their own limits asks only for what those let
 * through (and a margin), so the other shards can have the rest; one waiting tenant without
 * such a limit makes it ask for everything. */
START_TEST(a_shard_held_back_by_its_tenants_limits_asks_for_no_more)
{
    env_t e;
    int64_t now;
    shard_owning_all(&e, 1200, 1, &now);
    feed_n(&e, "globex", 20, now);
    sl_want_t d = demand_tpm(&e, now);
    ck_assert_double_gt(d.weight, 0);
    /* globex's 1,200 tokens a minute of dep-a's 12,000 at 0.9 headroom, and a tenth more */
    ck_assert_double_eq_tol(d.want, 1.1 * 1200.0 / (12000 * 0.9), 0.005);
    feed_n(&e, "acme", 5, now);
    ck_assert_double_eq(demand_tpm(&e, now).want, 1);
    env_done(&e);
}
END_TEST

/* A shard whose waiting tenant has spent its own daily quota asks for next to nothing: its jobs
 * (deadlines past the reset) wait for the reset, not for the shared limit. (It asked for
 * everything before.) */
START_TEST(a_shard_whose_tenants_quota_is_spent_asks_for_little)
{
    acme_extra = ", 'buckets': [{'name': 'rpd', 'dimension': 'requests_per_day', 'capacity': 2}]";
    env_t e;
    int64_t now;
    leased_shard(&e, &now);
    acme_extra = "";
    grant_all(&e, 1.0, now);
    for (int i = 0; i < 5; i++) {
        char id[32];
        snprintf(id, sizeof id, "acme-%02d", i);
        jobspec_t j = {id, "acme", NULL, now, now + 48 * HOUR, 150, 100};
        feed_spec(&e, &j, now);
    }
    ck_assert_double_eq(demand_tpm(&e, now).want, 1);
    ck_assert_int_eq(dispatches_over(&e, now, now + 20000, 1000), 2);
    sl_want_t d = demand_tpm(&e, now + 20000);
    ck_assert_double_gt(d.weight, 0); /* three jobs still wait */
    ck_assert_double_lt(d.want, 0.05);
    env_done(&e);
}
END_TEST

typedef struct {
    int n;
    char res[4][40];
} leases_seen_t;

static void see_lease(const char *tenant, const char *job_id, int attempt, const char *res_id,
                      const char *deployment, int64_t expires_ms, void *arg)
{
    (void)tenant;
    (void)job_id;
    (void)attempt;
    (void)deployment;
    (void)expires_ms;
    leases_seen_t *l = arg;
    if (l->n < 4)
        snprintf(l->res[l->n], sizeof l->res[0], "%s", res_id);
    l->n++;
}

/* A call in flight of a partition gained is taken over: the queued job becomes leased under
 * the previous owner's attempt and reservation, nothing is dispatched again, and its usage event
 * finishes it here. Leases that are over, of an unknown deployment, or of a job that is not
 * queued are not taken (the job runs again, as before). */
START_TEST(a_lease_of_a_partition_gained_is_taken_over)
{
    env_t e;
    int64_t now;
    shard_owning_all(&e, 0, 0, &now);
    feed_job(&e, "acme-in-flight", "acme", now);
    feed_job(&e, "acme-other", "acme", now);
    char res[40];
    snprintf(res, sizeof res, "%012llx%04x%016x", (unsigned long long)(now - 500), 7, 0xabcdef);
    int adopted = -1;
    ck_assert_int_eq(
        sl_sched_adopt_lease(e.sched, "acme-in-flight", 2, res, "dep-a", now - 1, now, &adopted),
        SL_OK);
    ck_assert_int_eq(adopted, 0); /* over */
    ck_assert_int_eq(sl_sched_adopt_lease(e.sched, "acme-in-flight", 2, res, "dep-zz", now + 60000,
                                          now, &adopted),
                     SL_OK);
    ck_assert_int_eq(adopted, 0); /* unknown deployment */
    ck_assert_int_eq(sl_sched_adopt_lease(e.sched, "acme-in-flight", 2, res, "dep-a", now + 60000,
                                          now, &adopted),
                     SL_OK);
    ck_assert_int_eq(adopted, 1);
    ck_assert_int_eq(sl_sched_adopt_lease(e.sched, "acme-in-flight", 3, res, "dep-a", now + 60000,
                                          now, &adopted),
                     SL_OK);
    ck_assert_int_eq(adopted, 0); /* not queued any more */
    /* A reservation open here already: not taken twice. */
    ck_assert_int_eq(
        sl_sched_adopt_lease(e.sched, "acme-other", 2, res, "dep-a", now + 60000, now, &adopted),
        SL_OK);
    ck_assert_int_eq(adopted, 0);
    leases_seen_t seen = {0};
    sl_sched_each_lease(e.sched, see_lease, &seen);
    ck_assert_int_eq(seen.n, 1);
    ck_assert_str_eq(seen.res[0], res);
    batch_t b = step(&e, now + 10);
    ck_assert_ptr_null(find(&b, SL_MSG_DISPATCH, "acme-in-flight"));
    batch_free(&b);
    feed_usage(&e, "acme-in-flight", 2, res, "dep-a", &OK_USAGE, now + 100);
    b = step(&e, now + 110);
    json_t *r = find(&b, SL_MSG_RESULT, "acme-in-flight");
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(sget(r, "status"), "succeeded");
    ck_assert_int_eq(iget(r, "attempts"), 2);
    batch_free(&b);
    sl_sched_stats_t st;
    sl_sched_stats(e.sched, &st);
    ck_assert_int_eq(st.leases_adopted, 1);
    env_done(&e);
}
END_TEST

/* A call in flight handed over with its partition and handed back before it ended (a scheduler
 * joined and left again): the reservation this shard closed at the hand-over is opened again,
 * so the call is taken over, not made twice, and its usage event finishes the job here. (It ran
 * again before: the reservation was found and the lease refused.) */
START_TEST(a_call_handed_over_and_back_is_taken_over_again)
{
    env_t e;
    int64_t now;
    shard_owning_all(&e, 0, 0, &now);
    int acme_p = sl_sched_partition(e.sched, "acme");
    feed_job(&e, "acme-00", "acme", now);
    batch_t b = step(&e, now);
    json_t *d = find(&b, SL_MSG_DISPATCH, "acme-00");
    ck_assert_ptr_nonnull(d);
    lease_t l = lease_of(d, now);
    batch_free(&b);
    int n = -1;
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    ck_assert_int_eq(sl_sched_hand_over(e.sched, acme_p, now + 100, &n), SL_OK);
    ck_assert_int_eq(sl_store_commit(e.store), SL_OK);
    ck_assert_int_eq(n, 1);
    /* It comes back from the changelog with the lease record its other owner wrote. */
    jobspec_t j = {"acme-00", "acme", NULL, now, now + HOUR, 150, 100};
    char *text = job_text(&j);
    int adopted = -1;
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    ck_assert_int_eq(sl_sched_on_restored_job(e.sched, text, strlen(text), now + 2000), SL_OK);
    ck_assert_int_eq(sl_sched_adopt_lease(e.sched, "acme-00", l.attempt, l.res, l.dep, now + 60000,
                                          now + 2000, &adopted),
                     SL_OK);
    ck_assert_int_eq(sl_store_commit(e.store), SL_OK);
    free(text);
    ck_assert_int_eq(adopted, 1);
    ck_assert_str_eq(
        peek_sql(&e, "SELECT state FROM reservations WHERE reservation_id = '%s'", l.res), "open");
    b = step(&e, now + 2010);
    ck_assert_ptr_null(find(&b, SL_MSG_DISPATCH, "acme-00"));
    batch_free(&b);
    usagespec_t u = OK_USAGE;
    feed_usage(&e, l.job, l.attempt, l.res, l.dep, &u, now + 2100);
    b = step(&e, now + 2110);
    json_t *r = find(&b, SL_MSG_RESULT, "acme-00");
    ck_assert_ptr_nonnull(r);
    ck_assert_str_eq(sget(r, "status"), "succeeded");
    batch_free(&b);
    env_done(&e);
}
END_TEST

static Suite *shard_suite(void)
{
    Suite *s = suite_create("shard");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, a_new_shard_admits_nothing_until_its_gained_share_is_due);
    tcase_add_test(tc, half_the_partitions_admit_half_at_once);
    tcase_add_test(tc, the_whole_limit_on_a_database_that_was_not_sharded);
    tcase_add_test(tc, a_share_given_away_and_taken_back_waits_again);
    tcase_add_test(tc, a_share_taken_back_applies_once_due);
    tcase_add_test(tc, the_share_survives_a_restart_and_a_reload);
    tcase_add_test(tc, hand_over_takes_out_the_partition_s_jobs_only);
    tcase_add_test(tc, a_call_handed_over_and_back_is_taken_over_again);
    tcase_add_test(tc, a_job_of_another_shard_s_partition_is_not_taken);
    tcase_add_test(tc, a_tenant_taken_over_starts_its_own_limits_used);
    tcase_add_test(tc, leased_shares_come_from_grants_alone);
    tcase_add_test(tc, an_idle_shard_wants_little);
    tcase_add_test(tc, a_shard_held_back_by_its_tenants_limits_asks_for_no_more);
    tcase_add_test(tc, a_shard_whose_tenants_quota_is_spent_asks_for_little);
    tcase_add_test(tc, a_lease_of_a_partition_gained_is_taken_over);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(shard_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
