/* test_heartbeat.c - the dispatcher's heartbeats (dispatcher/heartbeat.h): when they go out,
 * which attempts they name, and that each passes schema/heartbeat.json.
 *
 * The engine takes paced dispatches (send_at_ms a few seconds ahead), so its calls are held
 * and nothing goes on the network. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../dispatcher/engine.h"
#include "../dispatcher/heartbeat.h"
#include "config.h"
#include "jsonschema.h"
#include "util.h"

static struct {
    char dir[64], cfg_path[128];
    sl_config_t *cfg;
    sl_engine_t *engine;
    sl_schema_t *schema;
    json_t *sent[64]; /* the heartbeats emitted, in order */
    int nsent;
    char key[160];
} env;

static void on_usage(const char *key, const char *value, void *arg)
{
    (void)key, (void)value, (void)arg;
    ck_abort_msg("no usage event expected: %s", value);
}

static void on_beat(const char *key, const char *value, void *arg)
{
    (void)arg;
    ck_assert_int_lt(env.nsent, 64);
    json_t *doc = json_loads(value, 0, NULL);
    ck_assert_ptr_nonnull(doc);
    char why[256] = "";
    ck_assert_msg(sl_schema_validate(env.schema, doc, why, sizeof why) == SL_OK, "%s: %s", why,
                  value);
    snprintf(env.key, sizeof env.key, "%s", key);
    env.sent[env.nsent++] = doc;
}

static void start(void)
{
    memset(&env, 0, sizeof env);
    snprintf(env.dir, sizeof env.dir, "/tmp/sluice-test-hb-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(env.dir));
    snprintf(env.cfg_path, sizeof env.cfg_path, "%s/sluice.json", env.dir);
    FILE *f = fopen(env.cfg_path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"deployments\":[{\"name\":\"d\",\"base_url\":\"http://127.0.0.1:1/v1\","
          "\"model\":\"gpt-4o-mini\"}],\"routes\":[{\"name\":\"r\",\"deployments\":[\"d\"]}]}",
          f);
    fclose(f);
    char err[512] = "";
    ck_assert_msg(sl_config_load(env.cfg_path, &env.cfg, err, sizeof err) == SL_OK, "%s", err);
    ck_assert_msg(sl_engine_new(env.cfg, on_usage, NULL, &env.engine, err, sizeof err) ==
                      SL_OK,
                  "%s", err);
    ck_assert_msg(sl_schema_load_file("schema/heartbeat.json", &env.schema, err, sizeof err) ==
                      SL_OK,
                  "%s", err);
}

static void stop(void)
{
    for (int i = 0; i < env.nsent; i++)
        json_decref(env.sent[i]);
    sl_engine_free(env.engine);
    sl_schema_free(env.schema);
    sl_config_free(env.cfg);
    unlink(env.cfg_path);
    rmdir(env.dir);
}

/* Takes a paced dispatch for job_id (held: its send time is 5 s ahead). */
static void take_held(const char *job_id, int64_t now)
{
    char res[64];
    snprintf(res, sizeof res, "res-%s", job_id);
    json_t *msg = json_pack("{s:i, s:s, s:i, s:s, s:I, s:I, s:I, s:s, s:s, s:{s:s, s:[{s:s, "
                            "s:s}], s:i}}",
                            "v", 1, "job_id", job_id, "attempt", 1, "reservation_id", res,
                            "lease_expires_ms", (json_int_t)(now + 60000), "issued_ms",
                            (json_int_t)now, "send_at_ms", (json_int_t)(now + 5000),
                            "deployment", "d", "idempotency_key", job_id, "request", "model",
                            "gpt-4o-mini", "messages", "role", "user", "content", "hi",
                            "max_tokens", 16);
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    ck_assert_int_eq(sl_engine_submit(env.engine, text, strlen(text), now), SL_OK);
    free(text);
}

static int names(const json_t *hb, const char *job_id)
{
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(hb, "attempts"), i, a)
    {
        if (strcmp(json_string_value(json_object_get(a, "job_id")), job_id) == 0)
            return 1;
    }
    return 0;
}

START_TEST(first_heartbeat_is_full_then_new_attempts_then_periodic)
{
    start();
    int64_t t = sl_now_ms();
    sl_heartbeat_t *hb = sl_heartbeat_new("disp-1", 1000, 96, t);
    ck_assert_ptr_nonnull(hb);
    ck_assert_int_eq(strlen(sl_heartbeat_incarnation(hb)), 32);
    /* at start: full and empty */
    ck_assert_int_eq(sl_heartbeat_run(hb, env.engine, t, on_beat, NULL), SL_OK);
    ck_assert_int_eq(env.nsent, 1);
    ck_assert_str_eq(env.key, "dispatcher:disp-1");
    ck_assert(json_is_true(json_object_get(env.sent[0], "full")));
    ck_assert_int_eq(json_array_size(json_object_get(env.sent[0], "attempts")), 0);
    /* and how many calls it runs at once, in every heartbeat */
    ck_assert_int_eq(json_integer_value(json_object_get(env.sent[0], "max_in_flight")), 96);
    /* nothing new and not due: nothing */
    ck_assert_int_eq(sl_heartbeat_run(hb, env.engine, t + 10, on_beat, NULL), SL_OK);
    ck_assert_int_eq(env.nsent, 1);
    /* a new attempt: named at once, alone */
    take_held("job-1", t + 20);
    ck_assert_int_eq(sl_heartbeat_run(hb, env.engine, t + 20, on_beat, NULL), SL_OK);
    ck_assert_int_eq(env.nsent, 2);
    ck_assert(json_is_false(json_object_get(env.sent[1], "full")));
    ck_assert(names(env.sent[1], "job-1"));
    take_held("job-2", t + 100);
    ck_assert_int_eq(sl_heartbeat_run(hb, env.engine, t + 120, on_beat, NULL), SL_OK);
    ck_assert_int_eq(env.nsent, 3);
    ck_assert(names(env.sent[2], "job-2"));
    ck_assert(!names(env.sent[2], "job-1"));
    /* periodic ones; every fifth lists both */
    int64_t at = t + 120;
    int full_seen = 0;
    for (int k = 0; k < SL_HEARTBEAT_FULL_EVERY; k++) {
        at += 1000;
        int before = env.nsent;
        ck_assert_int_eq(sl_heartbeat_run(hb, env.engine, at, on_beat, NULL), SL_OK);
        ck_assert_int_eq(env.nsent, before + 1);
        json_t *last = env.sent[env.nsent - 1];
        if (json_is_true(json_object_get(last, "full"))) {
            full_seen++;
            ck_assert(names(last, "job-1") && names(last, "job-2"));
        } else {
            ck_assert_int_eq(json_array_size(json_object_get(last, "attempts")), 0);
        }
        ck_assert_str_eq(json_string_value(json_object_get(last, "incarnation")),
                         sl_heartbeat_incarnation(hb));
        ck_assert_int_eq(json_integer_value(json_object_get(last, "max_in_flight")), 96);
    }
    ck_assert_int_eq(full_seen, 1);
    sl_heartbeat_free(hb);
    stop();
}
END_TEST

/* Regression: a dispatcher taking calls every turn sent only the heartbeats naming them (to one
 * partition), which postponed the periodic one (to every partition) without end, so a scheduler
 * shard reading other partitions found it silent and declared it dead (seen in e2e_shards). */
START_TEST(calls_taken_all_the_time_do_not_postpone_the_periodic_heartbeat)
{
    start();
    int64_t t = sl_now_ms();
    sl_heartbeat_t *hb = sl_heartbeat_new("disp-1", 1000, 96, t);
    ck_assert_ptr_nonnull(hb);
    ck_assert(sl_heartbeat_periodic_due(hb, t));
    ck_assert_int_eq(sl_heartbeat_run(hb, env.engine, t, on_beat, NULL), SL_OK);
    int periodic = 0;
    for (int k = 1; k <= 25; k++) {
        int64_t at = t + 100 * k;
        char id[16];
        snprintf(id, sizeof id, "job-%d", k);
        take_held(id, at);
        periodic += sl_heartbeat_periodic_due(hb, at);
        ck_assert_int_eq(sl_heartbeat_run(hb, env.engine, at, on_beat, NULL), SL_OK);
    }
    /* 2.5 s of calls taken every 100 ms: two periodic ones among them, at 1 s and 2 s */
    ck_assert_int_eq(periodic, 2);
    sl_heartbeat_free(hb);
    stop();
}
END_TEST

START_TEST(each_incarnation_is_new)
{
    sl_heartbeat_t *a = sl_heartbeat_new("d", 1000, 8, 1), *b = sl_heartbeat_new("d", 1000, 8, 1);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_str_ne(sl_heartbeat_incarnation(a), sl_heartbeat_incarnation(b));
    sl_heartbeat_free(a);
    sl_heartbeat_free(b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("heartbeat");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, first_heartbeat_is_full_then_new_attempts_then_periodic);
    tcase_add_test(tc, calls_taken_all_the_time_do_not_postpone_the_periodic_heartbeat);
    tcase_add_test(tc, each_incarnation_is_new);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
