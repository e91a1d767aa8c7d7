/* sim.h - sluice-sim's core: a provider simulator (OpenAI, Azure OpenAI, Anthropic, Gemini)
 * without the network.
 *
 * The idea to hold first: sl_sim_handle() turns one fully received HTTP request into one
 * response, deciding admission at the caller's `now_ms` the moment the body is complete, exactly
 * as the providers charge at receipt. A 200 comes back with a delay (time to first token plus
 * time per generated token) that the HTTP layer waits out without blocking anything, or, for a
 * streamed request, as a list of events each with its own due time; every 429 and error is
 * immediate. Nothing here touches a socket or a clock, so tests drive it with explicit times.
 *
 * Per deployment it enforces RPM and TPM with continuous token buckets (limiter.h), charges
 * tokens the way OpenAI documents (max of max_tokens and a character-based prompt estimate, or
 * their sum), replays responses for a repeated Idempotency-Key without charging again, and
 * counts everything for GET /stats. Optionally it also enforces Anthropic-style limits: input
 * tokens per minute (ITPM, cache reads excluded), output tokens per minute (OTPM) and a daily
 * request quota (RPD), and simulates cache reads. Each deployment speaks one provider API
 * (wire.h: its URL, credential header, request and response bodies, errors, headers and
 * streams), and may inject faults: random 429s with or without Retry-After, unavailable
 * windows, overloads, slow answers, dropped connections and cut streams, a spend cap. The
 * fault draws follow a seeded sequence, so a run is reproducible.
 *
 * Thread-safety: an sl_sim_t may be used from several threads at once (one internal mutex).
 * A config is immutable once passed to sl_sim_new.
 */
#ifndef SL_SIM_H
#define SL_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Request bodies above this are refused with 413, except on the batch endpoints, which take
 * larger ones (sl_sim_body_limit). */
#define SL_SIM_MAX_BODY_BYTES (4u * 1024u * 1024u)

/* ---- Configuration ---------------------------------------------------------------------- */

typedef struct sl_sim_config sl_sim_config_t;

/* Parses a JSON config (see ops/sim/README.md) from len bytes at text, strictly: unknown keys,
 * wrong types, negative or out-of-range numbers are errors. On failure returns SL_EPARSE (not
 * JSON) or SL_ECONFIG and writes a one-line reason naming the key into err (errlen bytes, may be
 * 0). *out is set only on success and is freed with sl_sim_config_free. */
sl_err_t sl_sim_config_parse(const char *text, size_t len, sl_sim_config_t **out, char *err,
                             size_t errlen);

/* Like sl_sim_config_parse, reading the file at path (SL_EIO when unreadable). */
sl_err_t sl_sim_config_load(const char *path, sl_sim_config_t **out, char *err, size_t errlen);

/* Frees cfg; NULL is a no-op. */
void sl_sim_config_free(sl_sim_config_t *cfg);

/* Overrides the length of a simulated minute (1..3600000 ms); SL_EINVAL leaves cfg as it was. */
sl_err_t sl_sim_config_set_minute_ms(sl_sim_config_t *cfg, int64_t minute_ms);

int64_t sl_sim_config_minute_ms(const sl_sim_config_t *cfg);
size_t sl_sim_config_deployment_count(const sl_sim_config_t *cfg);

/* ---- Simulator -------------------------------------------------------------------------- */

typedef struct sl_sim sl_sim_t;
typedef struct sl_sim_response sl_sim_response_t;

/* Creates a simulator whose buckets are all full at now_ms (the origin of /stats' now_ms is 0).
 * Takes ownership of cfg on success only. Returns SL_EINVAL, SL_ENOMEM; *out is set only on
 * success and is freed with sl_sim_free (after every response it produced is finished). */
sl_err_t sl_sim_new(sl_sim_config_t *cfg, int64_t now_ms, sl_sim_t **out);

/* Frees sim and its config; NULL is a no-op. */
void sl_sim_free(sl_sim_t *sim);

/* One received request. A plain argument bundle, not state: every pointer is borrowed for the
 * duration of sl_sim_handle only, so a public struct costs nothing here and reads better than
 * eight positional arguments. */
typedef struct {
    const char *method; /* "GET", "POST", ... */
    const char *path;   /* URL path without query string, e.g. "/sim-a/v1/chat/completions" */
    const char *authorization;   /* the Authorization header, or NULL */
    const char *idempotency_key; /* the Idempotency-Key header, or NULL */
    /* Any other headers (api-key, x-api-key, anthropic-version, x-goog-api-key, ...): name,
     * value, name, value, ..., NULL; names are matched case-insensitively. NULL = none. The
     * two fields above take precedence over a header of the same name here. */
    const char *const *headers;
    /* Query arguments the same way (a NULL value is an argument without one), or NULL. */
    const char *const *query;
    const char *body; /* body bytes (need not be NUL-terminated), or NULL */
    size_t body_len;
    int body_too_large; /* nonzero: the HTTP layer dropped a body over sl_sim_body_limit */
} sl_sim_request_t;

/* Decides req at now_ms (milliseconds since the simulator's origin, monotonic) and builds the
 * response: status, body (or stream events) and headers in the deployment's API format, and how
 * long to hold it before sending. Admission and all counters are settled here, never later. A
 * 200 from a completion counts as in flight until sl_sim_finish. Returns SL_ENOMEM (nothing
 * charged or counted) or SL_OK with *out set; the caller frees *out with sl_sim_response_free. */
sl_err_t sl_sim_handle(sl_sim_t *sim, const sl_sim_request_t *req, int64_t now_ms,
                       sl_sim_response_t **out);

/* The largest body the HTTP layer should collect for a request to path: SL_SIM_MAX_BODY_BYTES,
 * or more on the batch endpoints (an OpenAI batch file upload takes up to 201 MB, an Anthropic
 * batch 256 MB, a Gemini inline batch 20 MB). */
size_t sl_sim_body_limit(sl_sim_t *sim, const char *path);

/* Tells the simulator the host:port it listens on ("127.0.0.1:8089"), for the absolute URLs it
 * writes (Anthropic's results_url) when a request has no Host header. */
void sl_sim_set_host(sl_sim_t *sim, const char *host);

/* Ends resp's in-flight count: call when it has been handed to the network (or abandoned). With
 * "otpm_counting": "max_tokens" this is also when the output tokens charged beyond the
 * completion are given back. Calling it again, or for a response that was never in flight, is a
 * no-op. */
void sl_sim_finish(sl_sim_t *sim, sl_sim_response_t *resp);

/* ---- Responses (owned by the caller of sl_sim_handle) ----------------------------------- */

int sl_sim_response_status(const sl_sim_response_t *resp);

/* The body (NUL-terminated; *len, when len is not NULL, gets its length). Owned by resp. */
const char *sl_sim_response_body(const sl_sim_response_t *resp, size_t *len);

/* Milliseconds to wait after the decision before sending (0 = send now). Always 0 for a stream:
 * its status and headers go at once, and each event carries its own time. */
int64_t sl_sim_response_delay_ms(const sl_sim_response_t *resp);

/* The number of stream events to send; 0 = not a stream (send the body). */
size_t sl_sim_response_chunk_count(const sl_sim_response_t *resp);

/* Stream event i (< chunk count): its bytes (owned by resp; *len gets their length) and in
 * *at_ms when to send it, in milliseconds after the decision. Either pointer may be NULL. */
const char *sl_sim_response_chunk(const sl_sim_response_t *resp, size_t i, size_t *len,
                                  int64_t *at_ms);

/* Nonzero: a fault says the connection is to be closed without completing the answer: for a
 * body, when its delay has passed, instead of sending it; for a stream, right after its last
 * event (a cut stream has fewer events than a whole one, and never its final one). */
int sl_sim_response_dropped(const sl_sim_response_t *resp);

/* Records that stream event i of resp was handed to the network at now_ms (the first one's time
 * goes to GET /stats' recent_streams and last_first_chunk_ms). A no-op for a non-stream. */
void sl_sim_chunk_sent(sl_sim_t *sim, sl_sim_response_t *resp, size_t i, int64_t now_ms);

size_t sl_sim_response_header_count(const sl_sim_response_t *resp);

/* Header i (< count): returns its lower-case name and sets *value. Owned by resp. */
const char *sl_sim_response_header(const sl_sim_response_t *resp, size_t i, const char **value);

/* The value of the header called name (case-insensitive), or NULL. Owned by resp. */
const char *sl_sim_response_header_get(const sl_sim_response_t *resp, const char *name);

/* Frees resp (it does not end its in-flight count; see sl_sim_finish). NULL is a no-op. */
void sl_sim_response_free(sl_sim_response_t *resp);

/* ---- Helpers ---------------------------------------------------------------------------- */

/* Writes ms as a Go duration string ("0s", "12ms", "1.5s", "6m0s", "1h0m0s"), the format of
 * OpenAI's x-ratelimit-reset-* headers, into buf (always NUL-terminated when len > 0). Returns
 * the length the full string needs, like snprintf. Negative ms are written as 0s. */
size_t sl_sim_go_duration(int64_t ms, char *buf, size_t len);

/* Writes the UTC time unix_ms (milliseconds since 1970), rounded up to a whole second, as
 * RFC 3339 ("2026-12-02T12:40:59Z"), the format of Anthropic's anthropic-ratelimit-*-reset
 * headers, into buf (always NUL-terminated when len > 0). Returns the length the full string
 * needs, like snprintf; 0 when the time cannot be represented. */
size_t sl_sim_rfc3339(int64_t unix_ms, char *buf, size_t len);

/* OpenAI-style prompt estimate: ceil(characters / 4) over every message's "content" (a string or
 * an array of {"type":"text","text":...} parts), counting UTF-8 code points. body must be a JSON
 * chat request; returns -1 when it is not parseable or has no messages array. */
int64_t sl_sim_prompt_estimate(const char *body, size_t len);

#endif
