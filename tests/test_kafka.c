/* test_kafka.c - librdkafka clients the sluice way (common/kafka.h), against librdkafka's mock
 * cluster on loopback: input the broker deleted before it was read is counted and logged
 * (sl_kafka_input_lost), and a group's first start, which also reads from the oldest message,
 * is not.
 *
 * The loss is made the way a real cluster makes it, as the consumer sees it: the group's
 * committed offset is past what the partition holds (as after retention deleted the segments
 * a stopped reader had not read yet, or the topic was made anew), so the fetch from it is out
 * of range and librdkafka goes on from the oldest message (auto.offset.reset earliest).
 */
#include <check.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "kafka.h"
#include "util.h"

#define TOPIC "lost.jobs"
#define MESSAGES 3

static rd_kafka_t *mock_owner;
static rd_kafka_mock_cluster_t *mock;
static char bootstraps[256];
static char dir[64];

static void start_mock(void)
{
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    ck_assert_int_eq(rd_kafka_conf_set(conf, "log_level", "0", err, sizeof err), RD_KAFKA_CONF_OK);
    mock_owner = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    ck_assert_msg(mock_owner != NULL, "%s", err);
    mock = rd_kafka_mock_cluster_new(mock_owner, 1);
    ck_assert_ptr_nonnull(mock);
    snprintf(bootstraps, sizeof bootstraps, "%s", rd_kafka_mock_cluster_bootstraps(mock));
    ck_assert_int_eq(rd_kafka_mock_topic_create(mock, TOPIC, 1, 1), RD_KAFKA_RESP_ERR_NO_ERROR);

    /* MESSAGES messages: offsets 0 .. MESSAGES - 1. */
    conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps, err, sizeof err);
    rd_kafka_t *prod = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    ck_assert_msg(prod != NULL, "%s", err);
    for (int i = 0; i < MESSAGES; i++)
        ck_assert_int_eq(rd_kafka_producev(prod, RD_KAFKA_V_TOPIC(TOPIC), RD_KAFKA_V_PARTITION(0),
                                           RD_KAFKA_V_VALUE("m", 1), RD_KAFKA_V_END),
                         RD_KAFKA_RESP_ERR_NO_ERROR);
    ck_assert_int_eq(rd_kafka_flush(prod, 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_destroy(prod);
}

/* Removes the config's directory. */
static void remove_dir(void)
{
    char cmd[128];
    if (dir[0] != '\0') {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
        dir[0] = '\0';
    }
}

static void stop_mock(void)
{
    rd_kafka_mock_cluster_destroy(mock);
    rd_kafka_destroy(mock_owner);
    remove_dir();
}

/* Commits offset for group on TOPIC [0], as a reader that stopped there would have. */
static void commit_offset(const char *group, int64_t offset)
{
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps, err, sizeof err);
    rd_kafka_conf_set(conf, "group.id", group, err, sizeof err);
    /* It fetches from its assignment too, from 1000: its own reset warning is not the test's. */
    rd_kafka_conf_set(conf, "log_level", "0", err, sizeof err);
    rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    ck_assert_msg(c != NULL, "%s", err);
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(parts, TOPIC, 0)->offset = offset;
    ck_assert_int_eq(rd_kafka_assign(c, parts), RD_KAFKA_RESP_ERR_NO_ERROR);
    ck_assert_int_eq(rd_kafka_commit(c, parts, 0 /* sync */), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_destroy(parts);
    rd_kafka_consumer_close(c);
    rd_kafka_destroy(c);
}

/* A config whose kafka section is kafka_json (a JSON object's members); with dev_broker, also
 * a bootstrap_file naming 127.0.0.1:1, as sluice-devkafka writes one. */
static sl_config_t *config_with(const char *kafka_json, int dev_broker)
{
    snprintf(dir, sizeof dir, "/tmp/sluice-test-kafka-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[128], key[128], text[1024], err[512] = "";
    snprintf(key, sizeof key, "%s/provider.key", dir);
    FILE *f = fopen(key, "w");
    ck_assert_ptr_nonnull(f);
    fputs("any-key\n", f);
    fclose(f);
    char kafka[512] = "";
    if (dev_broker) {
        snprintf(path, sizeof path, "%s/bootstrap", dir);
        f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs("127.0.0.1:1\n", f);
        fclose(f);
        snprintf(kafka, sizeof kafka, ", \"bootstrap_file\": \"%s\"", path);
    }
    snprintf(path, sizeof path, "%s/sluice.json", dir);
    snprintf(text, sizeof text,
             "{\"kafka\": {%s%s},"
             " \"deployments\": [{\"name\": \"d\", \"base_url\": \"http://127.0.0.1:1/v1\","
             " \"model\": \"m\", \"api_key_file\": \"%s\"}],"
             " \"routes\": [{\"name\": \"r\", \"deployments\": [\"d\"]}]}",
             kafka_json, kafka, key);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    sl_config_t *cfg = NULL;
    ck_assert_msg(sl_config_load(path, &cfg, err, sizeof err) == SL_OK, "config: %s", err);
    return cfg;
}

/* A config whose Kafka is the mock cluster, read the way sluice's daemons read the dev broker. */
static sl_config_t *mock_config(void)
{
    char kafka[512];
    snprintf(kafka, sizeof kafka, "\"bootstrap_servers\": \"%s\", \"membership\": \"static\"",
             bootstraps);
    return config_with(kafka, 0);
}

/* A consumer of group for cfg, not subscribed to anything (nothing is fetched), and the value
 * of its librdkafka property name ("" when unset). */
static void consumer_property(const sl_config_t *cfg, const char *group, const char *name,
                              char *value, size_t size)
{
    char err[512] = "";
    rd_kafka_t *c = NULL;
    ck_assert_msg(sl_kafka_consumer_new(cfg, group, "test-kafka", NULL, 0, NULL, &c, err,
                                        sizeof err) == SL_OK,
                  "consumer: %s", err);
    value[0] = '\0';
    size_t len = size;
    if (rd_kafka_conf_get(rd_kafka_conf(c), name, value, &len) != RD_KAFKA_CONF_OK)
        value[0] = '\0';
    rd_kafka_destroy(c);
}

/* On a real cluster a group member is static (KIP-345: a member back within the session
 * timeout keeps its partitions without a rebalance) and rebalances cooperatively (only the
 * partitions that move stop); on the dev broker, which implements neither, it is neither. */
START_TEST(group_members_are_static_and_cooperative_on_a_real_cluster)
{
    /* nothing listens there: the consumer is only made, never connected */
    sl_config_t *cfg = config_with("\"bootstrap_servers\": \"127.0.0.1:1\","
                                   " \"membership\": \"group\", \"instance\": \"sched-a\"",
                                   0);
    char v[256];
    consumer_property(cfg, "sluice-scheduler", "group.instance.id", v, sizeof v);
    ck_assert_str_eq(v, "sluice-scheduler.sched-a");
    consumer_property(cfg, "sluice-scheduler", "partition.assignment.strategy", v, sizeof v);
    ck_assert_str_eq(v, "cooperative-sticky");
    consumer_property(cfg, "sluice-scheduler", "session.timeout.ms", v, sizeof v);
    ck_assert_str_eq(v, "6000");
    sl_config_free(cfg);
    remove_dir();

    /* the dev broker (no bootstrap_servers): a plain member, librdkafka's own strategy */
    cfg = config_with("\"membership\": \"group\"", 1 /*dev broker*/);
    consumer_property(cfg, "sluice-scheduler", "group.instance.id", v, sizeof v);
    ck_assert_str_eq(v, "");
    consumer_property(cfg, "sluice-scheduler", "partition.assignment.strategy", v, sizeof v);
    ck_assert_str_ne(v, "cooperative-sticky");
    sl_config_free(cfg);
    remove_dir();
}
END_TEST

/* Reads TOPIC as group until every message came or 10 s passed; returns the messages read. */
static int read_all(const sl_config_t *cfg, const char *group)
{
    static const char *const topics[] = {TOPIC};
    char err[512] = "";
    rd_kafka_t *c = NULL;
    ck_assert_msg(sl_kafka_consumer_new(cfg, group, "test-kafka", topics, 1, NULL, &c, err,
                                        sizeof err) == SL_OK,
                  "consumer: %s", err);
    int got = 0;
    for (double until = sl_mono_ms() + 10000; got < MESSAGES && sl_mono_ms() < until;) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 100);
        if (m == NULL)
            continue;
        if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR)
            got++;
        rd_kafka_message_destroy(m);
    }
    sl_kafka_consumer_close(c);
    return got;
}

START_TEST(input_the_broker_deleted_unread_is_counted_and_a_first_start_is_not)
{
    start_mock();
    sl_config_t *cfg = mock_config();

    /* A group with no committed offset reads from the oldest message too: no loss. */
    ck_assert_int_eq(read_all(cfg, "sluice-test-fresh"), MESSAGES);
    ck_assert_int_eq(sl_kafka_input_lost(TOPIC), 0);

    /* A group that had read up to 1000: the broker holds 0 .. 2 only. */
    commit_offset("sluice-test-behind", 1000);
    ck_assert_int_eq(read_all(cfg, "sluice-test-behind"), MESSAGES);
    ck_assert_int_eq(sl_kafka_input_lost(TOPIC), 1);
    ck_assert_int_eq(sl_kafka_input_lost("another.topic"), 0);

    /* The daemons' metric. */
    sl_metrics_t *m = sl_metrics_new();
    ck_assert_ptr_nonnull(m);
    int family = sl_kafka_lost_family(m);
    ck_assert_int_ge(family, 0);
    sl_kafka_export_lost(m, family);
    sl_kafka_export_lost(m, family); /* a second export adds nothing */
    char *text = sl_metrics_render(m);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, SL_KAFKA_LOST_METRIC "{topic=\"" TOPIC "\"} 1\n") != NULL, "%s",
                  text);
    free(text);
    sl_metrics_free(m);

    sl_config_free(cfg);
    stop_mock();
}
END_TEST

static void note_partition(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    (void)opaque;
    ck_assert_int_eq(m->err, RD_KAFKA_RESP_ERR_NO_ERROR);
    *(int32_t *)m->_private = m->partition;
}

/* The scheduler finds a tenant's partition without a message in hand (a shard's jobs, its
 * changelog records): the partition librdkafka's default partitioner gave a message keyed by
 * it. */
START_TEST(a_key_s_partition_is_where_the_default_partitioner_puts_it)
{
    start_mock();
    enum { PARTS = 7, KEYS = 40 };
    ck_assert_int_eq(rd_kafka_mock_topic_create(mock, "keyed", PARTS, 1),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstraps, err, sizeof err);
    rd_kafka_conf_set_dr_msg_cb(conf, note_partition);
    rd_kafka_t *prod = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    ck_assert_msg(prod != NULL, "%s", err);
    int32_t got[KEYS];
    char keys[KEYS][32];
    for (int i = 0; i < KEYS; i++) {
        snprintf(keys[i], sizeof keys[i], i % 2 ? "tenant-%d" : "t%d.example", i);
        got[i] = -1;
        ck_assert_int_eq(rd_kafka_producev(prod, RD_KAFKA_V_TOPIC("keyed"),
                                           RD_KAFKA_V_KEY(keys[i], strlen(keys[i])),
                                           RD_KAFKA_V_VALUE("m", 1), RD_KAFKA_V_OPAQUE(&got[i]),
                                           RD_KAFKA_V_END),
                         RD_KAFKA_RESP_ERR_NO_ERROR);
    }
    ck_assert_int_eq(rd_kafka_flush(prod, 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
    int seen[PARTS] = {0};
    for (int i = 0; i < KEYS; i++) {
        ck_assert_int_eq(sl_kafka_key_partition(keys[i], PARTS), got[i]);
        seen[got[i]]++;
    }
    int used = 0;
    for (int p = 0; p < PARTS; p++)
        used += seen[p] > 0;
    ck_assert_int_gt(used, 1); /* the keys spread: the comparison means something */
    rd_kafka_destroy(prod);
    stop_mock();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kafka");
    TCase *tc = tcase_create("mock");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, input_the_broker_deleted_unread_is_counted_and_a_first_start_is_not);
    tcase_add_test(tc, group_members_are_static_and_cooperative_on_a_real_cluster);
    tcase_add_test(tc, a_key_s_partition_is_where_the_default_partitioner_puts_it);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
