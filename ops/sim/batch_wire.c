/* batch_wire.c - how the batch APIs spell a batch and its results (see batch_internal.h and
 * docs/provider-batch.md): OpenAI's and Azure's batch and file objects and their output and
 * error files, Anthropic's message_batch and its results, Gemini's operation with its inline
 * responses.
 *
 * A batch's status word is read from the clock here: a batch answered at its creation time is
 * still validating (OpenAI) or pending (Gemini), one with a cancel asked is cancelling, and the
 * rest comes from what sl_sim_batch_settle recorded. A line's success body is the deployment's
 * ordinary completion body (sl_sim_wire_body), rebuilt from the line's counts.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "batch_internal.h"
#include "rng.h"

int64_t sl_sim_batch_unix_s(const sl_sim_t *sim, int64_t sim_ms)
{
    return sl_sim_unix_ms(sim, sim_ms) / 1000;
}

/* RFC 3339 with milliseconds, as Anthropic and Google write times. */
static void rfc3339_ms(int64_t unix_ms, char *buf, size_t cap)
{
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    char base[24] = "1970-01-01T00:00:00";
    if (gmtime_r(&t, &tm) != NULL)
        strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, cap, "%s.%03dZ", base, (int)(unix_ms % 1000));
}

/* A JSON value for an optional time: the quoted RFC 3339 time, or null when sim_ms < 0. */
static void time_or_null(const sl_sim_batch_view_t *v, int64_t sim_ms, char *buf, size_t cap)
{
    if (sim_ms < 0) {
        snprintf(buf, cap, "null");
        return;
    }
    char t[32];
    rfc3339_ms(sl_sim_unix_ms(v->sim, sim_ms), t, sizeof t);
    snprintf(buf, cap, "\"%s\"", t);
}

/* Unix seconds of a simulator time, or null when cond is false. */
static void secs_or_null(const sl_sim_batch_view_t *v, bool cond, int64_t sim_ms, char *buf,
                         size_t cap)
{
    if (cond)
        snprintf(buf, cap, "%lld", (long long)sl_sim_batch_unix_s(v->sim, sim_ms));
    else
        snprintf(buf, cap, "null");
}

static void id_or_null(const char *id, char *buf, size_t cap)
{
    if (id[0] != '\0')
        snprintf(buf, cap, "\"%s\"", id);
    else
        snprintf(buf, cap, "null");
}

/* Still in its creation answer: OpenAI's validating, Gemini's pending. */
static bool just_created(const sl_sim_batch_view_t *v, const sl_sim_batch_t *b)
{
    return v->now_ms <= b->created_ms && b->cancel_ms < 0 &&
           (b->status == SL_SIM_BATCH_RUNNING || b->status == SL_SIM_BATCH_FAILED);
}

static bool ended(const sl_sim_batch_t *b)
{
    return b->status != SL_SIM_BATCH_RUNNING;
}

/* The ids of a line's answer derive from the batch and the line, like an online answer's from
 * its sequence number. */
static uint64_t line_id(const sl_sim_batch_view_t *v, const sl_sim_batch_t *b, size_t i)
{
    const char *name = v->dc->name;
    return sl_sim_rng_mix64(v->sim->salt ^ sl_sim_rng_fnv1a(name, strlen(name)) ^
                            (b->serial * 0x9e3779b97f4a7c15ULL)) +
           i;
}

/* The deployment's 200 body for line i. */
static void success_body(const sl_sim_batch_view_t *v, const sl_sim_batch_t *b, size_t i, char *buf,
                         size_t cap)
{
    const sl_sim_batch_line_t *line = &b->set->lines[i];
    sl_sim_reply_t reply = {
        .api = v->dc->api,
        .id = line_id(v, b, i),
        .created_s = sl_sim_batch_unix_s(v->sim, b->due_ms),
        .model = v->dc->model,
        .deployment = v->dc->name,
        .prompt_tokens = line->prompt_tokens,
        .completion_tokens = line->completion_tokens,
        .hit_max_tokens = line->hit_max_tokens,
    };
    size_t n = sl_sim_wire_body(&reply, buf, cap);
    if (n >= cap)
        snprintf(buf, cap, "{}"); /* cannot happen: names are bounded by the config */
}

/* ---- OpenAI and Azure ------------------------------------------------------------------- */

static const char *openai_status(const sl_sim_batch_view_t *v, const sl_sim_batch_t *b)
{
    if (just_created(v, b))
        return "validating";
    switch (b->status) {
    case SL_SIM_BATCH_RUNNING:
        return b->cancel_ms >= 0 ? "cancelling" : "in_progress";
    case SL_SIM_BATCH_FAILED:
        return "failed";
    case SL_SIM_BATCH_COMPLETED:
        return "completed";
    case SL_SIM_BATCH_EXPIRED:
        return "expired";
    case SL_SIM_BATCH_CANCELLED:
        return "cancelled";
    }
    return "failed";
}

static sl_err_t openai_errors(const sl_sim_batch_t *b, sl_buf_t *out)
{
    sl_err_t rc = sl_buf_adds(out, "{\"object\":\"list\",\"data\":[");
    for (size_t i = 0; rc == SL_OK && i < b->n_problems; i++) {
        const sl_sim_batch_problem_t *p = &b->problems[i];
        char line[24] = "null";
        if (p->line > 0)
            snprintf(line, sizeof line, "%lld", (long long)p->line);
        rc = sl_buf_addf(out, "%s{\"code\":\"%s\",\"message\":\"%s\",\"param\":null,\"line\":%s}",
                         i ? "," : "", p->code, p->message, line);
    }
    return rc == SL_OK ? sl_buf_adds(out, "]}") : rc;
}

static sl_err_t openai_object(const sl_sim_batch_view_t *v, const sl_sim_batch_t *b, sl_buf_t *out)
{
    bool fresh = just_created(v, b);
    bool failed = b->status == SL_SIM_BATCH_FAILED && !fresh;
    bool done = ended(b) && !failed;
    char output[48], error[48], in_progress[24], finalizing[24], completed[24], failed_at[24],
        expired[24], cancelling[24], cancelled[24];
    id_or_null(done ? b->output_file_id : "", output, sizeof output);
    id_or_null(done ? b->error_file_id : "", error, sizeof error);
    secs_or_null(v, !fresh && !failed, b->created_ms, in_progress, sizeof in_progress);
    bool ran = b->status == SL_SIM_BATCH_COMPLETED || b->status == SL_SIM_BATCH_EXPIRED;
    secs_or_null(v, ran, b->ended_ms, finalizing, sizeof finalizing);
    secs_or_null(v, b->status == SL_SIM_BATCH_COMPLETED, b->ended_ms, completed, sizeof completed);
    secs_or_null(v, failed, b->created_ms, failed_at, sizeof failed_at);
    secs_or_null(v, b->status == SL_SIM_BATCH_EXPIRED, b->ended_ms, expired, sizeof expired);
    secs_or_null(v, b->cancel_ms >= 0, b->cancel_ms, cancelling, sizeof cancelling);
    secs_or_null(v, b->status == SL_SIM_BATCH_CANCELLED, b->ended_ms, cancelled, sizeof cancelled);
    int64_t total = failed ? 0 : (int64_t)b->set->n;
    int64_t ok = done ? b->n_ok : 0;
    int64_t bad = done ? total - b->n_ok : 0;
    sl_err_t rc = sl_buf_addf(
        out, "{\"id\":\"%s\",\"object\":\"batch\",\"endpoint\":\"%s\",\"errors\":", b->id,
        b->endpoint);
    if (rc == SL_OK)
        rc = failed ? openai_errors(b, out) : sl_buf_adds(out, "null");
    if (rc == SL_OK)
        rc = sl_buf_addf(
            out,
            ",\"input_file_id\":\"%s\",\"completion_window\":\"24h\",\"status\":\"%s\","
            "\"output_file_id\":%s,\"error_file_id\":%s,\"created_at\":%lld,"
            "\"in_progress_at\":%s,\"expires_at\":%lld,\"finalizing_at\":%s,"
            "\"completed_at\":%s,\"failed_at\":%s,\"expired_at\":%s,\"cancelling_at\":%s,"
            "\"cancelled_at\":%s,\"request_counts\":{\"total\":%lld,\"completed\":%lld,"
            "\"failed\":%lld},\"metadata\":%s}",
            b->input_file_id, openai_status(v, b), output, error,
            (long long)sl_sim_batch_unix_s(v->sim, b->created_ms), in_progress,
            (long long)(sl_sim_batch_unix_s(v->sim, b->created_ms) + SL_SIM_BATCH_WINDOW_S),
            finalizing, completed, failed_at, expired, cancelling, cancelled, (long long)total,
            (long long)ok, (long long)bad, b->label != NULL ? b->label : "null");
    return rc;
}

static sl_err_t openai_line(const sl_sim_batch_view_t *v, const sl_sim_batch_t *b, size_t i,
                            bool errors, sl_buf_t *out)
{
    const sl_sim_batch_line_t *line = &b->set->lines[i];
    const char *custom_id = sl_sim_batch_text(b->set, line->id_off);
    uint64_t id = line_id(v, b, i);
    sl_sim_line_fate_t fate = (sl_sim_line_fate_t)b->fate[i];
    if (b->status == SL_SIM_BATCH_CANCELLED) {
        if (!errors)
            return SL_OK;
        return sl_buf_addf(out,
                           "{\"id\":\"batch_req_%016llx\",\"custom_id\":\"%s\",\"response\":null,"
                           "\"error\":{\"code\":\"batch_cancelled\",\"message\":\"This request "
                           "was not executed because the batch was cancelled.\"}}\n",
                           (unsigned long long)id, custom_id);
    }
    if ((fate == SL_SIM_LINE_OK) == errors)
        return SL_OK;
    if (fate == SL_SIM_LINE_EXPIRED)
        return sl_buf_addf(out,
                           "{\"id\":\"batch_req_%016llx\",\"custom_id\":\"%s\",\"response\":null,"
                           "\"error\":{\"code\":\"batch_expired\",\"message\":\"This request "
                           "could not be executed before the completion window expired.\"}}\n",
                           (unsigned long long)id, custom_id);
    char body[SL_SIM_BODY_CAP];
    int status = 200;
    if (fate == SL_SIM_LINE_OK) {
        success_body(v, b, i, body, sizeof body);
    } else if (fate == SL_SIM_LINE_SERVER_ERROR) {
        status = 500;
        snprintf(body, sizeof body,
                 "{\"error\":{\"message\":\"The server had an error while processing your "
                 "request. Sorry about that!\",\"type\":\"server_error\",\"param\":null,"
                 "\"code\":null}}");
    } else {
        status = 400;
        snprintf(body, sizeof body,
                 "{\"error\":{\"message\":\"%s\",\"type\":\"invalid_request_error\",\"param\":"
                 "null,\"code\":null}}",
                 sl_sim_batch_text(b->set, line->error_off));
    }
    return sl_buf_addf(out,
                       "{\"id\":\"batch_req_%016llx\",\"custom_id\":\"%s\",\"response\":{"
                       "\"status_code\":%d,\"request_id\":\"req_%016llx\",\"body\":%s},"
                       "\"error\":null}\n",
                       (unsigned long long)id, custom_id, status,
                       (unsigned long long)sl_sim_rng_mix64(id), body);
}

sl_err_t sl_sim_batch_wire_file(const char *id, size_t bytes, int64_t created_s,
                                const char *filename, const char *purpose, sl_buf_t *out)
{
    return sl_buf_addf(out,
                       "{\"id\":\"%s\",\"object\":\"file\",\"bytes\":%zu,\"created_at\":%lld,"
                       "\"filename\":\"%s\",\"purpose\":\"%s\",\"status\":\"processed\","
                       "\"status_details\":null}",
                       id, bytes, (long long)created_s, filename, purpose);
}

/* ---- Anthropic -------------------------------------------------------------------------- */

static sl_err_t anthropic_object(const sl_sim_batch_view_t *v, const sl_sim_batch_t *b,
                                 sl_buf_t *out)
{
    bool done = ended(b);
    const char *status = done ? "ended" : b->cancel_ms >= 0 ? "canceling" : "in_progress";
    char created[48], expires[48], ended_at[48], cancel[48], url[512];
    time_or_null(v, b->created_ms, created, sizeof created);
    rfc3339_ms(sl_sim_unix_ms(v->sim, b->created_ms) + SL_SIM_BATCH_WINDOW_S * 1000LL, expires,
               sizeof expires);
    time_or_null(v, done ? b->ended_ms : -1, ended_at, sizeof ended_at);
    time_or_null(v, b->cancel_ms, cancel, sizeof cancel);
    if (done)
        snprintf(url, sizeof url, "\"http://%s/%s/v1/messages/batches/%s/results\"", v->host,
                 v->dc->name, b->id);
    else
        snprintf(url, sizeof url, "null");
    return sl_buf_addf(
        out,
        "{\"id\":\"%s\",\"type\":\"message_batch\",\"processing_status\":\"%s\","
        "\"request_counts\":{\"processing\":%lld,\"succeeded\":%lld,\"errored\":%lld,"
        "\"canceled\":%lld,\"expired\":%lld},\"ended_at\":%s,\"created_at\":%s,"
        "\"expires_at\":\"%s\",\"cancel_initiated_at\":%s,\"archived_at\":null,"
        "\"results_url\":%s}",
        b->id, status, (long long)(done ? 0 : (int64_t)b->set->n), (long long)b->n_ok,
        (long long)b->n_errored, (long long)b->n_cancelled, (long long)b->n_expired, ended_at,
        created, expires, cancel, url);
}

static sl_err_t anthropic_line(const sl_sim_batch_view_t *v, const sl_sim_batch_t *b, size_t i,
                               sl_buf_t *out)
{
    const sl_sim_batch_line_t *line = &b->set->lines[i];
    const char *custom_id = sl_sim_batch_text(b->set, line->id_off);
    sl_sim_line_fate_t fate = (sl_sim_line_fate_t)b->fate[i];
    if (b->status == SL_SIM_BATCH_CANCELLED)
        return sl_buf_addf(out, "{\"custom_id\":\"%s\",\"result\":{\"type\":\"canceled\"}}\n",
                           custom_id);
    if (fate == SL_SIM_LINE_EXPIRED)
        return sl_buf_addf(out, "{\"custom_id\":\"%s\",\"result\":{\"type\":\"expired\"}}\n",
                           custom_id);
    if (fate == SL_SIM_LINE_SERVER_ERROR || fate == SL_SIM_LINE_INVALID) {
        bool server = fate == SL_SIM_LINE_SERVER_ERROR;
        return sl_buf_addf(out,
                           "{\"custom_id\":\"%s\",\"result\":{\"type\":\"errored\",\"error\":{"
                           "\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":\"%s\"}}}}\n",
                           custom_id, server ? "api_error" : "invalid_request_error",
                           server ? "Internal server error"
                                  : sl_sim_batch_text(b->set, line->error_off));
    }
    char body[SL_SIM_BODY_CAP];
    success_body(v, b, i, body, sizeof body);
    return sl_buf_addf(
        out, "{\"custom_id\":\"%s\",\"result\":{\"type\":\"succeeded\",\"message\":%s}}\n",
        custom_id, body);
}

/* ---- Gemini ----------------------------------------------------------------------------- */

static const char *gemini_state(const sl_sim_batch_view_t *v, const sl_sim_batch_t *b)
{
    if (just_created(v, b))
        return "BATCH_STATE_PENDING";
    switch (b->status) {
    case SL_SIM_BATCH_RUNNING:
        return "BATCH_STATE_RUNNING";
    case SL_SIM_BATCH_CANCELLED:
        return "BATCH_STATE_CANCELLED";
    case SL_SIM_BATCH_FAILED:
        return "BATCH_STATE_FAILED";
    default:
        /* Expired lines are error entries of a batch that succeeded. */
        return "BATCH_STATE_SUCCEEDED";
    }
}

static sl_err_t gemini_entry(const sl_sim_batch_view_t *v, const sl_sim_batch_t *b, size_t i,
                             sl_buf_t *out)
{
    const sl_sim_batch_line_t *line = &b->set->lines[i];
    sl_err_t rc = sl_buf_adds(out, i ? ",{" : "{");
    sl_sim_line_fate_t fate = (sl_sim_line_fate_t)b->fate[i];
    if (rc != SL_OK)
        return rc;
    if (fate == SL_SIM_LINE_OK) {
        char body[SL_SIM_BODY_CAP];
        success_body(v, b, i, body, sizeof body);
        rc = sl_buf_addf(out, "\"response\":%s", body);
    } else if (fate == SL_SIM_LINE_SERVER_ERROR) {
        rc = sl_buf_adds(out, "\"error\":{\"code\":500,\"message\":\"Internal error "
                              "encountered.\",\"status\":\"INTERNAL\"}");
    } else if (fate == SL_SIM_LINE_INVALID) {
        rc = sl_buf_addf(out,
                         "\"error\":{\"code\":400,\"message\":\"%s\",\"status\":"
                         "\"INVALID_ARGUMENT\"}",
                         sl_sim_batch_text(b->set, line->error_off));
    } else {
        rc = sl_buf_adds(out, "\"error\":{\"code\":504,\"message\":\"The request did not run "
                              "before the batch deadline.\",\"status\":\"DEADLINE_EXCEEDED\"}");
    }
    if (rc == SL_OK && line->meta_off != SL_SIM_BATCH_NO_TEXT)
        rc = sl_buf_addf(out, ",\"metadata\":%s", sl_sim_batch_text(b->set, line->meta_off));
    return rc == SL_OK ? sl_buf_adds(out, "}") : rc;
}

static sl_err_t gemini_object(const sl_sim_batch_view_t *v, const sl_sim_batch_t *b, sl_buf_t *out)
{
    bool done = ended(b);
    char created[48], updated[48], end_time[80] = "";
    time_or_null(v, b->created_ms, created, sizeof created);
    time_or_null(v, done ? b->ended_ms : b->created_ms, updated, sizeof updated);
    if (done) {
        char t[48];
        time_or_null(v, b->ended_ms, t, sizeof t);
        snprintf(end_time, sizeof end_time, "\"endTime\":%s,", t);
    }
    int64_t n = (int64_t)b->set->n;
    int64_t ok = done ? b->n_ok : 0;
    int64_t bad = done ? b->n_errored + b->n_expired : 0;
    int64_t pending = done ? 0 : n;
    sl_err_t rc = sl_buf_addf(
        out,
        "{\"name\":\"batches/%s\",\"metadata\":{\"@type\":\"type.googleapis.com/"
        "google.ai.generativelanguage.v1beta.GenerateContentBatch\",\"model\":\"models/%s\","
        "\"displayName\":\"%s\",\"createTime\":%s,\"updateTime\":%s,%s\"batchStats\":{"
        "\"requestCount\":\"%lld\",\"successfulRequestCount\":\"%lld\","
        "\"failedRequestCount\":\"%lld\",\"pendingRequestCount\":\"%lld\"},\"state\":\"%s\","
        "\"name\":\"batches/%s\"},\"done\":%s",
        b->id, b->model, b->label != NULL ? b->label : "", created, updated, end_time, (long long)n,
        (long long)ok, (long long)bad, (long long)pending, gemini_state(v, b), b->id,
        done ? "true" : "false");
    if (rc != SL_OK || !done)
        return rc == SL_OK ? sl_buf_adds(out, "}") : rc;
    if (b->status == SL_SIM_BATCH_CANCELLED)
        /* google.longrunning: a cancelled operation ends with the error CANCELLED (code 1). */
        return sl_buf_adds(out, ",\"error\":{\"code\":1,\"message\":\"CANCELLED\"}}");
    rc = sl_buf_adds(out, ",\"response\":{\"@type\":\"type.googleapis.com/"
                          "google.ai.generativelanguage.v1beta.GenerateContentBatchOutput\","
                          "\"inlinedResponses\":{\"inlinedResponses\":[");
    for (size_t i = 0; rc == SL_OK && i < b->set->n; i++)
        rc = gemini_entry(v, b, i, out);
    return rc == SL_OK ? sl_buf_adds(out, "]}}}") : rc;
}

/* ---- Entry points ----------------------------------------------------------------------- */

sl_err_t sl_sim_batch_wire_object(const sl_sim_batch_view_t *v, const sl_sim_batch_t *b,
                                  sl_buf_t *out)
{
    switch (v->dc->api) {
    case SL_SIM_API_OPENAI:
    case SL_SIM_API_AZURE:
        return openai_object(v, b, out);
    case SL_SIM_API_ANTHROPIC:
        return anthropic_object(v, b, out);
    default:
        return gemini_object(v, b, out);
    }
}

sl_err_t sl_sim_batch_wire_results(const sl_sim_batch_view_t *v, const sl_sim_batch_t *b,
                                   bool errors, sl_buf_t *out)
{
    sl_err_t rc = SL_OK;
    for (size_t i = 0; rc == SL_OK && b->fate != NULL && i < b->set->n; i++) {
        if (v->dc->api == SL_SIM_API_ANTHROPIC)
            rc = anthropic_line(v, b, i, out);
        else
            rc = openai_line(v, b, i, errors, out);
    }
    return rc;
}
