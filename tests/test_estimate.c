/* test_estimate.c - behaviour of the input-token estimate (common/estimate.h).
 *
 * The one property that matters most: the estimate is never below what OpenAI charges at
 * receipt, ceil(characters / 4) of the message text, which is also what the provider simulator
 * charges (sl_sim_prompt_estimate). Random ASCII and UTF-8 bodies check it against both an
 * independent count here and the simulator's function.
 */
#include <check.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/estimate.h"
#include "../common/sign.h"
#include "../ops/sim/sim.h"

static const char *const MODELS[] = {NULL,           "gpt-4o-mini",       "gpt-4o",
                                     "o3-mini",      "claude-3-5-sonnet", "gemini-1.5-pro",
                                     "unknown-model"};
#define NMODELS (sizeof MODELS / sizeof MODELS[0])

/* ---- Helpers ---------------------------------------------------------------------------- */

static json_t *parse(const char *text)
{
    json_error_t jerr;
    json_t *v = json_loads(text, 0, &jerr);
    ck_assert_msg(v != NULL, "bad test JSON: %s (%s)", jerr.text, text);
    return v;
}

static int64_t est(const char *body_text, const char *model)
{
    json_t *body = parse(body_text);
    int64_t n = sl_estimate_input_tokens(body, model);
    json_decref(body);
    return n;
}

static unsigned next_rand(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 8;
}

/* UTF-8 code points of a few widths: 2 (é, ж), 3 (€, 中), 4 (emoji). */
static const char *const WIDE[] = {"\xc3\xa9", "\xd0\xb6", "\xe2\x82\xac", "\xe4\xb8\xad",
                                   "\xf0\x9f\x98\x80"};

/* Appends a random string of n code points to buf (cap bytes); returns code points written.
 * utf8: mix in multi-byte code points. */
static size_t random_text(unsigned *seed, char *buf, size_t cap, size_t n, int utf8)
{
    size_t len = strlen(buf);
    size_t points = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned r = next_rand(seed);
        const char *piece;
        char one[2] = {0, 0};
        if (utf8 && r % 3 == 0) {
            piece = WIDE[(r / 3) % (sizeof WIDE / sizeof WIDE[0])];
        } else {
            one[0] = (char)(' ' + (r % 95)); /* printable ASCII, quotes and backslashes too */
            piece = one;
        }
        size_t pl = strlen(piece);
        if (len + pl + 1 > cap)
            break;
        memcpy(buf + len, piece, pl);
        len += pl;
        points++;
    }
    buf[len] = '\0';
    return points;
}

/* Builds a random chat body; returns it and sets *chars to its total content code points. */
static json_t *random_body(unsigned *seed, int utf8, size_t *chars)
{
    json_t *messages = json_array();
    int nmsg = 1 + (int)(next_rand(seed) % 6);
    *chars = 0;
    static const char *const roles[] = {"system", "user", "assistant", "user"};
    for (int m = 0; m < nmsg; m++) {
        char text[4096] = "";
        size_t n = next_rand(seed) % 900;
        json_t *content;
        if (next_rand(seed) % 4 == 0) {
            /* content as an array of text parts */
            content = json_array();
            int nparts = 1 + (int)(next_rand(seed) % 3);
            for (int p = 0; p < nparts; p++) {
                text[0] = '\0';
                *chars += random_text(seed, text, sizeof text, n / (size_t)nparts, utf8);
                json_array_append_new(content,
                                      json_pack("{s:s, s:s}", "type", "text", "text", text));
            }
        } else {
            *chars += random_text(seed, text, sizeof text, n, utf8);
            content = json_string(text);
        }
        ck_assert_ptr_nonnull(content);
        json_array_append_new(messages,
                              json_pack("{s:s, s:o}", "role", roles[m % 4], "content", content));
    }
    return json_pack("{s:o, s:i}", "messages", messages, "max_tokens", 16);
}

static void check_random_bodies(int utf8)
{
    unsigned seed = utf8 ? 777u : 4242u;
    for (int round = 0; round < 400; round++) {
        size_t chars = 0;
        json_t *body = random_body(&seed, utf8, &chars);
        int64_t openai = (int64_t)((chars + 3) / 4);
        char *text = json_dumps(body, JSON_COMPACT);
        ck_assert_ptr_nonnull(text);
        int64_t sim = sl_sim_prompt_estimate(text, strlen(text));
        ck_assert_int_eq(sim, openai); /* the reference agrees with the simulator */
        for (size_t m = 0; m < NMODELS; m++) {
            int64_t ours = sl_estimate_input_tokens(body, MODELS[m]);
            if (ours < openai)
                ck_abort_msg("round %d, model %s: estimate %lld < ceil(%zu chars / 4) = %lld; "
                             "body %.200s",
                             round, MODELS[m] ? MODELS[m] : "(null)", (long long)ours, chars,
                             (long long)openai, text);
        }
        free(text);
        json_decref(body);
    }
}

/* ---- Tests ------------------------------------------------------------------------------ */

START_TEST(never_below_openai_receipt_estimate_for_random_ascii)
{
    check_random_bodies(0);
}
END_TEST

START_TEST(never_below_openai_receipt_estimate_for_random_utf8)
{
    check_random_bodies(1);
}
END_TEST

START_TEST(never_below_openai_receipt_estimate_at_small_sizes)
{
    /* Rounding matters most for short texts: 1..40 characters, one message. */
    for (size_t n = 0; n <= 40; n++) {
        char text[64];
        memset(text, 'a', n);
        text[n] = '\0';
        json_t *body = json_pack("{s:[{s:s, s:s}]}", "messages", "role", "user", "content", text);
        for (size_t m = 0; m < NMODELS; m++)
            ck_assert_int_ge(sl_estimate_input_tokens(body, MODELS[m]), (int64_t)((n + 3) / 4));
        json_decref(body);
    }
}
END_TEST

START_TEST(long_text_is_close_to_its_size_over_four)
{
    /* Conservative, but not absurdly so: 40,000 characters of prose are not 40,000 tokens. */
    size_t n = 40000;
    char *text = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        text[i] = "lorem ipsum dolor sit amet "[i % 27];
    text[n] = '\0';
    json_t *body = json_pack("{s:[{s:s, s:s}]}", "messages", "role", "user", "content", text);
    int64_t e = sl_estimate_input_tokens(body, "gpt-4o-mini");
    ck_assert_int_ge(e, (int64_t)(n / 4));
    ck_assert_int_le(e, (int64_t)(n / 2));
    json_decref(body);
    free(text);
}
END_TEST

START_TEST(empty_request_costs_a_fixed_overhead)
{
    int64_t empty = est("{}", NULL);
    ck_assert_int_gt(empty, 0);
    ck_assert_int_eq(est("{\"messages\":[]}", NULL), empty);
    /* Odd shapes do not crash or go negative. */
    ck_assert_int_ge(est("{\"messages\":\"hello\"}", NULL), 0);
    ck_assert_int_ge(est("{\"messages\":[1, null, \"x\", {\"content\": 5}]}", NULL), 0);
    ck_assert_int_ge(sl_estimate_input_tokens(NULL, NULL), 0);
}
END_TEST

START_TEST(each_message_adds_an_overhead)
{
    char body[4096];
    int64_t prev = -1;
    for (int n = 1; n <= 20; n++) {
        size_t len = (size_t)snprintf(body, sizeof body, "{\"messages\":[");
        for (int i = 0; i < n; i++)
            len += (size_t)snprintf(body + len, sizeof body - len,
                                    "%s{\"role\":\"user\","
                                    "\"content\":\"\"}",
                                    i ? "," : "");
        snprintf(body + len, sizeof body - len, "]}");
        int64_t e = est(body, "gpt-4o-mini");
        if (prev >= 0)
            ck_assert_int_ge(e - prev, 3); /* OpenAI's own count is 3-4 tokens a message */
        prev = e;
    }
    /* Empty messages still cost more than no messages. */
    ck_assert_int_gt(est("{\"messages\":[{\"role\":\"user\",\"content\":null}]}", NULL),
                     est("{\"messages\":[]}", NULL));
}
END_TEST

START_TEST(tools_add_to_the_estimate)
{
    const char *plain = "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"}]}";
    const char *one_tool =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
        "\"description\":\"Current weather for a city\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}]}";
    const char *two_tools =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
        "\"description\":\"Current weather for a city\",\"parameters\":{\"type\":\"object\","
        "\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}},"
        "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":"
        "{\"type\":\"object\",\"properties\":{\"tz\":{\"type\":\"string\"}}}}}]}";
    for (size_t m = 0; m < NMODELS; m++) {
        int64_t p = est(plain, MODELS[m]);
        int64_t t1 = est(one_tool, MODELS[m]);
        int64_t t2 = est(two_tools, MODELS[m]);
        ck_assert_int_gt(t1, p);
        ck_assert_int_gt(t2, t1);
        /* The tool definition's text is counted, not just a flat fee: ~200 bytes of JSON. */
        ck_assert_int_ge(t1 - p, 40);
    }
}
END_TEST

START_TEST(response_format_adds_to_the_estimate)
{
    const char *plain = "{\"messages\":[{\"role\":\"user\",\"content\":\"List three rivers.\"}]}";
    const char *json_mode = "{\"messages\":[{\"role\":\"user\",\"content\":\"List three "
                            "rivers.\"}],\"response_format\":{\"type\":\"json_object\"}}";
    const char *schema =
        "{\"messages\":[{\"role\":\"user\",\"content\":\"List three rivers.\"}],"
        "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"rivers\","
        "\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":{\"rivers\":{\"type\":"
        "\"array\",\"items\":{\"type\":\"string\"}}},\"required\":[\"rivers\"],"
        "\"additionalProperties\":false}}}}";
    for (size_t m = 0; m < NMODELS; m++) {
        int64_t p = est(plain, MODELS[m]);
        int64_t j = est(json_mode, MODELS[m]);
        int64_t s = est(schema, MODELS[m]);
        ck_assert_int_gt(j, p);
        ck_assert_int_gt(s, j);
    }
}
END_TEST

START_TEST(array_content_parts_count_their_text)
{
    const char *as_string = "{\"messages\":[{\"role\":\"user\",\"content\":"
                            "\"Describe this picture in detail please\"}]}";
    const char *as_parts = "{\"messages\":[{\"role\":\"user\",\"content\":["
                           "{\"type\":\"text\",\"text\":\"Describe this picture \"},"
                           "{\"type\":\"text\",\"text\":\"in detail please\"}]}]}";
    const char *with_image =
        "{\"messages\":[{\"role\":\"user\",\"content\":["
        "{\"type\":\"text\",\"text\":\"Describe this picture \"},"
        "{\"type\":\"text\",\"text\":\"in detail please\"},"
        "{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://example.com/cat.png\"}}]}]}";
    for (size_t m = 0; m < NMODELS; m++) {
        int64_t s = est(as_string, MODELS[m]);
        int64_t p = est(as_parts, MODELS[m]);
        /* The same text split into parts costs the same, give or take rounding. */
        ck_assert_int_ge(p, s - 1);
        ck_assert_int_le(p, s + 1);
        ck_assert_int_ge(p, (38 + 3) / 4);
        ck_assert_int_gt(est(with_image, MODELS[m]), p);
    }
}
END_TEST

START_TEST(names_and_tool_calls_count)
{
    const char *plain = "{\"messages\":[{\"role\":\"assistant\",\"content\":null}]}";
    const char *named = "{\"messages\":[{\"role\":\"assistant\",\"content\":null,"
                        "\"name\":\"planner_agent_number_one\"}]}";
    const char *calls =
        "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":"
        "\"call_abc123\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
        "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]}]}";
    ck_assert_int_gt(est(named, NULL), est(plain, NULL));
    ck_assert_int_gt(est(calls, NULL), est(plain, NULL) + 10);
}
END_TEST

START_TEST(estimate_grows_with_text)
{
    char body[8192];
    int64_t prev = 0;
    for (int n = 0; n <= 4000; n += 400) {
        char text[4096];
        memset(text, 'z', (size_t)n);
        text[n] = '\0';
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}",
                 text);
        int64_t e = est(body, "gpt-4o-mini");
        ck_assert_int_gt(e, prev);
        prev = e;
    }
}
END_TEST

static Suite *estimate_suite(void)
{
    Suite *s = suite_create("estimate");
    TCase *tc = tcase_create("input");
    tcase_add_test(tc, never_below_openai_receipt_estimate_for_random_ascii);
    tcase_add_test(tc, never_below_openai_receipt_estimate_for_random_utf8);
    tcase_add_test(tc, never_below_openai_receipt_estimate_at_small_sizes);
    tcase_add_test(tc, long_text_is_close_to_its_size_over_four);
    tcase_add_test(tc, empty_request_costs_a_fixed_overhead);
    tcase_add_test(tc, each_message_adds_an_overhead);
    tcase_add_test(tc, tools_add_to_the_estimate);
    tcase_add_test(tc, response_format_adds_to_the_estimate);
    tcase_add_test(tc, array_content_parts_count_their_text);
    tcase_add_test(tc, names_and_tool_calls_count);
    tcase_add_test(tc, estimate_grows_with_text);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (sl_crypto_init() != SL_OK)
        return 1;
    SRunner *sr = srunner_create(estimate_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
