/* sluice-devkafka: a development Kafka broker. It hosts librdkafka's mock cluster, which speaks
 * the real Kafka protocol over TCP on loopback (in memory, about 5 MB retained per partition),
 * creates sluice's topics with enough partitions that retention is not what loses a job, and
 * writes its bootstrap address to a file the other processes read by default. */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "proc.h"
#include "util.h"

static const char usage_text[] =
    "usage: sluice-devkafka [--config FILE] [--partitions N] [--brokers N]\n"
    "                       [--bootstrap-file PATH] [--refuse-joins CODE] [--log-level L]\n"
    "                       [--help]\n"
    "\n"
    "Runs librdkafka's mock Kafka cluster on loopback for development and tests, creates the\n"
    "topics named in the config (default sluice.requests, .requests.batch, .jobs, .dispatch, "
    ".results, .usage, .stream)\n"
    "and every tenant's own results_topic and stream_topic, "
    "with N partitions each (default 32), writes the bootstrap address to PATH (default the\n"
    "config's kafka.bootstrap_file, var/devkafka.bootstrap) and runs until SIGTERM/SIGINT.\n"
    "All data is in memory and lost when it exits; the mock keeps about 5 MB or 100,000\n"
    "message sets per partition and silently drops older data (see docs/dev-kafka.md).\n"
    "\n"
    "  --refuse-joins CODE  for tests: answer every consumer group's JoinGroup with Kafka\n"
    "                       error CODE (e.g. 26, INVALID_SESSION_TIMEOUT, what a real broker\n"
    "                       answers a session timeout outside its allowed range)\n";

/* Creates one topic on the mock cluster; 0 on success, else says why and returns 1. */
static int create_topic(rd_kafka_mock_cluster_t *mc, const char *topic, long long partitions,
                        long long brokers)
{
    rd_kafka_resp_err_t kerr = rd_kafka_mock_topic_create(mc, topic, (int)partitions, (int)brokers);
    if (kerr == RD_KAFKA_RESP_ERR_NO_ERROR)
        return 0;
    fprintf(stderr, "sluice-devkafka: create topic %s: %s\n", topic, rd_kafka_err2str(kerr));
    return 1;
}

int main(int argc, char **argv)
{
    sl_proc_opts_t opts;
    const char *partitions_arg = NULL, *brokers_arg = NULL, *bootstrap_file = NULL;
    const char *refuse_arg = NULL;
    const sl_proc_opt_t own[] = {{"partitions", &partitions_arg, NULL},
                                 {"brokers", &brokers_arg, NULL},
                                 {"bootstrap-file", &bootstrap_file, NULL},
                                 {"refuse-joins", &refuse_arg, NULL},
                                 {NULL, NULL, NULL}};
    const sl_proc_cmdline_t cl = {"sluice-devkafka", usage_text, own, SL_PROC_NO_ARGS};
    sl_proc_init(&opts);
    int rc = sl_proc_args(&cl, argc, argv, &opts, NULL);
    if (rc != SL_PROC_GO_ON)
        return rc;
    long long partitions = partitions_arg != NULL ? sl_parse_count(partitions_arg) : 32;
    long long brokers = brokers_arg != NULL ? sl_parse_count(brokers_arg) : 1;
    long long refuse = refuse_arg != NULL ? sl_parse_count(refuse_arg) : 0;
    if (partitions < 1 || partitions > 1000 || brokers < 1 || brokers > 9 || refuse < 0 ||
        refuse > 32767 || (refuse_arg != NULL && refuse == 0)) {
        fprintf(stderr, "sluice-devkafka: --partitions must be 1..1000, --brokers 1..9 and "
                        "--refuse-joins a Kafka error code 1..32767\n");
        return 2;
    }
    sl_config_t *cfg = sl_proc_start("devkafka", &opts);
    if (bootstrap_file == NULL)
        bootstrap_file = cfg->kafka.bootstrap_file;

    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (rk == NULL) {
        fprintf(stderr, "sluice-devkafka: %s\n", err);
        return 1;
    }
    rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(rk, (int)brokers);
    if (mc == NULL) {
        fprintf(stderr, "sluice-devkafka: cannot start the mock cluster\n");
        return 1;
    }
    const char *topics[] = {
        cfg->kafka.topic_requests,   cfg->kafka.topic_requests_batch, cfg->kafka.topic_jobs,
        cfg->kafka.topic_jobs_batch, cfg->kafka.topic_dispatch,       cfg->kafka.topic_results,
        cfg->kafka.topic_usage,      cfg->kafka.topic_stream,         cfg->kafka.topic_changelog};
    int rc_topics = 0;
    for (size_t i = 0; rc_topics == 0 && i < sizeof topics / sizeof topics[0]; i++)
        rc_topics = create_topic(mc, topics[i], partitions, brokers);
    /* The tenants' own topics too (several tenants may share one). */
    for (int t = 0; rc_topics == 0 && t < cfg->ntenants; t++) {
        const char *mine[] = {cfg->tenants[t].results_topic, cfg->tenants[t].stream_topic};
        for (size_t i = 0; rc_topics == 0 && i < 2; i++) {
            int seen = mine[i] == NULL;
            for (size_t k = 0; !seen && k < sizeof topics / sizeof topics[0]; k++)
                seen = strcmp(topics[k], mine[i]) == 0;
            for (int u = 0; !seen && u < t; u++)
                seen = (cfg->tenants[u].results_topic != NULL &&
                        strcmp(cfg->tenants[u].results_topic, mine[i]) == 0) ||
                       (cfg->tenants[u].stream_topic != NULL &&
                        strcmp(cfg->tenants[u].stream_topic, mine[i]) == 0);
            if (!seen)
                rc_topics = create_topic(mc, mine[i], partitions, brokers);
        }
    }
    /* The capacity leases' topic: one partition, read whole by every scheduler. */
    if (rc_topics == 0)
        rc_topics = create_topic(mc, cfg->kafka.topic_capacity, 1, brokers);
    if (rc_topics != 0)
        return 1;
    if (refuse > 0) {
        /* The mock keeps a stack of errors per request type; a consumer retries a refused
         * join about once a second, so this lasts for as long as any test runs. */
        enum { JOIN_GROUP_API_KEY = 11, REFUSALS = 100000 };
        rd_kafka_resp_err_t *errs = malloc(REFUSALS * sizeof *errs);
        if (errs == NULL)
            return 1;
        for (int i = 0; i < REFUSALS; i++)
            errs[i] = (rd_kafka_resp_err_t)refuse;
        rd_kafka_mock_push_request_errors_array(mc, JOIN_GROUP_API_KEY, REFUSALS, errs);
        free(errs);
        sl_warn("dev kafka refuses every JoinGroup with %s",
                rd_kafka_err2name((rd_kafka_resp_err_t)refuse));
    }
    const char *bootstraps = rd_kafka_mock_cluster_bootstraps(mc);
    char line[1024];
    snprintf(line, sizeof line, "%s\n", bootstraps);
    if (sl_write_file(bootstrap_file, line, strlen(line), 0644) != SL_OK) {
        fprintf(stderr, "sluice-devkafka: cannot write %s\n", bootstrap_file);
        return 1;
    }
    sl_info("dev kafka up at %s (%lld partitions per topic); bootstrap in %s", bootstraps,
            partitions, bootstrap_file);
    while (!sl_stop_requested())
        usleep(100 * 1000);
    sl_info("dev kafka stopping; all its data is dropped");
    unlink(bootstrap_file);
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(rk);
    sl_config_free(cfg);
    return 0;
}
