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

START_TEST(rule)
{
    int64_t written[4] = {9, -1, 99, 4};
    int64_t committed[4] = {10, -1, 40, -1};
    /* partition 0 read to its end, 1 never written, 2: 60 behind, 3: never committed, 5. */
    ck_assert_int_eq(sl_backlog_compute(written, committed, 4), 60);
    committed[2] = 100;
    ck_assert_int_eq(sl_backlog_compute(written, committed, 4), 5);
    committed[3] = 5;
    ck_assert_int_eq(sl_backlog_compute(written, committed, 4), 0);
    /* A commit past what this ingest wrote (another ingest wrote more) is not negative. */
    committed[0] = 500;
    ck_assert_int_eq(sl_backlog_compute(written, committed, 4), 0);
    ck_assert_int_eq(sl_backlog_compute(written, committed, 0), 0);
}
END_TEST

START_TEST(ignores_other_topics_and_bad_partitions)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char err[256];
    rd_kafka_conf_set(conf, "bootstrap.servers", "127.0.0.1:1", err, sizeof err);
    rd_kafka_conf_set(conf, "log_level", "0", err, sizeof err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    ck_assert_ptr_nonnull(rk);
    sl_backlog_t *b = sl_backlog_new(rk, TOPIC, GROUP);
    ck_assert_ptr_nonnull(b);
    int64_t now = (int64_t)sl_mono_ms();
    ck_assert_int_eq(sl_backlog_max(b, now), 0); /* nothing written: nothing behind */
    sl_backlog_written(b, "results", 0, 10);
    sl_backlog_written(b, TOPIC, -1, 10);
    sl_backlog_written(b, TOPIC, SL_BACKLOG_MAX_PARTITIONS, 10);
    sl_backlog_written(b, TOPIC, 3, -1);
    ck_assert_int_eq(sl_backlog_max(b, now), 0);
    sl_backlog_written(b, TOPIC, 3, 7);
    /* Written to, never answered (the broker at port 1 is not there): unknown. */
    ck_assert_int_eq(sl_backlog_max(b, now), -1);
    sl_backlog_step(b, now);
    ck_assert_int_eq(sl_backlog_max(b, now), -1);
    sl_backlog_free(b);
    rd_kafka_destroy(rk);
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
    sl_backlog_written(told, rd_kafka_topic_name(m->rkt), m->partition, m->offset);
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

    /* 300 jobs on partition 1, 20 on partition 2; the group has committed nothing yet. */
    for (int i = 0; i < 320; i++)
        ck_assert_int_eq(rd_kafka_producev(prod, RD_KAFKA_V_TOPIC(TOPIC),
                                           RD_KAFKA_V_PARTITION(i < 300 ? 1 : 2),
                                           RD_KAFKA_V_VALUE("job", 3), RD_KAFKA_V_END),
                         RD_KAFKA_RESP_ERR_NO_ERROR);
    ck_assert_int_eq(rd_kafka_flush(prod, 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
    ck_assert_int_eq(backlog_becomes(told, 300), 300);

    /* The scheduler stores 250 of partition 1: partition 2's 20 are now the most behind... */
    commit_offset(1, 250);
    ck_assert_int_eq(backlog_becomes(told, 50), 50);
    /* ...and when it has read everything, nothing is behind. */
    commit_offset(1, 300);
    commit_offset(2, 20);
    ck_assert_int_eq(backlog_becomes(told, 0), 0);

    /* With the broker gone, the last answer ages into "unknown", which holds nothing back. */
    stop_mock();
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
    tcase_add_test(tc, rule);
    tcase_add_test(tc, ignores_other_topics_and_bad_partitions);
    tcase_add_test(tc, reads_the_group_commits_from_the_broker);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
