/* format.h - the values of the admin views as text: numbers, durations, periods, bars, clocks.
 *
 * Each writes at most cap bytes (NUL included) into out and never fails: a value it cannot show
 * prints as "-". Nothing here reads JSON, a terminal or the clock.
 */
#ifndef SL_CLI_FORMAT_H
#define SL_CLI_FORMAT_H

#include <stddef.h>
#include <stdint.h>

/* A number as an operator typed it: integers without decimals ("100000"), others with one
 * ("16666.7"). */
void sl_cli_fmt_exact(double v, char *out, size_t cap);

/* A number in at most 6 characters for the live view: 950, 12.5k, 100k, 1.2M. */
void sl_cli_fmt_compact(double v, char *out, size_t cap);

/* A duration as the views show it: "12.3s" under a minute, then "4m05s", "3h12m", "2d04h".
 * Negative durations print as their absolute value. */
void sl_cli_fmt_duration(int64_t ms, char *out, size_t cap);

/* A limit's period: "s", "min", "h", "day", "week", or a multiple ("5min", "2d"). */
void sl_cli_fmt_period(int64_t period_ms, char *out, size_t cap);

/* "[#####.....]  52%" for pct in [0, 100]: one '#' per whole ten percent, so the bar is full
 * only at 100%. */
void sl_cli_fmt_bar(int pct, char *out, size_t cap);

/* "YYYY-MM-DD HH:MM:SS", the local time of an epoch-ms instant. */
void sl_cli_fmt_clock(int64_t ms, char *out, size_t cap);

/* "2m03s ago" or "in 57m57s": at_ms relative to now_ms. */
void sl_cli_fmt_relative(int64_t at_ms, int64_t now_ms, char *out, size_t cap);

/* s itself when it fits in width columns, else its first width-1 characters and '~' written to
 * buf. Returns s or buf. */
const char *sl_cli_clip(const char *s, int width, char *buf, size_t cap);

#endif
