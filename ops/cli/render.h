/* render.h - the admin views (`sluice status|pause|resume|quota|jobs`) as plain text.
 *
 * These functions turn the JSON objects of the scheduler's admin API (scheduler/ADMIN-API.md)
 * into text; none touches the network, a terminal or the clock, so tests can feed them
 * fixtures. They write no escape codes and keep lines within 100 columns (except bucket ids,
 * which are never clipped: operators copy them into `sluice quota set`). Missing or mistyped
 * fields print as "-" or 0.
 */
#ifndef SL_CLI_RENDER_H
#define SL_CLI_RENDER_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

/* Tenants the status view lists at most, busiest first; the rest are counted. */
#define SL_CLI_STATUS_TENANTS 20

/* The answer of GET /v1/status: a header line (time, role, totals), each pool's queues,
 * deployments and their buckets (absent for partner keys: skipped), and the tenant table.
 * now_ms is the wall-clock time of the answer (its "now_ms"): the header shows it and reset
 * times count from it. Returns 0, or -1 when status is not an object (nothing written). */
int sl_cli_render_status(const json_t *status, FILE *out, int64_t now_ms);

/* A table of buckets (a JSON array of bucket objects): id, limit per period, level/capacity,
 * used %, time to reset, override. Returns 0, or -1 when buckets is not an array. */
int sl_cli_render_buckets(const json_t *buckets, FILE *out, int64_t now_ms);

/* A tenant (GET/PUT /v1/tenants/{t}): weight, guarantee, pause, queues, keys, then its buckets
 * as sl_cli_render_buckets does. Returns 0, or -1 when tenant is not an object. */
int sl_cli_render_tenant(const json_t *tenant, FILE *out, int64_t now_ms);

/* One line confirming a pause or resume from its answer: a tenant, or {"key","tenant","paused"}.
 * Returns 0, or -1 when the answer is neither. */
int sl_cli_render_pause(const json_t *answer, FILE *out);

/* A job (GET /v1/jobs/{id}): state, tenant/route/class, attempts, submitted and deadline
 * relative to now_ms, and why it is where it is. Returns 0, or -1 when job is not an object. */
int sl_cli_render_job(const json_t *job, FILE *out, int64_t now_ms);

#endif
