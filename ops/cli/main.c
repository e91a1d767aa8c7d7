/* sluice: the command line for users and operators. main.c only picks the command. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "log.h"
#include "proc.h"
#include "sign.h"
#include "util.h"

static const char usage_text[] =
    "usage: sluice [--config FILE] COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  submit --file FILE [--follow] ...  send a JSONL file of requests; follow the results\n"
    "  results [--all] ID...              print results of jobs (by job id or idempotency key)\n"
    "  cancel [--api-key KEY] IDEM...     cancel your queued jobs by idempotency key\n"
    "  hash-key [KEY]                     print the hash to put in the config for an API key\n"
    "                                     (reads the key from stdin when not given)\n"
    "  keygen SECRET_FILE PUBLIC_FILE     create a dispatch-signing key pair\n"
    "\n"
    "operator commands (the scheduler's admin API; need an admin key):\n"
    "  status [--once] [--interval S]     queues, buckets and tenants; live on a terminal\n"
    "  pause tenant NAME | key ID         hold a tenant's or key's jobs; reject new ones\n"
    "  resume tenant NAME | key ID        put held jobs back in line\n"
    "  quota get [BUCKET_ID | --tenant NAME | --prefix P]\n"
    "                                     limits, what is left, reset times\n"
    "  quota set BUCKET_ID LIMIT|default  change a bucket's limit at run time\n"
    "  quota set --tenant NAME weight=N guarantee=F daily_requests=N daily_tokens=N\n"
    "                                     change a tenant's share or daily limits\n"
    "  jobs JOB_ID                        a job's state and what holds it back\n"
    "  They take --json, --admin URL (default $SLUICE_ADMIN_URL, else the config's\n"
    "  scheduler.admin_listen) and --admin-key-file FILE (default $SLUICE_ADMIN_KEY).\n"
    "\n"
    "The config (default $SLUICE_CONFIG or examples/sluice.json) tells where Kafka is.\n"
    "`sluice COMMAND --help` describes each command.\n";

int main(int argc, char **argv)
{
    sl_proc_opts_t opts;
    sl_proc_parse(argc, argv, &opts);
    if (opts.nrest == 0) {
        fputs(usage_text, opts.help ? stdout : stderr);
        free(opts.rest);
        return opts.help ? 0 : 2;
    }
    const char *cmd = opts.rest[0];
    int rc = 2;
    if (opts.help) {
        /* `sluice submit --help`: the command prints its own help. */
        opts.rest[opts.nrest++] = "--help";
    }
    if (strcmp(cmd, "hash-key") == 0) {
        char buf[1024];
        const char *key = opts.nrest > 1 ? opts.rest[1] : NULL;
        if (key != NULL && strcmp(key, "--help") == 0) {
            puts("usage: sluice hash-key [KEY]   (reads KEY from stdin when absent)");
            rc = 0;
        } else {
            if (key == NULL && fgets(buf, sizeof buf, stdin) != NULL) {
                buf[strcspn(buf, "\r\n")] = '\0';
                key = buf;
            }
            if (key == NULL || strlen(key) < 8) {
                fprintf(stderr, "sluice hash-key: give a key of at least 8 characters\n");
            } else if (sl_crypto_init() == SL_OK) {
                uint8_t hash[32];
                char hex[65];
                sl_keyhash(key, strlen(key), hash);
                sl_hex_encode(hash, sizeof hash, hex);
                puts(hex);
                rc = 0;
            }
        }
    } else if (strcmp(cmd, "keygen") == 0) {
        if (opts.nrest != 3 || sl_crypto_init() != SL_OK) {
            fprintf(stderr, "usage: sluice keygen SECRET_FILE PUBLIC_FILE\n");
        } else if (sl_sign_keygen(opts.rest[1], opts.rest[2]) != SL_OK) {
            fprintf(stderr, "sluice keygen: cannot write the key files\n");
            rc = 1;
        } else {
            rc = 0;
        }
    } else if (strcmp(cmd, "submit") == 0 || strcmp(cmd, "results") == 0 ||
               strcmp(cmd, "cancel") == 0) {
        opts.log_level = "warn";
        sl_config_t *cfg = sl_proc_start("cli", &opts);
        if (strcmp(cmd, "submit") == 0)
            rc = sl_cli_submit(cfg, opts.nrest - 1, opts.rest + 1);
        else if (strcmp(cmd, "cancel") == 0)
            rc = sl_cli_cancel(cfg, opts.nrest - 1, opts.rest + 1);
        else
            rc = sl_cli_results(cfg, opts.nrest - 1, opts.rest + 1);
        sl_config_free(cfg);
    } else if (strcmp(cmd, "status") == 0 || strcmp(cmd, "pause") == 0 ||
               strcmp(cmd, "resume") == 0 || strcmp(cmd, "quota") == 0 ||
               strcmp(cmd, "jobs") == 0) {
        opts.log_level = "warn";
        sl_config_t *cfg = sl_proc_start("cli", &opts);
        int argc_cmd = opts.nrest - 1;
        char **argv_cmd = opts.rest + 1;
        if (strcmp(cmd, "status") == 0)
            rc = sl_cli_status(cfg, argc_cmd, argv_cmd);
        else if (strcmp(cmd, "pause") == 0 || strcmp(cmd, "resume") == 0)
            rc = sl_cli_pause(cfg, strcmp(cmd, "resume") == 0, argc_cmd, argv_cmd);
        else if (strcmp(cmd, "quota") == 0)
            rc = sl_cli_quota(cfg, argc_cmd, argv_cmd);
        else
            rc = sl_cli_jobs(cfg, argc_cmd, argv_cmd);
        sl_config_free(cfg);
    } else {
        fprintf(stderr, "sluice: unknown command %s\n%s", cmd, usage_text);
    }
    free(opts.rest);
    return rc;
}
