/* estimate.h - the deterministic part of demand estimation, used by ingest (the README's
 * "Limits: the capacity ledger" says how the estimate is used).
 *
 * Input tokens are estimated from the serialised request: message text, tool definitions,
 * response schema and a per-message overhead, with a bytes-per-token ratio per model family.
 * The ratios are deliberately on the low side (more tokens), because the estimate must never be
 * below what a provider charges at receipt (OpenAI's character-based count is about 4 chars a
 * token). What is learned from real usage belongs to the scheduler, not here.
 */
#ifndef SL_ESTIMATE_H
#define SL_ESTIMATE_H

#include <jansson.h>
#include <stdint.h>

/* Estimates the input tokens of a chat-completions body for the given model name (may be NULL:
 * a conservative generic ratio is used). Never negative; an empty request still costs the fixed
 * overhead. */
int64_t sl_estimate_input_tokens(const json_t *body, const char *model);

#endif
