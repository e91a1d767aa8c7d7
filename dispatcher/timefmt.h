/* timefmt.h - the time and duration formats providers write in headers and error bodies, read
 * into milliseconds.
 *
 * The idea to hold first: every parser takes exactly the bytes it is given (a header value is
 * not NUL-terminated where it stands) and answers -1 for anything it does not recognise, so a
 * malformed value is "not reported" and never a made-up number. Numbers are read by common/util.h's
 * range-checked readers: no sign, exponent, "inf" or "nan", and a duration longer than
 * SL_TIMEFMT_MAX_MS is refused (-1) rather than converted. Pure functions, no clock.
 */
#ifndef SL_TIMEFMT_H
#define SL_TIMEFMT_H

#include <stddef.h>
#include <stdint.h>

/* The longest duration any of these parsers returns: 10^12 ms, about 31.7 years. Longer ones
 * are no provider's meaning, and keeping far below INT64_MAX lets a caller add one to a clock. */
#define SL_TIMEFMT_MAX_MS INT64_C(1000000000000)

/* Parses an RFC 3339 date-time ("2025-08-21T12:40:59Z", "...T12:40:59.123456Z",
 * "...T14:40:59+02:00"; 'T' and 'Z' may be lower case), as in Anthropic's
 * anthropic-ratelimit-*-reset, into epoch milliseconds, truncating fractions below a
 * millisecond. Reads exactly len bytes. Returns -1 when malformed, out of range (e.g. February
 * 30th), or before 1970. */
int64_t sl_timefmt_rfc3339_ms(const char *s, size_t len);

/* Parses a Go duration as OpenAI sends in x-ratelimit-reset-*: "12ms", "1.5s", "6m0s", "1h2m",
 * "500µs". Reads exactly len bytes. Returns milliseconds (rounded to the nearest), or -1 when
 * malformed. */
int64_t sl_timefmt_go_duration_ms(const char *s, size_t len);

/* Parses a non-negative number of seconds, integer or decimal ("20", "0.644"), as in
 * Retry-After, into milliseconds (rounded to the nearest). Reads exactly len bytes. Returns -1
 * when it is not one (an HTTP-date Retry-After is not sent by the providers sluice calls). */
int64_t sl_timefmt_seconds_ms(const char *s, size_t len);

/* The same for a number of milliseconds ("1500", "750.4"), as in Azure's retry-after-ms. */
int64_t sl_timefmt_ms(const char *s, size_t len);

/* Parses a google.protobuf.Duration in JSON form, as in Gemini's google.rpc.RetryInfo
 * retryDelay ("23s", "1.5s", "0.250s"), into milliseconds rounded up to whole ms (a retry hint
 * is a lower bound). s is NUL-terminated and may be NULL. Returns -1 when malformed. */
int64_t sl_timefmt_proto_duration_ms(const char *s);

#endif
