/* calendar.h - calendar-day windows in a named time zone, for quotas that reset at local
 * midnight (Gemini's requests per day reset at midnight US Pacific).
 *
 * The one idea: a local day is not 24 hours. It is the span from the first instant whose local
 * date is that day to the first instant of a later date, so it lasts 23 or 25 hours across a DST
 * change (and may start at 01:00 where a DST change skips midnight).
 *
 * Threads: sl_calendar_day works by setting the TZ environment variable for the length of the
 * call and restoring it afterwards, so it must not run concurrently with anything that reads the
 * environment or local time (getenv, localtime, mktime, strftime). The scheduler is
 * single-threaded, which is what this module assumes.
 */
#ifndef SL_CALENDAR_H
#define SL_CALENDAR_H

#include <stdint.h>

#include "err.h"

/* Start (epoch ms) of the local calendar day containing now_ms in time zone tz (an IANA name such
 * as "America/Los_Angeles"; NULL or "" or "UTC" = UTC), and the start of the next one. Handles
 * DST (days of 23 or 25 hours). Returns SL_OK, SL_EINVAL for an unknown zone (see
 * sl_calendar_zone_ok) or a now_ms more than 2^52 ms (about 142,000 years) from the epoch, or
 * SL_ENOMEM; *start_ms and *next_ms are only written on success. The TZ environment variable is
 * the same after the call as before it (see the note on threads above). Every call with a zone
 * other than UTC reads the zone file: keep the window and call again once now_ms >= *next_ms. */
sl_err_t sl_calendar_day(int64_t now_ms, const char *tz, int64_t *start_ms, int64_t *next_ms);

/* Whether tz names a zone this machine knows: NULL, "" and "UTC", or a relative name without
 * ".." whose file under /usr/share/zoneinfo is a compiled zone (TZif). Returns 1 or 0. */
int sl_calendar_zone_ok(const char *tz);

#endif
