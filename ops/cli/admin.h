/* admin.h - the text side of the admin commands (`sluice status|pause|resume|quota|jobs`).
 *
 * The commands themselves are in cli.h. These functions turn the JSON objects of the
 * scheduler's admin API (scheduler/ADMIN-API.md) into plain text, or build request bodies; none
 * touches the network, a terminal or the clock, so tests can feed them fixtures. They write no
 * escape codes and keep lines within 100 columns (except bucket ids, which are never clipped:
 * operators copy them into `sluice quota set`). Missing or mistyped fields print as "-" or 0.
 */
#ifndef SL_CLI_ADMIN_H
#define SL_CLI_ADMIN_H

#include <jansson.h>
#include <stddef.h>
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

/* A duration as the views show it: "12.3s" under a minute, then "4m05s", "3h12m", "2d04h".
 * Negative durations print as their absolute value. */
void sl_cli_fmt_duration(int64_t ms, char *out, size_t cap);

/* The body of `sluice quota set`. For a bucket (tenant == 0), argv holds the one LIMIT, a
 * non-negative number or "default": {"limit": N} or {"limit": null}. For a tenant, each
 * argument is KEY=VALUE, KEY one of weight, guarantee, daily_requests, daily_tokens, VALUE a
 * non-negative number (an integer but for guarantee) or "default" (null: back to the config).
 * Returns a new object (caller decrefs), or NULL with the reason in err. Ranges are the
 * scheduler's to check: it answers bad_request. */
json_t *sl_cli_quota_body(int tenant, int argc, char **argv, char *err, size_t errlen);

/* Percent-encodes s for one URL path segment or query value: everything but letters, digits,
 * "-._~" and ":" ("/" becomes %2F). Returns a new string (caller frees), NULL when out of
 * memory. */
char *sl_cli_url_escape(const char *s);

#endif
