/* wire.h - the four provider APIs as sluice-sim speaks them: request bodies in; response bodies,
 * stream events and error bodies out (OpenAI chat completions, Azure OpenAI, Anthropic messages,
 * Gemini generateContent).
 *
 * The idea to hold first: each API is reduced to one neutral description each way. A request
 * body becomes an sl_sim_ask_t (prompt estimate, max_tokens, stream, the first tool offered), and
 * a decided completion (sl_sim_reply_t) or refusal (sl_sim_error_t) becomes that API's body or
 * Server-Sent Events. Nothing here holds state, reads a clock or decides anything; admission and
 * the faults decide (admit.c, faults.c), this module only spells. Every string that reaches a body
 * is either escaped here or restricted to characters that need no escaping (names, models, tool
 * names). wire.c dispatches on the API to one file per provider: wire_openai.c (with Azure),
 * wire_anthropic.c and wire_gemini.c.
 */
#ifndef SL_SIM_WIRE_H
#define SL_SIM_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    SL_SIM_API_OPENAI = 0, /* POST /NAME/v1/chat/completions, Authorization: Bearer */
    SL_SIM_API_AZURE,      /* POST /NAME/openai/deployments/NAME/chat/completions?api-version= */
    SL_SIM_API_ANTHROPIC,  /* POST /NAME/v1/messages, x-api-key + anthropic-version */
    SL_SIM_API_GEMINI,     /* POST /NAME/v1beta/models/MODEL:generateContent, x-goog-api-key */
    SL_SIM_API_COUNT_
} sl_sim_api_t;

/* "openai", "azure", "anthropic", "gemini". */
const char *sl_sim_api_name(sl_sim_api_t api);

/* Tool names are 1..64 characters of A-Z a-z 0-9 _ - . : (the intersection the providers allow,
 * and nothing that needs escaping in JSON). */
#define SL_SIM_TOOL_NAME_MAX 64

/* What a request asks for, whatever its API. */
typedef struct {
    int64_t prompt_tokens; /* ceil(characters / 4) over all text of the prompt */
    int64_t max_tokens;    /* the request's output cap, or -1 when it sets none */
    bool stream;           /* answer with Server-Sent Events (Gemini: set by the caller) */
    bool include_usage;    /* OpenAI: stream_options.include_usage */
    bool sse;              /* Gemini streams: alt=sse (else a progressively sent JSON array) */
    char tool_name[SL_SIM_TOOL_NAME_MAX + 1]; /* the first tool offered; "" = none or disabled */
} sl_sim_ask_t;

/* Refusal classes; sl_sim_wire_error_status maps each to the API's HTTP status. */
typedef enum {
    SL_SIM_ERR_INVALID,    /* 400 */
    SL_SIM_ERR_AUTH,       /* 401 */
    SL_SIM_ERR_PERMISSION, /* 403 */
    SL_SIM_ERR_NOT_FOUND,  /* 404 */
    SL_SIM_ERR_METHOD,     /* 405 (Gemini: 404) */
    SL_SIM_ERR_TOO_LARGE,  /* 413 (Gemini: 400) */
    SL_SIM_ERR_RATE_LIMIT, /* 429, worth retrying */
    SL_SIM_ERR_QUOTA,      /* 429, not worth retrying: spend cap, quota exhausted */
    SL_SIM_ERR_OVERLOADED, /* 503 (Anthropic: 529) */
} sl_sim_err_kind_t;

/* A refusal to spell. A plain bundle: zero-initialise, then set kind and message. */
typedef struct {
    sl_sim_err_kind_t kind;
    const char *type;       /* OpenAI error.type (default from kind), or NULL */
    const char *param;      /* OpenAI error.param, or NULL */
    const char *code;       /* OpenAI error.code, or NULL */
    const char *azure_code; /* Azure only: non-NULL = Azure's {"error":{"code","message"}} shape */
    const char *quota_id;   /* Gemini 429: QuotaFailure violation quotaId, or NULL */
    const char *quota_metric; /* Gemini 429: its quotaMetric, or NULL */
    int64_t quota_value;      /* Gemini 429: its quotaValue (the limit), 0 = none */
    bool retry_info;          /* Gemini 429: add RetryInfo with retry_delay_ms */
    int64_t retry_delay_ms;
    const char *reason; /* Gemini: an ErrorInfo reason (e.g. API_KEY_INVALID), or NULL */
    bool spend_limit;   /* Anthropic: details.error_code enforced_spend_limit_reached */
    char message[768];  /* plain text; escaped when spelled */
} sl_sim_error_t;

/* The HTTP status of kind in api. */
int sl_sim_wire_error_status(sl_sim_api_t api, sl_sim_err_kind_t kind);

/* Writes err as api's error body into buf (cap bytes, always NUL-terminated when cap > 0);
 * request_id goes into Anthropic's body. Returns the length the whole body needs (like
 * snprintf), so a result >= cap means it was cut. */
size_t sl_sim_wire_error_body(sl_sim_api_t api, const sl_sim_error_t *err, const char *request_id,
                              char *buf, size_t cap);

/* Parses and validates a request body of api the way that provider does (the parts that matter
 * to a rate-limit simulator). Returns true with *ask filled, or false with *err describing the
 * 400 (err->kind SL_SIM_ERR_INVALID). body need not be NUL-terminated; NULL/0 is an empty body.
 * ask->sse is left false; the caller sets it and, for Gemini, ask->stream from the URL. */
bool sl_sim_wire_parse(sl_sim_api_t api, const char *body, size_t len, sl_sim_ask_t *ask,
                       sl_sim_error_t *err);

/* OpenAI's prompt estimate of a chat body: ceil(characters / 4) over every message's content (a
 * string or text parts), counting UTF-8 code points; -1 when the body is not JSON or has no
 * messages array. */
int64_t sl_sim_wire_openai_estimate(const char *body, size_t len);

/* A decided completion, as every API reports it. */
typedef struct {
    sl_sim_api_t api;
    uint64_t id;       /* unique per completion; every id in the answer derives from it */
    int64_t created_s; /* Unix seconds */
    const char *model; /* echoed */
    const char *deployment;
    int64_t prompt_tokens;     /* the estimate, cache reads included */
    int64_t cached_tokens;     /* of those, read from the prompt cache */
    int64_t completion_tokens; /* generated */
    bool hit_max_tokens;       /* the completion stopped at max_tokens */
    const char *tool_name;     /* non-NULL and non-empty: the reply calls this tool */
    bool include_usage;        /* OpenAI streams: send the usage chunk */
    bool sse;                  /* Gemini streams: SSE rather than a JSON array */
} sl_sim_reply_t;

/* Writes reply as api's non-streamed response body into buf; returns the length needed, like
 * snprintf. */
size_t sl_sim_wire_body(const sl_sim_reply_t *reply, char *buf, size_t cap);

/* One event of a stream (an SSE event, or a piece of Gemini's JSON array). */
#define SL_SIM_EVENT_CAP 1024
typedef struct {
    int64_t tokens_before; /* completion tokens generated before it is due (0..completion) */
    size_t len;
    char text[SL_SIM_EVENT_CAP];
} sl_sim_event_t;

/* The most events sl_sim_wire_stream writes for a reply cut into `pieces` text pieces. */
size_t sl_sim_wire_stream_max(size_t pieces);

/* Writes the stream of reply in api's real format: the reply text in `pieces` (>= 1) content
 * events whose tokens_before grows with the text, then the closing events (finish reason, usage,
 * [DONE] / message_stop) at tokens_before = completion_tokens. events must hold
 * sl_sim_wire_stream_max(pieces). Returns the count; 0 when an event did not fit
 * SL_SIM_EVENT_CAP (a programming error: names are bounded). */
size_t sl_sim_wire_stream(const sl_sim_reply_t *reply, size_t pieces, sl_sim_event_t *events);

/* The text every reply carries ("Simulated reply from NAME (N completion tokens)."), into buf;
 * returns the length needed, like snprintf. */
size_t sl_sim_wire_reply_text(const sl_sim_reply_t *reply, char *buf, size_t cap);

/* Writes ms as a protobuf Duration the way Google's APIs do ("23s", "1.5s", "0.25s") into buf
 * (cap bytes, NUL-terminated). Negative ms are written as "0s". */
void sl_sim_wire_google_duration(int64_t ms, char *buf, size_t cap);

/* Writes s as JSON string content (no quotes) into dst (cap bytes, NUL-terminated), stopping
 * early rather than splitting an escape. */
void sl_sim_wire_escape(char *dst, size_t cap, const char *s);

#endif
