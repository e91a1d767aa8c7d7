/* test_log.c - behaviour of the logger's rate limit for repeated events (common/log.h): the
 * first occurrence is printed, the rest of the interval only counted, and the count comes out on
 * the next line or in a flushed summary. A fake clock drives the intervals; stderr is captured
 * in a temporary file.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/log.h"

static int64_t fake_now_ms;

static int64_t fake_clock(void)
{
    return fake_now_ms;
}

static FILE *captured;
static int saved_stderr = -1;

/* Sends stderr to a temporary file until captured_text() reads it back. */
static void capture_stderr(void)
{
    captured = tmpfile();
    ck_assert_ptr_nonnull(captured);
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

static int count_lines(const char *text)
{
    int n = 0;
    for (const char *p = text; *p; p++)
        n += *p == '\n';
    return n;
}

/* One call site, as a daemon would have it. */
static void forged_dispatch(int n)
{
    sl_log_every(10000, SL_LOG_WARN, "dropped a dispatch message without a valid signature (%d)",
                 n);
}

static void setup(void)
{
    sl_log_init("test", SL_LOG_INFO);
    sl_log_set_clock(fake_clock);
    sl_log_reset_limited(); /* the suite also runs in one process (CK_FORK=no) */
    fake_now_ms = 1000000;
}

START_TEST(a_flood_prints_one_line_then_one_summary_with_the_count)
{
    capture_stderr();
    for (int i = 0; i < 30000; i++)
        forged_dispatch(i); /* all within one interval */
    sl_log_flush_limited(); /* too early: the interval has not passed */
    fake_now_ms += 10000;
    sl_log_flush_limited();
    char *text = captured_text();
    ck_assert_int_eq(count_lines(text), 2);
    ck_assert_ptr_nonnull(strstr(text, "without a valid signature (0)\"}"));
    /* The summary is not an occurrence itself: 1 + 29,999 = 30,000. */
    ck_assert_ptr_nonnull(strstr(text, "signature (0) (29,999 more like it in the last 10 s)"));
    ck_assert_ptr_null(strstr(text, "(1)"));
    free(text);
}
END_TEST

START_TEST(the_next_line_after_the_interval_carries_the_count)
{
    capture_stderr();
    for (int i = 0; i < 5; i++)
        forged_dispatch(i); /* 0 printed, 1..4 held */
    fake_now_ms += 12000;
    forged_dispatch(5);
    forged_dispatch(6); /* held again */
    char *text = captured_text();
    ck_assert_int_eq(count_lines(text), 2);
    ck_assert_ptr_nonnull(strstr(text, "signature (5) (and 4 more like it in the last 12 s)"));
    ck_assert_ptr_null(strstr(text, "(6)"));
    free(text);
}
END_TEST

START_TEST(one_line_per_interval_under_a_steady_flood)
{
    capture_stderr();
    /* 100 events a second for 60 s: one line every 10 s at most (7 with the first). */
    for (int i = 0; i < 6000; i++) {
        forged_dispatch(i);
        fake_now_ms += 10;
        if (i % 100 == 0)
            sl_log_flush_limited();
    }
    char *text = captured_text();
    int lines = count_lines(text);
    ck_assert_int_ge(lines, 6);
    ck_assert_int_le(lines, 7);
    free(text);
}
END_TEST

START_TEST(a_flush_with_nothing_held_prints_nothing)
{
    capture_stderr();
    forged_dispatch(0);
    fake_now_ms += 60000;
    sl_log_flush_limited();
    char *text = captured_text();
    ck_assert_int_eq(count_lines(text), 1);
    free(text);
}
END_TEST

START_TEST(the_extra_field_is_kept_in_the_summary)
{
    capture_stderr();
    for (int i = 0; i < 3; i++)
        sl_logf_every(1000, SL_LOG_INFO, "job", "j-1", "cancel of job %s: not queued", "j-1");
    fake_now_ms += 1000;
    sl_log_flush_limited();
    char *text = captured_text();
    ck_assert_int_eq(count_lines(text), 2);
    const char *second = strchr(text, '\n') + 1;
    ck_assert_ptr_nonnull(strstr(second, "\"job\":\"j-1\""));
    ck_assert_ptr_nonnull(strstr(second, "not queued (2 more like it in the last 1 s)"));
    free(text);
}
END_TEST

START_TEST(lines_below_the_level_are_not_counted)
{
    sl_log_init("test", SL_LOG_ERROR);
    capture_stderr();
    for (int i = 0; i < 10; i++)
        forged_dispatch(i);
    fake_now_ms += 20000;
    sl_log_flush_limited();
    char *text = captured_text();
    ck_assert_int_eq(count_lines(text), 0);
    free(text);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("rate_limit");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, a_flood_prints_one_line_then_one_summary_with_the_count);
    tcase_add_test(tc, the_next_line_after_the_interval_carries_the_count);
    tcase_add_test(tc, one_line_per_interval_under_a_steady_flood);
    tcase_add_test(tc, a_flush_with_nothing_held_prints_nothing);
    tcase_add_test(tc, the_extra_field_is_kept_in_the_summary);
    tcase_add_test(tc, lines_below_the_level_are_not_counted);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
