/* format.c - values as the admin views print them (see format.h). */
#include "format.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define BAR_WIDTH 10

void sl_cli_fmt_exact(double v, char *out, size_t cap)
{
    if (!isfinite(v)) {
        snprintf(out, cap, "-");
        return;
    }
    double r = round(v) + 0.0; /* + 0.0 turns -0 into 0 */
    if (fabs(v - r) < 0.05)
        snprintf(out, cap, "%.0f", r);
    else
        snprintf(out, cap, "%.1f", v);
}

void sl_cli_fmt_compact(double v, char *out, size_t cap)
{
    static const char *const units[] = {"", "k", "M", "G", "T"};
    int u = 0;
    while (u < 4 && fabs(v) >= 999.95) {
        v /= 1000;
        u++;
    }
    if (u == 0) {
        sl_cli_fmt_exact(v, out, cap);
        return;
    }
    char num[32];
    if (fabs(v) >= 99.95) {
        snprintf(num, sizeof num, "%.0f", v);
    } else {
        snprintf(num, sizeof num, "%.1f", v);
        size_t n = strlen(num);
        if (n > 2 && strcmp(num + n - 2, ".0") == 0)
            num[n - 2] = '\0';
    }
    snprintf(out, cap, "%s%s", num, units[u]);
}

void sl_cli_fmt_duration(int64_t ms, char *out, size_t cap)
{
    if (ms < 0)
        ms = ms == INT64_MIN ? INT64_MAX : -ms;
    if (ms > INT64_MAX / 2) /* keeps the rounding below from overflowing; far beyond a day */
        ms = INT64_MAX / 2;
    int64_t tenths = (ms + 50) / 100;
    if (tenths < 600) {
        snprintf(out, cap, "%lld.%llds", (long long)(tenths / 10), (long long)(tenths % 10));
        return;
    }
    long long s = (long long)((ms + 500) / 1000); /* rounded like the seconds above */
    if (s < 3600)
        snprintf(out, cap, "%lldm%02llds", s / 60, s % 60);
    else if (s < 86400)
        snprintf(out, cap, "%lldh%02lldm", s / 3600, s % 3600 / 60);
    else
        snprintf(out, cap, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
}

void sl_cli_fmt_period(int64_t period_ms, char *out, size_t cap)
{
    static const struct {
        int64_t ms;
        const char *one, *many;
    } units[] = {{604800000, "week", "w"},
                 {86400000, "day", "d"},
                 {3600000, "h", "h"},
                 {60000, "min", "min"},
                 {1000, "s", "s"}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (period_ms % units[i].ms == 0) {
            long long n = (long long)(period_ms / units[i].ms);
            if (n == 1)
                snprintf(out, cap, "%s", units[i].one);
            else
                snprintf(out, cap, "%lld%s", n, units[i].many);
            return;
        }
    }
    snprintf(out, cap, "%lldms", (long long)period_ms);
}

void sl_cli_fmt_bar(int pct, char *out, size_t cap)
{
    char bar[BAR_WIDTH + 1];
    for (int i = 0; i < BAR_WIDTH; i++)
        bar[i] = i < pct * BAR_WIDTH / 100 ? '#' : '.';
    bar[BAR_WIDTH] = '\0';
    snprintf(out, cap, "[%s] %3d%%", bar, pct);
}

void sl_cli_fmt_clock(int64_t ms, char *out, size_t cap)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (localtime_r(&t, &tm) == NULL || strftime(out, cap, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        snprintf(out, cap, "-");
}

void sl_cli_fmt_relative(int64_t at_ms, int64_t now_ms, char *out, size_t cap)
{
    char dur[32];
    sl_cli_fmt_duration(at_ms - now_ms, dur, sizeof dur);
    if (at_ms > now_ms)
        snprintf(out, cap, "in %s", dur);
    else
        snprintf(out, cap, "%s ago", dur);
}

const char *sl_cli_clip(const char *s, int width, char *buf, size_t cap)
{
    if ((int)strlen(s) <= width || cap < 2)
        return s;
    int n = width - 1 < (int)cap - 2 ? width - 1 : (int)cap - 2;
    snprintf(buf, cap, "%.*s~", n, s);
    return buf;
}
