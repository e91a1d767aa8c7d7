/* cli.h - the `sluice` command line: submit jobs and follow them, read results, hash keys. */
#ifndef SL_CLI_H
#define SL_CLI_H

#include "config.h"

/* Each command returns the process exit status: 0 success, 1 some jobs did not succeed,
 * 2 usage or setup error, 3 timed out. */
int sl_cli_submit(const sl_config_t *cfg, int argc, char **argv);
int sl_cli_results(const sl_config_t *cfg, int argc, char **argv);
/* Sends a cancel request for each idempotency key (schema/cancel-request.json). */
int sl_cli_cancel(const sl_config_t *cfg, int argc, char **argv);

/* The idempotency key the CLI gives line `line` (1-based) of a file whose contents hash to
 * run_id; stable, so re-running the same file resubmits the same jobs. out holds 64 bytes. */
void sl_cli_line_key(const char *run_id, long line, char *out, size_t cap);

#endif
