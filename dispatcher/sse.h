/* sse.h - an incremental Server-Sent Events parser (the WHATWG "text/event-stream" rules).
 *
 * Bytes go in as they arrive, in pieces of any size (a libcurl write callback hands over whatever
 * the socket had); each complete event comes out through a callback as soon as its terminating
 * blank line has been read. Lines end in LF, CR or CRLF (a CRLF split across two pieces counts
 * once); lines starting with ':' are comments; "event:" names the event; several "data:" lines
 * join with LF; "id:" and "retry:" are read and ignored; a leading UTF-8 BOM is skipped. An
 * event without data is not dispatched, nor is an unterminated one at the end of the stream.
 *
 * Memory is bounded: a line, and the data of one event, may hold at most max_event_bytes.
 */
#ifndef SL_SSE_H
#define SL_SSE_H

#include <stddef.h>

#include "err.h"

typedef struct sl_sse sl_sse_t;

/* Receives one event: its name ("message" when the stream named none) and its data (len bytes,
 * NUL-terminated, no trailing LF). Both are valid only during the call. Returning anything but
 * SL_OK stops sl_sse_feed, which returns that code. */
typedef sl_err_t (*sl_sse_event_fn)(void *arg, const char *event, const char *data, size_t len);

/* Creates a parser; max_event_bytes > 0 bounds a line and an event's data. *out is set only on
 * success (SL_ENOMEM, SL_EINVAL otherwise); free with sl_sse_free. */
sl_err_t sl_sse_new(size_t max_event_bytes, sl_sse_t **out);
void sl_sse_free(sl_sse_t *p);

/* Parses len bytes, calling fn for every event they complete. Returns SL_OK, SL_ETOOBIG (a line
 * or an event's data is larger than the bound), SL_ENOMEM, or fn's code. After an error the
 * parser must not be fed again. */
sl_err_t sl_sse_feed(sl_sse_t *p, const char *data, size_t len, sl_sse_event_fn fn, void *arg);

#endif
