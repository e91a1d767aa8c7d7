/* ingest.h - turning one raw request into a canonical job or a rejection.
 *
 * The whole decision is a pure function of the message bytes, the config and the clock, so it
 * can be tested without Kafka; main.c only moves bytes between topics. Bad input never
 * disappears: every message yields exactly one output (a job for sluice.jobs, or a `rejected`
 * result for sluice.results with a reason code).
 */
#ifndef SL_INGEST_H
#define SL_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "err.h"

typedef struct sl_ingest sl_ingest_t;

typedef enum { SL_INGEST_JOB = 0, SL_INGEST_REJECT } sl_ingest_kind_t;

/* Where the message was read; echoed in rejections so a producer can match a message that
 * carried no idempotency key. */
typedef struct {
    const char *topic;
    int32_t partition;
    int64_t offset;
} sl_ingest_source_t;

typedef struct {
    sl_ingest_kind_t kind;
    const char *topic; /* config topic name (jobs or results); not owned */
    char *key;         /* Kafka message key, malloc'd */
    char *value;       /* JSON message, malloc'd */
    const char *reason; /* rejection reason code (static), NULL for jobs */
} sl_ingest_out_t;

/* Creates an ingest stage for cfg (borrowed, must outlive it), loading schema/request.json from
 * cfg->schema_dir. *out set only on success; err gets a reason on failure. */
sl_err_t sl_ingest_new(const sl_config_t *cfg, sl_ingest_t **out, char *err, size_t errlen);
void sl_ingest_free(sl_ingest_t *ing);

/* Decides what one request message becomes. Always fills out (key/value owned by the caller,
 * release with sl_ingest_out_clear) unless it returns SL_ENOMEM. */
sl_err_t sl_ingest_process(sl_ingest_t *ing, const void *payload, size_t len, int64_t now_ms,
                           const sl_ingest_source_t *src, sl_ingest_out_t *out);
void sl_ingest_out_clear(sl_ingest_out_t *out);

/* The job id of (tenant, idempotency key): stable, so a resubmission is the same job, and keyed
 * with the secret of signing.job_id_key_file (sl_job_id), so no one without it can tell the id
 * of another tenant's job. out holds 33 bytes. */
void sl_ingest_job_id(const sl_ingest_t *ing, const char *tenant, const char *idempotency_key,
                      char *out);

#endif
