/* stream.h - a streamed provider answer, turned into canonical chunks as it arrives.
 *
 * The idea to hold first: bytes from the provider go in (sl_stream_feed, from the libcurl write
 * callback), and each provider event that carries something comes out at once as one canonical
 * chunk message (schema/stream.json) through a callback; meanwhile the stream assembles the whole
 * answer, so when the call ends it yields the canonical chat.completion and the usage, exactly as
 * a non-streamed call would. A stream that ends without the provider's final event (connection
 * closed, timeout, provider error) still ends with a chunk whose done is true (finish_reason
 * null), and its usage is what was consumed: the provider's counts so far, else an estimate.
 *
 * Chunk message: {v:1, job_id, attempt, reservation_id, seq (0, 1, ...), delta (text, "" when
 * none), tool_calls (optional: OpenAI-style deltas {index, id?, type?, function:{name?,
 * arguments}}), finish_reason (null | stop | length | tool_calls | content_filter), done, usage
 * (null, or {input, output, cached, reasoning, total} on the last chunk), ts_ms}.
 *
 * Bounds: one SSE event and the assembled answer (content plus tool-call arguments) are capped
 * (SL_STREAM_MAX_EVENT_BYTES, SL_STREAM_MAX_CONTENT_BYTES); past either, sl_stream_feed fails
 * and the stream ends as bad_response.
 *
 * The second half of this header is for adapters only: how their event translators report what
 * an event said.
 */
#ifndef SL_STREAM_H
#define SL_STREAM_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "adapter.h"
#include "err.h"
#include "msg_usage.h"

#define SL_STREAM_MAX_EVENT_BYTES ((size_t)1 << 20)
#define SL_STREAM_MAX_CONTENT_BYTES ((size_t)4 << 20)
#define SL_STREAM_MAX_TOOL_CALLS 128

typedef struct sl_stream sl_stream_t;

/* Receives each chunk message as built (see above); it is valid only during the call. */
typedef void (*sl_stream_chunk_fn)(const json_t *chunk, void *arg);

/* Who a stream belongs to, copied into every chunk. */
typedef struct {
    const char *job_id;
    int attempt;
    const char *reservation_id;
    const char *model;      /* the deployment's model, used when the provider names none */
    int64_t input_estimate; /* input tokens to charge when the provider never said */
} sl_stream_ids_t;

/* Creates a stream translated by adapter ad; fn (may be NULL: no chunks) gets every chunk.
 * ids' strings are copied. *out is set only on success; free with sl_stream_free. */
sl_err_t sl_stream_new(const sl_adapter_t *ad, const sl_stream_ids_t *ids, sl_stream_chunk_fn fn,
                       void *arg, sl_stream_t **out);
void sl_stream_free(sl_stream_t *st);

/* Feeds len bytes of the SSE body, emitting the chunks they complete. Returns SL_OK;
 * SL_ETOOBIG (an event or the answer over its cap), SL_EPARSE (an event that is not the
 * provider's JSON) or SL_ENOMEM, after which the stream only ends (sl_stream_end). */
sl_err_t sl_stream_feed(sl_stream_t *st, const char *data, size_t len);

/* Ends the stream once the transfer is over (transport_error as sl_adapter_classify's) and
 * returns its outcome: ok when the provider finished the answer; the outcome of a provider
 * error event; bad_response after sl_stream_feed failed; else timeout or transport (a cut
 * stream). Emits the last chunk (done true) unless it went out already. Idempotent: later calls
 * return the same outcome and emit nothing. */
sl_outcome_t sl_stream_end(sl_stream_t *st, int transport_error);

/* Ends a stream whose answer did not come as events (an HTTP error, or a provider that answered
 * a stream request with one JSON body): emits one last chunk carrying all of response (a
 * canonical chat.completion, may be NULL) and usage (may be NULL). No-op once a last chunk
 * went out. */
void sl_stream_end_whole(sl_stream_t *st, const json_t *response, const json_t *usage);

/* The assembled canonical chat.completion (content concatenated, tool calls joined), or NULL
 * when out of memory. Caller owns it. Once the provider has finished the answer (a finish reason
 * or its final event), a tool call whose arguments never came has "{}", in the chunks as here. */
json_t *sl_stream_response(const sl_stream_t *st);

/* The usage of what was consumed so far (see the file comment). Caller owns it. */
json_t *sl_stream_usage(const sl_stream_t *st);

/* The provider's error event body, when one came (borrowed; NULL otherwise). */
const json_t *sl_stream_error(const sl_stream_t *st);

/* Chunks emitted so far. */
int64_t sl_stream_chunks(const sl_stream_t *st);

/* Milliseconds (sl_mono_ms clock) when the first event arrived; 0 before. */
double sl_stream_first_event_ms(const sl_stream_t *st);

/* ---- For adapters: what one event said ----------------------------------------------------- */

/* The provider's id, model and creation time (epoch seconds); NULL / 0 leave what was known. */
void sl_stream_meta(sl_stream_t *st, const char *id, const char *model, int64_t created);
/* Answer text. SL_ETOOBIG past the content cap. */
sl_err_t sl_stream_text(sl_stream_t *st, const char *text, size_t len);
/* Reasoning text the provider shows but that is not the answer: only counted for estimates. */
void sl_stream_reasoning_text(sl_stream_t *st, const char *text, size_t len);
/* A tool-call delta. key names the call in the provider's terms (OpenAI's index, Anthropic's
 * content block index, a counter for Gemini); the first delta of a key opens a new call. id and
 * name (may be NULL) are set once; args (len bytes) are appended. SL_ETOOBIG past the content
 * cap or SL_STREAM_MAX_TOOL_CALLS calls. */
sl_err_t sl_stream_tool(sl_stream_t *st, int64_t key, const char *id, const char *name,
                        const char *args, size_t len);
/* Tool calls opened so far. */
int sl_stream_tool_count(const sl_stream_t *st);
/* The canonical finish reason (sl_adapter_finish_reason's values). */
void sl_stream_finish(sl_stream_t *st, const char *finish_reason);
/* Usage the provider reported; has_input / has_output say which counts it gave. Later reports
 * replace earlier ones (providers send cumulative counts). */
void sl_stream_set_usage(sl_stream_t *st, const sl_usage_t *u, int has_input, int has_output);
/* The provider's final event: the answer is complete. */
void sl_stream_done(sl_stream_t *st);
/* A provider error event: body (copied) and the outcome it means. */
void sl_stream_fail(sl_stream_t *st, const json_t *body, sl_outcome_t outcome);

#endif
