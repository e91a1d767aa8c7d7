/* util.h - small helpers every process needs: clocks, hex, ids, files, signals.
 *
 * Times that cross processes (deadlines, leases, submit times) are wall-clock milliseconds since
 * the Unix epoch; sl_mono_ms() is for measuring durations inside one process.
 */
#ifndef SL_UTIL_H
#define SL_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"

/* Wall-clock milliseconds since the epoch. */
int64_t sl_now_ms(void);
/* Monotonic milliseconds (arbitrary origin); as a double for sub-millisecond durations. */
double sl_mono_ms(void);

/* Writes 2*len lowercase hex digits plus NUL into out (out must hold 2*len+1 bytes). */
void sl_hex_encode(const uint8_t *in, size_t len, char *out);
/* Decodes exactly outlen bytes from hex; returns SL_EPARSE on bad length or digit. */
sl_err_t sl_hex_decode(const char *hex, uint8_t *out, size_t outlen);

/* Fills out with a random id of 2*nbytes hex digits (nbytes <= 32); out holds 2*nbytes+1. */
void sl_random_id(char *out, size_t nbytes);

/* Reads f to its end (at most max_bytes) into a NUL-terminated buffer the caller frees; the same
 * contract as sl_read_file. */
sl_err_t sl_read_stream(FILE *f, size_t max_bytes, char **out, size_t *len);

/* Reads a whole file (at most max_bytes) into a NUL-terminated buffer the caller frees.
 * *out is NULL on entry and set only on success; SL_ETOOBIG when the file is larger. */
sl_err_t sl_read_file(const char *path, size_t max_bytes, char **out, size_t *len);

/* Writes data to path atomically (temp file + rename) with the given mode. */
sl_err_t sl_write_file(const char *path, const void *data, size_t len, unsigned mode);

/* Resolves a sluice data path: absolute paths and paths that exist relative to the working
 * directory are returned as is; otherwise, the path relative to the install root (the folder
 * above the running binary's bin/) is tried. Writes into out (cap bytes). */
void sl_resolve_path(const char *path, char *out, size_t cap);

/* Installs SIGINT/SIGTERM handlers that set the flag returned by sl_stop_requested(), and
 * ignores SIGPIPE. */
void sl_signals_install(void);
int sl_stop_requested(void);
/* Whether SIGHUP arrived since the last call (a daemon then reloads its config). */
int sl_reload_requested(void);

/* Parses a non-negative integer option value (decimal digits only); returns -1 when it is not
 * one or is above INT64_MAX. */
long long sl_parse_count(const char *s);

/* ---- Range-checked numbers ----------------------------------------------------------------
 * The one idea: text from outside (headers, error bodies, options) becomes a number only through
 * these, so a hostile value ("1e30", "nan", "inf", twenty 9s) is refused, never converted with
 * undefined behaviour (a double outside int64_t's range cast to it). */

/* Reads exactly len bytes at s as a non-negative decimal integer (digits only: no sign, space or
 * exponent) of at most max. Returns 0 with *out set, or -1 (*out untouched) when it is not one
 * or is larger than max. */
int sl_parse_uint(const char *s, size_t len, int64_t max, int64_t *out);

/* Reads the non-negative decimal number that starts s[0..len): digits with an optional '.' and
 * fraction ("20", "0.644", "1.", ".5"); no sign, space, exponent, hex, "inf" or "nan", and at
 * most SL_DECIMAL_MAX_CHARS bytes. Returns how many bytes it read, 0 when s does not start with
 * one; *out gets the value, always finite, only when it is not 0. */
#define SL_DECIMAL_MAX_CHARS 63
size_t sl_scan_decimal(const char *s, size_t len, double *out);

/* Converts a number of milliseconds held in a double to an integer, rounded to the nearest or,
 * with round_up, up. Returns -1 when ms is NaN, infinite, negative or above max_ms (which must be
 * at most INT64_MAX / 2), so the conversion is always defined. */
int64_t sl_ms_of_double(double ms, int64_t max_ms, int round_up);

/* Parses a listen address "HOST:PORT" (HOST an IPv4 address or "localhost", PORT 0..65535)
 * into addr; 0 when it is not one. */
struct sockaddr_in;
int sl_parse_listen(const char *listen, struct sockaddr_in *addr);

#endif
