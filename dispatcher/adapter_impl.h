/* adapter_impl.h - what an adapter implements (internal to dispatcher/: adapter.c, openai.c,
 * anthropic.c, gemini.c, stream.c). Everyone else uses adapter.h. */
#ifndef SL_ADAPTER_IMPL_H
#define SL_ADAPTER_IMPL_H

#include <jansson.h>

#include "adapter.h"
#include "stream.h"

struct sl_adapter {
    sl_provider_t api;
    const char *name;
    const char *auth_prefix; /* the credential header up to the key, e.g. "x-api-key: " */
    /* Builds the call; see sl_adapter_request (out is empty on entry). */
    sl_err_t (*request)(const sl_deployment_cfg_t *dep, const json_t *chat,
                        sl_adapter_request_t *out, char *err, size_t errlen);
    /* A completed HTTP exchange (transport errors and x-should-retry are handled around it). */
    sl_outcome_t (*classify)(long http_status, const json_t *body);
    json_t *(*response)(const json_t *body, const char *model);
    int (*usage)(const json_t *body, sl_usage_t *u);
    /* {type, code, message} from an error body, or NULL when it has none. */
    json_t *(*error)(const json_t *body);
    /* A retry hint in the body, ms, or -1. NULL: the API has none. */
    int64_t (*retry_hint_ms)(const json_t *body);
    const char *(*finish_reason)(const char *reason, int has_tool_calls);
    /* Translates one SSE event (see stream.h's adapter half). */
    sl_err_t (*stream_event)(sl_stream_t *st, const char *event, const char *data, size_t len);
    /* 1: the API has no final event: a stream that ends cleanly after a finish reason is
     * complete (Gemini). 0: only the final event completes it. */
    int complete_at_eof;
};

extern const sl_adapter_t sl_adapter_openai;
extern const sl_adapter_t sl_adapter_azure;
extern const sl_adapter_t sl_adapter_anthropic;
extern const sl_adapter_t sl_adapter_gemini;

/* ---- Helpers the adapters share (adapter.c) ------------------------------------------------ */

/* malloc'd printf; NULL when out of memory. */
char *sl_strdupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Adds a header line to req; SL_ENOMEM / SL_EINVAL when full. */
sl_err_t sl_adapter_add_header(sl_adapter_request_t *req, const char *line);

/* Serialises body into req->body (compact). SL_ENOMEM when it cannot. */
sl_err_t sl_adapter_set_body(sl_adapter_request_t *req, const json_t *body);

/* Appends items (stolen) as a turn {"role": role, key: items} to turns, merged into the last
 * turn when it has the same role (Anthropic's content blocks, Gemini's parts: both APIs want
 * alternating roles). Empty item lists add nothing. */
void sl_add_turn(json_t *turns, const char *role, const char *key, json_t *items);

/* The text of an OpenAI message content: a string, or the "text" of every text part joined;
 * NULL content gives "". Caller frees. NULL when out of memory. */
char *sl_content_text(const json_t *content);

/* A non-negative integer member of obj, else 0. */
int64_t sl_jcount(const json_t *obj, const char *key);

/* The request's max_tokens, else max_completion_tokens, else 0. */
int64_t sl_chat_max_tokens(const json_t *chat);

/* Builds the canonical chat.completion. content (may be NULL: JSON null), tool_calls (borrowed,
 * may be NULL or empty: left out), finish (may be NULL: JSON null), usage (may be NULL: left
 * out). NULL when out of memory. */
json_t *sl_canonical_completion(const char *id, const char *model, int64_t created,
                                const char *content, const json_t *tool_calls, const char *finish,
                                const sl_usage_t *usage);

/* Splits a data URL "data:MIME;base64,DATA" into malloc'd mime and data; 0 when it is not one. */
int sl_data_url(const char *url, char **mime, char **data);

#endif
