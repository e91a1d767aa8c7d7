/* batch_multipart.h - reading a multipart/form-data body (RFC 7578), as OpenAI's and Azure's
 * file uploads send it.
 *
 * The idea to hold first: nothing is copied. A part's content is a pointer into the body with a
 * length, so a 200 MB upload costs no second buffer; only the small header values (field name,
 * filename, content type) are copied into the part, bounded. The parser is strict about the
 * framing (a missing boundary, an unterminated part or a part without a field name is an error)
 * and lenient about what it does not need (preamble, epilogue, unknown part headers).
 */
#ifndef SL_SIM_BATCH_MULTIPART_H
#define SL_SIM_BATCH_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>

/* The most parts a body may have; an upload has two (purpose and file). */
#define SL_SIM_MULTIPART_MAX_PARTS 16

/* One part of the body. */
typedef struct {
    char name[64];          /* the form field ("purpose", "file") */
    char filename[256];     /* its filename parameter, when has_filename */
    bool has_filename;      /* the part is a file */
    char content_type[128]; /* its Content-Type, "" when absent */
    const char *data;       /* its content: borrowed from the body */
    size_t len;
} sl_sim_part_t;

/* Parses body (len bytes, need not be NUL-terminated) sent with the given Content-Type header
 * (NULL = none), which must be multipart/form-data with a boundary parameter. Returns true with
 * parts[0..*n) filled (at most max parts), or false with a one-line reason in err (errlen bytes).
 * A field name or filename longer than its buffer is an error, not a silent cut. */
bool sl_sim_multipart_parse(const char *content_type, const char *body, size_t len,
                            sl_sim_part_t *parts, size_t max, size_t *n, char *err, size_t errlen);

#endif
