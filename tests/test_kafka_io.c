/* test_kafka_io.c - ingest's side of Kafka (ingest/kafka_io.h): while the broker is away every
 * delivery report and every consumer poll can fail, and that must cost a few log lines that
 * count what they held back, not one line per message; the takes still hear of every failure.
 *
 * Delivery reports and consumer errors are built here as librdkafka hands them over (the
 * message struct is public); the producer handle has no broker and never connects. A fake clock
 * drives the rate limit; stderr is captured in a temporary file.
 */
#include <check.h>
#include <librdkafka/rdkafka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/log.h"
#include "../ingest/inflight.h"
#include "../ingest/kafka_io.h"

enum { OUTAGE = 10000 };

static int64_t fake_now_ms;

static int64_t fake_clock(void)
{
    return fake_now_ms;
}

static FILE *captured;
static int saved_stderr = -1;

static void capture_stderr(void)
{
    captured = tmpfile();
    ck_assert_ptr_nonnull(captured);
    fflush(stderr);
    saved_stderr = dup(STDERR_FILENO);
    ck_assert_int_ge(dup2(fileno(captured), STDERR_FILENO), 0);
}

/* Restores stderr and returns what was written (the caller frees it). */
static char *captured_text(void)
{
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    long len = ftell(captured);
    ck_assert_int_ge(len, 0);
    char *text = calloc(1, (size_t)len + 1);
    ck_assert_ptr_nonnull(text);
    rewind(captured);
    size_t got = fread(text, 1, (size_t)len, captured);
    text[got] = '\0';
    fclose(captured);
    return text;
}

/* Lines holding what, and the occurrences they stand for: one each, plus N for "(and N more
 * like it", or N alone for a summary "(N more like it". */
static long count_lines(const char *text, const char *what, long *occurrences)
{
    long lines = 0;
    *occurrences = 0;
    for (const char *line = text; *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
        char buf[1024];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        line += len + (end != NULL);
        if (strstr(buf, what) == NULL)
            continue;
        lines++;
        const char *more = strstr(buf, " more like it in the last ");
        if (more == NULL) {
            *occurrences += 1;
            continue;
        }
        const char *p = more;
        while (p > buf && ((p[-1] >= '0' && p[-1] <= '9') || p[-1] == ','))
            p--;
        long held = 0;
        for (; p < more; p++) {
            if (*p != ',')
                held = held * 10 + (*p - '0');
        }
        *occurrences += strstr(buf, "(and ") != NULL ? 1 + held : held;
    }
    return lines;
}

/* The takes' operations: produce counts, store does nothing. */
static int produced;

static int fake_produce(void *arg, sl_take_t *t, const char *topic, const char *key,
                        const char *value)
{
    (void)arg;
    (void)t;
    (void)topic;
    (void)key;
    (void)value;
    produced++;
    return 0;
}

static void fake_store(void *arg, const char *topic, int32_t partition, int64_t next)
{
    (void)arg;
    (void)topic;
    (void)partition;
    (void)next;
}

static rd_kafka_t *prod;
static rd_kafka_topic_t *topic;
static sl_inflight_t *flight;

static void setup(void)
{
    sl_log_init("test", SL_LOG_INFO);
    sl_log_set_clock(fake_clock);
    sl_log_reset_limited(); /* the suite also runs in one process (CK_FORK=no) */
    fake_now_ms = 1000000;
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    /* No broker: librdkafka would only warn about that, on the captured stderr. */
    ck_assert_int_eq(rd_kafka_conf_set(conf, "log_level", "0", err, sizeof err), RD_KAFKA_CONF_OK);
    prod = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    ck_assert_msg(prod != NULL, "%s", err);
    topic = rd_kafka_topic_new(prod, "sluice.jobs", NULL);
    ck_assert_ptr_nonnull(topic);
    produced = 0;
    sl_inflight_ops_t ops = {fake_produce, fake_store, NULL};
    flight = sl_inflight_new(4, 4, 4, &ops);
    ck_assert_ptr_nonnull(flight);
}

static void teardown(void)
{
    sl_inflight_free(flight);
    rd_kafka_topic_destroy(topic);
    rd_kafka_destroy(prod);
    sl_log_set_clock(NULL);
}

/* A take holding one output, produced once. */
static sl_take_t *take_one(void)
{
    sl_take_t *t = sl_inflight_open(flight);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(sl_take_input(t, "sluice.requests", 0, 7), SL_OK);
    ck_assert_int_eq(sl_take_output(flight, t, "sluice.jobs", strdup("k"), strdup("v")), SL_OK);
    ck_assert_int_eq(produced, 1);
    return t;
}

/* The delivery report of one output of t, as librdkafka builds it. */
static void deliver(sl_take_t *t, rd_kafka_resp_err_t err)
{
    rd_kafka_message_t msg;
    memset(&msg, 0, sizeof msg);
    msg.err = err;
    msg.rkt = topic;
    msg._private = t;
    sl_kafka_io_on_delivery(prod, &msg, NULL);
}

START_TEST(an_outage_that_fails_every_delivery_logs_a_few_lines)
{
    sl_take_t *t = take_one();
    capture_stderr();
    /* Every message times out at once when the broker has been away message.timeout.ms. */
    for (int i = 0; i < OUTAGE; i++)
        deliver(t, RD_KAFKA_RESP_ERR__MSG_TIMED_OUT);
    fake_now_ms += 10000;
    sl_log_flush_limited(); /* as ingest's loop does: the count held back comes out */
    char *text = captured_text();
    long seen = 0;
    long lines = count_lines(text, "delivery to sluice.jobs failed", &seen);
    ck_assert_msg(lines >= 1 && lines <= 2, "%ld lines for %d failed deliveries:\n%.600s", lines,
                  OUTAGE, text);
    ck_assert_int_eq(seen, OUTAGE);
    free(text);
    /* The take heard of the failures: it is produced again rather than retired. */
    ck_assert_int_eq(sl_inflight_retire(flight), 0);
    ck_assert_int_eq(produced, 2);
}
END_TEST

START_TEST(a_delivery_that_landed_logs_nothing_and_retires_its_take)
{
    sl_take_t *t = take_one();
    capture_stderr();
    deliver(t, RD_KAFKA_RESP_ERR_NO_ERROR);
    char *text = captured_text();
    ck_assert_str_eq(text, "");
    free(text);
    ck_assert_int_eq(sl_inflight_retire(flight), 1);
    ck_assert_int_eq(produced, 1);
}
END_TEST

START_TEST(consume_errors_of_an_outage_log_a_few_lines)
{
    capture_stderr();
    /* 100 loop turns a second for a minute, each handed a transport error by the consumer. */
    for (int i = 0; i < 6000; i++) {
        rd_kafka_message_t msg;
        memset(&msg, 0, sizeof msg);
        msg.err = RD_KAFKA_RESP_ERR__TRANSPORT;
        sl_kafka_io_consume_error(&msg);
        fake_now_ms += 10;
        if (i % 100 == 0)
            sl_log_flush_limited();
    }
    fake_now_ms += 10000;
    sl_log_flush_limited();
    char *text = captured_text();
    long seen = 0;
    long lines = count_lines(text, "consume: ", &seen);
    /* One line every 10 s at most: 6 in the minute, with the first, plus the last summary. */
    ck_assert_msg(lines >= 2 && lines <= 8, "%ld lines for 6000 consume errors:\n%.600s", lines,
                  text);
    ck_assert_int_eq(seen, 6000);
    free(text);
}
END_TEST

static long sent_count, sent_bytes;
static void count_sent(void *arg, const char *to, size_t len)
{
    ck_assert_ptr_eq(arg, &sent_count);
    ck_assert_str_eq(to, "sluice.jobs");
    sent_count++;
    sent_bytes += (long)len;
}

START_TEST(outputs_the_producer_refuses_log_a_few_lines)
{
    /* A producer that takes at most 1000 bytes a message refuses each larger output at once;
     * a take whose output failed so is produced again on every turn of ingest's loop. */
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    ck_assert_int_eq(rd_kafka_conf_set(conf, "log_level", "0", err, sizeof err), RD_KAFKA_CONF_OK);
    ck_assert_int_eq(rd_kafka_conf_set(conf, "message.max.bytes", "1000", err, sizeof err),
                     RD_KAFKA_CONF_OK);
    rd_kafka_t *small = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    ck_assert_msg(small != NULL, "%s", err);
    sl_kafka_io_t *io = sl_kafka_io_new(small, NULL);
    ck_assert_ptr_nonnull(io);
    sl_inflight_ops_t ops = sl_kafka_io_ops(io);
    sent_count = sent_bytes = 0;
    sl_kafka_io_on_sent(io, count_sent, &sent_count);
    char *value = malloc(4000);
    ck_assert_ptr_nonnull(value);
    memset(value, 'x', 3999);
    value[3999] = '\0';
    capture_stderr();
    int failed = 0;
    for (int i = 0; i < OUTAGE; i++)
        failed += ops.produce(ops.arg, NULL, "sluice.jobs", "k", value) != 0;
    fake_now_ms += 10000;
    sl_log_flush_limited();
    char *text = captured_text();
    ck_assert_int_eq(failed, OUTAGE);
    long seen = 0;
    long lines = count_lines(text, "produce to sluice.jobs", &seen);
    ck_assert_msg(lines >= 1 && lines <= 2, "%ld lines for %d refused outputs:\n%.600s", lines,
                  OUTAGE, text);
    ck_assert_int_eq(seen, OUTAGE);
    /* Refused outputs were never sent; one the producer takes is told once, with its size. */
    ck_assert_int_eq(sent_count, 0);
    value[100] = '\0';
    ck_assert_int_eq(ops.produce(ops.arg, NULL, "sluice.jobs", "k", value), 0);
    ck_assert_int_eq(sent_count, 1);
    ck_assert_int_eq(sent_bytes, 100);
    free(text);
    free(value);
    sl_kafka_io_free(io);
    rd_kafka_purge(small, RD_KAFKA_PURGE_F_QUEUE);
    rd_kafka_destroy(small);
}
END_TEST

static Suite *kafka_io_suite(void)
{
    Suite *s = suite_create("kafka_io");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, an_outage_that_fails_every_delivery_logs_a_few_lines);
    tcase_add_test(tc, a_delivery_that_landed_logs_nothing_and_retires_its_take);
    tcase_add_test(tc, consume_errors_of_an_outage_log_a_few_lines);
    tcase_add_test(tc, outputs_the_producer_refuses_log_a_few_lines);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(kafka_io_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
