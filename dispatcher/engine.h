/* engine.h - the dispatcher's engine: verifies signed dispatch messages, runs many provider
 * calls at once on one libcurl multi handle (keep-alive, HTTP/1.1 pipelining off), and turns
 * each finished call into one usage event. It never retries: retries are the scheduler's.
 *
 * Each deployment speaks its provider's API through an adapter (adapter.h): the engine itself
 * only moves bytes. A request with "stream": true is called in streaming mode, and each event the
 * provider sends becomes a stream chunk (stream.h, schema/stream.json) handed to the chunk
 * callback as soon as it is parsed; the usage event still comes once, at the end.
 */
#ifndef SL_ENGINE_H
#define SL_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "err.h"

typedef struct sl_engine sl_engine_t;

/* Receives each usage event: key (job id) and value (JSON), both valid only during the call. */
typedef void (*sl_engine_emit_fn)(const char *key, const char *value, void *arg);

/* Receives each stream chunk: the topic it belongs on (its tenant's stream_topic, else the
 * shared one), key (job id) and value (JSON), all valid only during the call. */
typedef void (*sl_engine_chunk_fn)(const char *topic, const char *key, const char *value,
                                   void *arg);

/* Creates an engine. It takes dispatches whose signature the caller checked: the dispatcher
 * checks every message over topic, key and value before it gets here (sl_kafka_verify,
 * common/auth.h). Credentials are resolved once here from each deployment's api_key_env /
 * api_key_file. */
/* The credential of deployment d (api_key_env, then api_key_file: its first line), malloc'd;
 * NULL when it has none. The caller wipes it (sodium_memzero) before freeing it. */
char *sl_engine_read_credential(const sl_deployment_cfg_t *d);

sl_err_t sl_engine_new(const sl_config_t *cfg, sl_engine_emit_fn emit, void *arg, sl_engine_t **out,
                       char *err, size_t errlen);
void sl_engine_free(sl_engine_t *e);

/* How long one provider call took, for metrics. Times run from the moment the request started
 * going out, so waiting for a connection, DNS and connection set-up are not in them. */
typedef struct {
    const char *deployment; /* the deployment's name; valid only during the callback */
    long http_status;
    double response_s; /* request sent -> full response received */
    double ttfb_s;     /* request sent -> first byte of the response (headers) */
} sl_engine_timing_t;

/* Receives the timing of each call that got a complete HTTP response, whatever its status;
 * calls that timed out, failed in transport or were never sent are not reported (their
 * usage events say what happened). Called from sl_engine_run, just before the call's usage
 * event is emitted. */
typedef void (*sl_engine_timing_fn)(const sl_engine_timing_t *timing, void *arg);

/* Sets (fn NULL: clears) the timing callback; arg is passed to it. */
void sl_engine_on_timing(sl_engine_t *e, sl_engine_timing_fn fn, void *arg);

/* Sets (fn NULL: clears) the receiver of stream chunks: topic, key (job id) and value (a chunk
 * message, schema/stream.json; its content sealed when the job's tenant has a result public
 * key), all valid only during the call. Called from sl_engine_run the moment a
 * provider event has been parsed, so a consumer sees each chunk without waiting for the call to
 * end. Every attempt of a streamed request that was not refused ("not_sent") and that
 * sl_engine_submit took ends with one chunk whose done is true, whatever happened. */
void sl_engine_on_chunk(sl_engine_t *e, sl_engine_chunk_fn fn, void *arg);

/* Receives each usage event's deployment (its name; NULL when the event names none) and outcome
 * (sl_outcome_name), for metrics, right after the event itself went to the emit callback. */
typedef void (*sl_engine_outcome_fn)(const char *deployment, const char *outcome, void *arg);

/* Sets (fn NULL: clears) the outcome callback; arg is passed to it. */
void sl_engine_on_outcome(sl_engine_t *e, sl_engine_outcome_fn fn, void *arg);

/* The oldest a dispatch may be when it reaches the dispatcher, whatever the deployment's limits:
 * with per-minute limits the stale cutoff is shorter (sl_capacity_dispatch_max_age_ms); without
 * them this bound is what keeps an old signed message from being usable for the whole lease. */
enum { SL_ENGINE_DISPATCH_MAX_AGE_MS = 30000 };

/* How many attempts the engine remembers having answered (executed, or reported not_sent or
 * client_error), so that a replay of one is dropped: the newest this many. */
enum { SL_ENGINE_REMEMBERED = 65536 };

/* The maximum age of a dispatch to deployment d (index into cfg): the shorter of
 * sl_capacity_dispatch_max_age_ms and SL_ENGINE_DISPATCH_MAX_AGE_MS. */
int64_t sl_engine_dispatch_max_age_ms(const sl_config_t *cfg, int d);

/* Takes one dispatch message (its value bytes), already authenticated. In this order:
 *   - malformed messages are dropped (and counted) with no call;
 *   - a replay is dropped (counted as replayed) with no call and NO usage event: a message
 *     whose attempt (job id, attempt, reservation id) is running here, or that this engine
 *     already answered (one of the last SL_ENGINE_REMEMBERED), or that was issued no later
 *     than an attempt it has since forgotten (it can no longer tell). A usage event for it would
 *     be a second answer to one attempt: a not_sent would make the scheduler give back what the
 *     running or finished call is charged and dispatch the job again;
 *   - a valid message whose lease already expired, that is older than
 *     sl_engine_dispatch_max_age_ms, or that names an unknown deployment, yields a "not_sent"
 *     usage event;
 *   - a request the deployment's API cannot express (e.g. tool-call arguments that are not
 *     JSON for anthropic) yields a "client_error" usage event with zero usage;
 *   - otherwise the call starts. Its request must still leave within the same age bound
 *     (a paced one within a few ms of its send_at_ms): one that could not (held up by the
 *     dispatcher, a connection, a loaded machine) is stopped before libcurl sends a byte of it
 *     and yields a "not_sent" usage event from sl_engine_run.
 * All of these return SL_OK.
 * Returns SL_ENOMEM (SL_EHTTP when libcurl refuses the call) when the engine could not take the
 * message, or not report it: then no call was made and no usage event went out for it; its lease
 * will expire and the scheduler dispatches the job again. The caller reports the failure. */
sl_err_t sl_engine_submit(sl_engine_t *e, const void *value, size_t len, int64_t now_ms);

/* Waits up to timeout_ms for call activity or for extra_fd (may be -1) to become readable, then
 * advances every call and emits the usage events of those that finished. A streamed call whose
 * provider sent nothing for its deployment's stream_idle_timeout_ms (counted from the first byte
 * of the response) is cut here and ends as a timeout; the wait is shortened so that the cut
 * comes on time. */
void sl_engine_run(sl_engine_t *e, int extra_fd, int timeout_ms);

int sl_engine_in_flight(const sl_engine_t *e);

/* Receives one attempt the engine holds (taken, not answered yet): its job and reservation ids,
 * valid only during the call. */
typedef void (*sl_engine_attempt_fn)(const char *job_id, const char *reservation_id, void *arg);

/* Calls fn for every attempt held (only_new: only those not passed to fn before) and marks
 * them passed; returns how many. For the heartbeats that tell the scheduler who holds what. */
int sl_engine_each_attempt(sl_engine_t *e, int only_new, sl_engine_attempt_fn fn, void *arg);

typedef struct {
    int64_t accepted, malformed, not_sent, completed;
    int64_t replayed;       /* replays dropped: the attempt was running or answered here */
    int64_t untranslatable; /* requests the deployment's API cannot express (client_error) */
    int64_t chunks;         /* stream chunks emitted */
} sl_engine_stats_t;
void sl_engine_stats(const sl_engine_t *e, sl_engine_stats_t *out);

#endif
