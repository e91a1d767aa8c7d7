/* pause.c - `sluice pause|resume tenant NAME | key ID`: hold a tenant's or a key's jobs, or put
 * them back in line.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "render.h"

static const char pause_usage[] =
    "usage: sluice pause tenant NAME | key ID     [--json] [--admin URL] [--admin-key-file F]\n"
    "       sluice resume tenant NAME | key ID\n"
    "\n"
    "Pauses a tenant or an API key from the next scheduling round on: its queued jobs are held\n"
    "(they keep their place and still expire), calls in flight finish, new jobs are rejected\n"
    "(tenant_paused, key_paused; retryable). Resume puts the held jobs back in "
    "line.\n" SL_CLI_ADMIN_HELP;

static int pause_or_resume(sl_proc_opts_t *opts, int resume, int argc, char **argv)
{
    const char *prog = resume ? "sluice resume" : "sluice pause";
    sl_cli_admin_opts_t admin = {0};
    const sl_proc_opt_t own[] = {SL_CLI_ADMIN_OPTIONS(&admin), {NULL, NULL, NULL}};
    const sl_proc_cmdline_t cl = {prog, pause_usage, own, SL_PROC_ARGS};
    int npos = 0;
    int rc = sl_proc_args(&cl, argc, argv, opts, &npos);
    if (rc != SL_PROC_GO_ON)
        return rc;
    int is_key = npos == 2 && strcmp(argv[1], "key") == 0;
    int is_tenant = npos == 2 && strcmp(argv[1], "tenant") == 0;
    if ((!is_key && !is_tenant) || argv[2][0] == '\0' || argv[2][0] == '-') {
        fprintf(stderr, "%s: name a tenant or a key\n%s", prog, pause_usage);
        return 2;
    }
    char *name = sl_cli_url_escape(argv[2]);
    if (name == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    sl_cli_admin_t *a = NULL;
    rc = sl_cli_admin_open(opts, prog, &admin, &a);
    if (rc != 0) {
        free(name);
        return rc;
    }
    char path[1024];
    snprintf(path, sizeof path, "/v1/%s/%s/%s", is_key ? "keys" : "tenants", name,
             resume ? "resume" : "pause");
    json_t *answer = NULL;
    rc = sl_cli_admin_request(a, "POST", path, NULL, &answer);
    if (rc == 0 && sl_cli_admin_json(a))
        rc = sl_cli_print_json(answer);
    else if (rc == 0 && sl_cli_render_pause(answer, stdout) != 0)
        rc = sl_cli_admin_unexpected(a);
    json_decref(answer);
    free(name);
    sl_cli_admin_close(a);
    return rc;
}

int sl_cli_pause(sl_proc_opts_t *opts, int argc, char **argv)
{
    return pause_or_resume(opts, 0 /*pause*/, argc, argv);
}

int sl_cli_resume(sl_proc_opts_t *opts, int argc, char **argv)
{
    return pause_or_resume(opts, 1 /*resume*/, argc, argv);
}
