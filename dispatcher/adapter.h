/* adapter.h - one adapter per provider API: how sluice's canonical request (the OpenAI
 * chat-completions body, schema/request.json $defs/chat) becomes a provider call, and how the
 * provider's answer becomes sluice's canonical answer again.
 *
 * The idea to hold first: everything outside an adapter speaks OpenAI chat completions. An
 * adapter translates the request on the way out (URL, headers, body), and on the way back turns
 * the provider's body into a canonical chat.completion object, its usage into the canonical
 * {input, output, cached, reasoning, total}, and its status and error body into one of the usage
 * event's outcomes (schema/usage.json). Streamed answers go through sl_stream_t (stream.h),
 * which uses the same adapter to translate each Server-Sent Event.
 *
 * Adapters: openai (chat completions) and azure (Azure OpenAI) in openai.c, anthropic (messages)
 * in anthropic.c, gemini (generateContent) in gemini.c. They are stateless and pure: no network,
 * no clock except where noted, so tests feed them recorded responses.
 *
 * Credentials: an adapter only names the header a key travels in (sl_adapter_auth_header); the
 * key is never part of a URL, a body, a usage, a response or an error object it builds.
 */
#ifndef SL_ADAPTER_H
#define SL_ADAPTER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "err.h"
#include "msg_usage.h"
#include "ratelimit.h"

typedef struct sl_adapter sl_adapter_t;

/* The adapter of a provider API; NULL for a value outside sl_provider_t. Static: never freed. */
const sl_adapter_t *sl_adapter_for(sl_provider_t api);

/* "openai", "azure", "anthropic" or "gemini". */
const char *sl_adapter_name(const sl_adapter_t *ad);

/* The header line that carries key, e.g. "Authorization: Bearer KEY" (openai), "api-key: KEY"
 * (azure), "x-api-key: KEY" (anthropic), "x-goog-api-key: KEY" (gemini). Returns a malloc'd
 * string the caller frees (after sodium_memzero: it holds a secret), or NULL when out of memory
 * or when key holds a CR or LF (a key that could inject a header is refused). */
char *sl_adapter_auth_header(const sl_adapter_t *ad, const char *key);

/* ---- Requests ------------------------------------------------------------------------------ */

#define SL_ADAPTER_MAX_HEADERS 4

/* One provider call, without the credential header (the engine adds that). Owns its strings. */
typedef struct {
    char *url;
    char *body; /* JSON text */
    int stream; /* 1: the provider answers with Server-Sent Events */
    int nheaders;
    char *headers[SL_ADAPTER_MAX_HEADERS]; /* extra non-secret lines, "Name: value" */
} sl_adapter_request_t;

/* Builds the call of deployment dep for the canonical body chat (not modified). The deployment's
 * model replaces the caller's where the API takes it in the body (openai, anthropic) or the URL
 * (gemini); azure names it in base_url. "stream": true asks for a streamed answer (openai and
 * azure also get stream_options.include_usage). Returns SL_OK with *out filled (free it with
 * sl_adapter_request_clear), SL_EINVAL when chat cannot be expressed in the provider's API
 * (a one-line reason in err, e.g. tool-call arguments that are not a JSON object), or SL_ENOMEM.
 * On failure *out is left empty. */
sl_err_t sl_adapter_request(const sl_adapter_t *ad, const sl_deployment_cfg_t *dep,
                            const json_t *chat, sl_adapter_request_t *out, char *err,
                            size_t errlen);

/* Frees what req holds and empties it; an empty req is a no-op. */
void sl_adapter_request_clear(sl_adapter_request_t *req);

/* ---- Responses ----------------------------------------------------------------------------- */

/* Token usage, canonical: input counts every input token, cache reads and cache writes included;
 * cached = cache reads; output includes reasoning. */
typedef struct {
    int64_t input, output, cached, reasoning, total;
} sl_usage_t;

/* {input, output, cached, reasoning, total} of u (total raised to input + output when lower).
 * Caller owns the result; NULL when out of memory. */
json_t *sl_usage_json(const sl_usage_t *u);

/* Classifies a finished call into a usage-event outcome:
 * transport_error 0 = the HTTP exchange completed, 1 = transport failure, 2 = timeout;
 * http_status and body (the parsed response, may be NULL) of the exchange; rl (may be NULL) the
 * headers, whose x-should-retry: false turns a retryable outcome into client_error. */
sl_outcome_t sl_adapter_classify(const sl_adapter_t *ad, int transport_error, long http_status,
                                 const json_t *body, const sl_ratelimit_t *rl);

/* The canonical chat.completion of a successful body: {id, object, created, model,
 * choices:[{index:0, message:{role:"assistant", content, tool_calls?}, finish_reason}], usage}.
 * model (may be NULL) is used when the body names none. Caller owns the result (a reference to
 * the body itself when it is canonical already: neither may be changed); NULL when the body is
 * not a provider success body. */
json_t *sl_adapter_response(const sl_adapter_t *ad, const json_t *body, const char *model);

/* The canonical usage of a body as JSON; NULL when it reports none. Caller owns the result. */
json_t *sl_adapter_usage(const sl_adapter_t *ad, const json_t *body);

/* Fills *u from a body; 0 when it reports no usage (then *u is zeroed). */
int sl_adapter_usage_of(const sl_adapter_t *ad, const json_t *body, sl_usage_t *u);

/* How long to wait before retrying, in ms, or -1 when nobody said: the retry-after-ms /
 * retry-after headers in rl (may be NULL) first, then a hint in the body (Gemini's
 * google.rpc.RetryInfo retryDelay, "23s"). */
int64_t sl_adapter_retry_after_ms(const sl_adapter_t *ad, const sl_ratelimit_t *rl,
                                  const json_t *body);

/* The usage event's error object {type, code, message} for a failed call: the provider's own
 * error type/code/message when body has them, else type = outcome (the outcome's name,
 * sl_outcome_name) and message = detail (may be NULL: then the outcome). Caller owns the
 * result. */
json_t *sl_adapter_error(const sl_adapter_t *ad, const json_t *body, const char *outcome,
                         const char *detail);

/* Maps a provider's stop/finish reason to the canonical finish_reason ("stop", "length",
 * "tool_calls", "content_filter"); NULL for NULL. has_tool_calls: the answer called tools (Gemini
 * says STOP then). */
const char *sl_adapter_finish_reason(const sl_adapter_t *ad, const char *reason,
                                     int has_tool_calls);

#endif
