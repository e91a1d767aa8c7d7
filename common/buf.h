/* buf.h - size-capped growable memory: a byte buffer and a growable array.
 *
 * The one idea: every buffer that grows with outside input has a cap, fixed when it is made,
 * and growing past it is SL_ETOOBIG, never a bigger allocation. A failed call leaves the
 * buffer as it was (what it held stays valid and is still owned by the buffer). Modelled on
 * curl's dynbuf.
 */
#ifndef SL_BUF_H
#define SL_BUF_H

#include <stdarg.h>
#include <stddef.h>

#include "err.h"

/* A byte buffer, always NUL-terminated once it holds anything (the NUL is not counted in len
 * and not charged to the cap). Zero-initialised it is empty with no cap; use sl_buf_init. */
typedef struct {
    char *ptr;
    size_t len;
    size_t alloc; /* bytes allocated, including room for the NUL */
    size_t max;   /* the cap on len */
} sl_buf_t;

/* Makes b empty with a cap of max bytes (max > 0). Allocates nothing. */
void sl_buf_init(sl_buf_t *b, size_t max);

/* Appends len bytes. SL_ETOOBIG when the result would pass the cap, SL_ENOMEM when memory runs
 * out; either way b is as it was. */
sl_err_t sl_buf_add(sl_buf_t *b, const void *data, size_t len);
/* Appends a NUL-terminated string. */
sl_err_t sl_buf_adds(sl_buf_t *b, const char *s);
/* Appends printf-formatted text; the same errors as sl_buf_add. */
sl_err_t sl_buf_addf(sl_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
sl_err_t sl_buf_vaddf(sl_buf_t *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* Makes the buffer empty, keeping its memory and cap. */
void sl_buf_reset(sl_buf_t *b);
/* Hands the contents to the caller (who frees them with free(); NULL when empty) and leaves b
 * empty with its cap. */
char *sl_buf_take(sl_buf_t *b, size_t *len);
/* Frees the memory; b is then empty and may be used again. sl_buf_free on a zeroed buffer is a
 * no-op. */
void sl_buf_free(sl_buf_t *b);

/* Makes room for at least need elements of elem_size bytes in *items, whose allocated count is
 * *cap, growing by doubling (from at least 8) up to max elements. Returns SL_ETOOBIG when need
 * exceeds max, SL_ENOMEM when the allocation fails; either way *items and *cap are as they
 * were. The array's existing elements keep their values; new room is not initialised. */
sl_err_t sl_grow(void **items, size_t elem_size, size_t *cap, size_t need, size_t max);

#endif
