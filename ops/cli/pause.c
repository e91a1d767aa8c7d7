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

int sl_cli_pause(const sl_config_t *cfg, int resume, int argc, char **argv)
{
    const char *prog = resume ? "sluice resume" : "sluice pause";
    sl_cli_admin_opts_t opts;
    int rc = sl_cli_admin_parse(prog, argc, argv, &opts);
    if (rc == 0 && opts.help) {
        fputs(pause_usage, stdout);
        free(opts.rest);
        return 0;
    }
    int is_key = opts.nrest == 2 && strcmp(opts.rest[0], "key") == 0;
    int is_tenant = opts.nrest == 2 && strcmp(opts.rest[0], "tenant") == 0;
    if (rc == 0 && ((!is_key && !is_tenant) || opts.rest[1][0] == '\0' || opts.rest[1][0] == '-')) {
        fprintf(stderr, "%s: name a tenant or a key\n%s", prog, pause_usage);
        rc = 2;
    }
    char *name = rc == 0 ? sl_cli_url_escape(opts.rest[1]) : NULL;
    free(opts.rest);
    if (rc != 0)
        return rc;
    if (name == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    sl_cli_admin_t *a = NULL;
    rc = sl_cli_admin_open(cfg, prog, &opts, &a);
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
