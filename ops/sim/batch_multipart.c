/* batch_multipart.c - the multipart/form-data reader of file uploads (see batch_multipart.h).
 *
 * A body is: an optional preamble, then "--BOUNDARY" CRLF, part headers, CRLF CRLF, content,
 * CRLF "--BOUNDARY", and so on until the last delimiter, which is followed by "--". Content is
 * found by searching for CRLF "--BOUNDARY", so it may hold any bytes but that sequence, which is
 * what a sender chooses its boundary for.
 */
#include "batch_multipart.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define BOUNDARY_MAX 70 /* RFC 2046 */
#define PART_HEADERS_MAX 8192

static bool fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return false;
}

/* Reads a header parameter value (a token or a quoted string) at p into out (cap bytes).
 * Returns the position after it, or NULL when it is unterminated or does not fit. */
static const char *read_value(const char *p, const char *end, char *out, size_t cap)
{
    size_t n = 0;
    if (p < end && *p == '"') {
        p++;
        while (p < end && *p != '"') {
            if (*p == '\\' && p + 1 < end)
                p++;
            if (n + 1 >= cap)
                return NULL;
            out[n++] = *p++;
        }
        if (p == end)
            return NULL;
        p++;
    } else {
        while (p < end && *p != ';' && *p != ' ' && *p != '\t') {
            if (n + 1 >= cap)
                return NULL;
            out[n++] = *p++;
        }
    }
    out[n] = '\0';
    return p;
}

/* Finds parameter name (case-insensitive) in the header value [p, end) of the form
 * "type; a=b; c=\"d\"" and copies its value into out. Returns 1 found, 0 absent, -1 bad. */
static int find_param(const char *p, const char *end, const char *name, char *out, size_t cap)
{
    size_t name_len = strlen(name);
    while (p < end) {
        const char *semi = memchr(p, ';', (size_t)(end - p));
        if (semi == NULL)
            return 0;
        p = semi + 1;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if ((size_t)(end - p) > name_len && strncasecmp(p, name, name_len) == 0 &&
            p[name_len] == '=') {
            return read_value(p + name_len + 1, end, out, cap) != NULL ? 1 : -1;
        }
    }
    return 0;
}

/* Reads the headers of one part ([p, end), CRLF-separated lines) into part. */
static bool read_part_headers(const char *p, const char *end, sl_sim_part_t *part, size_t index,
                              char *err, size_t errlen)
{
    bool disposition = false;
    while (p < end) {
        const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (eol == NULL)
            eol = end;
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        if (colon == NULL)
            return fail(err, errlen, "part %zu: a header line without a colon", index);
        size_t name_len = (size_t)(colon - p);
        const char *value = colon + 1;
        while (value < eol && (*value == ' ' || *value == '\t'))
            value++;
        if (name_len == 19 && strncasecmp(p, "Content-Disposition", 19) == 0) {
            if ((size_t)(eol - value) < 9 || strncasecmp(value, "form-data", 9) != 0)
                return fail(err, errlen, "part %zu: Content-Disposition is not form-data", index);
            int found = find_param(value, eol, "name", part->name, sizeof part->name);
            if (found <= 0 || part->name[0] == '\0')
                return fail(err, errlen, "part %zu: Content-Disposition has no valid name", index);
            found = find_param(value, eol, "filename", part->filename, sizeof part->filename);
            if (found < 0)
                return fail(err, errlen, "part %zu: its filename is malformed or too long", index);
            part->has_filename = found == 1;
            disposition = true;
        } else if (name_len == 12 && strncasecmp(p, "Content-Type", 12) == 0) {
            size_t n = (size_t)(eol - value);
            if (n >= sizeof part->content_type)
                return fail(err, errlen, "part %zu: its Content-Type is too long", index);
            memcpy(part->content_type, value, n);
            part->content_type[n] = '\0';
        }
        p = eol == end ? end : eol + 2;
    }
    if (!disposition)
        return fail(err, errlen, "part %zu has no Content-Disposition header", index);
    return true;
}

bool sl_sim_multipart_parse(const char *content_type, const char *body, size_t len,
                            sl_sim_part_t *parts, size_t max, size_t *n, char *err, size_t errlen)
{
    *n = 0;
    if (content_type == NULL || strncasecmp(content_type, "multipart/form-data", 19) != 0)
        return fail(err, errlen,
                    "Invalid Content-Type header (%.64s), expected multipart/form-data",
                    content_type != NULL ? content_type : "none");
    const char *ct_end = content_type + strlen(content_type);
    char boundary[BOUNDARY_MAX + 1];
    int found = find_param(content_type, ct_end, "boundary", boundary, sizeof boundary);
    if (found <= 0 || boundary[0] == '\0')
        return fail(err, errlen, "the multipart/form-data Content-Type has no valid boundary");
    /* delim is CRLF "--" boundary; the first delimiter may also open the body without CRLF. */
    char delim[BOUNDARY_MAX + 5];
    size_t delim_len = (size_t)snprintf(delim, sizeof delim, "\r\n--%s", boundary);
    if (body == NULL)
        len = 0;
    const char *end = body + len;
    const char *p = NULL;
    if (len >= delim_len - 2 && memcmp(body, delim + 2, delim_len - 2) == 0)
        p = body + delim_len - 2;
    else if (len > 0) {
        const char *at = memmem(body, len, delim, delim_len);
        p = at != NULL ? at + delim_len : NULL;
    }
    if (p == NULL)
        return fail(err, errlen, "the body holds no multipart boundary");
    for (;;) {
        /* After a delimiter: "--" closes the body, else optional blanks and CRLF open a part. */
        if (end - p >= 2 && p[0] == '-' && p[1] == '-')
            break;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
            return fail(err, errlen, "malformed multipart body: no line break after a boundary");
        p += 2;
        if (*n == max)
            return fail(err, errlen, "more than %zu parts in the multipart body", max);
        const char *headers_end = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
        const char *content = headers_end != NULL ? headers_end + 4 : NULL;
        /* A part with no headers at all starts with the blank line straight away. */
        if (end - p >= 2 && p[0] == '\r' && p[1] == '\n') {
            headers_end = p;
            content = p + 2;
        }
        if (headers_end == NULL || headers_end - p > PART_HEADERS_MAX)
            return fail(err, errlen, "malformed multipart body: part %zu headers do not end", *n);
        sl_sim_part_t *part = &parts[*n];
        memset(part, 0, sizeof *part);
        if (!read_part_headers(p, headers_end, part, *n, err, errlen))
            return false;
        const char *next = memmem(content, (size_t)(end - content), delim, delim_len);
        if (next == NULL)
            return fail(err, errlen, "malformed multipart body: part %zu is not terminated", *n);
        part->data = content;
        part->len = (size_t)(next - content);
        (*n)++;
        p = next + delim_len;
    }
    if (*n == 0)
        return fail(err, errlen, "the multipart body has no parts");
    return true;
}
