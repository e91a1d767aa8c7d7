/* outcome.h - how one provider call ended: the usage event's "outcome" (schema/usage.json).
 *
 * The idea to hold first: inside the dispatcher an outcome is an sl_outcome_t and is compared as
 * one; only its name travels, and the names are exactly the schema's strings. The list is an
 * X-macro, so the enum and the names can never drift apart (as err.h does for sl_err_t).
 *
 * ok: the answer came whole. rate_limited: a rate limit, which passes by waiting;
 * quota_exhausted: a quota or spend cap, which does not (soon). overloaded, server_error,
 * timeout: the provider's trouble. client_error: the request itself is at fault (retrying will
 * not help); auth_error: the credential. transport: no complete HTTP exchange, or a cut stream.
 * bad_response: an answer sluice cannot read or carry. not_sent: the dispatcher did not call.
 */
#ifndef SL_OUTCOME_H
#define SL_OUTCOME_H

#define SL_OUTCOME_MAP(X)                                                                          \
    X(OK, "ok")                                                                                    \
    X(RATE_LIMITED, "rate_limited")                                                                \
    X(QUOTA_EXHAUSTED, "quota_exhausted")                                                          \
    X(OVERLOADED, "overloaded")                                                                    \
    X(SERVER_ERROR, "server_error")                                                                \
    X(CLIENT_ERROR, "client_error")                                                                \
    X(AUTH_ERROR, "auth_error")                                                                    \
    X(TIMEOUT, "timeout")                                                                          \
    X(TRANSPORT, "transport")                                                                      \
    X(BAD_RESPONSE, "bad_response")                                                                \
    X(NOT_SENT, "not_sent")

typedef enum {
#define SL_OUTCOME_ENUM(name, text) SL_OUTCOME_##name,
    SL_OUTCOME_MAP(SL_OUTCOME_ENUM)
#undef SL_OUTCOME_ENUM
        SL_OUTCOME_COUNT_
} sl_outcome_t;

/* The outcome's name as it goes on the wire, e.g. "rate_limited": a static string, never NULL
 * ("unknown" for a value outside the enum). */
const char *sl_outcome_name(sl_outcome_t outcome);

#endif
