/* proc.h - what every sluice daemon does at start: parse the common options, load the config,
 * set up logging, signals and libsodium. Keeps each main.c to its wiring. */
#ifndef SL_PROC_H
#define SL_PROC_H

#include "config.h"
#include "metrics.h"

typedef struct {
    const char *config_path;
    const char *log_level;
    const char *metrics_listen; /* --metrics-listen ADDR: overrides the config's; NULL = none */
    int help;
    int nrest; /* arguments that are not common options, for the caller */
    char **rest;
} sl_proc_opts_t;

/* Parses --config FILE (default $SLUICE_CONFIG, else examples/sluice.json), --log-level L,
 * --metrics-listen ADDR and --help/-h; other arguments are left in rest. */
void sl_proc_parse(int argc, char **argv, sl_proc_opts_t *opts);

/* sl_proc_parse for a daemon that takes only the common options: --help prints usage and
 * exits 0; any other argument prints it on stderr and exits 2. */
void sl_proc_parse_daemon(int argc, char **argv, const char *prog, const char *usage,
                          sl_proc_opts_t *opts);

/* Starts a daemon: logging as component, signals, libsodium, then loads the config. On any
 * failure prints why on stderr and exits with status 2. Returns the config (caller frees). */
sl_config_t *sl_proc_start(const char *component, const sl_proc_opts_t *opts);

/* A daemon's metrics registry, served on opts->metrics_listen when given (several dispatchers
 * on one host each need their own port), else on listen from the config ("HOST:PORT"; "" = not
 * served). A port that cannot be bound is a warning, not a stop: the daemon's work matters
 * more. Returns NULL only when out of memory (caller frees with sl_metrics_free). */
sl_metrics_t *sl_proc_metrics(const sl_proc_opts_t *opts, const char *listen);

#endif
