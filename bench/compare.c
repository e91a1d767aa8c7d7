/* bench/compare - sluice against the client-side baseline (bench/baseline, the OpenAI cookbook's
 * api_request_parallel_processor algorithm), side by side: the same simulated deployment, the
 * same jobs with the same arrival schedule and tenants, each system on a fresh simulator (and
 * sluice on a fresh stack), with shortened minutes.
 *
 * The idea to hold first: everything is measured from outside both systems, the same way. The
 * simulator's /stats, sampled through the run, gives what the provider admitted and refused;
 * each job's submit, start (sluice: its dispatch; the baseline: the start of its last attempt),
 * end and attempts give queue wait, latency and retries. Neither system reports on itself.
 *
 * Scenarios (one deployment whose TPM, counting prompt + max_tokens, is the binding limit):
 *   steady    4 tenants, Poisson arrivals at 1.25x what the limit serves, all the measurement;
 *   burst     4 tenants at 0.4x, and 10x that for 10 s scaled (a sixth of a minute) at 50 %;
 *   noisy     a batch tenant submits at once 100x the volume of each of 3 interactive tenants;
 *   storm     steady, with the simulator injecting 429s into 30 % of admitted requests (half of
 *             them with a Retry-After of 1 s scaled);
 *   storm503  steady, with 503s for 30 % of requests;
 *   longctx   steady with prompts of 8,000 - 20,000 tokens (3 - 4 fill a provider slice);
 *   maxout    steady with max_tokens 3,000 - 4,000 and replies that use most of it, slowly;
 *   daily     a daily request quota (the provider's RPD) that runs out halfway;
 *   stream    streamed jobs at 0.9x, 15 % of streams cut by the provider, 10 % of clients
 *             giving up (a cancel) soon after they submit; sluice only.
 * Systems: sluice, and the baseline at 50 %, 75 % and 100 % of the real limits, one client
 * process per tenant; "share" gives each client its share of the limits (limit x fraction /
 * tenants, the careful static split), "full" gives each the whole limit x fraction (what each
 * team reads on the provider's page).
 *
 * Each run happens in a child process (its own process group and temporary directory, as in
 * bench/scenarios); each scenario is written to bench/results/compare-<scenario>-<unix>.json,
 * with a PNG of admitted tokens per second and queue wait per class over time when gnuplot is
 * installed. The runner measures; it does not gate: it exits 1 only when a run could not be
 * measured.
 *
 * This file is the options and the loop over scenarios and systems; the rest is in bench/lib:
 * the scenario table (scenario.c), one run and its child process (run.c), the jobs and the
 * baseline's request files (workload.c), the two systems (run_sluice.c, run_baseline.c), the
 * figures of a run (figures.c), the table and the JSON document (report.c), the plot (plot.c). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "group.h"
#include "plot.h"
#include "report.h"
#include "run.h"
#include "scenario.h"
#include "stats.h"
#include "util.h"

enum { DEFAULT_MINUTE_MS = 3000, MAX_SYSTEMS = 8 };

static void usage(FILE *f)
{
    fprintf(f,
            "usage: compare [--scenario NAME] [--quick] [--minute-ms N] [--fractions LIST]\n"
            "               [--split share|full] [--slices N] [--storm-retry-after-share X]\n"
            "               [--no-sluice] [--no-baseline] [--no-plot]\n"
            "Runs sluice and the cookbook baseline (bench/baseline) on the same workload against\n"
            "sluice-sim, each on a fresh stack, and writes bench/results/compare-<scenario>-\n"
            "<unix>.json (and .png with gnuplot).\n"
            "  --scenario NAME  one of:");
    for (int i = 0; i < b_nscenarios; i++)
        fprintf(f, " %s", b_scenarios[i].name);
    fprintf(f, " (default: all)\n"
               "  --quick          3 simulated minutes of measurement instead of 7\n"
               "  --minute-ms N    length of a simulated minute (default 3000)\n"
               "  --fractions L    the baseline's limits as fractions of the real ones\n"
               "                   (default 0.5,0.75,1)\n"
               "  --split S        share: each tenant's client gets limit x fraction / tenants\n"
               "                   (default); full: each gets limit x fraction\n"
               "  --slices N       the provider's enforcement slices a minute (default 10)\n"
               "  --storm-retry-after-share X  share of the storm's 429s with a Retry-After\n"
               "                   (default 0.5)\n"
               "  --no-sluice, --no-baseline: run one side only; --no-plot: no PNG\n");
}

int main(int argc, char **argv)
{
    const char *only = NULL;
    int no_sluice = 0, no_baseline = 0, no_plot = 0, full = 0;
    b_setup_t setup = {.quick = 0,
                       .minute_ms = DEFAULT_MINUTE_MS,
                       .slices_per_minute = 10,
                       .storm_retry_after_share = 0.5};
    double fractions[MAX_SYSTEMS] = {0.5, 0.75, 1.0};
    int nfractions = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--quick") == 0) {
            setup.quick = 1;
        } else if (strcmp(a, "--no-sluice") == 0) {
            no_sluice = 1;
        } else if (strcmp(a, "--no-baseline") == 0) {
            no_baseline = 1;
        } else if (strcmp(a, "--no-plot") == 0) {
            no_plot = 1;
        } else if (strcmp(a, "--scenario") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (strcmp(a, "--split") == 0 && i + 1 < argc) {
            const char *v = argv[++i];
            if (strcmp(v, "full") != 0 && strcmp(v, "share") != 0) {
                fprintf(stderr, "compare: --split is share or full\n");
                return 2;
            }
            full = strcmp(v, "full") == 0;
        } else if (strcmp(a, "--storm-retry-after-share") == 0 && i + 1 < argc) {
            char *end = NULL;
            setup.storm_retry_after_share = strtod(argv[++i], &end);
            if (end == NULL || *end != '\0' ||
                !(setup.storm_retry_after_share >= 0 && setup.storm_retry_after_share <= 1)) {
                fprintf(stderr, "compare: --storm-retry-after-share is 0 - 1\n");
                return 2;
            }
        } else if (strcmp(a, "--slices") == 0 && i + 1 < argc) {
            long long v = sl_parse_count(argv[++i]);
            if (v < 1 || v > 600) {
                fprintf(stderr, "compare: --slices is 1 - 600\n");
                return 2;
            }
            setup.slices_per_minute = (int)v;
        } else if (strcmp(a, "--minute-ms") == 0 && i + 1 < argc) {
            char *end = NULL;
            setup.minute_ms = strtod(argv[++i], &end);
            if (end == NULL || *end != '\0' ||
                !(setup.minute_ms >= 600 && setup.minute_ms <= 60000)) {
                fprintf(stderr, "compare: --minute-ms is 600 - 60000\n");
                return 2;
            }
        } else if (strcmp(a, "--fractions") == 0 && i + 1 < argc) {
            nfractions = 0;
            char *s = argv[++i], *end = NULL;
            while (*s != '\0') {
                double v = strtod(s, &end);
                if (end == s || !(v > 0 && v <= 4) || nfractions >= MAX_SYSTEMS - 1) {
                    fprintf(stderr,
                            "compare: --fractions is a list like 0.5,0.75,1 (each 0-4, "
                            "at most %d)\n",
                            MAX_SYSTEMS - 1);
                    return 2;
                }
                fractions[nfractions++] = v;
                s = *end == ',' ? end + 1 : end;
                if (*end != ',' && *end != '\0') {
                    fprintf(stderr, "compare: bad --fractions\n");
                    return 2;
                }
            }
        } else {
            fprintf(stderr, "compare: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (only != NULL && b_scenario_find(only) == NULL) {
        fprintf(stderr, "compare: unknown scenario \"%s\"\n", only);
        usage(stderr);
        return 2;
    }
    b_system_t systems[MAX_SYSTEMS];
    int nsys = 0;
    if (!no_sluice)
        systems[nsys++] = (b_system_t){.baseline = 0, .fraction = 1, .full = 0, .label = "sluice"};
    for (int k = 0; k < nfractions && !no_baseline; k++) {
        b_system_t *s = &systems[nsys++];
        *s = (b_system_t){.baseline = 1, .fraction = fractions[k], .full = full, .label = ""};
        snprintf(s->label, sizeof s->label, "cookbook %.0f%%%s", 100 * fractions[k],
                 full ? " full" : "");
    }
    if (nsys == 0) {
        fprintf(stderr, "compare: nothing to run\n");
        return 2;
    }
    b_forward_signals(SIGTERM);
    mkdir("bench/results", 0755);
    printf("sluice vs the cookbook baseline%s: one deployment, TPM %d (prompt + max_tokens, %d "
           "slices a minute), %.0f ms minutes; baseline split: %s\n",
           setup.quick ? " (quick)" : "", B_TPM, setup.slices_per_minute, setup.minute_ms,
           full ? "full" : "share");
    int broken = 0;
    for (int s = 0; s < b_nscenarios; s++) {
        const b_scenario_t *sc = &b_scenarios[s];
        if (only != NULL && strcmp(sc->name, only) != 0)
            continue;
        long long started = (long long)time(NULL);
        json_t *runs = json_array();
        double t0 = sl_mono_ms();
        for (int k = 0; k < nsys; k++) {
            if (sc->sluice_only && systems[k].baseline)
                continue; /* the baseline has no counterpart */
            double measure_s =
                setup.minute_ms / 1000.0 * (setup.quick ? sc->quick_measure_min : sc->measure_min);
            int timeout_s = (int)measure_s + 120;
            printf("%s / %s ...", sc->name, systems[k].label);
            fflush(stdout);
            json_t *res = b_run_child(sc, &systems[k], &setup, timeout_s, runs);
            const char *status = json_string_value(json_object_get(res, "status"));
            broken += strcmp(status, "ok") != 0;
            printf(" %s in %.1f s%s%s\n", status, b_jget(res, "duration_s"),
                   strcmp(status, "ok") != 0 ? ": " : "",
                   strcmp(status, "ok") != 0 ? json_string_value(json_object_get(res, "reason"))
                                             : "");
            json_array_append_new(runs, res);
        }
        b_report_table(sc, runs);
        char path[256], png[256];
        snprintf(path, sizeof path, "bench/results/compare-%s-%lld.json", sc->name, started);
        snprintf(png, sizeof png, "bench/results/compare-%s-%lld.png", sc->name, started);
        if (b_report_write(path, sc, &setup, full ? "full" : "share", started,
                           (sl_mono_ms() - t0) / 1000.0, runs) != 0) {
            fprintf(stderr, "cannot write %s\n", path);
            broken++;
        } else {
            printf("written to %s\n", path);
        }
        double xmax_s = setup.minute_ms * (setup.quick ? sc->quick_measure_min : sc->measure_min) /
                        1000.0 * 1.05;
        if (!no_plot && b_plot(sc, runs, setup.minute_ms, xmax_s, png) == 0)
            printf("plot: %s\n", png);
        json_decref(runs);
    }
    return broken > 0 ? 1 : 0;
}
