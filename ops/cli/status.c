/* status.c - `sluice status`: the scheduler's queues, buckets and busiest tenants, as one
 * snapshot or as a live view that redraws in place on a terminal until Ctrl-C.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "client.h"
#include "fields.h"
#include "format.h"
#include "render.h"
#include "util.h"

static const char status_usage[] =
    "usage: sluice status [--once] [--interval SECONDS] [--json] [--admin URL]\n"
    "                     [--admin-key-file FILE]\n"
    "\n"
    "Shows the scheduler's queues, each deployment's buckets (how full, when they reset) and\n"
    "the busiest tenants. On a terminal it redraws every --interval seconds (default 1) until\n"
    "Ctrl-C; with --once, --json or when the output is not a terminal it prints one snapshot.\n"
    "Bars show how much of a bucket is used; a '*' after a limit marks a run-time "
    "override.\n" SL_CLI_ADMIN_HELP;

/* The scheduler's clock when the answer has it: reset times then do not suffer clock skew. */
static int64_t answer_now_ms(const json_t *answer)
{
    return sl_cli_get_i64(answer, "now_ms", sl_now_ms());
}

static int terminal_rows(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0)
        return ws.ws_row;
    return 0;
}

/* Redraws the screen in place: home, each line then clear-to-end-of-line, then clear below,
 * so the view does not flicker. Lines past the window's height are cut (the footer stays). */
static void draw(const char *text, const char *footer)
{
    int rows = terminal_rows();
    int max_lines = rows > 3 ? rows - 2 : 1 << 30;
    int total = 0;
    for (const char *p = text; *p != '\0'; p++)
        total += *p == '\n';
    fputs("\033[H", stdout);
    const char *line = text;
    for (int n = 0; *line != '\0'; n++) {
        const char *nl = strchr(line, '\n');
        size_t len = nl != NULL ? (size_t)(nl - line) : strlen(line);
        if (total > max_lines && n == max_lines - 1) {
            printf("... %d more lines: enlarge the window, or use --once\033[K\n", total - n);
            break;
        }
        fwrite(line, 1, len, stdout);
        fputs("\033[K\n", stdout);
        line += len + (nl != NULL);
    }
    printf("\033[K\n%s\033[K\033[J", footer);
    fflush(stdout);
}

static void sleep_unless_stopped(double seconds)
{
    double until = sl_mono_ms() + seconds * 1000.0;
    while (!sl_stop_requested() && sl_mono_ms() < until) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static int status_live(sl_cli_admin_t *a, double interval_s)
{
    char *last = NULL; /* the last view that rendered, kept on screen while the API fails */
    int first = 1;
    while (!sl_stop_requested()) {
        json_t *status = NULL;
        char err[4096] = "";
        char footer[4352], clock[32];
        int failed = sl_cli_admin_call(a, "GET", "/v1/status", NULL, &status, err, sizeof err);
        if (sl_stop_requested()) {
            json_decref(status);
            break;
        }
        if (failed && first) {
            fprintf(stderr, "sluice: %s\n", err);
            return 1;
        }
        if (first)
            fputs("\033[?25l\033[2J", stdout); /* hide the cursor, clear the screen */
        first = 0;
        sl_cli_fmt_clock(sl_now_ms(), clock, sizeof clock);
        if (failed) {
            snprintf(footer, sizeof footer, "%s: update failed: %s; retrying", clock, err);
        } else {
            char *text = NULL;
            size_t len = 0;
            FILE *mem = open_memstream(&text, &len);
            if (mem != NULL) {
                if (sl_cli_render_status(status, mem, answer_now_ms(status)) != 0)
                    fputs("the scheduler's answer is not a status object (try --json)\n", mem);
                fclose(mem);
                free(last);
                last = text;
            }
            snprintf(footer, sizeof footer, "%s every %gs, Ctrl-C quits", sl_cli_admin_url(a),
                     interval_s);
        }
        json_decref(status);
        draw(last != NULL ? last : "", footer);
        sleep_unless_stopped(interval_s);
    }
    if (!first) {
        fputs("\033[?25h\n", stdout); /* show the cursor again; the prompt on its own line */
        fflush(stdout);
    }
    free(last);
    return 0;
}

int sl_cli_status(sl_proc_opts_t *opts, int argc, char **argv)
{
    const char *prog = "sluice status";
    sl_cli_admin_opts_t admin = {0};
    int once = 0;
    const char *interval = NULL;
    const sl_proc_opt_t own[] = {{"once", NULL, &once},
                                 {"interval", &interval, NULL},
                                 SL_CLI_ADMIN_OPTIONS(&admin),
                                 {NULL, NULL, NULL}};
    const sl_proc_cmdline_t cl = {prog, status_usage, own, SL_PROC_NO_ARGS};
    int rc = sl_proc_args(&cl, argc, argv, opts, NULL);
    if (rc != SL_PROC_GO_ON)
        return rc;
    double interval_s = 1.0;
    if (interval != NULL) {
        char *end = NULL;
        interval_s = strtod(interval, &end);
        if (*end != '\0' || !(interval_s >= 0.1 && interval_s <= 3600)) {
            fprintf(stderr, "%s: --interval takes seconds, 0.1 to 3600\n", prog);
            return 2;
        }
    }
    sl_cli_admin_t *a = NULL;
    rc = sl_cli_admin_open(opts, prog, &admin, &a);
    if (rc != 0)
        return rc;
    if (!once && !sl_cli_admin_json(a) && isatty(STDOUT_FILENO)) {
        rc = status_live(a, interval_s);
    } else {
        json_t *status = NULL;
        rc = sl_cli_admin_request(a, "GET", "/v1/status", NULL, &status);
        if (rc == 0 && sl_cli_admin_json(a))
            rc = sl_cli_print_json(status);
        else if (rc == 0 && sl_cli_render_status(status, stdout, answer_now_ms(status)) != 0)
            rc = sl_cli_admin_unexpected(a);
        json_decref(status);
    }
    sl_cli_admin_close(a);
    return rc;
}
