/* proc.c - what every sluice program does at start (see proc.h): its command line through
 * getopt_long, then the config, logging, signals and libsodium. */
#include "proc.h"

#include <assert.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sign.h"
#include "util.h"

/* getopt_long's codes for the options: 'h' and these for the common ones, OPT_OWN + i for
 * the caller's own option i. */
enum { OPT_CONFIG = 256, OPT_LOG_LEVEL, OPT_METRICS_LISTEN, OPT_OWN = 512 };

#define COMMON_COUNT 4
#define OWN_MAX 32

static const struct option common_options[COMMON_COUNT + 1] = {
    {"config", required_argument, NULL, OPT_CONFIG},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Records option c with value arg when it is a common one; returns 0 when it is not. */
static int take_common(int c, const char *arg, sl_proc_opts_t *opts)
{
    switch (c) {
    case 'h':
        opts->help = 1;
        return 1;
    case OPT_CONFIG:
        opts->config_path = arg;
        return 1;
    case OPT_LOG_LEVEL:
        opts->log_level = arg;
        return 1;
    case OPT_METRICS_LISTEN:
        opts->metrics_listen = arg;
        return 1;
    default:
        return 0;
    }
}

/* Starts a scan of a new vector. optind = 0 rather than 1: glibc then also forgets the previous
 * scan's place inside an argument and re-reads the '+' or '-' that starts optstring. */
static void scan_begin(void)
{
    optind = 0;
    opterr = 0; /* the messages are ours: they name the program and end with its usage */
}

/* Where getopt_long is about to look: optind, but 1 before the first call of a scan. */
static int scan_place(void)
{
    return optind == 0 ? 1 : optind;
}

/* The argument getopt_long has just worked on, given its place before the call (at): the one
 * before optind once it moved on, else the one it is still inside ("-xy"). */
static char *scanned(char **argv, int at)
{
    return optind > at ? argv[optind - 1] : argv[at];
}

/* A usage error from getopt_long's answer c (':' or '?') about argument arg, into err. */
static void describe_error(int c, const char *arg, char *err, size_t errlen)
{
    size_t name_len = strcspn(arg, "=");
    if (c == ':')
        snprintf(err, errlen, "%s needs a value", arg);
    else if (arg[0] == '-' && arg[1] == '-' && arg[name_len] == '=' && optopt != 0)
        snprintf(err, errlen, "%.*s takes no value", (int)name_len, arg);
    else
        snprintf(err, errlen, "unknown argument %s", arg);
}

void sl_proc_init(sl_proc_opts_t *opts)
{
    memset(opts, 0, sizeof *opts);
    const char *env = getenv("SLUICE_CONFIG");
    opts->config_path = env != NULL && *env != '\0' ? env : "examples/sluice.json";
    opts->log_level = "info";
}

int sl_proc_args(const sl_proc_cmdline_t *cl, int argc, char **argv, sl_proc_opts_t *opts,
                 int *npos)
{
    struct option table[OWN_MAX + COMMON_COUNT + 1];
    int nown = 0;
    for (; cl->own != NULL && cl->own[nown].name != NULL; nown++) {
        assert(nown < OWN_MAX && "a program with more options than OWN_MAX");
        table[nown].name = cl->own[nown].name;
        table[nown].has_arg = cl->own[nown].value != NULL ? required_argument : no_argument;
        table[nown].flag = NULL;
        table[nown].val = OPT_OWN + nown;
    }
    memcpy(table + nown, common_options, sizeof common_options);
    char err[256] = "";
    int n = 0;
    /* '+': stop at the command's name; '-': hand back positional arguments in order (as code
     * 1), so they may come before options even under POSIXLY_CORRECT. ':' reports a missing
     * value as ':' rather than '?'. */
    const char *optstring = cl->positional == SL_PROC_COMMAND ? "+:h" : "-:h";
    scan_begin();
    for (;;) {
        int at = scan_place();
        int c = getopt_long(argc, argv, optstring, table, NULL);
        if (c == -1)
            break;
        if (take_common(c, optarg, opts))
            continue;
        if (c >= OPT_OWN) {
            const sl_proc_opt_t *own = &cl->own[c - OPT_OWN];
            if (own->value != NULL)
                *own->value = optarg;
            else
                *own->flag = 1;
        } else if (c == 1 && cl->positional != SL_PROC_NO_ARGS) {
            argv[++n] = optarg; /* a slot getopt_long has passed: it never looks back */
        } else if (err[0] == '\0' && c == 1) {
            snprintf(err, sizeof err, "unknown argument %s", optarg);
        } else if (err[0] == '\0') {
            describe_error(c, scanned(argv, at), err, sizeof err);
        }
    }
    /* What follows "--", or the command and its arguments. */
    for (; optind < argc; optind++) {
        if (cl->positional != SL_PROC_NO_ARGS)
            argv[++n] = argv[optind];
        else if (err[0] == '\0')
            snprintf(err, sizeof err, "unknown argument %s", argv[optind]);
    }
    if (npos != NULL)
        *npos = n;
    if (opts->help && cl->positional == SL_PROC_COMMAND && n > 0)
        return SL_PROC_GO_ON; /* the command answers it, with its own usage */
    if (opts->help) {
        fputs(cl->usage, stdout);
        return 0;
    }
    if (err[0] != '\0') {
        fprintf(stderr, "%s: %s\n%s", cl->prog, err, cl->usage);
        return 2;
    }
    return SL_PROC_GO_ON;
}

void sl_proc_parse(int argc, char **argv, sl_proc_opts_t *opts)
{
    sl_proc_init(opts);
    opts->rest = calloc((size_t)argc + 1, sizeof *opts->rest);
    scan_begin();
    for (;;) {
        int at = scan_place();
        int c = getopt_long(argc, argv, "-:h", common_options, NULL);
        if (c == -1) {
            /* It stopped at "--" when it moved past one: the caller's parser wants it too. */
            if (optind > at)
                optind--;
            break;
        }
        if (take_common(c, optarg, opts) || opts->rest == NULL)
            continue;
        /* Anything else is the caller's, as written; "-xy" is one argument, however many
         * unknown options getopt_long finds in it. */
        char *arg = c == 1 ? optarg : scanned(argv, at);
        if (opts->nrest == 0 || opts->rest[opts->nrest - 1] != arg)
            opts->rest[opts->nrest++] = arg;
    }
    for (; optind < argc && opts->rest != NULL; optind++)
        opts->rest[opts->nrest++] = argv[optind];
}

void sl_proc_parse_daemon(int argc, char **argv, const char *prog, const char *usage,
                          sl_proc_opts_t *opts)
{
    const sl_proc_cmdline_t cl = {prog, usage, NULL, SL_PROC_NO_ARGS};
    sl_proc_init(opts);
    int rc = sl_proc_args(&cl, argc, argv, opts, NULL);
    if (rc != SL_PROC_GO_ON)
        exit(rc);
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
    if (sl_metrics_serve(m, listen, &port, err, sizeof err) != SL_OK) {
        /* Going on would let a scrape of this address read another process's metrics (a
         * second stack on the machine) while this one is invisible. */
        sl_error("%s; not starting: stop what holds it, or give this process its own address "
                 "(--metrics-listen HOST:PORT or metrics_listen; \"\" serves none)",
                 err);
        sl_metrics_free(m);
        exit(2);
    }
    sl_info("metrics on http://%s/metrics (port %d)", listen, port);
    return m;
}
