/* test_msg.c - the message modules (common/msg_*.h): what each builds is valid against its
 * schema in schema/, reads back to what was built, and the names of every enum round-trip. */
#include <check.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "../common/msg_dispatch.h"
#include "../common/msg_job.h"
#include "../common/msg_result.h"
#include "../common/msg_usage.h"
#include "../common/jsonschema.h"
#include "../common/seal.h"

static void assert_valid(const char *schema_path, const json_t *doc)
{
    sl_schema_t *schema = NULL;
    char err[512] = "";
    ck_assert_msg(sl_schema_load_file(schema_path, &schema, err, sizeof err) == SL_OK, "%s", err);
    char why[512] = "";
    ck_assert_msg(sl_schema_validate(schema, doc, why, sizeof why) == SL_OK, "%s: %s",
                  schema_path, why);
    sl_schema_free(schema);
}

START_TEST(job_builds_valid_and_reads_back)
{
    json_t *request = json_pack("{s:[{s:s, s:s}], s:i}", "messages", "role", "user", "content",
                                "hi", "max_tokens", 64);
    json_t *meta = json_pack("{s:s}", "trace", "t-1");
    sl_msg_job_t in = {.job_id = "abc123", .idempotency_key = "idem-1", .tenant = "acme",
                       .app = "web", .env = "prod", .key_id = "k1", .route = "chat",
                       .cls = "interactive", .submitted_ms = 1000, .deadline_ms = 61000,
                       .est_input = 7, .est_output = 64, .est_total = 71, .fallback = 1,
                       .degrade = 1, .metadata = meta, .request = request};
    json_t *doc = sl_msg_job_json(&in);
    ck_assert_ptr_nonnull(doc);
    assert_valid("schema/job.json", doc);
    ck_assert_int_eq(sl_msg_jobs_kind(doc), SL_JOBS_JOB);
    sl_msg_job_t out;
    ck_assert_int_eq(sl_msg_job_read(doc, &out), SL_OK);
    ck_assert_str_eq(out.job_id, "abc123");
    ck_assert_str_eq(out.idempotency_key, "idem-1");
    ck_assert_str_eq(out.tenant, "acme");
    ck_assert_str_eq(out.key_id, "k1");
    ck_assert_str_eq(out.cls, "interactive");
    ck_assert_int_eq(out.deadline_ms, 61000);
    ck_assert_int_eq(out.est_total, 71);
    ck_assert_int_eq(out.fallback, 1);
    ck_assert_int_eq(out.degrade, 1);
    ck_assert(json_equal((json_t *)out.request, request));
    ck_assert(json_equal((json_t *)out.metadata, meta));
    /* Absent optional fields stay absent. */
    in.fallback = -1;
    in.degrade = -1;
    in.metadata = NULL;
    json_t *bare = sl_msg_job_json(&in);
    ck_assert_ptr_null(json_object_get(bare, "fallback"));
    ck_assert_ptr_null(json_object_get(bare, "degrade"));
    ck_assert_ptr_null(json_object_get(bare, "metadata"));
    ck_assert_int_eq(sl_msg_job_read(bare, &out), SL_OK);
    ck_assert_int_eq(out.fallback, -1);
    ck_assert_int_eq(out.degrade, -1);
    /* A required field missing is refused, not read as empty. */
    json_object_del(bare, "tenant");
    ck_assert_int_eq(sl_msg_job_read(bare, &out), SL_EPARSE);
    in.route = NULL;
    ck_assert_ptr_null(sl_msg_job_json(&in));
    json_decref(bare);
    json_decref(doc);
    json_decref(meta);
    json_decref(request);
}
END_TEST

START_TEST(cancel_builds_valid_and_is_told_from_a_job)
{
    sl_msg_cancel_t in = {.job_id = "abc123", .idempotency_key = "idem-1", .tenant = "acme",
                          .key_id = "k1", .requested_ms = 5};
    json_t *doc = sl_msg_cancel_json(&in);
    ck_assert_ptr_nonnull(doc);
    assert_valid("schema/cancel.json", doc);
    ck_assert_int_eq(sl_msg_jobs_kind(doc), SL_JOBS_CANCEL);
    sl_msg_cancel_t out;
    ck_assert_int_eq(sl_msg_cancel_read(doc, &out), SL_OK);
    ck_assert_str_eq(out.job_id, "abc123");
    ck_assert_str_eq(out.key_id, "k1");
    ck_assert_int_eq(out.requested_ms, 5);
    json_decref(doc);
}
END_TEST

START_TEST(dispatch_builds_valid_around_the_stored_body)
{
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    sl_msg_dispatch_t in = {.job_id = "job_1-A", .attempt = 2, .reservation_id = "00ff",
                            .lease_expires_ms = 9000, .issued_ms = 1000,
                            .deployment = "dep \"a\"", .idempotency_key = "k\\1"};
    char *text = NULL;
    ck_assert_int_eq(sl_msg_dispatch_build(&in, body, &text), SL_OK);
    json_t *doc = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(doc);
    assert_valid("schema/dispatch.json", doc);
    sl_msg_dispatch_t out;
    ck_assert_int_eq(sl_msg_dispatch_read(doc, &out), SL_OK);
    ck_assert_str_eq(out.job_id, "job_1-A");
    ck_assert_int_eq(out.attempt, 2);
    ck_assert_str_eq(out.deployment, "dep \"a\""); /* escaped on the way out */
    ck_assert_str_eq(out.idempotency_key, "k\\1");
    ck_assert_int_eq(out.lease_expires_ms, 9000);
    ck_assert_str_eq(json_string_value(json_object_get(out.request, "messages") != NULL
                                           ? json_object_get(json_array_get(json_object_get(
                                                                                out.request,
                                                                                "messages"),
                                                                            0),
                                                             "content")
                                           : NULL),
                     "hi");
    ck_assert_int_eq(out.send_at_ms, 0); /* not paced: no send_at_ms */
    ck_assert_ptr_null(json_object_get(doc, "send_at_ms"));
    free(text);
    json_decref(doc);
    /* A paced dispatch carries its time. */
    in.send_at_ms = 1020;
    ck_assert_int_eq(sl_msg_dispatch_build(&in, body, &text), SL_OK);
    doc = json_loads(text, 0, NULL);
    assert_valid("schema/dispatch.json", doc);
    ck_assert_int_eq(sl_msg_dispatch_read(doc, &out), SL_OK);
    ck_assert_int_eq(out.send_at_ms, 1020);
    ck_assert_ptr_null(out.tenant); /* none written: none read */
    free(text);
    json_decref(doc);
    in.send_at_ms = 0;
    /* The tenant, which decides where the job's stream chunks go and whether they are sealed. */
    in.tenant = "acme \"eu\"";
    ck_assert_int_eq(sl_msg_dispatch_build(&in, body, &text), SL_OK);
    doc = json_loads(text, 0, NULL);
    assert_valid("schema/dispatch.json", doc);
    ck_assert_int_eq(sl_msg_dispatch_read(doc, &out), SL_OK);
    ck_assert_str_eq(out.tenant, "acme \"eu\"");
    free(text);
    json_decref(doc);
    in.tenant = NULL;
    /* An id that would need escaping is refused rather than written raw. */
    in.job_id = "bad\"id";
    text = NULL;
    ck_assert_int_eq(sl_msg_dispatch_build(&in, body, &text), SL_EINVAL);
    ck_assert_ptr_null(text);
}
END_TEST

START_TEST(usage_builds_valid_and_reads_back)
{
    json_t *usage = json_pack("{s:i, s:i, s:i}", "input", 10, "output", 20, "cached", 3);
    json_t *rl = json_pack("{s:i}", "remaining_tokens", 500);
    json_t *response = json_pack("{s:s}", "id", "r1");
    json_t *error = json_pack("{s:s, s:s}", "type", "x", "message", "m");
    sl_msg_usage_t in = {.job_id = "j1", .attempt = 1, .reservation_id = "r1",
                         .deployment = "sim-a", .outcome = SL_OUTCOME_OK, .http_status = 200,
                         .usage = usage, .ratelimit = rl, .retry_after_ms = -1,
                         .ttft_ms = 1.5, .total_ms = 9.0, .started_ms = 1, .finished_ms = 10,
                         .response = response, .error = error};
    json_t *doc = sl_msg_usage_json(&in);
    ck_assert_ptr_nonnull(doc);
    assert_valid("schema/usage.json", doc);
    /* The error travels only with a failure, the response only with a success. */
    ck_assert(json_is_null(json_object_get(doc, "error")));
    sl_msg_usage_t out;
    sl_msg_tokens_t tok;
    ck_assert_int_eq(sl_msg_usage_read(doc, &out, &tok), SL_OK);
    ck_assert_int_eq(out.outcome, SL_OUTCOME_OK);
    ck_assert_int_eq(tok.input, 10);
    ck_assert_int_eq(tok.output, 20);
    ck_assert_int_eq(tok.cached, 3);
    ck_assert_int_eq(tok.reasoning, 0);
    ck_assert_int_eq(out.retry_after_ms, -1);
    ck_assert(out.total_ms == 9.0);
    ck_assert_ptr_nonnull(out.response);
    json_decref(doc);

    in.outcome = SL_OUTCOME_RATE_LIMITED;
    in.http_status = 429;
    in.usage = NULL;
    in.retry_after_ms = 250;
    in.ratelimit = NULL;
    doc = sl_msg_usage_json(&in);
    assert_valid("schema/usage.json", doc);
    ck_assert(json_is_null(json_object_get(doc, "response")));
    ck_assert_int_eq(sl_msg_usage_read(doc, &out, &tok), SL_OK);
    ck_assert_int_eq(out.outcome, SL_OUTCOME_RATE_LIMITED);
    ck_assert_int_eq(tok.input, -1);
    ck_assert_int_eq(out.retry_after_ms, 250);
    ck_assert_ptr_nonnull(out.error);
    /* An outcome nobody knows is refused. */
    json_object_set_new(doc, "outcome", json_string("great"));
    ck_assert_int_eq(sl_msg_usage_read(doc, &out, &tok), SL_EPARSE);
    json_decref(doc);
    json_decref(usage);
    json_decref(rl);
    json_decref(response);
    json_decref(error);
}
END_TEST

START_TEST(result_builds_valid_for_a_rejection_and_a_success)
{
    sl_msg_error_t e;
    sl_msg_error_init(&e, SL_ERRTYPE_CAPACITY, SL_REASON_QUEUE_FULL,
                      SL_DECISION_REJECTED_LOCALLY, "queue is full");
    e.retryable = 1;
    e.fallback_allowed = 1;
    e.limiter = "queue:acme:batch";
    e.retry_after_ms = 1000;
    sl_msg_result_t r;
    sl_msg_result_init(&r, "j1", SL_STATUS_REJECTED);
    r.tenant = "acme";
    r.finished_ms = 42;
    r.error = &e;
    r.has_source = 1;
    r.source_topic = "sluice.requests";
    r.source_partition = 3;
    r.source_offset = 77;
    json_t *doc = sl_msg_result_json(&r);
    ck_assert_ptr_nonnull(doc);
    assert_valid("schema/result.json", doc);
    json_t *err = json_object_get(doc, "error");
    ck_assert_str_eq(json_string_value(json_object_get(err, "reason")), "queue_full");
    ck_assert_str_eq(json_string_value(json_object_get(err, "type")), "capacity");
    ck_assert(json_is_true(json_object_get(err, "fallback_allowed")));
    ck_assert_int_eq(json_integer_value(json_object_get(err, "retry_after_ms")), 1000);
    ck_assert(json_is_null(json_object_get(err, "scope")));
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(doc, "source"),
                                                        "offset")),
                     77);
    json_decref(doc);

    json_t *usage = json_pack("{s:i, s:i, s:i}", "input", 1, "output", 2, "cached", 0);
    sl_msg_result_init(&r, "j2", SL_STATUS_SUCCEEDED);
    r.usage = usage;
    r.deployment = "sim-a";
    r.attempts = 1;
    r.has_timings = 1;
    r.total_ms = 12.5;
    doc = sl_msg_result_json(&r);
    assert_valid("schema/result.json", doc);
    ck_assert(json_is_null(json_object_get(doc, "error")));
    ck_assert_str_eq(json_string_value(json_object_get(doc, "status")), "succeeded");
    ck_assert_ptr_null(json_object_get(doc, "source"));
    json_decref(doc);
    json_decref(usage);
}
END_TEST

/* A result sealed to its tenant's key: valid against the schema, its answer text, usage,
 * metadata and error message nowhere in the bytes a shared reader sees (ids, status and
 * reason are), opened back whole with the key pair and not at all with another. */
START_TEST(result_sealed_to_its_tenant_opens_only_with_its_key)
{
    ck_assert_int_ge(sodium_init(), 0);
    uint8_t pk[32], sk[32], other_pk[32], other_sk[32];
    crypto_box_keypair(pk, sk);
    crypto_box_keypair(other_pk, other_sk);
    json_t *response = json_pack("{s:[{s:{s:s}}]}", "choices", "message", "content",
                                 "the secret answer text");
    json_t *usage = json_pack("{s:i, s:i, s:i}", "input", 11, "output", 64, "cached", 0);
    json_t *meta = json_pack("{s:s}", "customer", "secret-customer-id");
    sl_msg_error_t e;
    sl_msg_error_init(&e, SL_ERRTYPE_PROVIDER, SL_REASON_PROVIDER_BAD_REQUEST,
                      SL_DECISION_ADMITTED_PROVIDER_REJECTED, "provider said: secret prompt");
    sl_msg_result_t r;
    sl_msg_result_init(&r, "j-sealed", SL_STATUS_FAILED);
    r.tenant = "acme";
    r.response = response;
    r.usage = usage;
    r.metadata = meta;
    r.error = &e;
    r.seal_pk = pk;
    json_t *doc = sl_msg_result_json(&r);
    ck_assert_ptr_nonnull(doc);
    assert_valid("schema/result.json", doc);
    ck_assert(sl_seal_is_sealed(doc));
    char *wire = json_dumps(doc, JSON_COMPACT);
    ck_assert_ptr_null(strstr(wire, "secret"));
    ck_assert_ptr_null(strstr(wire, "\"output\""));
    ck_assert_ptr_nonnull(strstr(wire, "\"j-sealed\""));
    ck_assert_ptr_nonnull(strstr(wire, "provider_bad_request"));
    ck_assert(json_is_null(json_object_get(doc, "response")));
    ck_assert(json_is_null(json_object_get(doc, "usage")));

    ck_assert_int_eq(sl_seal_open(doc, other_pk, other_sk), SL_ECRYPTO);
    char *after = json_dumps(doc, JSON_COMPACT);
    ck_assert_str_eq(after, wire); /* a failed open leaves the result as it was */
    free(after);
    free(wire);

    ck_assert_int_eq(sl_seal_open(doc, pk, sk), SL_OK);
    ck_assert(!sl_seal_is_sealed(doc));
    ck_assert(json_equal(json_object_get(doc, "response"), response));
    ck_assert(json_equal(json_object_get(doc, "usage"), usage));
    ck_assert(json_equal(json_object_get(doc, "metadata"), meta));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(doc, "error"), "message")),
                     "provider said: secret prompt");
    assert_valid("schema/result.json", doc);
    ck_assert_int_eq(sl_seal_open(doc, pk, sk), SL_ENOTFOUND);
    json_decref(doc);

    /* Without a key nothing is sealed. */
    r.seal_pk = NULL;
    doc = sl_msg_result_json(&r);
    ck_assert(!sl_seal_is_sealed(doc));
    ck_assert(json_equal(json_object_get(doc, "response"), response));
    json_decref(doc);
    json_decref(response);
    json_decref(usage);
    json_decref(meta);
}
END_TEST

/* A stream chunk's text, tool calls and usage are sealed; its ids and seq stay readable. */
START_TEST(chunk_members_are_sealed_and_opened)
{
    ck_assert_int_ge(sodium_init(), 0);
    uint8_t pk[32], sk[32];
    crypto_box_keypair(pk, sk);
    json_t *c = json_pack("{s:i, s:s, s:i, s:s, s:i, s:s, s:n, s:b, s:n, s:I}", "v", 1, "job_id",
                          "j1", "attempt", 1, "reservation_id", "r1", "seq", 0, "delta",
                          "secret words", "finish_reason", "done", 0, "usage", "ts_ms",
                          (json_int_t)5);
    json_object_set_new(c, "tool_calls", json_pack("[{s:i, s:{s:s}}]", "index", 0, "function",
                                                   "arguments", "{\\\"q\\\":\\\"secret\\\"}"));
    ck_assert_int_eq(sl_seal_chunk(c, pk), SL_OK);
    ck_assert_ptr_null(json_object_get(c, "tool_calls"));
    assert_valid("schema/stream.json", c);
    char *wire = json_dumps(c, JSON_COMPACT);
    ck_assert_ptr_null(strstr(wire, "secret"));
    free(wire);
    ck_assert_int_eq(sl_seal_open(c, pk, sk), SL_OK);
    ck_assert_str_eq(json_string_value(json_object_get(c, "delta")), "secret words");
    ck_assert(json_is_null(json_object_get(c, "usage")));
    ck_assert_int_eq(json_array_size(json_object_get(c, "tool_calls")), 1);
    assert_valid("schema/stream.json", c);
    json_decref(c);
}
END_TEST

START_TEST(every_name_round_trips)
{
    for (int i = 0; i < SL_STATUS_COUNT_; i++)
        ck_assert_int_eq(sl_status_parse(sl_status_name((sl_status_t)i)), i);
    for (int i = 0; i < SL_REASON_COUNT_; i++)
        ck_assert_int_eq(sl_reason_parse(sl_reason_name((sl_reason_t)i)), i);
    for (int i = 0; i < SL_OUTCOME_COUNT_; i++)
        ck_assert_int_eq(sl_outcome_parse(sl_outcome_name((sl_outcome_t)i)), i);
    ck_assert_int_eq(sl_outcome_parse("nope"), -1);
    ck_assert_int_eq(sl_reason_parse(NULL), -1);
    ck_assert_str_eq(sl_status_name((sl_status_t)99), "unknown");
    ck_assert_str_eq(sl_outcome_name((sl_outcome_t)99), "unknown");
    ck_assert_str_eq(sl_decision_name(SL_DECISION_EXPIRED_IN_QUEUE), "expired_in_queue");
    ck_assert_str_eq(sl_errtype_name(SL_ERRTYPE_INTERNAL), "internal");
}
END_TEST

static Suite *msg_suite(void)
{
    Suite *s = suite_create("msg");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, job_builds_valid_and_reads_back);
    tcase_add_test(tc, cancel_builds_valid_and_is_told_from_a_job);
    tcase_add_test(tc, dispatch_builds_valid_around_the_stored_body);
    tcase_add_test(tc, usage_builds_valid_and_reads_back);
    tcase_add_test(tc, result_builds_valid_for_a_rejection_and_a_success);
    tcase_add_test(tc, result_sealed_to_its_tenant_opens_only_with_its_key);
    tcase_add_test(tc, chunk_members_are_sealed_and_opened);
    tcase_add_test(tc, every_name_round_trips);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(msg_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
