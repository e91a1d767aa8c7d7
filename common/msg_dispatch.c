/* msg_dispatch.c - the dispatch message (see msg_dispatch.h). */
#include "msg_dispatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether s needs no JSON escaping and fits the schema's id alphabet. */
static int plain_id(const char *s)
{
    if (s == NULL || *s == '\0')
        return 0;
    for (; *s != '\0'; s++) {
        char c = *s;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* s as a JSON string literal, quotes included (caller frees); NULL when out of memory. */
static char *quote(const char *s)
{
    json_t *j = json_string(s);
    char *q = j != NULL ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    return q;
}

sl_err_t sl_msg_dispatch_build(const sl_msg_dispatch_t *d, const char *request_json, char **out)
{
    *out = NULL;
    if (!plain_id(d->job_id) || !plain_id(d->reservation_id) || request_json == NULL ||
        d->deployment == NULL || d->idempotency_key == NULL)
        return SL_EINVAL;
    sl_err_t rc = SL_ENOMEM;
    char *dep_q = quote(d->deployment);
    char *idem_q = quote(d->idempotency_key);
    char *tenant_q = d->tenant != NULL ? quote(d->tenant) : NULL;
    char *value = NULL;
    char send_at[48] = "";
    char *tenant = NULL;
    if (dep_q == NULL || idem_q == NULL || (d->tenant != NULL && tenant_q == NULL))
        goto out;
    if (tenant_q != NULL && asprintf(&tenant, "\"tenant\":%s,", tenant_q) < 0) {
        tenant = NULL;
        goto out;
    }
    if (d->send_at_ms > 0)
        snprintf(send_at, sizeof send_at, "\"send_at_ms\":%lld,", (long long)d->send_at_ms);
    if (asprintf(&value,
                 "{\"v\":1,\"job_id\":\"%s\",\"attempt\":%d,\"reservation_id\":\"%s\","
                 "\"lease_expires_ms\":%lld,\"issued_ms\":%lld,%s\"deployment\":%s,"
                 "\"idempotency_key\":%s,%s\"request\":%s}",
                 d->job_id, d->attempt, d->reservation_id, (long long)d->lease_expires_ms,
                 (long long)d->issued_ms, send_at, dep_q, idem_q, tenant != NULL ? tenant : "",
                 request_json) < 0)
        goto out;
    *out = value;
    rc = SL_OK;
out:
    free(dep_q);
    free(idem_q);
    free(tenant_q);
    free(tenant);
    return rc;
}

sl_err_t sl_msg_dispatch_read(const json_t *doc, sl_msg_dispatch_t *d)
{
    memset(d, 0, sizeof *d);
    d->job_id = json_string_value(json_object_get(doc, "job_id"));
    d->reservation_id = json_string_value(json_object_get(doc, "reservation_id"));
    d->deployment = json_string_value(json_object_get(doc, "deployment"));
    d->idempotency_key = json_string_value(json_object_get(doc, "idempotency_key"));
    d->tenant = json_string_value(json_object_get(doc, "tenant"));
    d->request = json_object_get(doc, "request");
    if (d->job_id == NULL || d->reservation_id == NULL || d->deployment == NULL ||
        d->idempotency_key == NULL || !json_is_object(d->request))
        return SL_EPARSE;
    d->attempt = (int)json_integer_value(json_object_get(doc, "attempt"));
    d->lease_expires_ms = json_integer_value(json_object_get(doc, "lease_expires_ms"));
    d->issued_ms = json_integer_value(json_object_get(doc, "issued_ms"));
    d->send_at_ms = json_integer_value(json_object_get(doc, "send_at_ms"));
    return SL_OK;
}
