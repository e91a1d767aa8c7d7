/* test_api.c - the admin API (scheduler/api.h, scheduler/admin.h): authentication, who sees
 * what, validation of changes and what they do to the core, driven through sl_api_handle with a
 * real core and store; and one real HTTP round trip through the server and the loop's poll.
 *
 * The config has tenants acme (under partner scope partner:big, with a requests_per_day limit
 * and a key) and globex; admin key "ops", partner key "big" (scope partner:big), partner key
 * "gx" (tenants: globex). Tests run from the repository root.
 */
#include <check.h>
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../scheduler/admin.h"
#include "../scheduler/api.h"
#include "../scheduler/history.h"
#include "config.h"
#include "sign.h"
#include "util.h"

#define T0 ((int64_t)1000000000)

static const char *const OPS = "ops-secret-key";
static const char *const BIG = "big-partner-key";
static const char *const GX = "globex-partner-key";

typedef struct {
    char dir[128], cfg_path[200], sql[1024];
    sl_config_t *cfg;
    sl_store_t *store;
    sl_sched_t *sched;
    sl_api_t api;
} env_t;

static int64_t fixed_now(void)
{
    return T0;
}

static void hex_of(const char *key, char out[65])
{
    uint8_t h[32];
    sl_keyhash(key, strlen(key), h);
    sl_hex_encode(h, sizeof h, out);
}

static void env_init(env_t *e)
{
    memset(e, 0, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/sluice-test-api-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(e->dir));
    snprintf(e->cfg_path, sizeof e->cfg_path, "%s/config.json", e->dir);
    sl_resolve_path("schema/ledger.sql", e->sql, sizeof e->sql);
    char ops[65], big[65], gx[65], k1[65];
    hex_of(OPS, ops);
    hex_of(BIG, big);
    hex_of(GX, gx);
    hex_of("acme-api-key", k1);
    char text[4096];
    snprintf(text, sizeof text,
             "{\"minute_ms\": 60000, \"schema_dir\": \"schema\","
             " \"scheduler\": {\"db\": \"%s/t.db\"},"
             " \"scopes\": [{\"name\": \"partner:big\"}],"
             " \"deployments\": [{\"name\": \"dep-a\", \"base_url\": \"http://127.0.0.1:9/v1\","
             "   \"model\": \"m\", \"limits\": {\"rpm\": 120, \"tpm\": 12000}}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"dep-a\"]}],"
             " \"tenants\": [{\"name\": \"acme\", \"parent\": \"partner:big\", \"guarantee\": 0.5,"
             "   \"buckets\": [{\"name\": \"rpd\", \"dimension\": \"requests_per_day\","
             "                 \"capacity\": 1000}]},"
             "   {\"name\": \"globex\", \"guarantee\": 0.3}],"
             " \"keys\": [{\"id\": \"k1\", \"tenant\": \"acme\", \"hash\": \"%s\"}],"
             " \"admin_keys\": [{\"id\": \"ops\", \"hash\": \"%s\"},"
             "   {\"id\": \"big\", \"hash\": \"%s\", \"role\": \"partner\","
             "    \"partner\": \"partner:big\"},"
             "   {\"id\": \"gx\", \"hash\": \"%s\", \"role\": \"partner\","
             "    \"tenants\": [\"globex\"]}]}",
             e->dir, k1, ops, big, gx);
    FILE *f = fopen(e->cfg_path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    char err[512] = "";
    ck_assert_msg(sl_config_load(e->cfg_path, &e->cfg, err, sizeof err) == SL_OK, "%s", err);
    ck_assert_int_eq(sl_store_open(e->cfg->db_path, e->sql, &e->store, err, sizeof err), SL_OK);
    ck_assert_int_eq(sl_sched_new(e->cfg, e->store, T0, &e->sched, err, sizeof err),
                     SL_OK);
    e->api =
        (sl_api_t){&e->sched, (const sl_config_t **)&e->cfg, e->store, fixed_now, NULL, NULL};
}

static void env_done(env_t *e)
{
    sl_sched_free(e->sched);
    sl_store_close(e->store);
    sl_config_free(e->cfg);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", e->dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Calls the API; returns the parsed answer (caller frees) and sets *status. */
static json_t *call(env_t *e, const char *method, const char *path, const char *key,
                    const char *body, int *status)
{
    char auth[128];
    if (key != NULL)
        snprintf(auth, sizeof auth, "Bearer %s", key);
    json_t *query = json_object();
    char pathbuf[256];
    snprintf(pathbuf, sizeof pathbuf, "%s", path);
    char *q = strchr(pathbuf, '?');
    if (q != NULL) {
        *q++ = '\0';
        for (char *kv = strtok(q, "&"); kv != NULL; kv = strtok(NULL, "&")) {
            char *eq = strchr(kv, '=');
            if (eq != NULL) {
                *eq = '\0';
                json_object_set_new(query, kv, json_string(eq + 1));
            }
        }
    }
    sl_admin_req_t req = {method, pathbuf, key != NULL ? auth : NULL, query,
                          body != NULL ? body : "", body != NULL ? strlen(body) : 0};
    sl_admin_resp_t resp = {0, NULL};
    sl_api_handle(&req, &resp, &e->api);
    json_decref(query);
    *status = resp.status;
    json_t *doc = resp.body != NULL ? json_loads(resp.body, 0, NULL) : NULL;
    ck_assert_msg(resp.body == NULL || doc != NULL, "answer is not JSON: %s", resp.body);
    free(resp.body);
    return doc;
}

static int status_of(env_t *e, const char *method, const char *path, const char *key,
                     const char *body)
{
    int status;
    json_decref(call(e, method, path, key, body, &status));
    return status;
}

static const char *error_code(json_t *doc)
{
    const char *c = json_string_value(json_object_get(json_object_get(doc, "error"), "code"));
    return c != NULL ? c : "<none>";
}

START_TEST(keys_are_checked_before_anything)
{
    env_t e;
    env_init(&e);
    int status;
    json_t *doc = call(&e, "GET", "/v1/status", NULL, NULL, &status);
    ck_assert_int_eq(status, 401);
    ck_assert_str_eq(error_code(doc), "unauthorized");
    json_decref(doc);
    ck_assert_int_eq(status_of(&e, "GET", "/v1/status", "wrong-key", NULL), 401);
    /* an API key is not an admin key */
    ck_assert_int_eq(status_of(&e, "GET", "/v1/status", "acme-api-key", NULL), 401);
    ck_assert_int_eq(status_of(&e, "GET", "/v1/status", OPS, NULL), 200);
    ck_assert_int_eq(status_of(&e, "GET", "/v2/status", OPS, NULL), 404);
    ck_assert_int_eq(status_of(&e, "DELETE", "/v1/status", OPS, NULL), 405);
    ck_assert_int_eq(status_of(&e, "GET", "/v1/nothing", OPS, NULL), 404);
    env_done(&e);
}
END_TEST

START_TEST(partner_sees_only_its_tenants)
{
    env_t e;
    env_init(&e);
    int status;
    /* partner:big covers acme (by scope); gx covers globex (by name) */
    json_t *doc = call(&e, "GET", "/v1/tenants", BIG, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "tenants")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(doc, "tenants"), 0), "tenant")),
                     "acme");
    json_decref(doc);
    ck_assert_int_eq(status_of(&e, "GET", "/v1/tenants/acme", BIG, NULL), 200);
    doc = call(&e, "GET", "/v1/tenants/globex", BIG, NULL, &status);
    ck_assert_int_eq(status, 403);
    ck_assert_str_eq(error_code(doc), "forbidden");
    json_decref(doc);
    /* a tenant that does not exist looks the same to a partner as another's */
    ck_assert_int_eq(status_of(&e, "GET", "/v1/tenants/nobody", BIG, NULL), 403);
    ck_assert_int_eq(status_of(&e, "GET", "/v1/tenants/nobody", OPS, NULL), 404);
    ck_assert_int_eq(status_of(&e, "GET", "/v1/tenants/acme", GX, NULL), 403);
    ck_assert_int_eq(status_of(&e, "GET", "/v1/buckets/tenant:acme:rpd", BIG, NULL), 200);
    ck_assert_int_eq(status_of(&e, "GET", "/v1/buckets/tenant:acme:rpd", GX, NULL), 403);
    ck_assert_int_eq(status_of(&e, "GET", "/v1/buckets/deployment:dep-a:tpm", BIG, NULL), 403);
    ck_assert_int_eq(status_of(&e, "GET", "/v1/buckets/deployment:dep-a:tpm", OPS, NULL), 200);
    /* the bucket list: every bucket for ops, only acme's for big */
    doc = call(&e, "GET", "/v1/buckets", BIG, NULL, &status);
    size_t i;
    json_t *b;
    json_array_foreach(json_object_get(doc, "buckets"), i, b) {
        const char *id = json_string_value(json_object_get(b, "id"));
        ck_assert_msg(strncmp(id, "tenant:acme:", 12) == 0 || strncmp(id, "key:k1:", 7) == 0,
                      "partner sees %s", id);
    }
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "total")), 1);
    json_decref(doc);
    doc = call(&e, "GET", "/v1/buckets?prefix=deployment:&limit=1", OPS, NULL, &status);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "total")), 2);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "buckets")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "next_offset")), 1);
    json_decref(doc);
    ck_assert_int_eq(status_of(&e, "GET", "/v1/buckets?limit=x", OPS, NULL), 400);
    /* status: no pools for a partner */
    doc = call(&e, "GET", "/v1/status", BIG, NULL, &status);
    ck_assert_ptr_null(json_object_get(doc, "pools"));
    ck_assert_str_eq(json_string_value(json_object_get(doc, "role")), "partner");
    json_decref(doc);
    doc = call(&e, "GET", "/v1/status", OPS, NULL, &status);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "pools")), 1);
    json_decref(doc);
    /* partners change nothing, not even their own */
    ck_assert_int_eq(status_of(&e, "PUT", "/v1/tenants/acme", BIG, "{\"weight\": 2}"), 403);
    ck_assert_int_eq(status_of(&e, "POST", "/v1/tenants/acme/pause", BIG, NULL), 403);
    ck_assert_int_eq(status_of(&e, "PUT", "/v1/buckets/tenant:acme:rpd", BIG, "{\"limit\": 5}"),
                     403);
    ck_assert_int_eq(status_of(&e, "POST", "/v1/keys/k1/pause", BIG, NULL), 403);
    env_done(&e);
}
END_TEST

START_TEST(changes_are_validated_and_applied)
{
    env_t e;
    env_init(&e);
    int status;
    /* bad bodies */
    ck_assert_int_eq(status_of(&e, "PUT", "/v1/buckets/deployment:dep-a:tpm", OPS, "nope"), 400);
    ck_assert_int_eq(status_of(&e, "PUT", "/v1/buckets/deployment:dep-a:tpm", OPS, "{}"), 400);
    ck_assert_int_eq(
        status_of(&e, "PUT", "/v1/buckets/deployment:dep-a:tpm", OPS, "{\"limit\": 0}"), 400);
    ck_assert_int_eq(
        status_of(&e, "PUT", "/v1/buckets/deployment:dep-a:tpm", OPS, "{\"limit\": \"9\"}"), 400);
    ck_assert_int_eq(status_of(&e, "PUT", "/v1/buckets/deployment:dep-a:tpm", OPS,
                               "{\"limit\": 9, \"x\": 1}"),
                     400);
    ck_assert_int_eq(status_of(&e, "PUT", "/v1/buckets/nope:x", OPS, "{\"limit\": 9}"), 404);
    /* a limit, then back to the config's */
    json_t *doc =
        call(&e, "PUT", "/v1/buckets/deployment:dep-a:tpm", OPS, "{\"limit\": 6000}", &status);
    ck_assert_int_eq(status, 200);
    ck_assert(json_is_true(json_object_get(doc, "override")));
    ck_assert_double_eq(json_number_value(json_object_get(doc, "limit")), 6000);
    ck_assert_double_eq(json_number_value(json_object_get(doc, "configured_limit")), 12000);
    json_decref(doc);
    doc = call(&e, "PUT", "/v1/buckets/deployment:dep-a:tpm", OPS, "{\"limit\": null}", &status);
    ck_assert_int_eq(status, 200);
    ck_assert(json_is_false(json_object_get(doc, "override")));
    ck_assert_double_eq(json_number_value(json_object_get(doc, "limit")), 12000);
    json_decref(doc);
    /* tenants: weight, guarantee within what can be promised, daily limit */
    ck_assert_int_eq(status_of(&e, "PUT", "/v1/tenants/acme", OPS, "{\"weight\": 1.5}"), 400);
    ck_assert_int_eq(status_of(&e, "PUT", "/v1/tenants/acme", OPS, "{\"guarantee\": 2}"), 400);
    doc = call(&e, "PUT", "/v1/tenants/acme", OPS, "{\"guarantee\": 0.7}", &status);
    ck_assert_int_eq(status, 409); /* 0.7 + globex's 0.3 > 0.95 */
    ck_assert_str_eq(error_code(doc), "conflict");
    json_decref(doc);
    ck_assert_int_eq(status_of(&e, "PUT", "/v1/tenants/globex", OPS, "{\"daily_tokens\": 5}"),
                     409);
    doc = call(&e, "PUT", "/v1/tenants/acme", OPS,
               "{\"weight\": 4, \"guarantee\": 0.6, \"daily_requests\": 10}", &status);
    ck_assert_int_eq(status, 200);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "weight")), 4);
    ck_assert_double_eq(json_number_value(json_object_get(doc, "guarantee")), 0.6);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "configured_weight")), 1);
    int found = 0;
    size_t i;
    json_t *b;
    json_array_foreach(json_object_get(doc, "buckets"), i, b) {
        if (strcmp(json_string_value(json_object_get(b, "id")), "tenant:acme:rpd") == 0) {
            found = 1;
            ck_assert_double_eq(json_number_value(json_object_get(b, "limit")), 10);
        }
    }
    ck_assert(found);
    json_decref(doc);
    /* what the core holds now */
    sl_sched_tenant_info_t ti[2];
    sl_sched_tenants_info(e.sched, ti);
    ck_assert_int_eq(ti[0].weight, 4);
    /* pause and resume, tenant and key */
    doc = call(&e, "POST", "/v1/tenants/acme/pause", OPS, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert(json_is_true(json_object_get(doc, "paused")));
    json_decref(doc);
    ck_assert_int_eq(status_of(&e, "GET", "/v1/tenants/acme/pause", OPS, NULL), 405);
    doc = call(&e, "POST", "/v1/keys/k1/pause", OPS, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "tenant")), "acme");
    json_decref(doc);
    ck_assert_int_eq(status_of(&e, "POST", "/v1/keys/nope/pause", OPS, NULL), 404);
    ck_assert_int_eq(status_of(&e, "POST", "/v1/keys/k1", OPS, NULL), 404);
    ck_assert_int_eq(sl_sched_key_paused(e.sched, 0), 1);
    /* every change is stored: a new core over the same store has them */
    sl_sched_free(e.sched);
    char err[256];
    ck_assert_int_eq(sl_sched_new(e.cfg, e.store, T0, &e.sched, err, sizeof err), SL_OK);
    sl_sched_tenants_info(e.sched, ti);
    ck_assert_int_eq(ti[0].weight, 4);
    ck_assert_double_eq(ti[0].guarantee, 0.6);
    ck_assert_int_eq(ti[0].paused, 1);
    ck_assert_int_eq(sl_sched_key_paused(e.sched, 0), 1);
    doc = call(&e, "GET", "/v1/buckets/tenant:acme:rpd", OPS, NULL, &status);
    ck_assert_double_eq(json_number_value(json_object_get(doc, "limit")), 10);
    json_decref(doc);
    doc = call(&e, "PUT", "/v1/tenants/acme", OPS, "{\"weight\": null}", &status);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "weight")), 1);
    json_decref(doc);
    env_done(&e);
}
END_TEST

START_TEST(jobs_are_found_and_scoped)
{
    env_t e;
    env_init(&e);
    int status;
    ck_assert_int_eq(status_of(&e, "GET", "/v1/jobs/nope", OPS, NULL), 404);
    const char *job = "{\"v\":1,\"job_id\":\"job-1\",\"idempotency_key\":\"i-1\","
                      "\"tenant\":\"acme\",\"app\":\"a\",\"env\":\"prod\",\"key_id\":\"k1\","
                      "\"route\":\"chat\",\"class\":\"standard\",\"submitted_ms\":1000000000,"
                      "\"deadline_ms\":1000600000,\"estimate\":{\"input\":10,\"output\":10,"
                      "\"total\":20},\"request\":{\"model\":\"chat\",\"messages\":[{\"role\":"
                      "\"user\",\"content\":\"hi\"}],\"max_tokens\":10}}";
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    ck_assert_int_eq(sl_sched_on_job(e.sched, job, strlen(job), T0), SL_OK);
    ck_assert_int_eq(sl_store_commit(e.store), SL_OK);
    json_t *doc = call(&e, "GET", "/v1/jobs/job-1", BIG, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "state")), "queued");
    ck_assert_str_eq(json_string_value(json_object_get(doc, "tenant")), "acme");
    json_decref(doc);
    ck_assert_int_eq(status_of(&e, "GET", "/v1/jobs/job-1", GX, NULL), 404);
    env_done(&e);
}
END_TEST

/* The answer's body with the job id (the one thing the caller chose) taken out of the text. */
static char *body_without(json_t *doc, const char *job_id)
{
    char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    ck_assert_ptr_nonnull(text);
    char *at = strstr(text, job_id);
    if (at != NULL)
        memmove(at, at + strlen(job_id), strlen(at + strlen(job_id)) + 1);
    return text;
}

/* The partner contract: no view of another tenant's state, not even whether a job id is one of
 * its jobs. A partner asking for another tenant's job (queued, then finished) gets exactly what
 * it gets for a job id that does not exist. */
START_TEST(partner_cannot_tell_another_tenants_job_from_none)
{
    env_t e;
    env_init(&e);
    const char *job = "{\"v\":1,\"job_id\":\"job-acme\",\"idempotency_key\":\"i-1\","
                      "\"tenant\":\"acme\",\"app\":\"a\",\"env\":\"prod\",\"key_id\":\"k1\","
                      "\"route\":\"chat\",\"class\":\"standard\",\"submitted_ms\":1000000000,"
                      "\"deadline_ms\":1000600000,\"estimate\":{\"input\":10,\"output\":10,"
                      "\"total\":20},\"request\":{\"model\":\"chat\",\"messages\":[{\"role\":"
                      "\"user\",\"content\":\"hi\"}],\"max_tokens\":10}}";
    ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
    ck_assert_int_eq(sl_sched_on_job(e.sched, job, strlen(job), T0), SL_OK);
    ck_assert_int_eq(sl_store_commit(e.store), SL_OK);
    for (int round = 0; round < 2; round++) {
        int st_other, st_none;
        json_t *other = call(&e, "GET", "/v1/jobs/job-acme", GX, NULL, &st_other);
        json_t *none = call(&e, "GET", "/v1/jobs/job-none", GX, NULL, &st_none);
        ck_assert_int_eq(st_other, st_none);
        ck_assert_int_eq(st_none, 404);
        char *a = body_without(other, "job-acme");
        char *b = body_without(none, "job-none");
        ck_assert_str_eq(a, b);
        free(a);
        free(b);
        json_decref(other);
        json_decref(none);
        if (round == 0) {
            /* Finished: the job is then only in the store, read by another path. */
            const char *cancel = "{\"v\":1,\"type\":\"cancel\",\"job_id\":\"job-acme\","
                                 "\"idempotency_key\":\"i-1\",\"tenant\":\"acme\","
                                 "\"requested_ms\":1000000010}";
            ck_assert_int_eq(sl_store_begin(e.store), SL_OK);
            sl_err_t rc = sl_sched_on_job(e.sched, cancel, strlen(cancel), T0 + 10);
            ck_assert_int_eq(sl_store_commit(e.store), SL_OK);
            ck_assert_int_eq(rc, SL_OK);
            ck_assert_int_eq(status_of(&e, "GET", "/v1/jobs/job-acme", OPS, NULL), 200);
        }
    }
    env_done(&e);
}
END_TEST

START_TEST(tenants_are_searched_within_what_the_key_sees)
{
    env_t e;
    env_init(&e);
    int status;
    /* any case, any part of the name */
    json_t *doc = call(&e, "GET", "/v1/tenants?q=CM", OPS, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "total")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(doc, "tenants"), 0), "tenant")),
                     "acme");
    json_decref(doc);
    doc = call(&e, "GET", "/v1/tenants?q=", OPS, NULL, &status);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "total")), 2);
    json_decref(doc);
    doc = call(&e, "GET", "/v1/tenants?q=zz", OPS, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "total")), 0);
    json_decref(doc);
    /* a partner's search never finds another's tenant */
    doc = call(&e, "GET", "/v1/tenants?q=glob", BIG, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "total")), 0);
    json_decref(doc);
    doc = call(&e, "GET", "/v1/tenants?q=glob", GX, NULL, &status);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "total")), 1);
    json_decref(doc);
    env_done(&e);
}
END_TEST

START_TEST(console_figures_are_for_operators_only)
{
    env_t e;
    env_init(&e);
    /* a scheduler that keeps no history says so */
    ck_assert_int_eq(status_of(&e, "GET", "/v1/history", OPS, NULL), 404);
    sl_history_t *h = sl_history_new();
    ck_assert_ptr_nonnull(h);
    e.api.history = h;
    sl_history_sample(h, e.sched, e.cfg, T0);
    sl_history_sample(h, e.sched, e.cfg, T0 + 1000);
    int status;
    json_t *doc = call(&e, "GET", "/v1/history", OPS, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "t")), 2);
    /* dep-a's two provider-side buckets, rpm and tpm; no tenant's */
    json_t *buckets = json_object_get(doc, "buckets");
    ck_assert_int_eq(json_array_size(buckets), 2);
    size_t i;
    json_t *b;
    json_array_foreach(buckets, i, b) {
        const char *id = json_string_value(json_object_get(b, "id"));
        ck_assert_msg(strncmp(id, "deployment:dep-a:", 17) == 0, "history holds %s", id);
        ck_assert_int_eq(json_array_size(json_object_get(b, "charged")), 2);
    }
    json_decref(doc);
    doc = call(&e, "GET", "/v1/queues", OPS, NULL, &status);
    ck_assert_int_eq(status, 200);
    json_t *route = json_array_get(json_object_get(doc, "routes"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(route, "route")), "chat");
    ck_assert_int_eq(json_array_size(json_object_get(route, "classes")), SL_CLASS_COUNT);
    ck_assert_ptr_nonnull(json_object_get(json_object_get(doc, "totals"), "received"));
    json_decref(doc);
    /* pools and other tenants' shares are not a partner's to read */
    doc = call(&e, "GET", "/v1/history", BIG, NULL, &status);
    ck_assert_int_eq(status, 403);
    ck_assert_str_eq(error_code(doc), "forbidden");
    json_decref(doc);
    ck_assert_int_eq(status_of(&e, "GET", "/v1/queues", GX, NULL), 403);
    ck_assert_int_eq(status_of(&e, "GET", "/v1/queues", NULL, NULL), 401);
    ck_assert_int_eq(status_of(&e, "PUT", "/v1/history", OPS, "{}"), 405);
    sl_history_free(h);
    env_done(&e);
}
END_TEST

/* ---- over HTTP ---- */

typedef struct {
    char url[128];
    const char *auth, *body;
    long status;
    char answer[4096];
    size_t len;
} http_t;

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    http_t *h = arg;
    size_t take = size * n;
    if (h->len + take >= sizeof h->answer)
        take = sizeof h->answer - 1 - h->len;
    memcpy(h->answer + h->len, p, take);
    h->len += take;
    h->answer[h->len] = '\0';
    return size * n;
}

static void *http_thread(void *arg)
{
    http_t *h = arg;
    CURL *c = curl_easy_init();
    struct curl_slist *hdrs = NULL;
    if (h->auth != NULL)
        hdrs = curl_slist_append(hdrs, h->auth);
    curl_easy_setopt(c, CURLOPT_URL, h->url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    if (h->body != NULL) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, h->body);
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 20000L);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &h->status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    return NULL;
}

/* Runs one request from another thread while this one polls, as the scheduler's loop does. */
static void round_trip(env_t *e, sl_admin_t *a, http_t *h)
{
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, http_thread, h), 0);
    double until = sl_mono_ms() + 20000;
    int answered = 0;
    while (sl_mono_ms() < until && h->status == 0) {
        answered += sl_admin_poll(a, sl_api_handle, &e->api);
        usleep(2000);
    }
    pthread_join(th, NULL);
    (void)answered;
}

START_TEST(http_server_hands_requests_to_the_loop)
{
    env_t e;
    env_init(&e);
    sl_admin_t *a = NULL;
    int port = 0;
    char err[256];
    ck_assert_int_eq(sl_admin_start("127.0.0.1:0", &a, &port, err, sizeof err), SL_OK);
    ck_assert_int_gt(port, 0);
    char auth[128];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", OPS);
    http_t h = {.auth = auth};
    snprintf(h.url, sizeof h.url, "http://127.0.0.1:%d/v1/tenants/acme", port);
    round_trip(&e, a, &h);
    ck_assert_int_eq(h.status, 200);
    json_t *doc = json_loads(h.answer, 0, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "tenant")), "acme");
    json_decref(doc);
    /* a path with an escaped slash and a body */
    http_t p = {.auth = auth, .body = "{\"limit\": 500}"};
    snprintf(p.url, sizeof p.url, "http://127.0.0.1:%d/v1/buckets/tenant%%3Aacme%%3Arpd", port);
    round_trip(&e, a, &p);
    ck_assert_int_eq(p.status, 200);
    doc = json_loads(p.answer, 0, NULL);
    ck_assert_double_eq(json_number_value(json_object_get(doc, "limit")), 500);
    json_decref(doc);
    /* a body over 64 KiB is refused without reaching the loop */
    char *big = malloc(70000);
    memset(big, ' ', 69999);
    big[69999] = '\0';
    http_t l = {.auth = auth, .body = big};
    snprintf(l.url, sizeof l.url, "http://127.0.0.1:%d/v1/buckets/tenant:acme:rpd", port);
    round_trip(&e, a, &l);
    ck_assert_int_eq(l.status, 413);
    free(big);
    /* no key */
    http_t n = {.auth = NULL};
    snprintf(n.url, sizeof n.url, "http://127.0.0.1:%d/v1/status", port);
    round_trip(&e, a, &n);
    ck_assert_int_eq(n.status, 401);
    /* the console's page needs no key and never reaches the loop's API */
    http_t page = {.auth = NULL};
    snprintf(page.url, sizeof page.url, "http://127.0.0.1:%d/console/", port);
    round_trip(&e, a, &page);
    ck_assert_int_eq(page.status, 200);
    ck_assert_ptr_nonnull(strstr(page.answer, "<script type=\"module\" src=\"app.js\">"));
    http_t js = {.auth = NULL};
    snprintf(js.url, sizeof js.url, "http://127.0.0.1:%d/console/app.js", port);
    round_trip(&e, a, &js);
    ck_assert_int_eq(js.status, 200);
    ck_assert_uint_gt(js.len, 1000);
    http_t moved = {.auth = NULL};
    snprintf(moved.url, sizeof moved.url, "http://127.0.0.1:%d/", port);
    round_trip(&e, a, &moved);
    ck_assert_int_eq(moved.status, 302);
    http_t none = {.auth = NULL};
    snprintf(none.url, sizeof none.url, "http://127.0.0.1:%d/console/../v1/status", port);
    round_trip(&e, a, &none);
    ck_assert(none.status == 404 || none.status == 401);
    ck_assert_ptr_null(strstr(none.answer, "pools"));
    sl_admin_stop(a);
    ck_assert_int_eq(sl_admin_start("nowhere", &a, &port, err, sizeof err), SL_EINVAL);
    env_done(&e);
}
END_TEST

/* One scheduler of several: an admin's status names the partitions it schedules and its share
 * of the shared limits; a partner's does not (the fleet is the operator's business), and a
 * scheduler that is not sharded says nothing of it. */
START_TEST(status_names_a_shard_s_partitions_to_admins)
{
    env_t e;
    env_init(&e);
    int status;
    json_t *doc = call(&e, "GET", "/v1/status", OPS, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_ptr_null(json_object_get(doc, "shard"));
    json_decref(doc);
    e.cfg->sched_sharded = 1;
    ck_assert_int_eq(sl_sched_shard(e.sched, 4, T0), SL_OK);
    uint8_t owned[4] = {1, 0, 1, 0};
    ck_assert_int_eq(sl_sched_set_owned(e.sched, owned, T0), SL_OK);
    doc = call(&e, "GET", "/v1/status", OPS, NULL, &status);
    ck_assert_int_eq(status, 200);
    json_t *shard = json_object_get(doc, "shard");
    ck_assert_int_eq(json_integer_value(json_object_get(shard, "partitions")), 4);
    json_t *list = json_object_get(shard, "owned");
    ck_assert_int_eq(json_array_size(list), 2);
    ck_assert_int_eq(json_integer_value(json_array_get(list, 0)), 0);
    ck_assert_int_eq(json_integer_value(json_array_get(list, 1)), 2);
    ck_assert_double_eq_tol(json_real_value(json_object_get(shard, "share")), 0.5, 1e-9);
    json_decref(doc);
    doc = call(&e, "GET", "/v1/status", BIG, NULL, &status);
    ck_assert_int_eq(status, 200);
    ck_assert_ptr_null(json_object_get(doc, "shard"));
    json_decref(doc);
    env_done(&e);
}
END_TEST

static Suite *api_suite(void)
{
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, keys_are_checked_before_anything);
    tcase_add_test(tc, status_names_a_shard_s_partitions_to_admins);
    tcase_add_test(tc, partner_sees_only_its_tenants);
    tcase_add_test(tc, changes_are_validated_and_applied);
    tcase_add_test(tc, jobs_are_found_and_scoped);
    tcase_add_test(tc, partner_cannot_tell_another_tenants_job_from_none);
    tcase_add_test(tc, tenants_are_searched_within_what_the_key_sees);
    tcase_add_test(tc, console_figures_are_for_operators_only);
    tcase_add_test(tc, http_server_hands_requests_to_the_loop);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (sl_crypto_init() != SL_OK)
        return 1;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    SRunner *sr = srunner_create(api_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    curl_global_cleanup();
    return failed == 0 ? 0 : 1;
}
