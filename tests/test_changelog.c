/* test_changelog.c - the changelog's records and their replay (scheduler/changelog.h): what a
 * scheduler on a new database takes back as unfinished, from records read in offset order per
 * partition. Records are built with sl_cl_encode and parsed with sl_cl_decode as they travel;
 * no Kafka is needed (e2e_changelog runs the real topic).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../scheduler/changelog.h"

/* A job message as the changelog carries it (only job_id matters to the replay). */
static void job_text(char *buf, size_t cap, const char *id)
{
    snprintf(buf, cap, "{\"job_id\":\"%s\",\"tenant\":\"acme\",\"route\":\"chat\"}", id);
}

/* Encodes and decodes one record, as a writer and a restore would. */
static sl_cl_rec_t rec(sl_cl_kind_t kind, int64_t seq, int64_t epoch, const char *id)
{
    char job[256];
    job_text(job, sizeof job, id != NULL ? id : "");
    size_t len = 0;
    char *text = sl_cl_encode(kind, seq, epoch, id, 1000 + seq, job, strlen(job), &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_uint_eq(len, strlen(text));
    sl_cl_rec_t r;
    ck_assert_int_eq(sl_cl_decode(text, len, &r), SL_OK);
    free(text);
    return r;
}

/* Feeds records into partition 0 at offsets from first, then applies with low. */
static sl_err_t replay(sl_cl_replay_t *r, int64_t first, int64_t low, sl_cl_rec_t *recs, int n)
{
    for (int i = 0; i < n; i++)
        sl_cl_replay_add(r, 0, first + i, &recs[i]);
    char err[256] = "";
    return sl_cl_replay_apply(r, 0, low, err, sizeof err);
}

/* Whether the replay calls id unfinished; checks every unfinished job's message on the way. */
static int live_has(const sl_cl_replay_t *r, const char *id)
{
    sl_cl_live_t *v = NULL;
    size_t n = 0;
    ck_assert_int_eq(sl_cl_replay_sorted(r, &v, &n), SL_OK);
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert_ptr_nonnull(strstr(v[i].job, v[i].job_id));
        ck_assert_uint_eq(v[i].len, strlen(v[i].job));
        found |= strcmp(v[i].job_id, id) == 0;
    }
    free(v);
    return found;
}

START_TEST(records_round_trip)
{
    sl_cl_rec_t j = rec(SL_CL_JOB, 7, 0, "job-1");
    ck_assert_int_eq(j.kind, SL_CL_JOB);
    ck_assert_int_eq(j.seq, 7);
    ck_assert_str_eq(j.job_id, "job-1");
    ck_assert_ptr_nonnull(strstr(j.job, "\"tenant\":\"acme\""));
    ck_assert_int_eq(j.submitted_ms, 1007);
    /* the message comes back byte for byte, not parsed and written again */
    char job[256];
    job_text(job, sizeof job, "job-1");
    ck_assert_str_eq(j.job, job);
    ck_assert_uint_eq(j.job_len, strlen(job));
    sl_cl_rec_clear(&j);
    /* no record for a job without a job id's shape */
    size_t len = 0;
    ck_assert_ptr_null(sl_cl_encode(SL_CL_JOB, 9, 0, "a\"b", 0, job, strlen(job), &len));
    ck_assert_ptr_null(sl_cl_encode(SL_CL_END, 9, 0, NULL, 0, NULL, 0, &len));
    sl_cl_rec_t e = rec(SL_CL_END, 8, 0, "job-1");
    ck_assert_int_eq(e.kind, SL_CL_END);
    ck_assert_str_eq(e.job_id, "job-1");
    ck_assert_ptr_null(e.job);
    sl_cl_rec_t b = rec(SL_CL_BEGIN, 9, 42, NULL), c = rec(SL_CL_CLOSE, 10, 42, NULL);
    ck_assert_int_eq(b.kind, SL_CL_BEGIN);
    ck_assert_int_eq(b.epoch, 42);
    ck_assert_int_eq(c.kind, SL_CL_CLOSE);
    ck_assert_int_eq(c.epoch, 42);
}
END_TEST

START_TEST(malformed_records_are_refused)
{
    static const char *const bad[] = {
        "",
        "null",
        "{\"v\":2,\"t\":\"end\",\"seq\":1,\"id\":\"a\"}",
        "{\"v\":1,\"t\":\"gone\",\"seq\":1,\"id\":\"a\"}",
        "{\"v\":1,\"t\":\"end\",\"id\":\"a\"}",
        "{\"v\":1,\"t\":\"end\",\"seq\":0,\"id\":\"a\"}",
        "{\"v\":1,\"t\":\"end\",\"seq\":\"1\",\"id\":\"a\"}",
        "{\"v\":1,\"t\":\"end\",\"seq\":1}",
        "{\"v\":1,\"t\":\"end\",\"seq\":1,\"id\":\"\"}",
        "{\"v\":1,\"t\":\"job\",\"seq\":1,\"job\":{\"tenant\":\"acme\"}}",
        "{\"v\":1,\"t\":\"job\",\"seq\":1,\"job\":\"{}\"}",
        "{\"v\":1,\"t\":\"job\",\"seq\":1,\"id\":\"a b\",\"sub\":5,\"job\":{}}",
        "{\"v\":1,\"t\":\"job\",\"seq\":1,\"id\":\"ab\",\"job\":{}}",
        "{\"v\":1,\"t\":\"job\",\"seq\":1,\"id\":\"ab\",\"sub\":5,\"job\":{}",
        "{\"v\":1,\"t\":\"job\",\"seq\":1,\"id\":\"ab\",\"sub\":5,\"job\":[]}",
        "{\"v\":1,\"t\":\"job\",\"seq\":-1,\"id\":\"ab\",\"sub\":5,\"job\":{}}",
        "{\"v\":1,\"t\":\"job\",\"seq\":1234567890123456789,\"id\":\"ab\",\"sub\":5,"
        "\"job\":{}}",
        "{\"v\":1, \"t\":\"job\",\"seq\":1,\"id\":\"ab\",\"sub\":5,\"job\":{}}",
        "{\"v\":1,\"t\":\"begin\",\"seq\":1}",
        "{\"v\":1,\"t\":\"close\",\"seq\":1,\"epoch\":-3}",
        "{\"v\":1,\"t\":\"end\",\"seq\":1,\"id\":\"a\",\"id\":\"b\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sl_cl_rec_t r;
        ck_assert_msg(sl_cl_decode(bad[i], strlen(bad[i]), &r) == SL_EINVAL, "accepted: %s",
                      bad[i]);
        ck_assert_ptr_null(r.job);
    }
    /* a NUL byte inside the job message (found by fuzz_changelog: the message was cut there
     * while its length said more) */
    static const char nul[] = "{\"v\":1,\"t\":\"job\",\"seq\":1,\"id\":\"ab\",\"sub\":5,"
                              "\"job\":{\"a\":\"x\0y\"}}";
    sl_cl_rec_t r0;
    ck_assert_int_eq(sl_cl_decode(nul, sizeof nul - 1, &r0), SL_EINVAL);
    ck_assert_ptr_null(r0.job);
    /* an id longer than any job id */
    char lng[200];
    snprintf(lng, sizeof lng, "{\"v\":1,\"t\":\"end\",\"seq\":1,\"id\":\"%0*d\"}",
             SL_JOB_ID_MAX + 1, 0);
    sl_cl_rec_t r;
    ck_assert_int_eq(sl_cl_decode(lng, strlen(lng), &r), SL_EINVAL);
}
END_TEST

START_TEST(a_job_is_live_until_its_end)
{
    sl_cl_replay_t *r = sl_cl_replay_new(1);
    sl_cl_rec_t recs[] = {rec(SL_CL_JOB, 1, 0, "a"), rec(SL_CL_JOB, 2, 0, "b"),
                          rec(SL_CL_END, 3, 0, "a"), rec(SL_CL_JOB, 4, 0, "c")};
    ck_assert_int_eq(replay(r, 0, 0, recs, 4), SL_OK);
    ck_assert_uint_eq(sl_cl_replay_live(r), 2);
    ck_assert(!live_has(r, "a"));
    ck_assert(live_has(r, "b") && live_has(r, "c"));
    ck_assert_int_eq(sl_cl_replay_last_seq(r, 0), 4);
    ck_assert_int_eq(sl_cl_replay_records(r), 4);
    sl_cl_replay_free(r);
}
END_TEST

/* A signed job record copied back into the topic after its end (a replay by someone who can
 * write to the topic) must not bring the finished job back: its seq is not above the last. */
START_TEST(a_replayed_record_does_not_bring_a_finished_job_back)
{
    sl_cl_replay_t *r = sl_cl_replay_new(1);
    sl_cl_rec_t recs[] = {rec(SL_CL_JOB, 10, 0, "a"), rec(SL_CL_END, 11, 0, "a"),
                          rec(SL_CL_JOB, 10, 0, "a"), rec(SL_CL_JOB, 5, 0, "z")};
    ck_assert_int_eq(replay(r, 0, 0, recs, 4), SL_OK);
    ck_assert_uint_eq(sl_cl_replay_live(r), 0);
    ck_assert_int_eq(sl_cl_replay_refused(r), 2);
    sl_cl_replay_free(r);
}
END_TEST

/* Older records were deleted (low > 0): the replay starts at the begin of the newest closed
 * snapshot, whatever came before it. */
START_TEST(a_trimmed_partition_replays_from_its_newest_closed_snapshot)
{
    sl_cl_replay_t *r = sl_cl_replay_new(1);
    sl_cl_rec_t recs[] = {
        rec(SL_CL_JOB, 1, 0, "old"), /* before the snapshot: not re-written, so finished */
        rec(SL_CL_BEGIN, 2, 100, NULL), rec(SL_CL_JOB, 3, 0, "b"),
        rec(SL_CL_CLOSE, 4, 100, NULL), rec(SL_CL_JOB, 5, 0, "c"),
        rec(SL_CL_BEGIN, 6, 200, NULL), /* never closed */
        rec(SL_CL_END, 7, 0, "b"),      rec(SL_CL_JOB, 8, 0, "d"),
    };
    ck_assert_int_eq(replay(r, 5000, 5000, recs, 8), SL_OK);
    ck_assert_uint_eq(sl_cl_replay_live(r), 2);
    ck_assert(live_has(r, "c") && live_has(r, "d"));
    ck_assert(!live_has(r, "old") && !live_has(r, "b"));
    sl_cl_replay_free(r);
}
END_TEST

START_TEST(a_trimmed_partition_without_a_whole_snapshot_is_refused)
{
    sl_cl_replay_t *r = sl_cl_replay_new(1);
    sl_cl_rec_t recs[] = {rec(SL_CL_JOB, 3, 0, "b"), rec(SL_CL_BEGIN, 4, 100, NULL),
                          rec(SL_CL_JOB, 5, 0, "b"), rec(SL_CL_CLOSE, 6, 99, NULL)};
    ck_assert_int_eq(replay(r, 10, 10, recs, 4), SL_EDB);
    sl_cl_replay_free(r);
    /* the same records with nothing deleted: every record counts */
    r = sl_cl_replay_new(1);
    sl_cl_rec_t again[] = {rec(SL_CL_JOB, 3, 0, "b"), rec(SL_CL_BEGIN, 4, 100, NULL),
                           rec(SL_CL_JOB, 5, 0, "b"), rec(SL_CL_CLOSE, 6, 99, NULL)};
    ck_assert_int_eq(replay(r, 0, 0, again, 4), SL_OK);
    ck_assert_uint_eq(sl_cl_replay_live(r), 1);
    sl_cl_replay_free(r);
}
END_TEST

/* Partitions replay on their own: a snapshot closed in one says nothing about another. */
START_TEST(partitions_replay_on_their_own)
{
    sl_cl_replay_t *r = sl_cl_replay_new(2);
    sl_cl_rec_t p0[] = {rec(SL_CL_BEGIN, 1, 7, NULL), rec(SL_CL_JOB, 2, 0, "a"),
                        rec(SL_CL_CLOSE, 3, 7, NULL)};
    sl_cl_rec_t p1[] = {rec(SL_CL_JOB, 1, 0, "x"), rec(SL_CL_BEGIN, 2, 7, NULL)};
    for (int i = 0; i < 3; i++)
        sl_cl_replay_add(r, 0, i, &p0[i]);
    for (int i = 0; i < 2; i++)
        sl_cl_replay_add(r, 1, 20 + i, &p1[i]);
    char err[256] = "";
    ck_assert_int_eq(sl_cl_replay_apply(r, 0, 40, err, sizeof err), SL_OK);
    ck_assert_int_eq(sl_cl_replay_apply(r, 1, 20, err, sizeof err), SL_EDB);
    ck_assert_ptr_nonnull(strstr(err, "partition 1"));
    sl_cl_replay_free(r);
}
END_TEST

/* The topic's settings must keep a whole snapshot: refused are compaction (records are keyed by
 * tenant), a retention.bytes below what the scheduler plans with, and a retention.ms that a
 * snapshot interval does not fit twice into. */
/* A lease record, as a revoking shard writes it and a restore reads it. */
static sl_cl_rec_t lease_rec(int64_t seq, const char *id, const char *res, int64_t exp)
{
    sl_cl_lease_t l = {.attempt = 2, .expires_ms = exp};
    snprintf(l.res_id, sizeof l.res_id, "%s", res);
    snprintf(l.deployment, sizeof l.deployment, "dep-a");
    size_t len = 0;
    char *text = sl_cl_encode_lease(seq, id, &l, &len);
    ck_assert_ptr_nonnull(text);
    sl_cl_rec_t r;
    ck_assert_int_eq(sl_cl_decode(text, len, &r), SL_OK);
    free(text);
    ck_assert_int_eq(r.kind, SL_CL_LEASE);
    ck_assert_int_eq(r.lease.attempt, 2);
    ck_assert_int_eq(r.lease.expires_ms, exp);
    ck_assert_str_eq(r.lease.res_id, res);
    ck_assert_str_eq(r.lease.deployment, "dep-a");
    return r;
}

/* The lease the replay hands over with job id (NULL: none), checked against the live list. */
static const char *live_lease(const sl_cl_replay_t *r, const char *id, char *res, size_t cap)
{
    sl_cl_live_t *v = NULL;
    size_t n = 0;
    ck_assert_int_eq(sl_cl_replay_sorted(r, &v, &n), SL_OK);
    const char *found = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].job_id, id) == 0 && v[i].lease != NULL) {
            snprintf(res, cap, "%s", v[i].lease->res_id);
            found = res;
        }
    free(v);
    return found;
}

/* A call in flight when its partition was given up is handed to the next owner with its job;
 * a later snapshot record of the job, or its end, means the lease is not one to take over. */
START_TEST(a_lease_record_goes_with_its_live_job)
{
    const char *res1 = "00019000000aaaa0123456789abcdef0",
               *res2 = "00019000000bbbb0123456789abcdef0";
    char got[40];
    sl_cl_replay_t *r = sl_cl_replay_new(1);
    sl_cl_rec_t recs[] = {rec(SL_CL_JOB, 1, 0, "job-a"),     rec(SL_CL_JOB, 2, 0, "job-b"),
                          lease_rec(3, "job-a", res1, 5000), lease_rec(4, "job-x", res2, 5000),
                          lease_rec(5, "job-b", res2, 6000), rec(SL_CL_END, 6, 0, "job-b")};
    ck_assert_int_eq(replay(r, 0, 0, recs, 6), SL_OK);
    ck_assert_ptr_nonnull(live_lease(r, "job-a", got, sizeof got));
    ck_assert_str_eq(got, res1);
    ck_assert(!live_has(r, "job-b")); /* ended: no lease to take over */
    ck_assert(!live_has(r, "job-x")); /* a lease alone brings no job */

    sl_cl_replay_free(r);

    r = sl_cl_replay_new(1);
    sl_cl_rec_t again[] = {rec(SL_CL_JOB, 1, 0, "job-a"), lease_rec(2, "job-a", res1, 5000),
                           rec(SL_CL_JOB, 3, 0, "job-a")};
    ck_assert_int_eq(replay(r, 0, 0, again, 3), SL_OK);
    ck_assert(live_has(r, "job-a"));
    ck_assert_ptr_null(live_lease(r, "job-a", got, sizeof got));
    sl_cl_replay_free(r);

    /* A job with a lease to take over comes first, whenever it was submitted. */
    r = sl_cl_replay_new(1);
    sl_cl_rec_t order_recs[] = {rec(SL_CL_JOB, 1, 0, "job-old"), rec(SL_CL_JOB, 2, 0, "job-new"),
                                lease_rec(3, "job-new", res1, 5000)};
    ck_assert_int_eq(replay(r, 0, 0, order_recs, 3), SL_OK);
    sl_cl_live_t *order = NULL;
    size_t n = 0;
    ck_assert_int_eq(sl_cl_replay_sorted(r, &order, &n), SL_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(order[0].job_id, "job-new");
    ck_assert_ptr_nonnull(order[0].lease);
    ck_assert_str_eq(order[1].job_id, "job-old");
    ck_assert_ptr_null(order[1].lease);
    free(order);
    sl_cl_replay_free(r);

    /* What a lease record may not carry is neither written nor read. */
    sl_cl_lease_t bad = {.attempt = 1, .expires_ms = 5000};
    snprintf(bad.res_id, sizeof bad.res_id, "has\"quote");
    snprintf(bad.deployment, sizeof bad.deployment, "dep-a");
    size_t len = 0;
    ck_assert_ptr_null(sl_cl_encode_lease(1, "job-a", &bad, &len));
    ck_assert_ptr_null(sl_cl_encode(SL_CL_LEASE, 1, 0, "job-a", 0, NULL, 0, &len));
    const char *refused[] = {
        "{\"v\":1,\"t\":\"lease\",\"seq\":1,\"id\":\"job-a\",\"att\":0,\"res\":\"r\","
        "\"dep\":\"d\",\"exp\":5}",
        "{\"v\":1,\"t\":\"lease\",\"seq\":1,\"id\":\"job-a\",\"att\":1,\"res\":\"\","
        "\"dep\":\"d\",\"exp\":5}",
        "{\"v\":1,\"t\":\"lease\",\"seq\":1,\"id\":\"job-a\",\"att\":1,\"res\":\"r\","
        "\"dep\":\"d\"}",
        "{\"v\":1,\"t\":\"lease\",\"seq\":1,\"id\":\"job a\",\"att\":1,\"res\":\"r\","
        "\"dep\":\"d\",\"exp\":5}",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        sl_cl_rec_t x;
        ck_assert_msg(sl_cl_decode(refused[i], strlen(refused[i]), &x) != SL_OK, "%zu taken", i);
    }
}
END_TEST

START_TEST(topic_settings_that_could_lose_jobs_are_refused)
{
    sl_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.kafka.topic_changelog = "sluice.changelog";
    cfg.changelog_retention_bytes = 5 << 20;
    cfg.changelog_snapshot_ms = 3600000;
    char err[512] = "";
    /* the dev broker: delete, 5 MB, no time limit */
    ck_assert_int_eq(sl_cl_check_retention(&cfg, "delete", -1, 5 << 20, err, sizeof err), SL_OK);
    /* unbounded by size and by time */
    ck_assert_int_eq(sl_cl_check_retention(&cfg, "delete", -1, -1, err, sizeof err), SL_OK);
    ck_assert_int_eq(sl_cl_check_retention(&cfg, "compact,delete", -1, -1, err, sizeof err),
                     SL_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "cleanup.policy=delete"));
    /* a broker that keeps less than the scheduler plans with */
    ck_assert_int_eq(sl_cl_check_retention(&cfg, "delete", -1, 1 << 20, err, sizeof err),
                     SL_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "at most 1048576"));
    cfg.changelog_retention_bytes = 0; /* planning for unbounded, on a bounded topic */
    ck_assert_int_eq(sl_cl_check_retention(&cfg, "delete", -1, 5 << 20, err, sizeof err),
                     SL_ECONFIG);
    ck_assert_int_eq(sl_cl_check_retention(&cfg, "delete", 7200000, -1, err, sizeof err), SL_OK);
    ck_assert_int_eq(sl_cl_check_retention(&cfg, "delete", 7199999, -1, err, sizeof err),
                     SL_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "retention.ms"));
    cfg.changelog_snapshot_ms = 0; /* no snapshot by time, on a topic that deletes by time */
    ck_assert_int_eq(sl_cl_check_retention(&cfg, "delete", 604800000, -1, err, sizeof err),
                     SL_ECONFIG);
}
END_TEST

static Suite *changelog_suite(void)
{
    Suite *s = suite_create("changelog");
    TCase *tc = tcase_create("records");
    tcase_add_test(tc, records_round_trip);
    tcase_add_test(tc, malformed_records_are_refused);
    suite_add_tcase(s, tc);
    tc = tcase_create("replay");
    tcase_add_test(tc, a_job_is_live_until_its_end);
    tcase_add_test(tc, a_replayed_record_does_not_bring_a_finished_job_back);
    tcase_add_test(tc, a_trimmed_partition_replays_from_its_newest_closed_snapshot);
    tcase_add_test(tc, a_trimmed_partition_without_a_whole_snapshot_is_refused);
    tcase_add_test(tc, partitions_replay_on_their_own);
    tcase_add_test(tc, topic_settings_that_could_lose_jobs_are_refused);
    tcase_add_test(tc, a_lease_record_goes_with_its_live_job);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(changelog_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
