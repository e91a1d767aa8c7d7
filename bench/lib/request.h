/* request.h - the bytes the benchmarks send to sluice.requests: a chat completions body whose
 * prompt is filler text of a given length, the request around it, a client's cancel, and the
 * API key each tenant is given.
 *
 * The idea to hold first: bench/compare (for sluice and, as files, for the baseline) and
 * bench/scenarios send the very same bytes for the same job, so their figures compare. */
#ifndef SL_BENCH_REQUEST_H
#define SL_BENCH_REQUEST_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>

enum {
    B_PROMPT_CHARS_CAP = 100000,              /* the longest prompt a job may ask for */
    B_REQUEST_CAP = B_PROMPT_CHARS_CAP + 1024 /* a buffer of this size holds any request */
};

/* Writes tenant's API key in the benchmark called bench ("sk-<bench>-<tenant>") into out. */
void b_request_api_key(const char *bench, const char *tenant, char *out, size_t cap);

/* Writes the chat completions body of job idem: one user message "Job <idem>: " followed by
 * prompt_chars characters of filler (at most B_PROMPT_CHARS_CAP), max_tokens, and
 * "stream": true when stream is set. Returns its length (buf holds B_REQUEST_CAP bytes). */
int b_request_body(char *buf, size_t cap, const char *idem, int prompt_chars, int max_tokens,
                   int stream);

/* Writes the request of job idem on route "chat": its idempotency key, api_key, class cls and
 * the body b_request_body writes. Returns its length (buf holds B_REQUEST_CAP bytes). */
int b_request_job(char *buf, size_t cap, const char *idem, const char *api_key, const char *cls,
                  int prompt_chars, int max_tokens, int stream);

/* Produces the request of job idem of tenant (its API key as b_request_api_key gives it for
 * bench) to sluice.requests, keyed by idem, as b_request_job writes it. */
void b_request_produce(rd_kafka_t *prod, const char *bench, const char *tenant, const char *idem,
                       const char *cls, int prompt_chars, int max_tokens, int stream);

/* Writes the request a client sends when it gives up on job idem. Returns its length. */
int b_request_cancel(char *buf, size_t cap, const char *api_key, const char *idem);

#endif
