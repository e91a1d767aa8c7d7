/* result.h - one sluice result (schema/result.json) as the benchmarks read it from
 * sluice.results: what each of them needs, parsed one way. */
#ifndef SL_BENCH_RESULT_H
#define SL_BENCH_RESULT_H

#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    json_t *doc;           /* the parsed message; the strings below point into it */
    const char *idem;      /* idempotency_key */
    const char *status;    /* succeeded, failed, rejected, expired, cancelled */
    const char *reason;    /* error.reason, or NULL */
    const char *job_id;    /* or NULL */
    int64_t input, output; /* usage (0 when absent) */
    int attempts;
    double queued_ms;   /* timings.queued_ms: (last) dispatch minus submit */
    double dispatch_ms; /* when the scheduler last dispatched it (epoch ms); -1 when never */
} b_result_t;

/* A job's final status; B_NONE until its result arrives. */
typedef enum {
    B_NONE = 0,
    B_SUCCEEDED,
    B_FAILED,
    B_REJECTED,
    B_EXPIRED,
    B_CANCELLED,
    B_OTHER
} b_status_t;

/* The status of a result's "status" text (B_OTHER when unknown). */
b_status_t b_status_parse(const char *s);

/* Parses a result message; 0, or -1 when it is not one (nothing to free then). */
int b_result_parse(const void *payload, size_t len, b_result_t *r);
void b_result_free(b_result_t *r);

/* Reads the results waiting on cons, waiting up to wait_ms for the first: each one that
 * parses goes to on_result (r is valid during the call only); the others are skipped. */
void b_result_poll(rd_kafka_t *cons, int wait_ms, void (*on_result)(void *arg, const b_result_t *r),
                   void *arg);

/* The idempotency key of job index of a workload: "j<index>", seven digits. */
void b_job_key(int index, char *out, size_t cap);
/* The index of job "j<index>" of a workload of njobs; -1 for any other key (warm-up jobs). */
int b_job_index(const char *idem, int njobs);

#endif
