/* opts.h - the options of the benchmark programs, read one way. A program describes its
 * options in a table and b_opt_parse reads argv with getopt_long against it: --help and -h
 * print the program's usage on stdout (exit status 0, nothing run); an unknown option, a
 * missing or bad value, or a stray argument is named on stderr (exit status 2). */
#ifndef SL_BENCH_OPTS_H
#define SL_BENCH_OPTS_H

#include <stdio.h>

typedef enum {
    B_OPT_FLAG, /* no value: sets an int to 1 */
    B_OPT_INT,  /* a whole number from min to max into an int */
    B_OPT_LONG, /* a whole number from min to max into a long long */
    B_OPT_NUM,  /* a number (a decimal fraction allowed) from min to max into a double */
    B_OPT_TEXT, /* any text into a const char * (pointing into argv) */
} b_opt_kind_t;

typedef struct {
    const char *name; /* the long option without its "--"; NULL ends a table */
    b_opt_kind_t kind;
    void *value; /* int *, long long *, double * or const char **, after kind */
    double min, max;
} b_opt_t;

/* Reads argv into the values opts points to; a value whose option is not given keeps what it
 * held (its default). Returns 0; 1 when --help or -h was given (usage(stdout) has been
 * called: exit 0); or 2 when something was refused (said on stderr, prog naming the
 * program: exit with it). Values read before a refusal stay set. */
int b_opt_parse(const char *prog, int argc, char **argv, const b_opt_t *opts,
                void (*usage)(FILE *f));

/* Says on stderr that prog refused value of option opt (why: what it takes) and how to see
 * the options; returns 2, the exit status for it. For the checks a table cannot express. */
int b_opt_refuse(const char *prog, const char *opt, const char *value, const char *why);

#endif
