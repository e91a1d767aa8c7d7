/* proc.h - what every sluice program does at start: parse its command line (the common options
 * and its own, with getopt_long), load the config, set up logging, signals and libsodium. Keeps
 * each main.c to its wiring. */
#ifndef SL_PROC_H
#define SL_PROC_H

#include "config.h"
#include "metrics.h"

typedef struct {
    const char *config_path;
    const char *log_level;
    const char *metrics_listen; /* --metrics-listen ADDR: overrides the config's; NULL = none */
    int help;
    int nrest; /* sl_proc_parse only: arguments that are not common options, for the caller */
    char **rest;
} sl_proc_opts_t;

/* One option of a program's own, besides the common ones: --name VALUE or --name=VALUE when
 * value is set (the last one given wins), else the flag --name, which sets *flag to 1. */
typedef struct {
    const char *name;
    const char **value;
    int *flag;
} sl_proc_opt_t;

/* Where a program takes positional arguments. */
typedef enum {
    SL_PROC_NO_ARGS, /* none: each is a usage error */
    SL_PROC_ARGS,    /* anywhere among the options; they keep their order */
    SL_PROC_COMMAND, /* the first names a command: it and all after it are the command's,
                        unparsed, and --help before it is left for the command to answer */
} sl_proc_positional_t;

/* A program's (or a command's) command line, for sl_proc_args. */
typedef struct {
    const char *prog;         /* "sluice-devkafka", "sluice status": starts each message */
    const char *usage;        /* --help prints it on stdout, a usage error on stderr */
    const sl_proc_opt_t *own; /* its own options, ending in {NULL}; NULL = none */
    sl_proc_positional_t positional;
} sl_proc_cmdline_t;

/* What sl_proc_args returns when the program goes on. */
#define SL_PROC_GO_ON (-1)

/* Sets the common options' defaults: --config $SLUICE_CONFIG, else examples/sluice.json;
 * --log-level info; no --metrics-listen; no --help. */
void sl_proc_init(sl_proc_opts_t *opts);

/* Parses argv (argv[0] is the program's or the command's name) with getopt_long: the common
 * options --config FILE, --log-level L, --metrics-listen ADDR and --help/-h into opts (set up
 * by sl_proc_init, or by an earlier sl_proc_args: what it holds stays unless given again), and
 * cl->own. Options take their value as the next argument or after '='; "--" ends the options.
 * --help anywhere wins: the usage goes to stdout and 0 is returned. Otherwise the first usage
 * error (an unknown option, a missing value, a value given to a flag, a positional argument
 * where none is taken) is printed on stderr with the usage and 2 is returned. Else returns
 * SL_PROC_GO_ON, with the positional arguments moved, in order, to argv[1] .. argv[*npos]
 * (argv is reordered as getopt_long does; no string changes). npos may be NULL with
 * SL_PROC_NO_ARGS. Each call starts afresh, so one program may parse several vectors. */
int sl_proc_args(const sl_proc_cmdline_t *cl, int argc, char **argv, sl_proc_opts_t *opts,
                 int *npos);

/* For a program that parses its own options itself: sl_proc_init, then takes the common
 * options (--config FILE or --config=FILE, ...) from anywhere in argv and leaves every other
 * argument, in order, in rest (allocated: the caller frees rest). A common option without its
 * value is left in rest too. New code uses sl_proc_args. */
void sl_proc_parse(int argc, char **argv, sl_proc_opts_t *opts);

/* sl_proc_init and sl_proc_args for a daemon that takes only the common options: --help
 * prints usage and exits 0; any other argument prints it on stderr and exits 2. rest is left
 * NULL (freeing it stays harmless). */
void sl_proc_parse_daemon(int argc, char **argv, const char *prog, const char *usage,
                          sl_proc_opts_t *opts);

/* Starts a daemon: logging as component, signals, libsodium, then loads the config. On any
 * failure prints why on stderr and exits with status 2. Returns the config (caller frees). */
sl_config_t *sl_proc_start(const char *component, const sl_proc_opts_t *opts);

/* A daemon's metrics registry, served on opts->metrics_listen when given (several dispatchers
 * on one host each need their own port), else on listen from the config ("HOST:PORT"; "" = not
 * served). An address that cannot be served (taken, bad) is a stop: it says why on stderr and
 * exits with status 2, since a scrape would otherwise read whatever else holds the port.
 * Returns NULL only when out of memory (caller frees with sl_metrics_free). */
sl_metrics_t *sl_proc_metrics(const sl_proc_opts_t *opts, const char *listen);

#endif
