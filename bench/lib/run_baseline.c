/* run_baseline.c - see run_baseline.h. */
#include "run_baseline.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "stats.h"
#include "workload.h"

/* Reads one client's output into the jobs; returns the records read, -1 when unreadable. */
static int read_client_output(b_run_t *run, const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *r = json_loads(line, 0, NULL);
        const char *id = json_string_value(json_object_get(r, "id"));
        const char *status = json_string_value(json_object_get(r, "status"));
        int i = id != NULL && id[0] == 'j' ? atoi(id + 1) : -1;
        if (r == NULL || status == NULL || i < 0 || i >= run->njobs) {
            json_decref(r);
            continue;
        }
        b_job_t *job = &run->jobs[i];
        job->submit_ms = b_jget(r, "submit_ms");
        job->start_ms = b_jget(r, "start_ms");
        job->attempts = (int)json_integer_value(json_object_get(r, "attempts"));
        job->est_tokens = json_integer_value(json_object_get(r, "tokens_estimate"));
        if (strcmp(status, "unfinished") != 0) {
            job->status = b_status_parse(status);
            if (job->status != B_SUCCEEDED) {
                char why[32];
                snprintf(why, sizeof why, "HTTP %lld",
                         (long long)json_integer_value(json_object_get(r, "http_status")));
                b_run_count_reason(run, status, why);
            }
            job->end_ms = b_jget(r, "end_ms");
            job->usage_input = json_integer_value(json_object_get(r, "prompt_tokens"));
            job->usage_tokens =
                job->usage_input + json_integer_value(json_object_get(r, "completion_tokens"));
        }
        n++;
        json_decref(r);
    }
    free(line);
    fclose(f);
    return n;
}

/* The last line of a client's log: its JSON summary, or NULL. */
static json_t *client_summary(const char *logname)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s.log", h_tmpdir(), logname);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    char line[1024], last[1024] = "";
    while (fgets(line, sizeof line, f) != NULL) {
        if (line[0] == '{')
            snprintf(last, sizeof last, "%s", line);
    }
    fclose(f);
    return last[0] != '\0' ? json_loads(last, 0, NULL) : NULL;
}

static void add_rss(json_t *rss, const char *name, long kb)
{
    json_object_set_new(rss, name, json_integer(kb));
}

const char *b_run_baseline(b_run_t *run)
{
    const b_scenario_t *sc = run->sc;
    const b_system_t *sys = run->sys;
    char req_paths[B_MAX_TENANTS][512], out_paths[B_MAX_TENANTS][512];
    if (b_workload_write_requests(run, req_paths) != 0)
        return "cannot write the requests files";
    int sim_port = h_free_port();
    b_pool_t pool = b_run_pool(run, sim_port);
    char *sim_cfg = b_pool_sim_config(&pool);
    char port[16], stats_url[64], url[128];
    snprintf(port, sizeof port, "%d", sim_port);
    snprintf(stats_url, sizeof stats_url, "http://127.0.0.1:%d/stats", sim_port);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/pool/v1/chat/completions", sim_port);
    const char *sim_args[] = {"--config", sim_cfg, "--port", port, NULL};
    pid_t sim = h_spawn("sluice-sim", "sim", NULL, sim_args);
    json_t *probe = NULL;
    for (int i = 0; i < 200 && probe == NULL; i++) {
        usleep(50 * 1000);
        probe = h_http_json(stats_url);
    }
    json_decref(probe);
    if (probe == NULL) {
        h_stop(sim, SIGTERM, 5000);
        free(sim_cfg);
        return "sluice-sim did not start";
    }

    /* Each client's limits: a share of the real ones, or the whole of them. */
    double split = sys->full ? 1.0 : (double)sc->ntenants;
    char rpm[32], tpm[32], minute[32], start[32], stop[32], grace[32];
    snprintf(rpm, sizeof rpm, "%.0f", sys->fraction * B_RPM / split);
    snprintf(tpm, sizeof tpm, "%.0f", sys->fraction * B_TPM / split);
    snprintf(minute, sizeof minute, "%.0f", run->minute_ms);
    snprintf(stop, sizeof stop, "%.0f", run->measure_ms);
    snprintf(grace, sizeof grace, "%.0f", run->grace_ms);
    run->t0_wall = h_wall_ms() + 300; /* every client starts at the same instant */
    snprintf(start, sizeof start, "%.3f", run->t0_wall);
    pid_t clients[B_MAX_TENANTS];
    int exited[B_MAX_TENANTS] = {0};
    long rss_kb[B_MAX_TENANTS];
    for (int t = 0; t < sc->ntenants; t++) {
        char logname[64];
        snprintf(out_paths[t], sizeof out_paths[t], "%s/out-%s.jsonl", h_tmpdir(),
                 sc->tenants[t].name);
        snprintf(logname, sizeof logname, "client-%s", sc->tenants[t].name);
        const char *args[] = {"--url",       url,          "--api-key",  "compare-provider-key",
                              "--requests",  req_paths[t], "--out",      out_paths[t],
                              "--rpm",       rpm,          "--tpm",      tpm,
                              "--minute-ms", minute,       "--start-ms", start,
                              "--stop-ms",   stop,         "--grace-ms", grace,
                              NULL};
        clients[t] = h_spawn("bench/baseline", logname, NULL, args);
        rss_kb[t] = -1;
    }
    while (h_wall_ms() < run->t0_wall)
        usleep(1000);
    double next_sample = 0, deadline = run->measure_ms + run->grace_ms + 30000;
    int running = sc->ntenants;
    const char *broken = NULL;
    for (;;) {
        double now = h_wall_ms() - run->t0_wall;
        if (now >= next_sample) {
            b_run_sample(run, stats_url, now);
            next_sample += run->sample_ms;
        }
        for (int t = 0; t < sc->ntenants; t++) {
            if (exited[t])
                continue;
            int status = 0;
            struct rusage ru;
            pid_t got = wait4(clients[t], &status, WNOHANG, &ru);
            if (got == clients[t]) {
                exited[t] = 1;
                running--;
                rss_kb[t] = ru.ru_maxrss;
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                    broken = "a baseline client failed (see its log)";
            }
        }
        if (running == 0)
            break;
        if (now >= deadline) {
            for (int t = 0; t < sc->ntenants; t++) {
                if (!exited[t])
                    h_stop(clients[t], SIGKILL, 1000);
            }
            broken = "the baseline clients did not stop in time";
            break;
        }
        double wait = next_sample - (h_wall_ms() - run->t0_wall);
        usleep((useconds_t)(wait < 1 ? 1000 : wait > 20 ? 20000 : wait * 1000));
    }
    b_run_sample(run, stats_url, h_wall_ms() - run->t0_wall);
    json_t *rss = json_object();
    add_rss(rss, "sim", h_peak_rss_kb(sim));
    json_t *summaries = json_object();
    for (int t = 0; t < sc->ntenants; t++) {
        char name[64];
        snprintf(name, sizeof name, "client-%s", sc->tenants[t].name);
        add_rss(rss, name, rss_kb[t]);
        json_t *s = client_summary(name);
        json_object_set_new(summaries, sc->tenants[t].name, s != NULL ? s : json_null());
        if (read_client_output(run, out_paths[t]) < 0 && broken == NULL)
            broken = "a baseline client wrote no output";
    }
    json_object_set_new(run->extra, "peak_rss_kb", rss);
    json_object_set_new(run->extra, "clients", summaries);
    json_object_set_new(run->extra, "client_limits",
                        json_pack("{s:f, s:f, s:f, s:s}", "rpm", sys->fraction * B_RPM / split,
                                  "tpm", sys->fraction * B_TPM / split, "pause_ms",
                                  run->minute_ms * 15.0 / 60.0, "split",
                                  sys->full ? "full" : "share"));
    if (h_stop(sim, SIGTERM, 10000) != 0 && broken == NULL)
        broken = "sluice-sim did not stop cleanly";
    /* Jobs due before the stop that no client read were submitted and never started. */
    for (int i = 0; i < run->njobs; i++) {
        b_job_t *job = &run->jobs[i];
        if (job->submit_ms < 0 && job->due_ms < run->measure_ms)
            job->submit_ms = job->due_ms;
    }
    free(sim_cfg);
    return broken;
}
