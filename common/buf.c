/* buf.c - size-capped growable memory (see buf.h). */
#include "buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BUF_MIN_ALLOC = 64, GROW_MIN = 8 };

void sl_buf_init(sl_buf_t *b, size_t max)
{
    memset(b, 0, sizeof *b);
    b->max = max;
}

/* Makes room for extra more bytes plus the NUL; b unchanged on failure. */
static sl_err_t reserve(sl_buf_t *b, size_t extra)
{
    if (extra > b->max || b->len > b->max - extra)
        return SL_ETOOBIG;
    size_t need = b->len + extra + 1;
    if (need <= b->alloc)
        return SL_OK;
    size_t alloc = b->alloc > 0 ? b->alloc : BUF_MIN_ALLOC;
    while (alloc < need)
        alloc = alloc > SIZE_MAX / 2 ? need : alloc * 2;
    /* Never allocate more than the cap can use. */
    if (alloc > b->max + 1)
        alloc = b->max + 1;
    char *p = realloc(b->ptr, alloc);
    if (p == NULL)
        return SL_ENOMEM;
    b->ptr = p;
    b->alloc = alloc;
    return SL_OK;
}

sl_err_t sl_buf_add(sl_buf_t *b, const void *data, size_t len)
{
    sl_err_t rc = reserve(b, len);
    if (rc != SL_OK)
        return rc;
    if (len > 0)
        memcpy(b->ptr + b->len, data, len);
    b->len += len;
    b->ptr[b->len] = '\0';
    return SL_OK;
}

sl_err_t sl_buf_adds(sl_buf_t *b, const char *s)
{
    return sl_buf_add(b, s, strlen(s));
}

sl_err_t sl_buf_vaddf(sl_buf_t *b, const char *fmt, va_list ap)
{
    va_list probe;
    va_copy(probe, ap);
    int n = vsnprintf(NULL, 0, fmt, probe);
    va_end(probe);
    if (n < 0)
        return SL_EINVAL;
    sl_err_t rc = reserve(b, (size_t)n);
    if (rc != SL_OK)
        return rc;
    vsnprintf(b->ptr + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return SL_OK;
}

sl_err_t sl_buf_addf(sl_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_err_t rc = sl_buf_vaddf(b, fmt, ap);
    va_end(ap);
    return rc;
}

void sl_buf_reset(sl_buf_t *b)
{
    b->len = 0;
    if (b->ptr != NULL)
        b->ptr[0] = '\0';
}

char *sl_buf_take(sl_buf_t *b, size_t *len)
{
    char *p = b->ptr;
    if (len != NULL)
        *len = b->len;
    sl_buf_init(b, b->max);
    return p;
}

void sl_buf_free(sl_buf_t *b)
{
    free(b->ptr);
    sl_buf_init(b, b->max);
}

sl_err_t sl_grow(void **items, size_t elem_size, size_t *cap, size_t need, size_t max)
{
    if (need > max)
        return SL_ETOOBIG;
    if (need <= *cap)
        return SL_OK;
    size_t ncap = *cap > 0 ? *cap : GROW_MIN;
    while (ncap < need)
        ncap = ncap > max / 2 ? max : ncap * 2;
    if (ncap > max)
        ncap = max;
    if (elem_size > 0 && ncap > SIZE_MAX / elem_size)
        return SL_ETOOBIG;
    void *p = realloc(*items, ncap * elem_size);
    if (p == NULL)
        return SL_ENOMEM;
    *items = p;
    *cap = ncap;
    return SL_OK;
}
