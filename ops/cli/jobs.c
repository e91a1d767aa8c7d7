/* jobs.c - `sluice jobs JOB_ID`: where a job is and why. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "client.h"
#include "render.h"
#include "util.h"

static const char jobs_usage[] =
    "usage: sluice jobs JOB_ID [--json] [--admin URL] [--admin-key-file FILE]\n"
    "\n"
    "Describes a job: its state, tenant, route and class, attempts, when it was submitted and\n"
    "its deadline, and why it is where it is: the limit it waits for, the deployment it is\n"
    "leased to, or its result.\n" SL_CLI_ADMIN_HELP;

int sl_cli_jobs(sl_proc_opts_t *opts, int argc, char **argv)
{
    const char *prog = "sluice jobs";
    sl_cli_admin_opts_t admin = {0};
    const sl_proc_opt_t own[] = {SL_CLI_ADMIN_OPTIONS(&admin), {NULL, NULL, NULL}};
    const sl_proc_cmdline_t cl = {prog, jobs_usage, own, SL_PROC_ARGS};
    int npos = 0;
    int rc = sl_proc_args(&cl, argc, argv, opts, &npos);
    if (rc != SL_PROC_GO_ON)
        return rc;
    if (npos != 1 || argv[1][0] == '-') {
        fprintf(stderr, "%s: name one job id\n%s", prog, jobs_usage);
        return 2;
    }
    char *esc = sl_cli_url_escape(argv[1]);
    if (esc == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    sl_cli_admin_t *a = NULL;
    rc = sl_cli_admin_open(opts, prog, &admin, &a);
    if (rc != 0) {
        free(esc);
        return rc;
    }
    char path[2048];
    snprintf(path, sizeof path, "/v1/jobs/%s", esc);
    free(esc);
    json_t *job = NULL;
    rc = sl_cli_admin_request(a, "GET", path, NULL, &job);
    if (rc == 0 && sl_cli_admin_json(a))
        rc = sl_cli_print_json(job);
    else if (rc == 0 && sl_cli_render_job(job, stdout, sl_now_ms()) != 0)
        rc = sl_cli_admin_unexpected(a);
    json_decref(job);
    sl_cli_admin_close(a);
    return rc;
}
