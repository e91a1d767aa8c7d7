/* wire_internal.h - what wire.c shares with the per-provider files wire_openai.c,
 * wire_anthropic.c and wire_gemini.c. Private to them; the rest of the simulator uses wire.h.
 *
 * The idea to hold first: wire.c holds the entry points of wire.h and dispatches on the API;
 * each provider file holds everything one provider's format needs, both ways (request parsing,
 * error bodies, 200 bodies, streams), so it can be read side by side with that provider's
 * documentation.
 */
#ifndef SL_SIM_WIRE_INTERNAL_H
#define SL_SIM_WIRE_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

/* The largest output cap a request may ask for, in every API. */
#define SL_SIM_WIRE_MAX_TOKENS 1000000000LL

/* ---- Shared helpers (wire.c) ---- */

/* Describes a 400 (SL_SIM_ERR_INVALID) in err, with OpenAI's param and code (or NULL). */
void sl_sim_wire_fail(sl_sim_error_t *err, const char *param, const char *code, const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));

/* UTF-8 code points of a JSON string; 0 for anything else. */
int64_t sl_sim_wire_chars(json_t *s);

/* Whether obj has "type": type. */
bool sl_sim_wire_is_type(json_t *obj, const char *type);

/* Characters of a string, or of the "text" of every {"type":"text"} part of an array. */
int64_t sl_sim_wire_text_chars(json_t *content);

/* Whether name is a tool name every provider accepts (see SL_SIM_TOOL_NAME_MAX). */
bool sl_sim_wire_tool_name_ok(const char *name);

/* Offers name as ask's tool unless an earlier tool was offered: the first one is called. */
void sl_sim_wire_set_tool(sl_sim_ask_t *ask, const char *name);

/* Reads an optional positive integer cap into *out (-1 when absent or null). */
bool sl_sim_wire_read_cap(json_t *v, int64_t *out);

/* Whether the reply is a tool call rather than text. */
bool sl_sim_wire_calls_tool(const sl_sim_reply_t *reply);

/* Id number salt of a reply, for the ids in its body. Every one derives from reply->id, so a
 * replay repeats them exactly. */
unsigned long long sl_sim_wire_id_hex(const sl_sim_reply_t *reply, unsigned salt);

/* Where a stream writer puts its events: events holds sl_sim_wire_stream_max(pieces). */
typedef struct {
    sl_sim_event_t *events;
    size_t n;
    bool overflow;
} sl_sim_wire_emitter_t;

/* Appends an event due after tokens_before completion tokens; one that does not fit
 * SL_SIM_EVENT_CAP sets overflow. */
void sl_sim_wire_emit(sl_sim_wire_emitter_t *e, int64_t tokens_before, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Piece k of n of text (split evenly by bytes; the text is ASCII) into buf. */
void sl_sim_wire_piece(const char *text, size_t k, size_t n, char *buf, size_t cap);

/* ---- OpenAI chat completions, and Azure OpenAI (wire_openai.c) ---- */

/* OpenAI's error body, or Azure's {"error":{"code","message"}} when err has an azure_code; msg is
 * err's message, already escaped. Returns what snprintf does. */
int sl_sim_wire_openai_error(sl_sim_api_t api, const sl_sim_error_t *err, const char *msg,
                             char *buf, size_t cap);

/* Validates root, a JSON object, as OpenAI's (and Azure's) request body, filling ask; false with
 * *err describing the 400. */
bool sl_sim_wire_openai_parse(json_t *root, sl_sim_ask_t *ask, sl_sim_error_t *err);

/* The non-streamed 200 of OpenAI (and Azure, which adds prompt_filter_results); text is the
 * reply text. Returns what snprintf does. */
int sl_sim_wire_openai_body(const sl_sim_reply_t *reply, const char *text, char *buf, size_t cap);

/* The chat.completion.chunk events of r, its text in `pieces` content events, then the finish
 * chunk, the usage chunk when asked for, and [DONE]. */
void sl_sim_wire_openai_stream(const sl_sim_reply_t *r, size_t pieces, const char *text,
                               sl_sim_wire_emitter_t *e);

/* ---- Anthropic messages (wire_anthropic.c) ---- */

/* Anthropic's error body; msg is err's message, already escaped. Returns what snprintf does. */
int sl_sim_wire_anthropic_error(const sl_sim_error_t *err, const char *msg, const char *request_id,
                                char *buf, size_t cap);

/* Validates root, a JSON object, as Anthropic's request body, filling ask; false with *err
 * describing the 400. */
bool sl_sim_wire_anthropic_parse(json_t *root, sl_sim_ask_t *ask, sl_sim_error_t *err);

/* Anthropic's non-streamed 200; text is the reply text. Returns what snprintf does. */
int sl_sim_wire_anthropic_body(const sl_sim_reply_t *reply, const char *text, char *buf,
                               size_t cap);

/* The named events of r: message_start, content_block_start, ping, one content_block_delta
 * per piece (or one input_json_delta for a tool call), content_block_stop, message_delta,
 * message_stop. */
void sl_sim_wire_anthropic_stream(const sl_sim_reply_t *r, size_t pieces, const char *text,
                                  sl_sim_wire_emitter_t *e);

/* ---- Gemini generateContent (wire_gemini.c) ---- */

/* Google's error body with its QuotaFailure, ErrorInfo and RetryInfo details; msg is err's
 * message, already escaped. Returns what snprintf does. */
int sl_sim_wire_gemini_error(const sl_sim_error_t *err, const char *msg, char *buf, size_t cap);

/* Validates root, a JSON object, as Gemini's request body, filling ask; false with *err
 * describing the 400. */
bool sl_sim_wire_gemini_parse(json_t *root, sl_sim_ask_t *ask, sl_sim_error_t *err);

/* Gemini's non-streamed 200 (a GenerateContentResponse); text is the reply text. Returns what
 * snprintf does. */
int sl_sim_wire_gemini_body(const sl_sim_reply_t *reply, const char *text, char *buf, size_t cap);

/* Gemini: each event is a whole GenerateContentResponse; usageMetadata on every one, with the
 * candidates counted so far, and finishReason on the last. SSE events end in CRLF CRLF as
 * Google's do; without alt=sse the responses form one JSON array sent piece by piece. */
void sl_sim_wire_gemini_stream(const sl_sim_reply_t *r, size_t pieces, const char *text,
                               sl_sim_wire_emitter_t *e);

#endif
