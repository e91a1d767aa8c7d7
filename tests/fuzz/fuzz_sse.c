/* fuzz_sse.c - the Server-Sent Events parser (dispatcher/sse.c).
 *
 * Input: a stream body. Its first byte picks how the rest is cut into pieces; the events that
 * come out must be exactly those of the same bytes fed whole (the network decides the cuts, so
 * they must not matter), and each event's data is NUL-terminated at its length.
 */
#include <string.h>

#include "../../dispatcher/sse.h"
#include "buf.h"
#include "fuzz.h"

#define MAX_EVENT 4096

/* The events of one run, as "event\0data\0" records. */
typedef struct {
    sl_buf_t log;
    size_t events;
} events_t;

static sl_err_t record(void *arg, const char *event, const char *data, size_t len)
{
    events_t *ev = arg;
    FUZZ_CHECK(event != NULL && data != NULL && data[len] == '\0');
    FUZZ_CHECK(len <= MAX_EVENT);
    ev->events++;
    if (sl_buf_add(&ev->log, event, strlen(event) + 1) != SL_OK ||
        sl_buf_add(&ev->log, data, len) != SL_OK || sl_buf_add(&ev->log, "", 1) != SL_OK)
        return SL_ENOMEM;
    return SL_OK;
}

/* Feeds text in pieces of piece bytes (0: whole); returns the first error. */
static sl_err_t run(const char *text, size_t len, size_t piece, events_t *ev)
{
    sl_sse_t *p = NULL;
    FUZZ_CHECK(sl_sse_new(MAX_EVENT, &p) == SL_OK);
    sl_buf_init(&ev->log, (size_t)64 << 20);
    ev->events = 0;
    sl_err_t rc = SL_OK;
    for (size_t at = 0; at < len && rc == SL_OK;) {
        size_t n = piece == 0 || piece > len - at ? len - at : piece;
        rc = sl_sse_feed(p, text + at, n, record, ev);
        at += n;
    }
    sl_sse_free(p);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t piece = (size_t)(data[0] % 17) + 1;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    events_t whole, cut;
    sl_err_t rc_whole = run(text, len, 0, &whole);
    sl_err_t rc_cut = run(text, len, piece, &cut);
    FUZZ_CHECK(rc_whole == rc_cut);
    if (rc_whole == SL_OK) {
        FUZZ_CHECK(whole.events == cut.events);
        FUZZ_CHECK(whole.log.len == cut.log.len);
        FUZZ_CHECK(whole.log.len == 0 || memcmp(whole.log.ptr, cut.log.ptr, whole.log.len) == 0);
    }
    sl_buf_free(&whole.log);
    sl_buf_free(&cut.log);
    return 0;
}
