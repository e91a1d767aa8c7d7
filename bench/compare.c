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
 *             giving up (a cancel) soon after they submit; sluice only;
 *   bigjobs   steady with jobs of 1 - 4 provider slices (60 slices a minute, its own) against a
 *             simulator that also enforces a rolling minute (429s it counts as refused_rolling).
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
#include "opts.h"
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
            "               [--no-sluice] [--no-baseline] [--no-plot] [--help]\n"
            "Runs sluice and the cookbook baseline (bench/baseline) on the same workload against\n"
            "sluice-sim, each on a fresh stack, and writes bench/results/compare-<scenario>-\n"
            "<unix>.json (and .png with gnuplot). Measures, from outside both: utilisation of the\n"
            "binding TPM limit, the simulator's 429s, retries, queue wait and latency per class,\n"
            "throughput, Jain's index, peak memory, and estimated against real tokens.\n"
            "  --scenario NAME  one of:");
    for (int i = 0; i < b_nscenarios; i++)
        fprintf(f, " %s", b_scenarios[i].name);
    fprintf(f,
            " (default: all)\n"
            "  --quick          3 simulated minutes of measurement instead of 7\n"
            "  --minute-ms N    length of a simulated minute, 600 - 60000 (default 3000)\n"
            "  --fractions L    the baseline's limits as fractions of the real ones\n"
            "                   (default 0.5,0.75,1)\n"
            "  --split S        share: each tenant's client gets limit x fraction / tenants\n"
            "                   (default); full: each gets limit x fraction\n"
            "  --slices N       the provider's enforcement slices a minute, 1 - 600 (default 10;\n"
            "                   bigjobs has its own 60)\n"
            "  --storm-retry-after-share X  share of the storm's 429s with a Retry-After\n"
            "                   (default 0.5)\n"
            "  --no-sluice, --no-baseline: run one side only; --no-plot: no PNG\n"
            "  -h, --help       this text\n");
}

/* Reads --fractions' list ("0.5,0.75,1") into fractions; returns how many, or -1 (said on
 * stderr). */
static int parse_fractions(const char *arg, double fractions[MAX_SYSTEMS])
{
    int n = 0;
    const char *s = arg;
    while (*s != '\0') {
        char *end = NULL;
        double v = strtod(s, &end);
        if (end == s || !(v > 0 && v <= 4) || n >= MAX_SYSTEMS - 1 ||
            (*end != ',' && *end != '\0')) {
            char why[96];
            snprintf(why, sizeof why,
                     "a list like 0.5,0.75,1 (at most %d, each above 0 and at most 4)",
                     MAX_SYSTEMS - 1);
            b_opt_refuse("compare", "--fractions", arg, why);
            return -1;
        }
        fractions[n++] = v;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv)
{
    const char *only = NULL, *fractions_arg = NULL, *split = "share";
    int no_sluice = 0, no_baseline = 0, no_plot = 0;
    b_setup_t setup = {.quick = 0,
                       .minute_ms = DEFAULT_MINUTE_MS,
                       .slices_per_minute = 10,
                       .storm_retry_after_share = 0.5};
    const b_opt_t options[] = {
        {"scenario", B_OPT_TEXT, &only, 0, 0},
        {"quick", B_OPT_FLAG, &setup.quick, 0, 0},
        {"minute-ms", B_OPT_NUM, &setup.minute_ms, 600, 60000},
        {"fractions", B_OPT_TEXT, &fractions_arg, 0, 0},
        {"split", B_OPT_TEXT, &split, 0, 0},
        {"slices", B_OPT_INT, &setup.slices_per_minute, 1, 600},
        {"storm-retry-after-share", B_OPT_NUM, &setup.storm_retry_after_share, 0, 1},
        {"no-sluice", B_OPT_FLAG, &no_sluice, 0, 0},
        {"no-baseline", B_OPT_FLAG, &no_baseline, 0, 0},
        {"no-plot", B_OPT_FLAG, &no_plot, 0, 0},
        {NULL, B_OPT_FLAG, NULL, 0, 0},
    };
    int parsed = b_opt_parse("compare", argc, argv, options, usage);
    if (parsed != 0)
        return parsed == 1 ? 0 : parsed;
    if (only != NULL && b_scenario_find(only) == NULL)
        return b_opt_refuse("compare", "--scenario", only, "the name of a scenario");
    if (strcmp(split, "full") != 0 && strcmp(split, "share") != 0)
        return b_opt_refuse("compare", "--split", split, "share or full");
    int full = strcmp(split, "full") == 0;
    double fractions[MAX_SYSTEMS] = {0.5, 0.75, 1.0};
    int nfractions = fractions_arg != NULL ? parse_fractions(fractions_arg, fractions) : 3;
    if (nfractions < 0)
        return 2;
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
