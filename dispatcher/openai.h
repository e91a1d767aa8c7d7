/* openai.h - the OpenAI chat-completions dialect: error classification and usage normalisation.
 * Pure functions over JSON, tested against recorded responses. The openai and azure adapters
 * (adapter.h) are built on them, in openai.c; their rate-limit headers are read by ratelimit.h.
 */
#ifndef SL_OPENAI_H
#define SL_OPENAI_H

#include <jansson.h>

#include "msg_usage.h"

/* Classifies a finished call into a usage-event outcome (schema/usage.json):
 * transport_error: 0 = the HTTP exchange completed, 1 = transport failure, 2 = timeout.
 * body may be NULL. */
sl_outcome_t sl_openai_classify(int transport_error, long http_status, const json_t *body);

/* Extracts the canonical usage {input, output, cached, reasoning, total} from a chat-completion
 * body; NULL when the body has no usable usage object. Caller owns the result. */
json_t *sl_openai_usage(const json_t *body);

#endif
