/* sluice: the command line for users and operators. main.c only picks the command. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "proc.h"

static const char usage_text[] =
    "usage: sluice [--config FILE] COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  submit --file FILE [--follow] ...  send a JSONL file of requests; follow the results\n"
    "  results [--all] ID...              print results of jobs (by job id or idempotency key);\n"
    "                                     --tenant/--api-key, --secret-key for sealed ones\n"
    "  cancel [--api-key KEY] IDEM...     cancel your queued jobs by idempotency key\n"
    "  hash-key [KEY]                     print the hash to put in the config for an API key\n"
    "                                     (reads the key from stdin when not given)\n"
    "  keygen [--box] SECRET PUBLIC       create one signing key pair (e.g. for a rotation;\n"
    "                                     --box: a key pair for sealed results)\n"
    "  keys                               create every missing key file the config names\n"
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

static const struct {
    const char *name;
    int (*run)(sl_proc_opts_t *opts, int argc, char **argv);
} commands[] = {
    {"submit", sl_cli_submit},     {"results", sl_cli_results}, {"cancel", sl_cli_cancel},
    {"hash-key", sl_cli_hash_key}, {"keygen", sl_cli_keygen}, {"keys", sl_cli_keys},   {"status", sl_cli_status},
    {"pause", sl_cli_pause},       {"resume", sl_cli_resume},   {"quota", sl_cli_quota},
    {"jobs", sl_cli_jobs},
};

int main(int argc, char **argv)
{
    /* The common options may come before the command's name too: `sluice --config F status`. */
    const sl_proc_cmdline_t cl = {"sluice", usage_text, NULL, SL_PROC_COMMAND};
    sl_proc_opts_t opts;
    sl_proc_init(&opts);
    int npos = 0;
    int rc = sl_proc_args(&cl, argc, argv, &opts, &npos);
    if (rc != SL_PROC_GO_ON)
        return rc;
    if (npos == 0) {
        fputs(usage_text, stderr);
        return 2;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(&opts, npos, argv + 1);
    }
    fprintf(stderr, "sluice: unknown command %s\n%s", argv[1], usage_text);
    return 2;
}
