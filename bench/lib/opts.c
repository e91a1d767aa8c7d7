/* opts.c - see opts.h. */
#include "opts.h"

#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>

enum { MAX_OPTIONS = 32, FIRST_VAL = 256 };

static int refused(const char *prog)
{
    fprintf(stderr, "%s: bin/bench/%s --help lists the options\n", prog, prog);
    return 2;
}

int b_opt_refuse(const char *prog, const char *opt, const char *value, const char *why)
{
    fprintf(stderr, "%s: %s takes %s, not \"%s\"\n", prog, opt, why, value);
    return refused(prog);
}

/* Reads arg into o's value; 0, or 2 after saying why not. */
static int read_value(const char *prog, const b_opt_t *o, const char *arg)
{
    char opt[64], why[96];
    snprintf(opt, sizeof opt, "--%s", o->name);
    char *end = NULL;
    errno = 0;
    if (o->kind == B_OPT_INT || o->kind == B_OPT_LONG) {
        long long v = strtoll(arg, &end, 10);
        if (errno != 0 || end == arg || *end != '\0' || v < o->min || v > o->max) {
            snprintf(why, sizeof why, "a whole number from %.0f to %.0f", o->min, o->max);
            return b_opt_refuse(prog, opt, arg, why);
        }
        if (o->kind == B_OPT_INT)
            *(int *)o->value = (int)v;
        else
            *(long long *)o->value = v;
    } else if (o->kind == B_OPT_NUM) {
        double v = strtod(arg, &end);
        if (errno != 0 || end == arg || *end != '\0' || !isfinite(v) || v < o->min || v > o->max) {
            snprintf(why, sizeof why, "a number from %g to %g", o->min, o->max);
            return b_opt_refuse(prog, opt, arg, why);
        }
        *(double *)o->value = v;
    } else if (o->kind == B_OPT_TEXT) {
        *(const char **)o->value = arg;
    } else {
        *(int *)o->value = 1;
    }
    return 0;
}

int b_opt_parse(const char *prog, int argc, char **argv, const b_opt_t *opts,
                void (*usage)(FILE *f))
{
    struct option longopts[MAX_OPTIONS + 2];
    int n = 0;
    for (; opts[n].name != NULL && n < MAX_OPTIONS; n++) {
        int has_arg = opts[n].kind == B_OPT_FLAG ? no_argument : required_argument;
        longopts[n] = (struct option){opts[n].name, has_arg, NULL, FIRST_VAL + n};
    }
    assert(opts[n].name == NULL); /* a longer table needs a larger MAX_OPTIONS */
    longopts[n] = (struct option){"help", no_argument, NULL, 'h'};
    longopts[n + 1] = (struct option){NULL, 0, NULL, 0};
    int rc = 0;
    while (rc == 0) {
        int opt = getopt_long(argc, argv, "h", longopts, NULL);
        if (opt == -1)
            break;
        if (opt == 'h') {
            usage(stdout);
            return 1;
        }
        /* getopt_long has said what it did not recognise or what lacks its value. */
        if (opt < FIRST_VAL || opt >= FIRST_VAL + n)
            return refused(prog);
        rc = read_value(prog, &opts[opt - FIRST_VAL], optarg);
    }
    if (rc == 0 && optind < argc) {
        fprintf(stderr, "%s: unexpected argument \"%s\" (every setting is an option)\n", prog,
                argv[optind]);
        rc = refused(prog);
    }
    return rc;
}
