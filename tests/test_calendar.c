/* test_calendar.c - behaviour of calendar-day windows in a time zone (scheduler/calendar.h):
 * days start at local midnight, last 23 or 25 hours across DST changes, start later when a DST
 * change skips midnight, unknown zones are refused, and the caller's TZ is left as it was.
 *
 * Expected instants are written in UTC; the zone facts come from the IANA database (zdump -v).
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calendar.h"

#define HOUR_MS INT64_C(3600000)

/* Epoch ms of a UTC date and time. */
static int64_t utc_ms(int year, int mon, int mday, int hour, int min)
{
    struct tm tm = {
        .tm_year = year - 1900, .tm_mon = mon - 1, .tm_mday = mday, .tm_hour = hour, .tm_min = min};
    return (int64_t)timegm(&tm) * 1000;
}

/* Asserts the day of now_ms in tz runs from want_start to want_next. */
static void expect_day(int64_t now_ms, const char *tz, int64_t want_start, int64_t want_next)
{
    int64_t start = -1;
    int64_t next = -1;
    ck_assert_int_eq(sl_calendar_day(now_ms, tz, &start, &next), SL_OK);
    ck_assert_msg(start == want_start && next == want_next,
                  "%s at %lld: day [%lld, %lld), expected [%lld, %lld)", tz ? tz : "(null)",
                  (long long)now_ms, (long long)start, (long long)next, (long long)want_start,
                  (long long)want_next);
}

static int64_t day_length_ms(int64_t now_ms, const char *tz)
{
    int64_t start = -1;
    int64_t next = -1;
    ck_assert_int_eq(sl_calendar_day(now_ms, tz, &start, &next), SL_OK);
    return next - start;
}

/* Saves the TZ variable on entry of a test that changes it, and puts it back at the end (the
 * suite may run without fork, as under make asan). */
static char *saved_tz;
static int had_tz;

static void save_tz(void)
{
    const char *tz = getenv("TZ");
    had_tz = tz != NULL;
    saved_tz = tz != NULL ? strdup(tz) : NULL;
}

static void restore_tz(void)
{
    if (had_tz)
        setenv("TZ", saved_tz, 1);
    else
        unsetenv("TZ");
    tzset();
    free(saved_tz);
    saved_tz = NULL;
}

/* ---- UTC -------------------------------------------------------------------------------- */

START_TEST(utc_days_run_from_midnight_to_midnight)
{
    int64_t now = utc_ms(2026, 3, 8, 15, 30);
    int64_t midnight = utc_ms(2026, 3, 8, 0, 0);
    int64_t next = utc_ms(2026, 3, 9, 0, 0);
    expect_day(now, NULL, midnight, next);
    expect_day(now, "", midnight, next);
    expect_day(now, "UTC", midnight, next);
    expect_day(now, "Etc/UTC", midnight, next); /* through the zone file */
    /* Midnight belongs to the day it starts; the millisecond before does not. */
    expect_day(midnight, "UTC", midnight, next);
    expect_day(midnight - 1, "UTC", utc_ms(2026, 3, 7, 0, 0), midnight);
    expect_day(next - 1, NULL, midnight, next);
    /* Before 1970 too. */
    expect_day(-1, NULL, -24 * HOUR_MS, 0);
    expect_day(-24 * HOUR_MS, "UTC", -24 * HOUR_MS, 0);
}
END_TEST

/* ---- America/Los_Angeles ---------------------------------------------------------------- */

START_TEST(los_angeles_midnight_is_0800_utc_in_winter)
{
    const char *la = "America/Los_Angeles";
    expect_day(utc_ms(2026, 1, 15, 20, 0), la, utc_ms(2026, 1, 15, 8, 0),
               utc_ms(2026, 1, 16, 8, 0));
    /* 03:00 UTC on the 16th is still the 15th in Los Angeles (19:00 PST). */
    expect_day(utc_ms(2026, 1, 16, 3, 0), la, utc_ms(2026, 1, 15, 8, 0), utc_ms(2026, 1, 16, 8, 0));
    /* Local midnight itself starts the day. */
    expect_day(utc_ms(2026, 1, 16, 8, 0), la, utc_ms(2026, 1, 16, 8, 0), utc_ms(2026, 1, 17, 8, 0));
    expect_day(utc_ms(2026, 1, 16, 8, 0) - 1, la, utc_ms(2026, 1, 15, 8, 0),
               utc_ms(2026, 1, 16, 8, 0));
}
END_TEST

START_TEST(los_angeles_midnight_is_0700_utc_in_summer)
{
    const char *la = "America/Los_Angeles";
    expect_day(utc_ms(2026, 7, 4, 12, 0), la, utc_ms(2026, 7, 4, 7, 0), utc_ms(2026, 7, 5, 7, 0));
    expect_day(utc_ms(2026, 7, 5, 6, 59), la, utc_ms(2026, 7, 4, 7, 0), utc_ms(2026, 7, 5, 7, 0));
}
END_TEST

START_TEST(los_angeles_spring_forward_day_is_23_hours)
{
    /* 2026-03-08 02:00 PST becomes 03:00 PDT. */
    const char *la = "America/Los_Angeles";
    int64_t start = utc_ms(2026, 3, 8, 8, 0);
    int64_t next = utc_ms(2026, 3, 9, 7, 0);
    expect_day(utc_ms(2026, 3, 8, 9, 30), la, start, next);  /* 01:30 PST */
    expect_day(utc_ms(2026, 3, 8, 10, 30), la, start, next); /* 03:30 PDT */
    expect_day(utc_ms(2026, 3, 9, 6, 59), la, start, next);  /* 23:59 PDT */
    ck_assert_int_eq(next - start, 23 * HOUR_MS);
    ck_assert_int_eq(day_length_ms(utc_ms(2026, 3, 7, 20, 0), la), 24 * HOUR_MS);
    ck_assert_int_eq(day_length_ms(utc_ms(2026, 3, 9, 20, 0), la), 24 * HOUR_MS);
}
END_TEST

START_TEST(los_angeles_fall_back_day_is_25_hours)
{
    /* 2026-11-01 02:00 PDT becomes 01:00 PST: 01:00-02:00 happens twice. */
    const char *la = "America/Los_Angeles";
    int64_t start = utc_ms(2026, 11, 1, 7, 0);
    int64_t next = utc_ms(2026, 11, 2, 8, 0);
    expect_day(utc_ms(2026, 11, 1, 8, 30), la, start, next); /* 01:30 PDT */
    expect_day(utc_ms(2026, 11, 1, 9, 30), la, start, next); /* 01:30 PST */
    expect_day(utc_ms(2026, 11, 2, 7, 59), la, start, next); /* 23:59 PST */
    ck_assert_int_eq(next - start, 25 * HOUR_MS);
}
END_TEST

START_TEST(every_instant_of_a_year_lies_in_its_own_day)
{
    /* Hour by hour through 2026 in Los Angeles: the window contains now, lasts 23, 24 or 25
     * hours, and the windows tile time (the next day starts where this one ends). */
    const char *la = "America/Los_Angeles";
    int short_days = 0;
    int long_days = 0;
    int64_t prev_start = -1;
    for (int64_t now = utc_ms(2026, 1, 1, 8, 0); now < utc_ms(2027, 1, 1, 8, 0); now += HOUR_MS) {
        int64_t start = -1;
        int64_t next = -1;
        ck_assert_int_eq(sl_calendar_day(now, la, &start, &next), SL_OK);
        ck_assert_int_le(start, now);
        ck_assert_int_lt(now, next);
        int64_t len = next - start;
        ck_assert(len == 23 * HOUR_MS || len == 24 * HOUR_MS || len == 25 * HOUR_MS);
        if (start != prev_start) {
            short_days += len == 23 * HOUR_MS;
            long_days += len == 25 * HOUR_MS;
            int64_t s2 = -1;
            int64_t n2 = -1;
            ck_assert_int_eq(sl_calendar_day(next, la, &s2, &n2), SL_OK);
            ck_assert_int_eq(s2, next);
            prev_start = start;
        }
    }
    ck_assert_int_eq(short_days, 1);
    ck_assert_int_eq(long_days, 1);
}
END_TEST

/* ---- Other zones ------------------------------------------------------------------------ */

START_TEST(berlin_days_follow_central_european_time)
{
    const char *berlin = "Europe/Berlin";
    /* CET (+01:00) in winter, CEST (+02:00) in summer. */
    expect_day(utc_ms(2026, 1, 15, 12, 0), berlin, utc_ms(2026, 1, 14, 23, 0),
               utc_ms(2026, 1, 15, 23, 0));
    expect_day(utc_ms(2026, 7, 3, 22, 30), berlin, utc_ms(2026, 7, 3, 22, 0),
               utc_ms(2026, 7, 4, 22, 0));
    /* 2026-03-29 02:00 CET becomes 03:00 CEST; 2026-10-25 03:00 CEST becomes 02:00 CET. */
    expect_day(utc_ms(2026, 3, 29, 12, 0), berlin, utc_ms(2026, 3, 28, 23, 0),
               utc_ms(2026, 3, 29, 22, 0));
    expect_day(utc_ms(2026, 10, 25, 12, 0), berlin, utc_ms(2026, 10, 24, 22, 0),
               utc_ms(2026, 10, 25, 23, 0));
    ck_assert_int_eq(day_length_ms(utc_ms(2026, 3, 29, 12, 0), berlin), 23 * HOUR_MS);
    ck_assert_int_eq(day_length_ms(utc_ms(2026, 10, 25, 12, 0), berlin), 25 * HOUR_MS);
}
END_TEST

START_TEST(a_day_whose_midnight_is_skipped_starts_at_one)
{
    /* Chile moves its clocks at midnight: 2025-09-07 00:00 -04 becomes 01:00 -03, so that day
     * starts at 01:00 local (04:00 UTC) and lasts 23 hours. */
    const char *santiago = "America/Santiago";
    expect_day(utc_ms(2025, 9, 7, 15, 0), santiago, utc_ms(2025, 9, 7, 4, 0),
               utc_ms(2025, 9, 8, 3, 0));
    /* The day before ends where it starts. */
    expect_day(utc_ms(2025, 9, 6, 15, 0), santiago, utc_ms(2025, 9, 6, 4, 0),
               utc_ms(2025, 9, 7, 4, 0));
    /* 2025-04-06 00:00 -03 became 2025-04-05 23:00 -04: a 25-hour Saturday. */
    ck_assert_int_eq(day_length_ms(utc_ms(2025, 4, 5, 15, 0), santiago), 25 * HOUR_MS);
}
END_TEST

START_TEST(a_skipped_calendar_day_is_jumped_over)
{
    /* Samoa crossed the date line: 2011-12-29 23:59:59 -10 was followed by 2011-12-31 00:00 +14,
     * so the 29th is followed directly by the 31st. */
    expect_day(utc_ms(2011, 12, 29, 20, 0), "Pacific/Apia", utc_ms(2011, 12, 29, 10, 0),
               utc_ms(2011, 12, 30, 10, 0));
    expect_day(utc_ms(2011, 12, 30, 10, 0), "Pacific/Apia", utc_ms(2011, 12, 30, 10, 0),
               utc_ms(2011, 12, 31, 10, 0));
}
END_TEST

/* ---- Refusals and the environment ------------------------------------------------------- */

START_TEST(unknown_zones_are_refused)
{
    static const char *const bad[] = {
        "Mars/Olympus_Mons",
        "America",                           /* a directory */
        "zone.tab",                          /* a data file beside the zones, not a zone */
        "../../../etc/passwd",               /* outside the zone directory */
        "America/../Europe/Berlin",          /* ".." is refused even when it would resolve */
        "/usr/share/zoneinfo/Europe/Berlin", /* absolute */
        "Europe/Berlin/",                    /* not a directory */
        "PST8PDT,M3.2.0,M11.1.0",            /* a POSIX rule, not a zone name */
        "america/los_angeles",               /* names are case-sensitive */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t start = 42;
        int64_t next = 43;
        ck_assert_msg(!sl_calendar_zone_ok(bad[i]), "\"%s\" accepted as a zone", bad[i]);
        ck_assert_int_eq(sl_calendar_day(utc_ms(2026, 1, 1, 0, 0), bad[i], &start, &next),
                         SL_EINVAL);
        /* Outputs are only written on success. */
        ck_assert_int_eq(start, 42);
        ck_assert_int_eq(next, 43);
    }
    char long_name[400];
    memset(long_name, 'A', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    ck_assert(!sl_calendar_zone_ok(long_name));
}
END_TEST

START_TEST(known_zones_are_accepted)
{
    ck_assert(sl_calendar_zone_ok(NULL));
    ck_assert(sl_calendar_zone_ok(""));
    ck_assert(sl_calendar_zone_ok("UTC"));
    ck_assert(sl_calendar_zone_ok("Etc/UTC"));
    ck_assert(sl_calendar_zone_ok("America/Los_Angeles"));
    ck_assert(sl_calendar_zone_ok("Europe/Berlin"));
}
END_TEST

START_TEST(absurd_times_are_refused)
{
    int64_t start = 42;
    int64_t next = 43;
    ck_assert_int_eq(sl_calendar_day(INT64_MAX, NULL, &start, &next), SL_EINVAL);
    ck_assert_int_eq(sl_calendar_day(INT64_MIN, "Europe/Berlin", &start, &next), SL_EINVAL);
    ck_assert_int_eq(start, 42);
    ck_assert_int_eq(next, 43);
}
END_TEST

START_TEST(previous_tz_is_restored)
{
    save_tz();
    int64_t start = -1;
    int64_t next = -1;
    time_t epoch = 0;
    struct tm tm;

    /* A TZ that was set keeps its value, and local time follows it again. */
    setenv("TZ", "Asia/Tokyo", 1);
    tzset();
    ck_assert_int_eq(
        sl_calendar_day(utc_ms(2026, 1, 15, 20, 0), "America/Los_Angeles", &start, &next), SL_OK);
    ck_assert_str_eq(getenv("TZ"), "Asia/Tokyo");
    ck_assert_ptr_nonnull(localtime_r(&epoch, &tm));
    ck_assert_int_eq(tm.tm_hour, 9); /* 1970-01-01 09:00 in Tokyo */

    /* So does it after a refused zone, and after a UTC day. */
    ck_assert_int_eq(sl_calendar_day(0, "Nowhere/Special", &start, &next), SL_EINVAL);
    ck_assert_str_eq(getenv("TZ"), "Asia/Tokyo");
    ck_assert_int_eq(sl_calendar_day(0, "UTC", &start, &next), SL_OK);
    ck_assert_str_eq(getenv("TZ"), "Asia/Tokyo");

    /* An unset TZ stays unset. */
    unsetenv("TZ");
    tzset();
    ck_assert_int_eq(sl_calendar_day(utc_ms(2026, 1, 15, 20, 0), "Europe/Berlin", &start, &next),
                     SL_OK);
    ck_assert_ptr_null(getenv("TZ"));

    /* An empty TZ (UTC for the C library) stays empty. */
    setenv("TZ", "", 1);
    ck_assert_int_eq(sl_calendar_day(utc_ms(2026, 1, 15, 20, 0), "Europe/Berlin", &start, &next),
                     SL_OK);
    ck_assert_str_eq(getenv("TZ"), "");
    restore_tz();
}
END_TEST

static Suite *calendar_suite(void)
{
    Suite *s = suite_create("calendar");
    TCase *tc = tcase_create("days");
    tcase_add_test(tc, utc_days_run_from_midnight_to_midnight);
    tcase_add_test(tc, los_angeles_midnight_is_0800_utc_in_winter);
    tcase_add_test(tc, los_angeles_midnight_is_0700_utc_in_summer);
    tcase_add_test(tc, los_angeles_spring_forward_day_is_23_hours);
    tcase_add_test(tc, los_angeles_fall_back_day_is_25_hours);
    tcase_add_test(tc, every_instant_of_a_year_lies_in_its_own_day);
    tcase_add_test(tc, berlin_days_follow_central_european_time);
    tcase_add_test(tc, a_day_whose_midnight_is_skipped_starts_at_one);
    tcase_add_test(tc, a_skipped_calendar_day_is_jumped_over);
    suite_add_tcase(s, tc);

    TCase *z = tcase_create("zones");
    tcase_add_test(z, unknown_zones_are_refused);
    tcase_add_test(z, known_zones_are_accepted);
    tcase_add_test(z, absurd_times_are_refused);
    tcase_add_test(z, previous_tz_is_restored);
    suite_add_tcase(s, z);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(calendar_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
