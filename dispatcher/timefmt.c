/* timefmt.c - provider time and duration formats into milliseconds (see timefmt.h). */
#include "timefmt.h"

#include <ctype.h>
#include <string.h>

#include "util.h"

/* Reads exactly n decimal digits at s (no sign); -1 when any is not a digit. */
static int digits(const char *s, size_t n)
{
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* Days from 1970-01-01 to the proleptic Gregorian date y-m-d (m 1..12); Howard Hinnant's
 * days_from_civil, exact for every year of four digits. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

int64_t sl_timefmt_rfc3339_ms(const char *s, size_t len)
{
    /* "YYYY-MM-DDTHH:MM:SS" is 19 bytes; a fraction and a zone follow. */
    if (s == NULL || len < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') ||
        s[13] != ':' || s[16] != ':')
        return -1;
    int year = digits(s, 4);
    int mon = digits(s + 5, 2);
    int day = digits(s + 8, 2);
    int hour = digits(s + 11, 2);
    int min = digits(s + 14, 2);
    int sec = digits(s + 17, 2);
    /* Second 60 is a leap second; it counts as the next minute's first second. */
    if (year < 0 || mon < 1 || mon > 12 || day < 1 || day > days_in_month(year, mon) || hour < 0 ||
        hour > 23 || min < 0 || min > 59 || sec < 0 || sec > 60)
        return -1;
    size_t i = 19;
    int64_t frac_ms = 0;
    if (s[i] == '.') {
        size_t first = ++i;
        while (i < len && isdigit((unsigned char)s[i])) {
            if (i - first < 3)
                frac_ms = frac_ms * 10 + (s[i] - '0');
            i++;
        }
        if (i == first)
            return -1;
        for (size_t n = i - first; n < 3; n++)
            frac_ms *= 10;
    }
    int64_t offset_s;
    if (i + 1 == len && (s[i] == 'Z' || s[i] == 'z')) {
        offset_s = 0;
    } else if (i + 6 == len && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
        int oh = digits(s + i + 1, 2);
        int om = digits(s + i + 4, 2);
        if (oh < 0 || oh > 23 || om < 0 || om > 59)
            return -1;
        offset_s = (s[i] == '-' ? -1 : 1) * (int64_t)(oh * 3600 + om * 60);
    } else {
        return -1;
    }
    int64_t epoch_s =
        days_from_civil(year, mon, day) * 86400 + hour * 3600 + min * 60 + sec - offset_s;
    if (epoch_s < 0)
        return -1;
    return epoch_s * 1000 + frac_ms;
}

int64_t sl_timefmt_go_duration_ms(const char *s, size_t len)
{
    double total = 0;
    size_t i = 0;
    if (len == 0)
        return -1;
    while (i < len) {
        double v;
        size_t n = sl_scan_decimal(s + i, len - i, &v);
        if (n == 0)
            return -1;
        i += n;
        double unit;
        if (i + 1 < len && s[i] == 'm' && s[i + 1] == 's') {
            unit = 1;
            i += 2;
        } else if (i + 1 < len && (s[i] == 'u' || s[i] == 'n') && s[i + 1] == 's') {
            unit = s[i] == 'u' ? 1e-3 : 1e-6;
            i += 2;
        } else if (i + 2 < len && (unsigned char)s[i] == 0xC2 && (unsigned char)s[i + 1] == 0xB5 &&
                   s[i + 2] == 's') {
            unit = 1e-3; /* "µs" with U+00B5 MICRO SIGN, as Go prints it */
            i += 3;
        } else if (i + 2 < len && (unsigned char)s[i] == 0xCE && (unsigned char)s[i + 1] == 0xBC &&
                   s[i + 2] == 's') {
            unit = 1e-3; /* "μs" with U+03BC GREEK SMALL LETTER MU */
            i += 3;
        } else if (i < len && s[i] == 'h') {
            unit = 3600000;
            i++;
        } else if (i < len && s[i] == 'm') {
            unit = 60000;
            i++;
        } else if (i < len && s[i] == 's') {
            unit = 1000;
            i++;
        } else {
            return -1;
        }
        /* Each term is below 1e64 ms, so the sum stays finite; the range is checked once. */
        total += v * unit;
    }
    return sl_ms_of_double(total, SL_TIMEFMT_MAX_MS, 0 /*nearest*/);
}

/* A whole value of len bytes that is one decimal number, or -1. */
static int decimal(const char *s, size_t len, double *v)
{
    return len > 0 && sl_scan_decimal(s, len, v) == len ? 0 : -1;
}

int64_t sl_timefmt_seconds_ms(const char *s, size_t len)
{
    double x;
    if (decimal(s, len, &x) != 0)
        return -1;
    return sl_ms_of_double(x * 1000, SL_TIMEFMT_MAX_MS, 0 /*nearest*/);
}

int64_t sl_timefmt_ms(const char *s, size_t len)
{
    double x;
    if (decimal(s, len, &x) != 0)
        return -1;
    return sl_ms_of_double(x, SL_TIMEFMT_MAX_MS, 0 /*nearest*/);
}

int64_t sl_timefmt_proto_duration_ms(const char *s)
{
    if (s == NULL)
        return -1;
    size_t n = strlen(s);
    double secs;
    if (n < 2 || s[n - 1] != 's' || decimal(s, n - 1, &secs) != 0)
        return -1;
    /* Rounded up: a retry hint is a lower bound, so never wait less than asked. The 1e-6 keeps
     * a value such as 0.001 s, a hair above 1 ms in binary, at 1 ms. */
    double ms = secs * 1000.0 - 1e-6;
    return sl_ms_of_double(ms > 0 ? ms : 0, SL_TIMEFMT_MAX_MS, 1 /*up*/);
}
