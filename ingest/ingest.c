/* ingest.c - validate, authenticate, resolve identity, estimate (see ingest.h). */
#include "ingest.h"

#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "capacity.h"
#include "estimate.h"
#include "jsonschema.h"
#include "msg_job.h"
#include "msg_result.h"
#include "sign.h"
#include "util.h"

struct sl_ingest {
    const sl_config_t *cfg;
    sl_schema_t *schema;                     /* request.json */
    sl_schema_t *cancel_schema;              /* cancel-request.json */
    uint8_t job_id_key[SL_JOB_ID_KEY_BYTES]; /* signing.job_id_key_file */
};

sl_err_t sl_ingest_new(const sl_config_t *cfg, sl_ingest_t **out, char *err, size_t errlen)
{
    *out = NULL;
    char rel[1024], path[1024];
    sl_ingest_t *ing = calloc(1, sizeof *ing);
    if (ing == NULL)
        return SL_ENOMEM;
    snprintf(rel, sizeof rel, "%s/request.json", cfg->schema_dir);
    sl_resolve_path(rel, path, sizeof path);
    sl_err_t rc = sl_schema_load_file(path, &ing->schema, err, errlen);
    if (rc == SL_OK) {
        snprintf(rel, sizeof rel, "%s/cancel-request.json", cfg->schema_dir);
        sl_resolve_path(rel, path, sizeof path);
        rc = sl_schema_load_file(path, &ing->cancel_schema, err, errlen);
    }
    if (rc == SL_OK)
        rc = sl_auth_job_id_key(cfg, 0 /*create*/, ing->job_id_key, err, errlen);
    if (rc != SL_OK) {
        sl_ingest_free(ing);
        return rc;
    }
    ing->cfg = cfg;
    *out = ing;
    return SL_OK;
}

void sl_ingest_free(sl_ingest_t *ing)
{
    if (ing == NULL)
        return;
    sl_schema_free(ing->schema);
    sl_schema_free(ing->cancel_schema);
    sodium_memzero(ing->job_id_key, sizeof ing->job_id_key);
    free(ing);
}

void sl_ingest_out_clear(sl_ingest_out_t *out)
{
    free(out->key);
    free(out->value);
    memset(out, 0, sizeof *out);
}

void sl_ingest_job_id(const sl_ingest_t *ing, const char *tenant, const char *idempotency_key,
                      char *out)
{
    sl_job_id(ing->job_id_key, tenant, idempotency_key, out);
}

/* Sets out to doc (serialised) for topic, keyed by key; on SL_ENOMEM out is left clear. */
static sl_err_t fill_out(sl_ingest_out_t *out, sl_ingest_kind_t kind, const char *topic,
                         const char *key, const json_t *doc)
{
    out->kind = kind;
    out->topic = topic;
    out->key = strdup(key);
    out->value = json_dumps(doc, JSON_COMPACT);
    if (out->key == NULL || out->value == NULL) {
        sl_ingest_out_clear(out);
        return SL_ENOMEM;
    }
    return SL_OK;
}

/* Builds the rejection result. idem and job_id may be NULL. */
static sl_err_t reject(sl_ingest_t *ing, sl_ingest_out_t *out, const sl_ingest_source_t *src,
                       int64_t now_ms, const char *job_id, const char *idem, const char *tenant,
                       sl_errtype_t type, sl_reason_t reason, const char *message)
{
    char fresh_id[33];
    if (job_id == NULL) {
        sl_random_id(fresh_id, 16);
        job_id = fresh_id;
    }
    sl_msg_error_t e;
    sl_msg_result_t r;
    sl_msg_result_rejected(&r, &e, job_id, idem, tenant, type, reason, message, now_ms);
    if (src != NULL && src->topic != NULL) {
        r.has_source = 1;
        r.source_topic = src->topic;
        r.source_partition = (int)src->partition;
        r.source_offset = src->offset;
    }
    /* A rejection of a known tenant's request goes where its results go, sealed like them;
     * one that names no tenant (malformed, unknown key) has only the shared topic. */
    int t = tenant != NULL ? sl_config_tenant(ing->cfg, tenant) : -1;
    r.seal_pk = sl_config_seal_key(ing->cfg, t);
    json_t *res = sl_msg_result_json(&r);
    if (res == NULL)
        return SL_ENOMEM;
    sl_err_t rc =
        fill_out(out, SL_INGEST_REJECT, sl_config_results_topic(ing->cfg, t), job_id, res);
    out->reason = rc == SL_OK ? sl_reason_name(reason) : NULL;
    json_decref(res);
    return rc;
}

/* Returns 1 when at least one deployment of the route could ever take the request by the
 * same rule the scheduler reserves with (common/capacity.h, at its cold-start estimates), and
 * the tenant's own token budget is not smaller than it. */
static int fits_any_limit(const sl_config_t *cfg, int route, int tenant, int64_t input,
                          int64_t max_tokens)
{
    const sl_route_cfg_t *r = &cfg->routes[route];
    const sl_tenant_cfg_t *t = &cfg->tenants[tenant];
    if (t->tokens_per_min > 0 && input + max_tokens > t->tokens_per_min)
        return 0;
    sl_demand_t dm = sl_demand_cold(input, max_tokens);
    for (int i = 0; i < r->ndeployments; i++) {
        if (sl_capacity_deployment_fits(cfg, r->deployments[i], &dm))
            return 1;
    }
    return 0;
}

/* A cancel request: resolves the job within the caller's tenant (its id derives from the tenant
 * and the idempotency key, so no one can name another tenant's job) and sends the scheduler a
 * cancel message on the batch jobs topic, keyed by tenant like the job itself. */
static sl_err_t cancel(sl_ingest_t *ing, json_t *req, int64_t now_ms, const sl_ingest_source_t *src,
                       sl_ingest_out_t *out)
{
    const sl_config_t *cfg = ing->cfg;
    char why[512];
    const json_t *idem_j = json_object_get(req, "cancel");
    const char *idem = json_is_string(idem_j) && json_string_length(idem_j) <= 800
                           ? json_string_value(idem_j)
                           : NULL;
    if (sl_schema_validate(ing->cancel_schema, req, why, sizeof why) != SL_OK)
        return reject(ing, out, src, now_ms, NULL, idem, NULL, SL_ERRTYPE_INVALID_REQUEST,
                      SL_REASON_SCHEMA_VIOLATION, why);
    const char *api_key = json_string_value(json_object_get(req, "api_key"));
    uint8_t hash[32];
    sl_keyhash(api_key, strlen(api_key), hash);
    int key = sl_config_key_by_hash(cfg, hash);
    if (key < 0)
        return reject(ing, out, src, now_ms, NULL, idem, NULL, SL_ERRTYPE_AUTHENTICATION,
                      SL_REASON_UNKNOWN_API_KEY, "the API key is not known");
    const sl_key_cfg_t *k = &cfg->keys[key];
    const char *tenant = cfg->tenants[k->tenant].name;
    char job_id[33];
    sl_ingest_job_id(ing, tenant, idem, job_id);
    sl_msg_cancel_t c = {.job_id = job_id,
                         .idempotency_key = idem,
                         .tenant = tenant,
                         .key_id = k->id,
                         .requested_ms = now_ms};
    json_t *msg = sl_msg_cancel_json(&c);
    if (msg == NULL)
        return SL_ENOMEM;
    /* Cancels go where batch jobs go, after them: a cancel of a batch job must not overtake
     * it (it would find nothing to cancel). One of an interactive job comes after that job,
     * which the scheduler takes in first. */
    sl_err_t rc = fill_out(out, SL_INGEST_JOB, cfg->kafka.topic_jobs_batch, tenant, msg);
    json_decref(msg);
    return rc;
}

sl_err_t sl_ingest_process(sl_ingest_t *ing, const void *payload, size_t len, int64_t now_ms,
                           const sl_ingest_source_t *src, sl_ingest_out_t *out)
{
    const sl_config_t *cfg = ing->cfg;
    memset(out, 0, sizeof *out);
    char why[512];
    sl_err_t rc = SL_OK;
    json_t *req = NULL;
    json_t *job = NULL;

    if ((int64_t)len > cfg->max_request_bytes) {
        snprintf(why, sizeof why, "request is %zu bytes; the limit is %lld", len,
                 (long long)cfg->max_request_bytes);
        return reject(ing, out, src, now_ms, NULL, NULL, NULL, SL_ERRTYPE_INVALID_REQUEST,
                      SL_REASON_PAYLOAD_TOO_LARGE, why);
    }
    json_error_t jerr;
    req = json_loadb(payload, len, JSON_REJECT_DUPLICATES, &jerr);
    if (req == NULL) {
        snprintf(why, sizeof why, "malformed JSON at line %d column %d: %s", jerr.line, jerr.column,
                 jerr.text);
        return reject(ing, out, src, now_ms, NULL, NULL, NULL, SL_ERRTYPE_INVALID_REQUEST,
                      SL_REASON_MALFORMED_JSON, why);
    }
    /* The idempotency key is echoed even on a schema violation when it is usable, so the
     * producer can match the rejection. The schema bounds it at 200 characters; 800 bytes is
     * that in UTF-8 at most (a byte count must not cut valid keys short). */
    const json_t *idem_j = json_object_get(req, "idempotency_key");
    const char *idem = json_is_string(idem_j) && json_string_length(idem_j) <= 800
                           ? json_string_value(idem_j)
                           : NULL;
    if (json_object_get(req, "cancel") != NULL) {
        rc = cancel(ing, req, now_ms, src, out);
        goto out;
    }
    if (sl_schema_validate(ing->schema, req, why, sizeof why) != SL_OK) {
        rc = reject(ing, out, src, now_ms, NULL, idem, NULL, SL_ERRTYPE_INVALID_REQUEST,
                    SL_REASON_SCHEMA_VIOLATION, why);
        goto out;
    }

    const char *api_key = json_string_value(json_object_get(req, "api_key"));
    uint8_t hash[32];
    sl_keyhash(api_key, strlen(api_key), hash);
    int key = sl_config_key_by_hash(cfg, hash);
    if (key < 0) {
        rc = reject(ing, out, src, now_ms, NULL, idem, NULL, SL_ERRTYPE_AUTHENTICATION,
                    SL_REASON_UNKNOWN_API_KEY, "the API key is not known");
        goto out;
    }
    const sl_key_cfg_t *k = &cfg->keys[key];
    const char *tenant = cfg->tenants[k->tenant].name;
    char job_id[33];
    char fresh_idem[33];
    if (idem == NULL) {
        sl_random_id(fresh_idem, 16);
        idem = fresh_idem;
    }
    sl_ingest_job_id(ing, tenant, idem, job_id);
    if (k->paused) {
        rc = reject(ing, out, src, now_ms, job_id, idem, tenant, SL_ERRTYPE_POLICY,
                    SL_REASON_KEY_PAUSED, "this API key is paused by an operator");
        goto out;
    }
    const char *route_name = json_string_value(json_object_get(req, "route"));
    int route = sl_config_route(cfg, route_name);
    if (route < 0) {
        snprintf(why, sizeof why, "route \"%.128s\" does not exist", route_name);
        rc = reject(ing, out, src, now_ms, job_id, idem, tenant, SL_ERRTYPE_INVALID_REQUEST,
                    SL_REASON_UNKNOWN_ROUTE, why);
        goto out;
    }
    if (!sl_config_tenant_allows_route(cfg, k->tenant, route)) {
        snprintf(why, sizeof why, "tenant \"%s\" may not use route \"%s\"", tenant, route_name);
        rc = reject(ing, out, src, now_ms, job_id, idem, tenant, SL_ERRTYPE_PERMISSION,
                    SL_REASON_ROUTE_NOT_ALLOWED, why);
        goto out;
    }
    const json_t *cls_j = json_object_get(req, "class");
    const char *cls_name = json_is_string(cls_j) ? json_string_value(cls_j) : "standard";
    int cls = sl_class_parse(cls_name);

    /* Output is bounded by max_tokens; a request without one gets the route's default, so
     * every reservation has a ceiling the provider respects. */
    const sl_route_cfg_t *r = &cfg->routes[route];
    int64_t max_tokens = 0;
    json_t *body = json_object_get(req, "request");
    const json_t *mt = json_object_get(body, "max_tokens");
    const json_t *mct = json_object_get(body, "max_completion_tokens");
    if (json_is_integer(mt)) {
        max_tokens = json_integer_value(mt);
    } else if (json_is_integer(mct)) {
        max_tokens = json_integer_value(mct);
    } else {
        max_tokens = r->default_max_tokens;
        json_object_set_new(body, "max_tokens", json_integer(max_tokens));
    }
    const char *model = cfg->deployments[r->deployments[0]].model;
    int64_t input = sl_estimate_input_tokens(body, model);
    if (!fits_any_limit(cfg, route, k->tenant, input, max_tokens)) {
        snprintf(why, sizeof why,
                 "request needs about %lld input + %lld output tokens, more than any limit on "
                 "route \"%s\" or tenant \"%s\" allows",
                 (long long)input, (long long)max_tokens, route_name, tenant);
        rc = reject(ing, out, src, now_ms, job_id, idem, tenant, SL_ERRTYPE_CAPACITY,
                    SL_REASON_REQUEST_TOO_LARGE, why);
        goto out;
    }
    const json_t *dl = json_object_get(req, "deadline_ms");
    int64_t rel_deadline =
        json_is_integer(dl) ? json_integer_value(dl) : cfg->classes[cls].deadline_ms;

    const json_t *fb = json_object_get(req, "fallback");
    const json_t *dg = json_object_get(req, "degrade");
    sl_msg_job_t mj = {.job_id = job_id,
                       .idempotency_key = idem,
                       .tenant = tenant,
                       .app = k->app,
                       .env = k->env,
                       .key_id = k->id,
                       .route = route_name,
                       .cls = sl_class_name((sl_class_t)cls),
                       .submitted_ms = now_ms,
                       .deadline_ms = now_ms + rel_deadline,
                       .est_input = input,
                       .est_output = max_tokens,
                       .est_total = input + max_tokens,
                       .fallback = json_is_boolean(fb) ? json_is_true(fb) : -1,
                       .degrade = json_is_boolean(dg) ? json_is_true(dg) : -1,
                       .metadata = json_object_get(req, "metadata"),
                       .request = body};
    job = sl_msg_job_json(&mj);
    if (job == NULL) {
        rc = SL_ENOMEM;
        goto out;
    }
    /* Batch jobs have a topic of their own, so a tenant's other jobs never wait behind its
     * backfill in their partition. */
    rc = fill_out(out, SL_INGEST_JOB,
                  cls == SL_CLASS_BATCH ? cfg->kafka.topic_jobs_batch : cfg->kafka.topic_jobs,
                  tenant, job);
out:
    json_decref(job);
    json_decref(req);
    return rc;
}
