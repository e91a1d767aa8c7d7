/* test_backlog.c - ingest's view of the schedulers' backlog on the jobs topic
 * (ingest/backlog.h): the rule, and the committed offsets read through the admin API from
 * librdkafka's mock cluster (the dev broker), with the offsets learnt from real delivery
 * reports. */
#include <check.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../ingest/backlog.h"
#include "util.h"

#define TOPIC "jobs"
#define GROUP "schedulers"

static void write_jobs(sl_backlog_t *b, int32_t partition, int64_t from, int count, size_t bytes)
{
    for (int i = 0; i < count; i++)
        sl_backlog_landed(b, TOPIC, partition, from + i, bytes, 1);
}

START_TEST(counts_the_bytes_not_committed)
{
    sl_backlog_t *b = sl_backlog_new(NULL, TOPIC, GROUP);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(sl_backlog_max(b, 1000), 0); /* nothing written: nothing behind */
    write_jobs(b, 0, 0, 10, 1000);
    write_jobs(b, 2, 0, 100, 100);
    write_jobs(b, 3, 0, 5, 1000);
    /* Written to, never answered: unknown. */
    ck_assert_int_eq(sl_backlog_max(b, 1000), -1);
    /* Partition 0 read to its end; 2: 60 jobs of 100 bytes behind; 3 never committed. */
    int64_t committed[4] = {10, -1, 40, -1};
    sl_backlog_answer(b, committed, 4, 1000);
    ck_assert_int_eq(sl_backlog_max(b, 1000), 6000);
    committed[2] = 100;
    sl_backlog_answer(b, committed, 4, 1100);
    ck_assert_int_eq(sl_backlog_max(b, 1100), 5000);
    /* Sizes are the jobs' own: small ones among big ones do not make the big ones small. */
    write_jobs(b, 3, 5, 20, 10);
    ck_assert_int_eq(sl_backlog_max(b, 1100), 5200);
    committed[3] = 5;
    sl_backlog_answer(b, committed, 4, 1200);
    ck_assert_int_eq(sl_backlog_max(b, 1200), 200);
    /* A commit past what this ingest wrote (another ingest wrote more) leaves nothing. */
    committed[0] = 500;
    committed[3] = 500;
    sl_backlog_answer(b, committed, 4, 1300);
    ck_assert_int_eq(sl_backlog_max(b, 1300), 0);
    /* An answer gets old: unknown while something is unread. */
    write_jobs(b, 0, 500, 1, 7);
    ck_assert_int_eq(sl_backlog_max(b, 1300), 7);
    ck_assert_int_eq(sl_backlog_max(b, 1300 + SL_BACKLOG_STALE_MS + 1), -1);
    sl_backlog_free(b);
}
END_TEST

START_TEST(past_the_ring_counts_until_a_commit_passes)
{
    sl_backlog_t *b = sl_backlog_new(NULL, TOPIC, GROUP);
    ck_assert_ptr_nonnull(b);
    write_jobs(b, 1, 0, SL_BACKLOG_RING_MAX + 10, 1);
    int64_t committed[2] = {-1, 5};
    sl_backlog_answer(b, committed, 2, 1000);
    /* Offsets 0 - 9 left the ring: a commit inside them cannot say how much of them is read. */
    ck_assert_int_eq(sl_backlog_max(b, 1000), SL_BACKLOG_RING_MAX + 10);
    committed[1] = 10;
    sl_backlog_answer(b, committed, 2, 1000);
    ck_assert_int_eq(sl_backlog_max(b, 1000), SL_BACKLOG_RING_MAX);
    committed[1] = SL_BACKLOG_RING_MAX;
    sl_backlog_answer(b, committed, 2, 1000);
    ck_assert_int_eq(sl_backlog_max(b, 1000), 10);
    committed[1] = SL_BACKLOG_RING_MAX + 10;
    sl_backlog_answer(b, committed, 2, 1000);
    ck_assert_int_eq(sl_backlog_max(b, 1000), 0);
    sl_backlog_free(b);
}
END_TEST

START_TEST(jobs_on_their_way_count_before_they_land)
{
    sl_backlog_t *b = sl_backlog_new(NULL, TOPIC, GROUP);
    ck_assert_ptr_nonnull(b);
    for (int i = 0; i < 3; i++)
        sl_backlog_sent(b, TOPIC, 100);
    /* Nothing landed yet: what is in the producer's queue is ahead of the next job. */
    ck_assert_int_eq(sl_backlog_max(b, 1000), 300);
    sl_backlog_landed(b, TOPIC, 0, 0, 100, 1);
    int64_t committed[1] = {-1};
    sl_backlog_answer(b, committed, 1, 1000);
    ck_assert_int_eq(sl_backlog_max(b, 1000), 300);
    /* A failed delivery leaves the queue (its take sends it again, and tells again). */
    sl_backlog_landed(b, TOPIC, -1, -1, 100, 0);
    ck_assert_int_eq(sl_backlog_max(b, 1000), 200);
    committed[0] = 1;
    sl_backlog_answer(b, committed, 1, 1000);
    ck_assert_int_eq(sl_backlog_max(b, 1000), 100);
    sl_backlog_landed(b, TOPIC, 0, 1, 100, 1);
    ck_assert_int_eq(sl_backlog_max(b, 1000), 100);
    committed[0] = 2;
    sl_backlog_answer(b, committed, 1, 1000);
    ck_assert_int_eq(sl_backlog_max(b, 1000), 0);
    sl_backlog_free(b);
}
END_TEST

START_TEST(holds_only_past_a_bound_that_is_on)
{
    sl_backlog_t *b = sl_backlog_new(NULL, TOPIC, GROUP);
    ck_assert_ptr_nonnull(b);
    write_jobs(b, 0, 0, 10, 100);
    /* Unread, but no answer yet: unknown holds nothing back. */
    ck_assert_int_eq(sl_backlog_holds(b, 500, 1000), 0);
    int64_t committed[1] = {-1};
    sl_backlog_answer(b, committed, 1, 1000);
    ck_assert_int_eq(sl_backlog_holds(b, 500, 1000), 1);
    ck_assert_int_eq(sl_backlog_holds(b, 1000, 1000), 0);
    /* Regression: a reload that sets the bound to 0 turns it off; it held whenever anything
     * was unread. */
    ck_assert_int_eq(sl_backlog_holds(b, 0, 1000), 0);
    ck_assert_int_eq(sl_backlog_holds(NULL, 500, 1000), 0);
    sl_backlog_free(b);
}
END_TEST

START_TEST(ignores_other_topics_and_bad_partitions)
{
    sl_backlog_t *b = sl_backlog_new(NULL, TOPIC, GROUP);
    ck_assert_ptr_nonnull(b);
    sl_backlog_sent(b, "results", 100);
    sl_backlog_landed(b, "results", 0, 10, 100, 1);
    sl_backlog_landed(b, TOPIC, -1, 10, 100, 1);
    sl_backlog_landed(b, TOPIC, SL_BACKLOG_MAX_PARTITIONS, 10, 100, 1);
    sl_backlog_landed(b, TOPIC, 3, -1, 100, 1);
    ck_assert_int_eq(sl_backlog_max(b, 1000), 0);
    sl_backlog_free(b);
}
END_TEST

static rd_kafka_t *mock_owner;
static rd_kafka_mock_cluster_t *mock;
static char bootstraps[256];

static void start_mock(void)
{
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "0", err, sizeof err);
    mock_owner = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    ck_assert_msg(mock_owner != NULL, "%s", err);
    mock = rd_kafka_mock_cluster_new(mock_owner, 1);
    ck_assert_ptr_nonnull(mock);
    snprintf(bootstraps, sizeof bootstraps, "%s", rd_kafka_mock_cluster_bootstraps(mock));
    ck_assert_int_eq(rd_kafka_mock_topic_create(mock, TOPIC, 4, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
}

static void stop_mock(void)
{
    rd_kafka_mock_cluster_destroy(mock);
    rd_kafka_destroy(mock_owner);
}

/* Delivery reports go to the backlog, as ingest's do. */
static sl_backlog_t *told;
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    (void)opaque;
    ck_assert_int_eq(m->err, RD_KAFKA_RESP_ERR_NO_ERROR);
    sl_backlog_landed(told, rd_kafka_topic_name(m->rkt), m->partition, m->offset, m->len, 1);
}

/* Commits offset for GROUP on TOPIC [partition], as a scheduler that stored that far would. */
static void commit_offset(int32_t partition, int64_t offset)
{
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps, err, sizeof err);
    rd_kafka_conf_set(conf, "group.id", GROUP, err, sizeof err);
    rd_kafka_conf_set(conf, "log_level", "0", err, sizeof err);
    rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    ck_assert_msg(c != NULL, "%s", err);
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(parts, TOPIC, partition)->offset = offset;
    ck_assert_int_eq(rd_kafka_commit(c, parts, 0 /* sync */), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(parts);
    rd_kafka_destroy(c);
}

/* Steps b until its backlog is expect, at most 10 s; the last backlog it had. */
static int64_t backlog_becomes(sl_backlog_t *b, int64_t expect)
{
    int64_t max = -2;
    double until = sl_mono_ms() + 10000;
    while (sl_mono_ms() < until) {
        int64_t now = (int64_t)sl_mono_ms();
        sl_backlog_step(b, now);
        max = sl_backlog_max(b, now);
        if (max == expect)
            break;
        usleep(10 * 1000);
    }
    return max;
}

START_TEST(reads_the_group_commits_from_the_broker)
{
    start_mock();
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps, err, sizeof err);
    rd_kafka_conf_set(conf, "log_level", "0", err, sizeof err); /* the broker goes, on purpose */
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_t *prod = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    ck_assert_msg(prod != NULL, "%s", err);
    told = sl_backlog_new(prod, TOPIC, GROUP);
    ck_assert_ptr_nonnull(told);

    /* 300 jobs of 10 bytes on partition 1, 20 of 100 bytes on partition 2; the group has
     * committed nothing yet. */
    static const char job[100];
    for (int i = 0; i < 320; i++)
        ck_assert_int_eq(
            rd_kafka_producev(prod, RD_KAFKA_V_TOPIC(TOPIC), RD_KAFKA_V_PARTITION(i < 300 ? 1 : 2),
                              RD_KAFKA_V_VALUE((void *)job, i < 300 ? 10 : 100), RD_KAFKA_V_END),
            RD_KAFKA_RESP_ERR_NO_ERROR);
    ck_assert_int_eq(rd_kafka_flush(prod, 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
    ck_assert_int_eq(backlog_becomes(told, 3000), 3000);

    /* The scheduler stores 250 of partition 1: partition 2's 20 are now the most behind... */
    commit_offset(1, 250);
    ck_assert_int_eq(backlog_becomes(told, 2000), 2000);
    /* ...and when it has read everything, nothing is behind. */
    commit_offset(1, 300);
    commit_offset(2, 20);
    ck_assert_int_eq(backlog_becomes(told, 0), 0);
    /* Regression: with nothing unread there is nothing to ask, and the backlog stays known
     * (the admin API refused the empty question, and the last answer aged while nothing was
     * behind, so the next job found the backlog unknown). */
    int64_t t0 = (int64_t)sl_mono_ms();
    while ((int64_t)sl_mono_ms() < t0 + 3 * SL_BACKLOG_REFRESH_MS) {
        sl_backlog_step(told, (int64_t)sl_mono_ms());
        usleep(10 * 1000);
    }
    sl_backlog_landed(told, TOPIC, 2, 20, 10, 1);
    ck_assert_int_eq(sl_backlog_max(told, t0 + SL_BACKLOG_STALE_MS + SL_BACKLOG_REFRESH_MS), 10);
    int64_t committed2[3] = {-1, -1, 21};
    sl_backlog_answer(told, committed2, 3, (int64_t)sl_mono_ms());
    ck_assert_int_eq(sl_backlog_max(told, (int64_t)sl_mono_ms()), 0);

    /* With the broker gone, the last answer ages into "unknown" (which holds nothing back)
     * as soon as anything is unread. */
    stop_mock();
    sl_backlog_landed(told, TOPIC, 1, 300, 10, 1);
    int64_t later = (int64_t)sl_mono_ms() + SL_BACKLOG_STALE_MS + 1;
    ck_assert_int_eq(sl_backlog_max(told, later), -1);

    sl_backlog_free(told);
    told = NULL;
    rd_kafka_destroy(prod);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backlog");
    TCase *tc = tcase_create("backlog");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, counts_the_bytes_not_committed);
    tcase_add_test(tc, past_the_ring_counts_until_a_commit_passes);
    tcase_add_test(tc, jobs_on_their_way_count_before_they_land);
    tcase_add_test(tc, holds_only_past_a_bound_that_is_on);
    tcase_add_test(tc, ignores_other_topics_and_bad_partitions);
    tcase_add_test(tc, reads_the_group_commits_from_the_broker);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
