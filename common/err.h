/* err.h - the one error enum of sluice.
 *
 * Every function that can fail returns an sl_err_t; 0 is success. The list is an X-macro so the
 * enum and sl_strerror() can never drift apart (libuv's UV_ERRNO_MAP). Foreign error codes
 * (CURLcode, rd_kafka_resp_err_t, SQLite rc, errno) are converted where they enter sluice.
 */
#ifndef SL_ERR_H
#define SL_ERR_H

#define SL_ERR_MAP(X)                                                   \
    X(OK, "success")                                                    \
    X(NOMEM, "out of memory")                                           \
    X(INVAL, "invalid argument")                                        \
    X(PARSE, "malformed input")                                         \
    X(SCHEMA, "input does not match its schema")                        \
    X(TOOBIG, "input larger than allowed")                              \
    X(NOTFOUND, "not found")                                            \
    X(EXISTS, "already exists")                                         \
    X(IO, "input/output error")                                         \
    X(CONFIG, "configuration error")                                    \
    X(KAFKA, "kafka error")                                             \
    X(DB, "database error")                                             \
    X(HTTP, "http error")                                               \
    X(CRYPTO, "signature or hashing error")                             \
    X(NOROOM, "no capacity available")                                  \
    X(BUSY, "resource busy")                                            \
    X(TIMEOUT, "timed out")

typedef enum {
#define SL_ERR_ENUM(name, text) SL_E##name,
    SL_ERR_MAP(SL_ERR_ENUM)
#undef SL_ERR_ENUM
    SL_E_COUNT_
} sl_err_t;

#define SL_OK SL_EOK

/* Returns a static, human-readable description of rc (never NULL). */
const char *sl_strerror(sl_err_t rc);

/* Returns the short symbolic name of rc, e.g. "NOROOM" (never NULL). */
const char *sl_errname(sl_err_t rc);

#endif
