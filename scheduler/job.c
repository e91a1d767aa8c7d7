/* job.c - a job of the scheduler core: its place, its lists and what its request needs (see
 * job.h). The one rule here: a job is in exactly one place, and adding it to a second one is a
 * programmer error caught by an assert.
 */
#include "job.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drr.h"
#include "hmap.h"
#include "store.h"

job_t *sl_job_new(const char *id, const char *idem)
{
    size_t nid = strnlen(id, SL_JOB_ID_MAX);
    if (idem == NULL)
        idem = id;
    size_t nidem = idem == id ? nid : strlen(idem);
    job_t *j = calloc(1, sizeof *j + nid + 1 + nidem + 1);
    if (j == NULL)
        return NULL;
    memcpy(j->id, id, nid);
    memcpy(j->id + nid + 1, idem, nidem);
    j->deployment = -1;
    j->list_idx = -1;
    sl_drr_node_init(&j->node);
    return j;
}

void sl_job_free(job_t *j)
{
    if (j == NULL)
        return;
    if (j->lease != NULL)
        free(j->lease->held);
    free(j->lease);
    free(j->orphan);
    free(j);
}

sl_err_t sl_job_set_held(job_t *j, held_t *h)
{
    if (j->lease == NULL && h == NULL)
        return SL_OK;
    job_lease_t *l = sl_job_lease(j);
    if (l == NULL) {
        free(h);
        return SL_ENOMEM;
    }
    free(l->held);
    l->held = h;
    return SL_OK;
}

sl_err_t sl_job_set_orphan(job_t *j, const char *tenant, const char *route)
{
    size_t nt = strlen(tenant), nr = strlen(route);
    char *names = malloc(nt + 1 + nr + 1);
    if (names == NULL)
        return SL_ENOMEM;
    memcpy(names, tenant, nt + 1);
    memcpy(names + nt + 1, route, nr + 1);
    free(j->orphan);
    j->orphan = names;
    j->tenant = 0;
    j->route = 0;
    return SL_OK;
}

job_lease_t *sl_job_lease(job_t *j)
{
    if (j->lease == NULL)
        j->lease = calloc(1, sizeof *j->lease);
    return j->lease;
}

sl_err_t sl_job_track(sl_sched_t *s, job_t *j)
{
    sl_err_t rc = sl_hmap_put(s->jobs, j->id, j);
    if (rc == SL_OK)
        s->jobs_bytes += j->bytes;
    return rc;
}

void sl_job_untrack(sl_sched_t *s, job_t *j)
{
    if (sl_hmap_get(s->jobs, j->id) != j)
        return;
    sl_hmap_del(s->jobs, j->id);
    s->jobs_bytes -= j->bytes;
}

sl_err_t sl_job_list_add(joblist_t *l, job_t *j)
{
    /* A job is in exactly one place: not in another list, not queued in a DRR. */
    assert(j->list_idx < 0 && !sl_drr_queued(&j->node));
    if (l->n == l->cap) {
        int ncap = l->cap ? l->cap * 2 : 64;
        job_t **ni = realloc(l->items, (size_t)ncap * sizeof *ni);
        if (ni == NULL)
            return SL_ENOMEM;
        l->items = ni;
        l->cap = ncap;
    }
    j->list_idx = l->n;
    l->items[l->n++] = j;
    l->npbatch += j->pbatch;
    return SL_OK;
}

void sl_job_list_del(joblist_t *l, job_t *j)
{
    int i = j->list_idx;
    if (i < 0 || i >= l->n || l->items[i] != j)
        return;
    l->items[i] = l->items[--l->n];
    l->items[i]->list_idx = i;
    j->list_idx = -1;
    l->npbatch -= j->pbatch;
}

void sl_job_unplace(sl_sched_t *s, job_t *j)
{
    if (j->state == J_QUEUED && sl_drr_queued(&j->node)) {
        sl_drr_remove(s->routes[j->route].drr, &j->node);
    } else if (j->state == J_DELAYED) {
        sl_job_list_del(&s->delayed, j);
    } else if (j->state == J_LEASED) {
        sl_job_list_del(&s->leased, j);
    } else if (j->state == J_ORPHAN) {
        sl_job_list_del(&s->orphans, j);
    } else if (j->state == J_HELD) {
        sl_job_list_del(&s->held, j);
    }
}

const char *sl_job_state_name(jstate_t state)
{
    static const char *const names[] = {"queued", "delayed", "leased", "orphan", "held"};
    return names[state];
}

int sl_job_tenant_index(const sl_sched_t *s, const char *name)
{
    return (int)(intptr_t)sl_hmap_get(s->tenant_index, name) - 1;
}

int sl_job_key_index(const sl_sched_t *s, const char *key_id, int tenant)
{
    intptr_t v = key_id != NULL ? (intptr_t)sl_hmap_get(s->key_index, key_id) : 0;
    int k = (int)v - 1;
    return k >= 0 && s->cfg->keys[k].tenant == tenant ? k : -1;
}

/* What a request body needs from a deployment (JF_* without JF_KNOWN's meaning of "read"). */
static unsigned request_flags(json_t *req)
{
    unsigned f = JF_KNOWN;
    json_t *tools = json_object_get(req, "tools");
    if (json_is_array(tools) && json_array_size(tools) > 0)
        f |= JF_TOOLS;
    const char *rf =
        json_string_value(json_object_get(json_object_get(req, "response_format"), "type"));
    if (rf != NULL && (strcmp(rf, "json_schema") == 0 || strcmp(rf, "json_object") == 0))
        f |= JF_JSON;
    if (json_is_true(json_object_get(req, "stream")))
        f |= JF_STREAM;
    return f;
}

unsigned sl_job_doc_flags(json_t *doc)
{
    unsigned f = request_flags(json_object_get(doc, "request"));
    if (json_is_true(json_object_get(doc, "fallback")))
        f |= JF_FALLBACK;
    if (json_is_true(json_object_get(doc, "degrade")))
        f |= JF_DEGRADE;
    return f;
}

unsigned sl_job_flags(sl_sched_t *s, job_t *j)
{
    if (j->flags & JF_KNOWN)
        return j->flags;
    char *text = NULL;
    j->flags |= JF_KNOWN;
    if (sl_store_job_json(s->store, j->id, &text) == SL_OK) {
        json_t *doc = json_loads(text, 0, NULL);
        j->flags |= sl_job_doc_flags(doc);
        json_decref(doc);
    }
    free(text);
    return j->flags;
}
