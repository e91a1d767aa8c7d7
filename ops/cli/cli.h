/* cli.h - the `sluice` command line: submit jobs and follow them, read results, hash keys, and
 * operate the scheduler through its admin API. */
#ifndef SL_CLI_H
#define SL_CLI_H

#include "config.h"

/* Each command returns the process exit status: 0 success, 1 some jobs did not succeed,
 * 2 usage or setup error, 3 timed out. */
int sl_cli_submit(const sl_config_t *cfg, int argc, char **argv);
int sl_cli_results(const sl_config_t *cfg, int argc, char **argv);
/* Sends a cancel request for each idempotency key (schema/cancel-request.json). */
int sl_cli_cancel(const sl_config_t *cfg, int argc, char **argv);

/* The admin API commands (status.c, pause.c, quota.c, jobs.c; scheduler/ADMIN-API.md), each
 * with --json, --admin URL and --admin-key-file FILE. cfg gives the default URL
 * (scheduler.admin_listen). Exit status: 0 done, 1 the API answered an error or could not be
 * reached, 2 usage or no admin key. */
/* `status [--once] [--interval SECONDS]`: a live view on a terminal, else one snapshot. */
int sl_cli_status(const sl_config_t *cfg, int argc, char **argv);
/* `pause|resume tenant NAME | key ID` (resume != 0 for resume). */
int sl_cli_pause(const sl_config_t *cfg, int resume, int argc, char **argv);
/* `quota get [BUCKET_ID | --tenant NAME | --prefix P]`, `quota set BUCKET_ID LIMIT`,
 * `quota set --tenant NAME KEY=VALUE...`. */
int sl_cli_quota(const sl_config_t *cfg, int argc, char **argv);
/* `jobs JOB_ID`: a job's state and why. */
int sl_cli_jobs(const sl_config_t *cfg, int argc, char **argv);

/* The idempotency key the CLI gives line `line` (1-based) of a file whose contents hash to
 * run_id; stable, so re-running the same file resubmits the same jobs. out holds 64 bytes. */
void sl_cli_line_key(const char *run_id, long line, char *out, size_t cap);

#endif
