/* sse.c - incremental Server-Sent Events parser (see sse.h). */
#include "sse.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"

enum { EVENT_NAME_MAX = 64 };

struct sl_sse {
    size_t max;
    sl_buf_t line; /* capped at max */
    sl_buf_t data; /* capped at max + 1: the data and the LF after its last line */
    char event[EVENT_NAME_MAX]; /* "" = not named; longer names are cut (none matter) */
    int after_cr;               /* the last byte was CR: an LF right after it ends nothing */
    size_t bom_seen;            /* bytes of a leading BOM matched so far; 3 = past the start */
};

static const unsigned char BOM[3] = {0xEF, 0xBB, 0xBF};

sl_err_t sl_sse_new(size_t max_event_bytes, sl_sse_t **out)
{
    *out = NULL;
    if (max_event_bytes == 0)
        return SL_EINVAL;
    sl_sse_t *p = calloc(1, sizeof *p);
    if (p == NULL)
        return SL_ENOMEM;
    p->max = max_event_bytes;
    sl_buf_init(&p->line, max_event_bytes);
    sl_buf_init(&p->data, max_event_bytes + 1);
    *out = p;
    return SL_OK;
}

void sl_sse_free(sl_sse_t *p)
{
    if (p == NULL)
        return;
    sl_buf_free(&p->line);
    sl_buf_free(&p->data);
    free(p);
}

static sl_err_t dispatch(sl_sse_t *p, sl_sse_event_fn fn, void *arg)
{
    sl_err_t rc = SL_OK;
    if (p->data.len > 0) {
        /* Every data line added a LF; the last one is not part of the data. */
        p->data.len--;
        p->data.ptr[p->data.len] = '\0';
        rc = fn(arg, p->event[0] != '\0' ? p->event : "message", p->data.ptr, p->data.len);
    }
    sl_buf_reset(&p->data);
    p->event[0] = '\0';
    return rc;
}

static sl_err_t process_line(sl_sse_t *p, sl_sse_event_fn fn, void *arg)
{
    const char *line = p->line.ptr != NULL ? p->line.ptr : "";
    size_t len = p->line.len;
    if (len == 0)
        return dispatch(p, fn, arg);
    if (line[0] == ':')
        return SL_OK; /* a comment: servers send them to keep the connection alive */
    const char *colon = memchr(line, ':', len);
    size_t nlen = colon != NULL ? (size_t)(colon - line) : len;
    const char *value = colon != NULL ? colon + 1 : line + len;
    size_t vlen = len - (size_t)(value - line);
    if (vlen > 0 && value[0] == ' ') {
        value++;
        vlen--;
    }
    if (nlen == 4 && memcmp(line, "data", 4) == 0) {
        sl_err_t rc = sl_buf_add(&p->data, value, vlen);
        if (rc == SL_OK)
            rc = sl_buf_add(&p->data, "\n", 1);
        return rc;
    }
    if (nlen == 5 && memcmp(line, "event", 5) == 0) {
        size_t n = vlen < sizeof p->event - 1 ? vlen : sizeof p->event - 1;
        memcpy(p->event, value, n);
        p->event[n] = '\0';
    }
    /* "id" and "retry" matter to a browser reconnecting; a provider call never reconnects. */
    return SL_OK;
}

sl_err_t sl_sse_feed(sl_sse_t *p, const char *data, size_t len, sl_sse_event_fn fn, void *arg)
{
    size_t i = 0;
    /* A BOM may itself arrive split across pieces. */
    while (p->bom_seen < 3 && i < len) {
        if ((unsigned char)data[i] != BOM[p->bom_seen]) {
            if (p->bom_seen > 0) {
                /* Not a BOM after all: what matched is ordinary line content. */
                sl_err_t rc = sl_buf_add(&p->line, (const char *)BOM, p->bom_seen);
                if (rc != SL_OK)
                    return rc;
            }
            p->bom_seen = 3;
            break;
        }
        p->bom_seen++;
        i++;
    }
    while (i < len) {
        char ch = data[i];
        if (p->after_cr) {
            p->after_cr = 0;
            if (ch == '\n') {
                i++;
                continue;
            }
        }
        if (ch == '\r' || ch == '\n') {
            sl_err_t rc = process_line(p, fn, arg);
            sl_buf_reset(&p->line);
            if (rc != SL_OK)
                return rc;
            p->after_cr = ch == '\r';
            i++;
            continue;
        }
        size_t j = i;
        while (j < len && data[j] != '\r' && data[j] != '\n')
            j++;
        sl_err_t rc = sl_buf_add(&p->line, data + i, j - i);
        if (rc != SL_OK)
            return rc;
        i = j;
    }
    return SL_OK;
}
