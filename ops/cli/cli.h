/* cli.h - the `sluice` commands: submit jobs and follow them, read results, hash keys, and
 * operate the scheduler through its admin API. main.c picks one by name.
 *
 * Each command takes its arguments from its own name on (argv[0] is "submit") and opts, which
 * holds the common options given before the name and takes those given after it: --config,
 * --log-level, --metrics-listen and --help work anywhere on the line. A command answers --help
 * with its usage on stdout (0) and a usage error with its usage on stderr (2) before it loads
 * the config. Each returns the process exit status: 0 success, 1 some jobs did not succeed,
 * 2 usage or setup error, 3 timed out.
 */
#ifndef SL_CLI_H
#define SL_CLI_H

#include <stddef.h>

#include "config.h"
#include "proc.h"

/* `submit --file FILE|- [--api-key KEY] [--route NAME] [--class CLASS] [--follow] [--out FILE]
 * [--timeout SECONDS]` (submit.c). */
int sl_cli_submit(sl_proc_opts_t *opts, int argc, char **argv);
/* `results [--timeout SECONDS] [--all] ID...`: results by job id or idempotency key. */
int sl_cli_results(sl_proc_opts_t *opts, int argc, char **argv);
/* `cancel [--api-key KEY] IDEM...`: a cancel request for each idempotency key
 * (schema/cancel-request.json). */
int sl_cli_cancel(sl_proc_opts_t *opts, int argc, char **argv);

/* `hash-key [KEY]`: the hash to put in the config for an API key (keys.c). */
int sl_cli_hash_key(sl_proc_opts_t *opts, int argc, char **argv);
/* `keygen SECRET_FILE PUBLIC_FILE`: one signing key pair (e.g. the next one of a rotation). */
int sl_cli_keygen(sl_proc_opts_t *opts, int argc, char **argv);
/* `keys`: every key file of the config's "signing" section that is missing. */
int sl_cli_keys(sl_proc_opts_t *opts, int argc, char **argv);

/* The admin API commands (status.c, pause.c, quota.c, jobs.c; scheduler/ADMIN-API.md), each
 * with --json, --admin URL and --admin-key-file FILE. The config gives the default URL
 * (scheduler.admin_listen). Exit status: 0 done, 1 the API answered an error or could not be
 * reached, 2 usage or no admin key. */
/* `status [--once] [--interval SECONDS]`: a live view on a terminal, else one snapshot. */
int sl_cli_status(sl_proc_opts_t *opts, int argc, char **argv);
/* `pause tenant NAME | key ID` and `resume tenant NAME | key ID`. */
int sl_cli_pause(sl_proc_opts_t *opts, int argc, char **argv);
int sl_cli_resume(sl_proc_opts_t *opts, int argc, char **argv);
/* `quota get [BUCKET_ID | --tenant NAME | --prefix P]`, `quota set BUCKET_ID LIMIT`,
 * `quota set --tenant NAME KEY=VALUE...`. */
int sl_cli_quota(sl_proc_opts_t *opts, int argc, char **argv);
/* `jobs JOB_ID`: a job's state and why. */
int sl_cli_jobs(sl_proc_opts_t *opts, int argc, char **argv);

/* The config from opts, as every command that needs it loads it (logging at warn: the
 * command's own output is what its user reads). Exits 2 when it cannot be loaded; the caller
 * frees it. */
sl_config_t *sl_cli_config(sl_proc_opts_t *opts);

/* The idempotency key the CLI gives line `line` (1-based) of a file whose contents hash to
 * run_id; stable, so re-running the same file resubmits the same jobs. out holds 64 bytes. */
void sl_cli_line_key(const char *run_id, long line, char *out, size_t cap);

#endif
