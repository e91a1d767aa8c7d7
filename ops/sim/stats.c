/* stats.c - counters, rings and the GET /stats body of the provider simulator (see stats.h). */
#include "stats.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Claims the slot of a new entry, the oldest one once the ring is full; returns its index. */
static size_t ring_push(sl_sim_ring_t *ring, size_t cap)
{
    size_t slot = ring->next;
    ring->next = (ring->next + 1) % cap;
    if (ring->len < cap)
        ring->len++;
    return slot;
}

/* The index of the i-th oldest entry (i < len). */
static size_t ring_at(const sl_sim_ring_t *ring, size_t cap, size_t i)
{
    return (ring->next + cap - ring->len + i) % cap;
}

void sl_sim_stats_counters_reset(sl_sim_counters_t *count)
{
    memset(count, 0, sizeof *count);
    count->first_admit_ms = -1;
    count->last_admit_ms = -1;
    count->last_first_chunk_ms = -1;
}

/* The wait a client is told for wait_ms: Anthropic's headers carry whole seconds only. */
static int64_t announced_wait_ms(const sl_sim_deployment_t *dep, int64_t wait_ms)
{
    if (dep->cfg->headers == SL_SIM_HEADERS_ANTHROPIC && dep->cfg->api != SL_SIM_API_GEMINI)
        return (wait_ms + 999) / 1000 * 1000;
    return wait_ms;
}

void sl_sim_stats_note_arrival(sl_sim_t *sim, sl_sim_deployment_t *dep, const char *key, int status,
                               int64_t now_ms)
{
    pthread_mutex_lock(&sim->lock);
    sl_sim_arrival_t *a = &dep->arrivals[ring_push(&dep->arrivals_ring, SL_SIM_RING_CAP)];
    a->at_ms = sl_sim_unix_ms(sim, now_ms);
    a->status = status;
    snprintf(a->key, sizeof a->key, "%s", key != NULL ? key : "");
    pthread_mutex_unlock(&sim->lock);
}

void sl_sim_stats_open_stream(sl_sim_t *sim, sl_sim_deployment_t *dep, sl_sim_response_t *resp)
{
    uint64_t serial = ++sim->stream_serial;
    sl_sim_stream_entry_t *e = &sim->streams[ring_push(&sim->streams_ring, SL_SIM_STREAM_RING_CAP)];
    e->serial = serial;
    snprintf(e->request_id, sizeof e->request_id, "%s", resp->request_id);
    e->deployment = dep->cfg->name;
    e->first_chunk_ms = -1;
    e->chunks = 0;
    e->cut = resp->dropped;
    resp->stream_serial = serial;
    resp->stream_dep = dep;
}

void sl_sim_stats_note_retry_after(sl_sim_t *sim, sl_sim_deployment_t *dep, const char *key,
                                   int64_t now_ms, int64_t wait_ms, bool fault)
{
    sl_sim_retry_entry_t *e = &dep->retries[ring_push(&dep->retries_ring, SL_SIM_RING_CAP)];
    e->sent_ms = sl_sim_unix_ms(sim, now_ms);
    e->retry_after_ms = announced_wait_ms(dep, wait_ms);
    e->fault = fault;
    snprintf(e->key, sizeof e->key, "%s", key != NULL ? key : "");
    int64_t until_ms = now_ms + e->retry_after_ms;
    /* Losing a key only loses one early-retry count: report and go on. */
    if (key != NULL && sl_sim_idem_put(dep->retry_keys, key, &until_ms) != SL_OK)
        sl_logf(SL_LOG_WARN, "deployment", dep->cfg->name, "out of memory storing a retry key");
}

/* The /stats counter of the refusals reported for each dimension. */
static const char *const refused_field[SL_SIM_DIM_COUNT_] = {
    [SL_SIM_DIM_REQUESTS] = "refused_requests_dim", [SL_SIM_DIM_TOKENS] = "refused_tokens_dim",
    [SL_SIM_DIM_INPUT_TOKENS] = "refused_itpm_dim", [SL_SIM_DIM_OUTPUT_TOKENS] = "refused_otpm_dim",
    [SL_SIM_DIM_REQUESTS_DAY] = "refused_rpd_dim",
};

/* Adds name: value (an integer, or null when negative) to obj; false without memory. */
static bool set_ms(json_t *obj, const char *name, int64_t value)
{
    json_t *v = value < 0 ? json_null() : json_integer(value);
    return json_object_set_new(obj, name, v) == 0;
}

/* The rings of a deployment, oldest first. Caller holds the lock. */
static bool add_rings(json_t *one, const sl_sim_deployment_t *dep)
{
    json_t *retries = json_array();
    json_t *arrivals = json_array();
    bool ok = retries != NULL && arrivals != NULL;
    for (size_t i = 0; ok && i < dep->retries_ring.len; i++) {
        const sl_sim_retry_entry_t *e =
            &dep->retries[ring_at(&dep->retries_ring, SL_SIM_RING_CAP, i)];
        json_t *item =
            json_pack("{s:I, s:I, s:b, s:o}", "sent_ms", (json_int_t)e->sent_ms, "retry_after_ms",
                      (json_int_t)e->retry_after_ms, "fault", (int)e->fault, "idempotency_key",
                      e->key[0] ? json_string(e->key) : json_null());
        ok = item != NULL && json_array_append_new(retries, item) == 0;
    }
    for (size_t i = 0; ok && i < dep->arrivals_ring.len; i++) {
        const sl_sim_arrival_t *a =
            &dep->arrivals[ring_at(&dep->arrivals_ring, SL_SIM_RING_CAP, i)];
        json_t *item =
            json_pack("{s:I, s:i, s:o}", "at_ms", (json_int_t)a->at_ms, "status", a->status,
                      "idempotency_key", a->key[0] ? json_string(a->key) : json_null());
        ok = item != NULL && json_array_append_new(arrivals, item) == 0;
    }
    if (!ok) {
        json_decref(retries);
        json_decref(arrivals);
        return false;
    }
    return json_object_set_new(one, "retry_after_429s", retries) == 0 &&
           json_object_set_new(one, "arrivals", arrivals) == 0;
}

/* The "batch" object of a deployment. Caller holds the lock. */
static bool add_batch(json_t *one, const sl_sim_deployment_t *dep)
{
    const sl_sim_batch_counters_t *b = &dep->batch_count;
    const struct {
        const char *name;
        int64_t value;
    } fields[] = {
        {"batches_created", b->batches_created},
        {"creates_refused", b->creates_refused},
        {"failed_token_limit", b->failed_token_limit},
        {"lines", b->lines},
        {"lines_succeeded", b->lines_succeeded},
        {"lines_errored", b->lines_errored},
        {"lines_expired", b->lines_expired},
        {"lines_cancelled", b->lines_cancelled},
        {"lines_duplicate", b->lines_duplicate},
        {"enqueued_tokens_now", b->enqueued_tokens_now},
        {"enqueued_tokens_peak", b->enqueued_tokens_peak},
        {"enqueued_tokens_limit", dep->cfg->batch.enqueued_tokens},
    };
    json_t *obj = json_object();
    for (size_t f = 0; obj != NULL && f < sizeof fields / sizeof fields[0]; f++) {
        if (json_object_set_new(obj, fields[f].name, json_integer(fields[f].value)) != 0) {
            json_decref(obj);
            obj = NULL;
        }
    }
    return obj != NULL && json_object_set_new(one, "batch", obj) == 0;
}

/* The recent streams, oldest first. Caller holds the lock. */
static json_t *streams_json(const sl_sim_t *sim)
{
    json_t *list = json_array();
    for (size_t i = 0; list != NULL && i < sim->streams_ring.len; i++) {
        const sl_sim_stream_entry_t *e =
            &sim->streams[ring_at(&sim->streams_ring, SL_SIM_STREAM_RING_CAP, i)];
        json_t *item = json_pack(
            "{s:s, s:s, s:o, s:I, s:b}", "request_id", e->request_id, "deployment", e->deployment,
            "first_chunk_ms", e->first_chunk_ms < 0 ? json_null() : json_integer(e->first_chunk_ms),
            "chunks", (json_int_t)e->chunks, "cut", (int)e->cut);
        if (item == NULL || json_array_append_new(list, item) != 0) {
            json_decref(list);
            return NULL;
        }
    }
    return list;
}

sl_err_t sl_sim_stats_json(sl_sim_t *sim, int64_t now_ms, char **out)
{
    *out = NULL;
    json_t *deps = json_object();
    json_t *root =
        json_pack("{s:I, s:I, s:I, s:o}", "now_ms", (json_int_t)(now_ms - sim->origin_ms),
                  "minute_ms", (json_int_t)sim->cfg->minute_ms, "origin_unix_ms",
                  (json_int_t)sim->origin_unix_ms, "deployments", deps);
    if (root == NULL)
        return SL_ENOMEM;
    bool ok = true;
    pthread_mutex_lock(&sim->lock);
    for (size_t i = 0; i < sim->cfg->n_deps && ok; i++) {
        const sl_sim_deployment_t *dep = &sim->deps[i];
        const sl_sim_counters_t *c = &dep->count;
        const sl_sim_dep_config_t *dc = dep->cfg;
        const struct {
            const char *name;
            int64_t value;
        } fields[] = {
            {"rpm", dc->rpm},
            {"tpm", dc->tpm},
            {"itpm", dc->itpm},
            {"otpm", dc->otpm},
            {"rpd", dc->rpd},
            {"admitted", c->admitted},
            {"refused", c->refused},
            {refused_field[SL_SIM_DIM_REQUESTS], c->refused_by[SL_SIM_DIM_REQUESTS]},
            {refused_field[SL_SIM_DIM_TOKENS], c->refused_by[SL_SIM_DIM_TOKENS]},
            {refused_field[SL_SIM_DIM_INPUT_TOKENS], c->refused_by[SL_SIM_DIM_INPUT_TOKENS]},
            {refused_field[SL_SIM_DIM_OUTPUT_TOKENS], c->refused_by[SL_SIM_DIM_OUTPUT_TOKENS]},
            {refused_field[SL_SIM_DIM_REQUESTS_DAY], c->refused_by[SL_SIM_DIM_REQUESTS_DAY]},
            {"refused_rolling", c->refused_rolling},
            {"replayed", c->replayed},
            {"errors", c->errors},
            {"tokens_charged", c->tokens_charged},
            {"input_tokens_charged", c->input_tokens_charged},
            {"output_tokens_charged", c->output_tokens_charged},
            {"prompt_tokens", c->prompt_tokens},
            {"completion_tokens", c->completion_tokens},
            {"cached_tokens", c->cached_tokens},
            {"in_flight", dep->in_flight},
            {"requests_today", sl_sim_limiter_day_count(dep->lim, now_ms)},
            {"streams", c->streams},
            {"tool_calls", c->tool_calls},
            {"fault_429", c->fault_429},
            {"fault_429_retry_after", c->fault_429_retry_after},
            {"fault_503", c->fault_503},
            {"fault_spend_limit", c->fault_spend_limit},
            {"fault_acceleration", c->fault_acceleration},
            {"dropped", c->dropped},
            {"slow", c->slow},
            {"stalled", c->stalled},
            {"early_retries", c->early_retries},
        };
        json_t *one = json_pack("{s:s, s:s}", "model", dc->model, "api", sl_sim_api_name(dc->api));
        for (size_t f = 0; one != NULL && f < sizeof fields / sizeof fields[0]; f++) {
            if (json_object_set_new(one, fields[f].name, json_integer(fields[f].value)) != 0) {
                json_decref(one);
                one = NULL;
            }
        }
        if (one != NULL && (!set_ms(one, "first_admit_ms", c->first_admit_ms) ||
                            !set_ms(one, "last_admit_ms", c->last_admit_ms) ||
                            !set_ms(one, "last_first_chunk_ms", c->last_first_chunk_ms) ||
                            !add_rings(one, dep) || !add_batch(one, dep))) {
            json_decref(one);
            one = NULL;
        }
        ok = one != NULL && json_object_set_new(deps, dep->cfg->name, one) == 0;
    }
    json_t *streams = ok ? streams_json(sim) : NULL;
    pthread_mutex_unlock(&sim->lock);
    ok = ok && streams != NULL && json_object_set_new(root, "recent_streams", streams) == 0;
    char *text = ok ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (text == NULL)
        return SL_ENOMEM;
    *out = text;
    return SL_OK;
}

void sl_sim_stats_reset(sl_sim_t *sim)
{
    for (size_t i = 0; i < sim->cfg->n_deps; i++) {
        sl_sim_deployment_t *dep = &sim->deps[i];
        sl_sim_stats_counters_reset(&dep->count);
        /* What is enqueued now is state, not a count: it stays, and the peak starts from it. */
        int64_t enqueued = dep->batch_count.enqueued_tokens_now;
        memset(&dep->batch_count, 0, sizeof dep->batch_count);
        dep->batch_count.enqueued_tokens_now = enqueued;
        dep->batch_count.enqueued_tokens_peak = enqueued;
        dep->retries_ring.len = 0;
        dep->arrivals_ring.len = 0;
    }
    /* The ring keeps its position, so an entry's slot stays (serial - 1) % capacity. */
    for (size_t i = 0; i < SL_SIM_STREAM_RING_CAP; i++)
        sim->streams[i].serial = 0;
    sim->streams_ring.len = 0;
    sim->stats_epoch++;
}

void sl_sim_chunk_sent(sl_sim_t *sim, sl_sim_response_t *resp, size_t i, int64_t now_ms)
{
    if (resp == NULL || resp->stream_serial == 0)
        return;
    pthread_mutex_lock(&sim->lock);
    int64_t unix_ms = sl_sim_unix_ms(sim, now_ms);
    sl_sim_stream_entry_t *e = &sim->streams[(resp->stream_serial - 1) % SL_SIM_STREAM_RING_CAP];
    if (e->serial == resp->stream_serial) {
        if ((int64_t)i + 1 > e->chunks)
            e->chunks = (int64_t)i + 1;
        if (i == 0 && e->first_chunk_ms < 0)
            e->first_chunk_ms = unix_ms;
    }
    if (i == 0)
        resp->stream_dep->count.last_first_chunk_ms = unix_ms;
    pthread_mutex_unlock(&sim->lock);
}
