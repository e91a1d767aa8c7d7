/* proc.c - common daemon start-up (see proc.h). */
#include "proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sign.h"
#include "util.h"

void sl_proc_parse(int argc, char **argv, sl_proc_opts_t *opts)
{
    memset(opts, 0, sizeof *opts);
    const char *env = getenv("SLUICE_CONFIG");
    opts->config_path = env != NULL && *env != '\0' ? env : "examples/sluice.json";
    opts->log_level = "info";
    opts->rest = calloc((size_t)argc + 1, sizeof *opts->rest);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            opts->help = 1;
        } else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            opts->config_path = argv[++i];
        } else if (strcmp(argv[i], "--log-level") == 0 && i + 1 < argc) {
            opts->log_level = argv[++i];
        } else if (strcmp(argv[i], "--metrics-listen") == 0 && i + 1 < argc) {
            opts->metrics_listen = argv[++i];
        } else if (opts->rest != NULL) {
            opts->rest[opts->nrest++] = argv[i];
        }
    }
}

void sl_proc_parse_daemon(int argc, char **argv, const char *prog, const char *usage,
                          sl_proc_opts_t *opts)
{
    sl_proc_parse(argc, argv, opts);
    if (opts->help) {
        fputs(usage, stdout);
        exit(0);
    }
    if (opts->nrest > 0) {
        fprintf(stderr, "%s: unknown argument %s\n%s", prog, opts->rest[0], usage);
        exit(2);
    }
}

sl_config_t *sl_proc_start(const char *component, const sl_proc_opts_t *opts)
{
    int level = sl_log_level_parse(opts->log_level);
    if (level < 0) {
        fprintf(stderr, "%s: --log-level must be debug, info, warn or error\n", component);
        exit(2);
    }
    sl_log_init(component, (sl_log_level_t)level);
    sl_signals_install();
    if (sl_crypto_init() != SL_OK) {
        fprintf(stderr, "%s: libsodium failed to initialise\n", component);
        exit(2);
    }
    char path[1024];
    sl_resolve_path(opts->config_path, path, sizeof path);
    sl_config_t *cfg = NULL;
    char err[512] = "";
    sl_err_t rc = sl_config_load(path, &cfg, err, sizeof err);
    if (rc != SL_OK) {
        fprintf(stderr, "%s: cannot load config %s: %s\n", component, path,
                err[0] ? err : sl_strerror(rc));
        exit(2);
    }
    return cfg;
}

sl_metrics_t *sl_proc_metrics(const sl_proc_opts_t *opts, const char *listen)
{
    if (opts->metrics_listen != NULL)
        listen = opts->metrics_listen;
    sl_metrics_t *m = sl_metrics_new();
    if (m == NULL || listen == NULL || listen[0] == '\0')
        return m;
    char err[256] = "";
    int port = 0;
    if (sl_metrics_serve(m, listen, &port, err, sizeof err) != SL_OK)
        sl_warn("metrics not served on %s: %s", listen, err);
    else
        sl_info("metrics on http://%s/metrics (port %d)", listen, port);
    return m;
}
