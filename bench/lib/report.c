/* report.c - see report.h. */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static double fig_num(json_t *fig, const char *a, const char *b, const char *c)
{
    json_t *v = json_object_get(fig, a);
    if (b != NULL)
        v = json_object_get(v, b);
    if (c != NULL)
        v = json_object_get(v, c);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void fmt_ms(char *out, size_t cap, double ms)
{
    if (!isfinite(ms))
        snprintf(out, cap, "-");
    else if (ms >= 10000)
        snprintf(out, cap, "%.0fs", ms / 1000);
    else if (ms >= 1000)
        snprintf(out, cap, "%.1fs", ms / 1000);
    else
        snprintf(out, cap, "%.0f", ms);
}

/* A second line for the figures some scenarios add: outcomes other than success, cancels,
 * streams, the simulator's 503s. */
static void print_details(json_t *fig)
{
    char line[1024] = "";
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(fig, "reasons"), k, v)
    {
        n += (size_t)snprintf(line + n, sizeof line - n, "%s%s %lld", n ? ", " : "", k,
                              (long long)json_integer_value(v));
        if (n >= sizeof line)
            n = sizeof line - 1;
    }
    double rolling = fig_num(fig, "sim", "limit_429_rolling", NULL);
    if (rolling > 0) {
        n += (size_t)snprintf(line + n, sizeof line - n,
                              "%sof the limit 429s, by the rolling minute %.0f", n ? "; " : "",
                              rolling);
        if (n >= sizeof line)
            n = sizeof line - 1;
    }
    double f503 = fig_num(fig, "sim", "fault_503", NULL);
    if (f503 > 0) {
        n += (size_t)snprintf(line + n, sizeof line - n, "%ssimulator 503s %.0f", n ? "; " : "",
                              f503);
        if (n >= sizeof line)
            n = sizeof line - 1;
    }
    json_t *c = json_object_get(fig, "cancels");
    if (c != NULL) {
        n += (size_t)snprintf(line + n, sizeof line - n,
                              "%scancels sent %.0f: cancelled %.0f, succeeded anyway %.0f",
                              n ? "; " : "", fig_num(fig, "cancels", "sent", NULL),
                              fig_num(fig, "cancels", "cancelled", NULL),
                              fig_num(fig, "cancels", "succeeded_anyway", NULL));
        if (n >= sizeof line)
            n = sizeof line - 1;
    }
    json_t *st = json_object_get(fig, "stream");
    if (st != NULL) {
        char a[16], b[16];
        fmt_ms(a, sizeof a, fig_num(fig, "stream", "first_chunk_ms", "p50"));
        fmt_ms(b, sizeof b, fig_num(fig, "stream", "first_chunk_ms", "p99"));
        n += (size_t)snprintf(line + n, sizeof line - n,
                              "%sfirst chunk p50/p99 %s/%s (ms unless s); %.0f chunks; %.0f "
                              "attempts cut; %.0f of %.0f "
                              "succeeded streams finished",
                              n ? "; " : "", a, b, fig_num(fig, "stream", "chunks", NULL),
                              fig_num(fig, "stream", "cut_attempts", NULL),
                              fig_num(fig, "stream", "succeeded_with_finished_stream", NULL),
                              fig_num(fig, "stream", "succeeded", NULL));
    }
    if (line[0] != '\0')
        printf("%-13s   %s\n", "", line);
}

void b_report_table(const b_scenario_t *sc, json_t *runs)
{
    printf("\n%s: %s\n", sc->name, sc->what);
    printf("%-13s %6s %13s %6s %7s", "system", "util", "limit 429s", "inj429", "retry/j");
    int cls_present[B_NCLASSES] = {0};
    for (int t = 0; t < sc->ntenants; t++)
        cls_present[sc->tenants[t].cls] = 1;
    for (int c = 0; c < B_NCLASSES; c++) {
        if (cls_present[c]) {
            char head[40];
            snprintf(head, sizeof head, "wait %.5s p50/p99", b_class_names[c]);
            printf(" %17s", head);
            snprintf(head, sizeof head, "e2e %.5s p50/p99", b_class_names[c]);
            printf(" %17s", head);
        }
    }
    if (sc->burst_minutes > 0)
        printf(" %12s", "burst drain");
    printf(" %6s %7s %6s %5s %7s %8s %8s %6s\n", "jobs/s", "tok/s", "Jain", "fail", "queued",
           "RSS MiB", "est/real", "waste");
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r)
    {
        const char *label = json_string_value(json_object_get(r, "system"));
        const char *status = json_string_value(json_object_get(r, "status"));
        json_t *fig = json_object_get(r, "figures");
        if (strcmp(status, "ok") != 0 && fig == NULL) {
            printf("%-13s %s: %s\n", label, status,
                   json_string_value(json_object_get(r, "reason")));
            continue;
        }
        char lim[32];
        snprintf(lim, sizeof lim, "%.0f (%.2f%%)", fig_num(fig, "sim", "limit_429", NULL),
                 100 * fig_num(fig, "sim", "limit_429_share", NULL));
        printf("%-13s %5.1f%% %13s %6.0f %7.2f", label,
               100 * fig_num(fig, "utilisation", NULL, NULL), lim,
               fig_num(fig, "sim", "fault_429", NULL),
               fig_num(fig, "retries_per_request", NULL, NULL));
        for (int c = 0; c < B_NCLASSES; c++) {
            if (!cls_present[c])
                continue;
            char a[16], b[16], cell[40];
            fmt_ms(a, sizeof a, fig_num(fig, "queue_wait_ms", b_class_names[c], "p50"));
            fmt_ms(b, sizeof b, fig_num(fig, "queue_wait_ms", b_class_names[c], "p99"));
            snprintf(cell, sizeof cell, "%s/%s", a, b);
            printf(" %17s", cell);
            fmt_ms(a, sizeof a, fig_num(fig, "latency_ms", b_class_names[c], "p50"));
            fmt_ms(b, sizeof b, fig_num(fig, "latency_ms", b_class_names[c], "p99"));
            snprintf(cell, sizeof cell, "%s/%s", a, b);
            printf(" %17s", cell);
        }
        double rss = 0;
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(json_object_get(r, "details"), "peak_rss_kb"), k, v)
        {
            if (json_integer_value(v) > 0)
                rss += (double)json_integer_value(v);
        }
        if (sc->burst_minutes > 0) {
            double drain = fig_num(fig, "burst_drain_s", NULL, NULL);
            if (isfinite(drain))
                printf(" %11.1fs", drain);
            else
                printf(" %12s", "not drained");
        }
        printf(" %6.1f %7.0f %6.4f %5.0f %7.0f %8.0f %8.3f %5.1f%%%s\n",
               fig_num(fig, "jobs_per_s", NULL, NULL), fig_num(fig, "tokens_per_s", NULL, NULL),
               fig_num(fig, "jain", NULL, NULL),
               fig_num(fig, "failed", NULL, NULL) + fig_num(fig, "expired", NULL, NULL),
               fig_num(fig, "unfinished_at_stop", NULL, NULL), rss / 1024,
               fig_num(fig, "tokens", "estimated_over_real", NULL),
               100 * fig_num(fig, "tokens", "wasted_share", NULL),
               strcmp(status, "ok") == 0 ? "" : "  (broken)");
        print_details(fig);
    }
    printf("(util: tokens the simulator admitted per second over the B_TPM limit, in the steady "
           "window; limit 429s: the simulator's own refusals over the run and their share of its "
           "requests; inj429: injected; waits (submit to start) and e2e (submit to result) in "
           "ms, over the jobs that started / succeeded; jobs/s, tok/s: succeeded, steady window; "
           "burst drain: from the end of the burst window to the start of its last job; "
           "fail: failed + expired; queued: submitted and not finished at the stop; Jain: over "
           "the tenants of equal demand; RSS: peak, all processes of the run; est/real: tokens "
           "reserved (sluice) or taken by the estimate at every attempt (baseline) over what the "
           "provider's limit counted; waste: the share of what the system's own accounting kept "
           "that the provider did not count)\n");
}

int b_report_write(const char *path, const b_scenario_t *sc, const b_setup_t *setup,
                   const char *split, long long started_unix, double wall_s, json_t *runs)
{
    int slices = sc->slices_per_minute > 0 ? sc->slices_per_minute : setup->slices_per_minute;
    json_t *doc = json_pack(
        "{s:s, s:s, s:I, s:b, s:f, s:{s:i, s:i, s:i, s:b, s:s, s:i, s:f, s:s, s:f, s:f, s:s}, "
        "s:O}",
        "scenario", sc->name, "what", sc->what, "started_unix", (json_int_t)started_unix, "quick",
        setup->quick, "wall_s", wall_s, "setup", "tpm", B_TPM, "rpm", B_RPM, "slices_per_minute",
        slices, "rolling_minute", sc->rolling_minute, "tpm_counting", "sum",
        "interactive_deadline_ms", B_INTERACTIVE_DEADLINE_MS, "minute_ms", setup->minute_ms,
        "steady_window",
        setup->quick ? "40 % of the measurement to half a minute before its end"
                     : "3 minutes to half a minute before the end",
        "storm_retry_after_share", setup->storm_retry_after_share, "baseline_pause_ms",
        setup->minute_ms * 15.0 / 60.0, "baseline_split", split, "runs", runs);
    int rc = doc != NULL && json_dump_file(doc, path, JSON_INDENT(1)) == 0 ? 0 : -1;
    json_decref(doc);
    return rc;
}
