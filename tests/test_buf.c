/* test_buf.c - behaviour of the size-capped buffer and array growth (common/buf.h): appends,
 * the cap, failures that leave the buffer as it was, taking the contents, doubling growth. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../common/buf.h"

START_TEST(appends_are_nul_terminated_and_counted)
{
    sl_buf_t b;
    sl_buf_init(&b, 100);
    ck_assert_int_eq(sl_buf_add(&b, "ab", 2), SL_OK);
    ck_assert_int_eq(sl_buf_adds(&b, "cd"), SL_OK);
    ck_assert_int_eq(sl_buf_addf(&b, "-%d-%s", 42, "x"), SL_OK);
    ck_assert_uint_eq(b.len, 9);
    ck_assert_str_eq(b.ptr, "abcd-42-x");
    sl_buf_free(&b);
    ck_assert_ptr_null(b.ptr);
    ck_assert_uint_eq(b.len, 0);
}
END_TEST

START_TEST(the_cap_is_exact)
{
    sl_buf_t b;
    sl_buf_init(&b, 5);
    ck_assert_int_eq(sl_buf_add(&b, "12345", 5), SL_OK);
    ck_assert_int_eq(sl_buf_add(&b, "6", 1), SL_ETOOBIG);
    ck_assert_uint_eq(b.len, 5);
    ck_assert_str_eq(b.ptr, "12345");
    sl_buf_free(&b);
}
END_TEST

START_TEST(a_refused_append_leaves_the_buffer_as_it_was)
{
    sl_buf_t b;
    sl_buf_init(&b, 10);
    ck_assert_int_eq(sl_buf_adds(&b, "hello"), SL_OK);
    ck_assert_int_eq(sl_buf_adds(&b, "world!"), SL_ETOOBIG);
    ck_assert_int_eq(sl_buf_addf(&b, "%s", "toolong"), SL_ETOOBIG);
    ck_assert_str_eq(b.ptr, "hello");
    ck_assert_uint_eq(b.len, 5);
    /* A size so large that len + size overflows is refused, not wrapped. */
    ck_assert_int_eq(sl_buf_add(&b, "x", (size_t)-1), SL_ETOOBIG);
    ck_assert_str_eq(b.ptr, "hello");
    sl_buf_free(&b);
}
END_TEST

START_TEST(grows_far_past_its_first_allocation)
{
    sl_buf_t b;
    sl_buf_init(&b, 1 << 20);
    for (int i = 0; i < 10000; i++)
        ck_assert_int_eq(sl_buf_adds(&b, "0123456789"), SL_OK);
    ck_assert_uint_eq(b.len, 100000);
    ck_assert_uint_eq(strlen(b.ptr), 100000);
    ck_assert(b.alloc <= (1u << 20) + 1);
    sl_buf_free(&b);
}
END_TEST

START_TEST(take_hands_over_and_empties)
{
    sl_buf_t b;
    sl_buf_init(&b, 64);
    size_t len = 99;
    ck_assert_ptr_null(sl_buf_take(&b, &len));
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(sl_buf_adds(&b, "mine"), SL_OK);
    char *p = sl_buf_take(&b, &len);
    ck_assert_str_eq(p, "mine");
    ck_assert_uint_eq(len, 4);
    ck_assert_ptr_null(b.ptr);
    ck_assert_uint_eq(b.max, 64);
    free(p);
    sl_buf_reset(&b); /* on an empty buffer: nothing to do */
    ck_assert_int_eq(sl_buf_adds(&b, "again"), SL_OK);
    sl_buf_reset(&b);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_str_eq(b.ptr, "");
    sl_buf_free(&b);
    sl_buf_free(&b); /* twice is harmless */
}
END_TEST

START_TEST(grow_doubles_and_keeps_elements)
{
    int *items = NULL;
    size_t cap = 0;
    for (size_t n = 1; n <= 1000; n++) {
        ck_assert_int_eq(sl_grow((void **)&items, sizeof *items, &cap, n, 4096), SL_OK);
        ck_assert(cap >= n);
        items[n - 1] = (int)n;
    }
    ck_assert_uint_eq(cap, 1024);
    for (size_t i = 0; i < 1000; i++)
        ck_assert_int_eq(items[i], (int)i + 1);
    free(items);
}
END_TEST

START_TEST(grow_stops_at_its_max)
{
    int *items = NULL;
    size_t cap = 0;
    ck_assert_int_eq(sl_grow((void **)&items, sizeof *items, &cap, 10, 12), SL_OK);
    ck_assert(cap >= 10 && cap <= 12);
    ck_assert_int_eq(sl_grow((void **)&items, sizeof *items, &cap, 12, 12), SL_OK);
    ck_assert_uint_eq(cap, 12);
    int *before = items;
    ck_assert_int_eq(sl_grow((void **)&items, sizeof *items, &cap, 13, 12), SL_ETOOBIG);
    ck_assert_ptr_eq(items, before);
    ck_assert_uint_eq(cap, 12);
    /* An element size whose product overflows is refused. */
    void *big = NULL;
    size_t bigcap = 0;
    ck_assert_int_eq(sl_grow(&big, (size_t)-1 / 4, &bigcap, 8, 1000), SL_ETOOBIG);
    ck_assert_ptr_null(big);
    free(items);
}
END_TEST

static Suite *buf_suite(void)
{
    Suite *s = suite_create("buf");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, appends_are_nul_terminated_and_counted);
    tcase_add_test(tc, the_cap_is_exact);
    tcase_add_test(tc, a_refused_append_leaves_the_buffer_as_it_was);
    tcase_add_test(tc, grows_far_past_its_first_allocation);
    tcase_add_test(tc, take_hands_over_and_empties);
    tcase_add_test(tc, grow_doubles_and_keeps_elements);
    tcase_add_test(tc, grow_stops_at_its_max);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(buf_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
