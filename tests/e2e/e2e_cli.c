/* e2e_cli - the `sluice` CLI against the real stack on the example config: `submit --follow`
 * writes one result per line of examples/jobs.jsonl and exits 1 because three are rejected on
 * purpose; submitting the same file again is answered from the job store (same idempotency
 * keys) without calling the provider again; `results` finds a job by its key. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "sign.h"
#include "util.h"

/* Writes the example config with this run's paths and simulator port. */
static const char *write_configs(int sim_port, char **sim_cfg)
{
    const char *dir = h_tmpdir();
    json_error_t jerr;
    json_t *cfg = json_load_file("examples/sluice.json", 0, &jerr);
    json_t *sim = json_load_file("examples/sim.json", 0, &jerr);
    if (cfg == NULL || sim == NULL) {
        fprintf(stderr, "cannot read the example configs\n");
        exit(2);
    }
    char path[512];
    snprintf(path, sizeof path, "%s/bootstrap", dir);
    json_object_set_new(json_object_get(cfg, "kafka"), "bootstrap_file", json_string(path));
    snprintf(path, sizeof path, "%s/sluice.db", dir);
    json_object_set_new(json_object_get(cfg, "scheduler"), "db", json_string(path));
    snprintf(path, sizeof path, "%s/dispatch.key", dir);
    json_object_set_new(json_object_get(cfg, "signing"), "secret_key_file", json_string(path));
    snprintf(path, sizeof path, "%s/dispatch.pub", dir);
    json_object_set_new(json_object_get(cfg, "signing"), "public_key_file", json_string(path));
    size_t i;
    json_t *dep;
    json_array_foreach(json_object_get(cfg, "deployments"), i, dep)
    {
        char url[256];
        snprintf(url, sizeof url, "http://127.0.0.1:%d/%s/v1", sim_port,
                 json_string_value(json_object_get(dep, "name")));
        json_object_set_new(dep, "base_url", json_string(url));
    }
    char *text = json_dumps(cfg, JSON_INDENT(1));
    char *sim_text = json_dumps(sim, JSON_INDENT(1));
    const char *out = strdup(h_write("sluice.json", text));
    *sim_cfg = strdup(h_write("sim.json", sim_text));
    free(text);
    free(sim_text);
    json_decref(cfg);
    json_decref(sim);
    return out;
}

/* Runs `sluice submit --follow` on a file of one small request as api_key; its exit status. */
static int submit_one(const char *cfg, const char *idem, const char *api_key)
{
    char line[512], name[64];
    snprintf(line, sizeof line,
             "{\"idempotency_key\": \"%s\", \"api_key\": \"%s\", \"route\": \"chat-small\","
             " \"request\": {\"messages\": [{\"role\": \"user\", \"content\": \"hello\"}],"
             " \"max_tokens\": 16}}\n",
             idem, api_key);
    snprintf(name, sizeof name, "%s.jsonl", idem);
    char *file = strdup(h_write(name, line));
    const char *args[] = {"submit", "--file", file, "--follow", "--timeout", "60", NULL};
    int rc = h_run("sluice", idem, cfg, args, 90000);
    free(file);
    return rc;
}

/* Counts result lines by status; returns the number of lines. */
static int read_results(const char *path, int *succeeded, int *rejected)
{
    *succeeded = *rejected = 0;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    char line[65536];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        json_t *r = json_loads(line, 0, NULL);
        const char *status = json_string_value(json_object_get(r, "status"));
        if (status != NULL) {
            n++;
            *succeeded += strcmp(status, "succeeded") == 0;
            *rejected += strcmp(status, "rejected") == 0;
        }
        json_decref(r);
    }
    fclose(f);
    return n;
}

int main(void)
{
    sl_crypto_init();
    printf("e2e cli: sluice submit/results on examples/jobs.jsonl\n");
    int sim_port = h_free_port();
    char *sim_cfg = NULL;
    const char *cfg = write_configs(sim_port, &sim_cfg);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    char out1[512], out2[512];
    snprintf(out1, sizeof out1, "%s/first.jsonl", h_tmpdir());
    snprintf(out2, sizeof out2, "%s/second.jsonl", h_tmpdir());

    const char *args1[] = {"submit", "--file", "examples/jobs.jsonl", "--follow", "--out", out1,
                           "--timeout", "120", NULL};
    int rc1 = h_run("sluice", "cli-first", cfg, args1, 150000);
    int ok = 0, rej = 0;
    int n = read_results(out1, &ok, &rej);
    h_check(rc1 == 1, "submit --follow exits 1 when some jobs are rejected (%d)", rc1);
    h_check(n == 7 && ok == 4 && rej == 3,
            "one result per line: %d results, %d succeeded, %d rejected", n, ok, rej);
    json_t *s1 = h_http_json(st.stats_url);
    int64_t admitted1 = h_sim_total(s1, "admitted");
    h_check(admitted1 == 4, "the provider saw the 4 good jobs (%lld)", (long long)admitted1);

    const char *args2[] = {"submit", "--file", "examples/jobs.jsonl", "--follow", "--out", out2,
                           "--timeout", "120", NULL};
    int rc2 = h_run("sluice", "cli-second", cfg, args2, 150000);
    n = read_results(out2, &ok, &rej);
    json_t *s2 = h_http_json(st.stats_url);
    int64_t admitted2 = h_sim_total(s2, "admitted");
    h_check(rc2 == 1 && n == 7 && ok == 4 && rej == 3,
            "re-running the file gets every result again (%d results, exit %d)", n, rc2);
    h_check(admitted2 == admitted1,
            "the re-run did not call the provider again (admitted %lld -> %lld)",
            (long long)admitted1, (long long)admitted2);

    const char *args3[] = {"results", "--timeout", "20", "demo-2", NULL};
    int rc3 = h_run("sluice", "cli-results", cfg, args3, 30000);
    h_check(rc3 == 0, "sluice results finds a job by its idempotency key (%d)", rc3);
    const char *args4[] = {"results", "--timeout", "5", "no-such-job", NULL};
    int rc4 = h_run("sluice", "cli-results-missing", cfg, args4, 30000);
    h_check(rc4 == 1, "sluice results exits 1 for a job it cannot find (%d)", rc4);

    /* A key added to the config is taken at SIGHUP by ingest (and the scheduler), without a
     * restart: refused before, served after. */
    int rc5 = submit_one(cfg, "reload-1", "sk-acme-added-0001");
    h_check(rc5 == 1, "a request with a key not in the config is rejected (exit %d)", rc5);
    json_error_t jerr;
    json_t *doc = json_load_file(cfg, 0, &jerr);
    char hex[65];
    h_key_hash_hex("sk-acme-added-0001", hex);
    json_array_append_new(json_object_get(doc, "keys"),
                          json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", "acme-added", "tenant",
                                    "acme", "app", "web", "env", "prod", "hash", hex));
    char *text = json_dumps(doc, JSON_INDENT(1));
    h_write("sluice.json", text);
    free(text);
    json_decref(doc);
    kill(st.ingest, SIGHUP);
    kill(st.sched, SIGHUP);
    usleep(1500 * 1000);
    int rc6 = submit_one(cfg, "reload-2", "sk-acme-added-0001");
    h_check(rc6 == 0, "after SIGHUP the added key is served without a restart (exit %d)", rc6);

    json_decref(s1);
    json_decref(s2);
    int unclean = h_stack_down(&st);
    h_check(unclean == 0, "every process stopped cleanly on SIGTERM (%d did not)", unclean);
    free(sim_cfg);
    free((char *)cfg);
    int rc = h_summary("cli");
    h_cleanup(rc != 0);
    return rc;
}
