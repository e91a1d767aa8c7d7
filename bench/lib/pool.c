/* pool.c - see pool.h. */
#include "pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "request.h"

/* The daily quota as a JSON member to append to a deployment's limits, or "". */
static void rpd_member(const b_pool_t *pool, char *out, size_t cap)
{
    out[0] = '\0';
    if (pool->rpd > 0)
        snprintf(out, cap, ", \"rpd\": %ld", pool->rpd);
}

static int anthropic_style(const b_pool_t *pool)
{
    return pool->itpm > 0 || pool->otpm > 0;
}

/* The simulator's token limits as JSON members: TPM counting prompt + max_tokens, or ITPM and
 * OTPM counting the generated output with Anthropic's headers; and the rolling minute. */
static void sim_token_members(const b_pool_t *pool, char *out, size_t cap)
{
    size_t n;
    if (anthropic_style(pool))
        n = (size_t)snprintf(out, cap,
                             "\"itpm\": %d, \"otpm\": %d, \"otpm_counting\": \"generated\","
                             " \"headers\": \"anthropic\"",
                             pool->itpm, pool->otpm);
    else
        n = (size_t)snprintf(out, cap, "\"tpm\": %d, \"tpm_counting\": \"sum\"", pool->tpm);
    if (pool->rolling_minute && n < cap)
        snprintf(out + n, cap - n, ", \"rolling_minute\": true");
}

char *b_pool_sim_config(const b_pool_t *pool)
{
    char faults[512] = "", rpd[64], tokens[256];
    if (pool->faults[0] != '\0')
        snprintf(faults, sizeof faults, ", \"faults\": %s", pool->faults);
    rpd_member(pool, rpd, sizeof rpd);
    sim_token_members(pool, tokens, sizeof tokens);
    char sim[1280];
    snprintf(sim, sizeof sim,
             "{\"minute_ms\": %.0f, \"deployments\": [{\"name\": \"pool\", \"model\": "
             "\"gpt-4o-mini\", \"rpm\": %d, %s,"
             " \"slices_per_minute\": %d, \"ttft_ms\": 20, \"ms_per_token\": %.3f,"
             " \"output_min\": %d, \"output_max\": %d, \"api_key\": \"%s-provider-key\"%s%s}]}",
             pool->minute_ms, pool->rpm, tokens, pool->slices_per_minute, pool->ms_per_token,
             pool->output_min, pool->output_max, pool->bench, rpd, faults);
    return strdup(h_write("sim.json", sim));
}

/* sluice's view of the same token limits: the deployment's limits members and how it counts. */
static void sluice_token_members(const b_pool_t *pool, char *limits, size_t lcap, char *counting,
                                 size_t ccap)
{
    if (anthropic_style(pool)) {
        snprintf(limits, lcap, "\"itpm\": %d, \"otpm\": %d", pool->itpm, pool->otpm);
        snprintf(counting, ccap, "\"input_counting\": \"all\", \"output_counting\": \"generated\"");
    } else {
        snprintf(limits, lcap, "\"tpm\": %d", pool->tpm);
        snprintf(counting, ccap, "\"tpm_counting\": \"sum\"");
    }
}

char *b_pool_sluice_config(const b_pool_t *pool)
{
    const char *dir = h_tmpdir();
    char provider_key[128];
    snprintf(provider_key, sizeof provider_key, "%s-provider-key\n", pool->bench);
    char *keyfile = strdup(h_write("provider.key", provider_key));

    /* Tenants and keys: the benchmark's, plus "warm" for the warm-up jobs. */
    char tenants[2048] = "", keys[4096] = "";
    size_t tl = 0, kl = 0;
    for (int i = 0; i <= pool->ntenants; i++) {
        const b_pool_tenant_t warm = {.name = "warm", .weight = 1};
        const b_pool_tenant_t *t = i < pool->ntenants ? &pool->tenants[i] : &warm;
        char key[64], hex[65], extra[64] = "";
        b_request_api_key(pool->bench, t->name, key, sizeof key);
        h_key_hash_hex(key, hex);
        if (t->guarantee > 0)
            snprintf(extra, sizeof extra, ", \"guarantee\": %.2f", t->guarantee);
        tl += (size_t)snprintf(tenants + tl, sizeof tenants - tl,
                               "%s{\"name\": \"%s\", \"weight\": %lld%s}", i ? ", " : "", t->name,
                               (long long)t->weight, extra);
        kl += (size_t)snprintf(keys + kl, sizeof keys - kl,
                               "%s{\"id\": \"k-%s\", \"tenant\": \"%s\", \"hash\": \"%s\"}",
                               i ? ", " : "", t->name, t->name, hex);
    }
    /* The daemons' metrics on the ports asked for, so that runs side by side do not collide. */
    char sched_listen[128] = "", daemons[256] = "";
    if (pool->metrics_port > 0) {
        snprintf(sched_listen, sizeof sched_listen,
                 ", \"metrics_listen\": \"127.0.0.1:%d\", \"admin_listen\": \"\"",
                 pool->metrics_port);
        snprintf(daemons, sizeof daemons,
                 " \"ingest\": {\"metrics_listen\": \"127.0.0.1:%d\"},"
                 " \"dispatcher\": {\"metrics_listen\": \"127.0.0.1:%d\"},",
                 h_free_port(), h_free_port());
    }
    char rpd[64], limits[128], counting[128];
    rpd_member(pool, rpd, sizeof rpd);
    sluice_token_members(pool, limits, sizeof limits, counting, sizeof counting);
    char cfg[8192];
    snprintf(cfg, sizeof cfg,
             "{\"minute_ms\": %.0f,"
             " \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s/sluice.db\", \"lease_ms\": 20000,"
             "               \"max_attempts\": 5%s},%s"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"classes\": {\"interactive\": {\"deadline_ms\": %d, \"max_queue\": 100000},"
             "               \"standard\": {\"max_queue\": 1000000},"
             "               \"batch\": {\"max_queue\": 1000000}},"
             " \"deployments\": [{\"name\": \"pool\","
             "   \"base_url\": \"http://127.0.0.1:%d/pool/v1\", \"model\": \"gpt-4o-mini\","
             "   \"api_key_file\": \"%s\", \"limits\": {\"rpm\": %d, %s%s},"
             "   %s, \"slices_per_minute\": %d,"
             "   \"max_output_tokens\": 4096}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"pool\"]}],"
             " \"tenants\": [%s],"
             " \"keys\": [%s]}",
             pool->minute_ms, dir, dir, sched_listen, daemons, dir, dir,
             pool->interactive_deadline_ms, pool->sim_port, keyfile, pool->rpm, limits, rpd,
             counting, pool->slices_per_minute, tenants, keys);
    free(keyfile);
    return strdup(h_write("sluice.json", cfg));
}
