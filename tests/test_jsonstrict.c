/* test_jsonstrict.c - behaviour of the strict key check (common/jsonstrict.h): allowed keys pass,
 * the first unknown key is named, and anything but an object is refused with a one-line reason.
 */
#include <check.h>
#include <jansson.h>
#include <string.h>

#include "../common/jsonstrict.h"

static const char *const allowed[] = {"limit", "weight", "guarantee", NULL};

START_TEST(allowed_keys_pass)
{
    json_t *obj = json_pack("{s:i, s:i}", "limit", 10, "guarantee", 0);
    char err[128] = "untouched";
    ck_assert_ptr_null(sl_jsonstrict_unknown_key(obj, allowed));
    ck_assert_int_eq(sl_jsonstrict_check(obj, allowed, "body", err, sizeof err), SL_OK);
    ck_assert_str_eq(err, "untouched");
    json_decref(obj);
}
END_TEST

START_TEST(empty_object_passes_any_list)
{
    static const char *const none[] = {NULL};
    json_t *obj = json_object();
    ck_assert_ptr_null(sl_jsonstrict_unknown_key(obj, none));
    ck_assert_int_eq(sl_jsonstrict_check(obj, none, "body", NULL, 0), SL_OK);
    json_decref(obj);
}
END_TEST

START_TEST(unknown_key_is_named)
{
    json_t *obj = json_pack("{s:i, s:i}", "limit", 10, "limt", 5);
    char err[128];
    ck_assert_str_eq(sl_jsonstrict_unknown_key(obj, allowed), "limt");
    ck_assert_int_eq(sl_jsonstrict_check(obj, allowed, "kafka.topics", err, sizeof err),
                     SL_ESCHEMA);
    ck_assert_str_eq(err, "kafka.topics: unknown key \"limt\"");
    json_decref(obj);
}
END_TEST

START_TEST(first_unknown_key_in_object_order_is_named)
{
    json_t *obj = json_object();
    json_object_set_new(obj, "weight", json_integer(1));
    json_object_set_new(obj, "zeta", json_integer(1));
    json_object_set_new(obj, "alpha", json_integer(1));
    ck_assert_str_eq(sl_jsonstrict_unknown_key(obj, allowed), "zeta");
    json_decref(obj);
}
END_TEST

START_TEST(prefix_or_extension_of_an_allowed_key_is_unknown)
{
    json_t *obj = json_pack("{s:i}", "limits", 1);
    ck_assert_str_eq(sl_jsonstrict_unknown_key(obj, allowed), "limits");
    json_decref(obj);
    obj = json_pack("{s:i}", "lim", 1);
    ck_assert_str_eq(sl_jsonstrict_unknown_key(obj, allowed), "lim");
    json_decref(obj);
}
END_TEST

START_TEST(non_object_is_an_error)
{
    char err[128];
    json_t *arr = json_pack("[s]", "limit");
    ck_assert_int_eq(sl_jsonstrict_check(arr, allowed, "routes[0]", err, sizeof err), SL_ESCHEMA);
    ck_assert_str_eq(err, "routes[0]: must be an object");
    json_decref(arr);

    json_t *str = json_string("limit");
    ck_assert_int_eq(sl_jsonstrict_check(str, allowed, "body", err, sizeof err), SL_ESCHEMA);
    ck_assert_str_eq(err, "body: must be an object");
    json_decref(str);

    ck_assert_int_eq(sl_jsonstrict_check(NULL, allowed, "body", err, sizeof err), SL_ESCHEMA);
    ck_assert_str_eq(err, "body: must be an object");
}
END_TEST

START_TEST(reason_is_truncated_to_the_buffer)
{
    json_t *obj = json_pack("{s:i}", "a_rather_long_unknown_key", 1);
    char err[8];
    memset(err, 'x', sizeof err);
    ck_assert_int_eq(sl_jsonstrict_check(obj, allowed, "config", err, sizeof err), SL_ESCHEMA);
    ck_assert_uint_eq(strlen(err), sizeof err - 1);
    /* No buffer at all: the verdict alone. */
    ck_assert_int_eq(sl_jsonstrict_check(obj, allowed, "config", NULL, 0), SL_ESCHEMA);
    ck_assert_int_eq(sl_jsonstrict_check(obj, allowed, "config", err, 0), SL_ESCHEMA);
    json_decref(obj);
}
END_TEST

START_TEST(checked_object_is_left_as_it_was)
{
    json_t *obj = json_pack("{s:i, s:i}", "limit", 1, "other", 2);
    sl_jsonstrict_check(obj, allowed, "body", NULL, 0);
    ck_assert_uint_eq(json_object_size(obj), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(obj, "other")), 2);
    ck_assert_int_eq(obj->refcount, 1);
    json_decref(obj);
}
END_TEST

static Suite *jsonstrict_suite(void)
{
    Suite *s = suite_create("jsonstrict");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, allowed_keys_pass);
    tcase_add_test(tc, empty_object_passes_any_list);
    tcase_add_test(tc, unknown_key_is_named);
    tcase_add_test(tc, first_unknown_key_in_object_order_is_named);
    tcase_add_test(tc, prefix_or_extension_of_an_allowed_key_is_unknown);
    tcase_add_test(tc, non_object_is_an_error);
    tcase_add_test(tc, reason_is_truncated_to_the_buffer);
    tcase_add_test(tc, checked_object_is_left_as_it_was);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(jsonstrict_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
