/* calendar.c - calendar-day windows in a named time zone (see calendar.h).
 *
 * The C library knows the zones: with TZ pointing at a zone file, localtime_r gives the local date
 * of any instant. A day's start is then found without trusting mktime on a midnight that may not
 * exist: it is the first second whose local date is on or after the day, found by bisection over
 * a span that certainly contains it (UTC offsets lie within a day of zero).
 */
#include "calendar.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ZONEINFO "/usr/share/zoneinfo/"
#define ZONE_NAME_MAX 255
#define DAY_MS INT64_C(86400000)
#define DAY_S 86400
/* About 142,000 years either side of 1970: far beyond any quota, far from overflowing. */
#define NOW_MS_LIMIT (INT64_C(1) << 52)

static int is_utc(const char *tz)
{
    return tz == NULL || tz[0] == '\0' || strcmp(tz, "UTC") == 0;
}

int sl_calendar_zone_ok(const char *tz)
{
    if (is_utc(tz))
        return 1;
    /* The name becomes a path: keep it inside the zone directory. */
    if (tz[0] == '/' || strstr(tz, "..") != NULL || strlen(tz) > ZONE_NAME_MAX)
        return 0;
    char path[sizeof ZONEINFO + ZONE_NAME_MAX];
    snprintf(path, sizeof path, ZONEINFO "%s", tz);
    /* Directories ("America") and the data files beside the zones ("zone.tab") exist too, and the
     * C library would silently take them for UTC: only a compiled zone (TZif) will do. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char magic[4];
    ssize_t n = read(fd, magic, sizeof magic);
    close(fd);
    return n == (ssize_t)sizeof magic && memcmp(magic, "TZif", sizeof magic) == 0;
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* The local date of t as one ordered number, or INT64_MIN when t cannot be converted. */
static int64_t date_key(time_t t)
{
    struct tm tm;
    if (localtime_r(&t, &tm) == NULL)
        return INT64_MIN;
    return (int64_t)tm.tm_year * 10000 + tm.tm_mon * 100 + tm.tm_mday;
}

/* Sets *out to the first second whose local date is on or after year-mon-mday (struct tm
 * conventions, normalised). Most days start at local midnight, but a DST change at 00:00 skips
 * to 01:00 (America/Santiago) and Pacific/Apia skipped 2011-12-30 altogether, so midnight is not
 * asked for: the answer is bisected between two instants whose local dates lie before and on or
 * after the day. The local date only moves forward across such a span. */
static sl_err_t first_second_of(int year, int mon, int mday, time_t *out)
{
    int64_t target = (int64_t)year * 10000 + mon * 100 + mday;
    struct tm utc = {.tm_year = year, .tm_mon = mon, .tm_mday = mday};
    time_t utc_midnight = timegm(&utc);
    /* UTC offsets lie within -12 h and +14 h, well inside two days. */
    time_t lo = utc_midnight - 2 * DAY_S;
    time_t hi = utc_midnight + 2 * DAY_S;
    if (date_key(lo) >= target || date_key(hi) < target)
        return SL_EINVAL;
    while (hi - lo > 1) {
        time_t mid = lo + (hi - lo) / 2;
        if (date_key(mid) >= target)
            hi = mid;
        else
            lo = mid;
    }
    *out = hi;
    return SL_OK;
}

/* sl_calendar_day with TZ already set to the zone. */
static sl_err_t local_day(int64_t now_ms, int64_t *start_ms, int64_t *next_ms)
{
    time_t now_s = (time_t)floor_div(now_ms, 1000);
    struct tm today;
    if (localtime_r(&now_s, &today) == NULL)
        return SL_EINVAL;
    /* timegm normalises the day after (the 32nd of a month, the 366th day of a year). */
    struct tm tomorrow = {
        .tm_year = today.tm_year, .tm_mon = today.tm_mon, .tm_mday = today.tm_mday + 1};
    timegm(&tomorrow);
    time_t start_s;
    time_t next_s;
    sl_err_t rc = first_second_of(today.tm_year, today.tm_mon, today.tm_mday, &start_s);
    if (rc != SL_OK)
        return rc;
    rc = first_second_of(tomorrow.tm_year, tomorrow.tm_mon, tomorrow.tm_mday, &next_s);
    if (rc != SL_OK)
        return rc;
    *start_ms = (int64_t)start_s * 1000;
    *next_ms = (int64_t)next_s * 1000;
    return SL_OK;
}

sl_err_t sl_calendar_day(int64_t now_ms, const char *tz, int64_t *start_ms, int64_t *next_ms)
{
    if (now_ms <= -NOW_MS_LIMIT || now_ms >= NOW_MS_LIMIT || !sl_calendar_zone_ok(tz))
        return SL_EINVAL;
    if (is_utc(tz)) {
        int64_t start = floor_div(now_ms, DAY_MS) * DAY_MS;
        *start_ms = start;
        *next_ms = start + DAY_MS;
        return SL_OK;
    }

    /* A leading ':' makes the C library read the zone file and never parse the value as a POSIX
     * rule; the absolute path keeps it from looking anywhere but where zone_ok looked (TZDIR). */
    char tz_value[1 + sizeof ZONEINFO + ZONE_NAME_MAX];
    snprintf(tz_value, sizeof tz_value, ":" ZONEINFO "%s", tz);
    const char *prev = getenv("TZ");
    char *saved = NULL;
    if (prev != NULL) {
        saved = strdup(prev); /* setenv may free the string prev points to */
        if (saved == NULL)
            return SL_ENOMEM;
    }

    sl_err_t rc = SL_ENOMEM;
    int64_t start = 0;
    int64_t next = 0;
    if (setenv("TZ", tz_value, 1 /*overwrite*/) == 0) {
        tzset();
        rc = local_day(now_ms, &start, &next);
    }

    /* Restoring cannot be skipped, whatever happened above. (Putting back a previous value could
     * itself run out of memory; there is nothing better to do then.) */
    if (saved != NULL)
        setenv("TZ", saved, 1 /*overwrite*/);
    else
        unsetenv("TZ");
    tzset();
    free(saved);

    if (rc == SL_OK) {
        *start_ms = start;
        *next_ms = next;
    }
    return rc;
}
