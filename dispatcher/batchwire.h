/* batchwire.h - the providers' batch APIs on the wire: the requests that create, find, poll and
 * cancel a provider batch, and the reading of what the provider answers (docs/provider-batch.md
 * has the formats).
 *
 * The idea to hold first: like the adapters (adapter.h), everything here is pure: no network,
 * no clock. The dispatcher's batch executor (batch.c) makes the HTTP calls these functions
 * describe and feeds the answers back in, so tests feed them hand-written fixtures.
 *
 * Each request body is built from sluice's canonical chat body by the deployment's online
 * adapter (sl_adapter_request), so a batch line says exactly what an online call would have.
 */
#ifndef SL_BATCHWIRE_H
#define SL_BATCHWIRE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "adapter.h"
#include "config.h"
#include "err.h"
#include "msg_usage.h"

/* Where a deployment's batch API is and what it runs: the deployment (its api, credential,
 * api_version and online adapter) and the batch base URL and model from its "batch" config. */
typedef struct {
    const sl_deployment_cfg_t *dep;
    const char *base_url; /* BASE in docs/provider-batch.md, no trailing '/' */
    const char *model;    /* the model (Azure: the Global Batch deployment) batch lines name */
} sl_batch_target_t;

/* One HTTP request of the batch API, without the credential header (the executor adds it, as
 * for online calls). Owns its strings. For a multipart upload (OpenAI and Azure files), body is
 * NULL and upload holds the JSONL content: the executor sends it with curl_mime as the field
 * "file" (filename upload_name, type application/jsonl) beside the field "purpose" = "batch".
 * A POST always has a body or an upload (a cancel sends "{}"); a body is sent as
 * Content-Type: application/json, added by the executor as for online calls. */
typedef struct {
    const char *method; /* "GET" or "POST" (static) */
    char *url;
    char *body; /* JSON text; NULL for GET or an upload */
    size_t body_len;
    char *upload; /* JSONL of an upload; NULL otherwise */
    size_t upload_len;
    char *upload_name;
    int nheaders;
    char *headers[SL_ADAPTER_MAX_HEADERS]; /* extra non-secret lines, e.g. anthropic-version */
} sl_batch_http_t;

/* Frees what h holds and empties it; an empty h is a no-op. */
void sl_batch_http_clear(sl_batch_http_t *h);

/* One request of a batch: the job id (the custom id) and its canonical chat body (not
 * modified; "stream" in it is ignored: a batch line is never streamed). */
typedef struct {
    const char *job_id;
    const json_t *chat;
} sl_batch_item_t;

/* What to send to create a batch named marker from n items (n >= 1). OpenAI and Azure: *first
 * is the file upload and the create call needs the file's id (sl_batch_create_after_upload);
 * Anthropic and Gemini: *first is the create call itself and needs_second is 0. An item the
 * provider's API cannot express (sl_adapter_request says SL_EINVAL) is left out and reported
 * through refused (its index into items, and the reason), so the batch still goes; refused may
 * be NULL only when the caller accepts losing them. An item whose job id is not
 * [A-Za-z0-9_-]{1,64}, or repeats an earlier item's, is refused the same way (results are
 * matched by job id). marker must be [a-z0-9-]{1,64}. Returns SL_OK, SL_EINVAL (nothing left to
 * send, a bad marker or target: err says why), SL_ETOOBIG (the items are over the provider's
 * limit for one batch: OpenAI/Azure 50,000 lines or 200 MB, Anthropic 100,000 requests or
 * 256 MB, Gemini 20 MB inline; err says which; send fewer) or SL_ENOMEM. refused may have been
 * called before a failure. On failure *first is left empty. */
typedef void (*sl_batch_refused_fn)(void *arg, size_t item, const char *reason);
sl_err_t sl_batch_create_request(const sl_batch_target_t *t, const char *marker,
                                 const sl_batch_item_t *items, size_t n,
                                 sl_batch_refused_fn refused, void *arg, sl_batch_http_t *first,
                                 int *needs_second, char *err, size_t errlen);

/* OpenAI and Azure: the create call after the upload, from the upload's answer (the file
 * object). SL_EPARSE when upload_answer holds no file id. */
sl_err_t sl_batch_create_after_upload(const sl_batch_target_t *t, const char *marker,
                                      const json_t *upload_answer, sl_batch_http_t *out);

/* The provider's state of a batch, reduced to what sluice acts on. */
typedef enum {
    SL_BATCH_RUNNING = 0, /* accepted, not ended (validating, in_progress, finalizing, pending,
                           * running, cancelling/canceling) */
    SL_BATCH_ENDED,       /* ended with results to read (completed, ended, succeeded; also
                           * expired and cancelled when some lines ran) */
    SL_BATCH_FAILED       /* ended without running any line (OpenAI failed: the input was
                           * refused, e.g. over the enqueued-token limit; Gemini FAILED) */
} sl_batch_state_t;

typedef struct {
    char id[128];    /* the provider's batch id ("batch_…", "msgbatch_…", "batches/…") */
    char marker[72]; /* the marker read back (metadata.sluice_batch, displayName); "" none */
    char status[40]; /* the provider's own status word, for logs and the admin API */
    sl_batch_state_t state;
    int64_t total, succeeded, failed, pending; /* the provider's counts; -1 = not said */
    /* Where the results are once ended: OpenAI/Azure the output and error file ids (either may
     * be ""), Anthropic the results_url in results[0]; Gemini: inline (results_inline = 1: the
     * status answer itself holds them). */
    char results[2][512];
    int results_inline;
    char error[256]; /* why it failed, when FAILED ("" otherwise) */
} sl_batch_status_t;

/* Reads a batch object (the answer to create, status or cancel; for Gemini an operation; Gemini's
 * cancel answers {}, which is not one: poll the status after it). SL_EPARSE when answer is not
 * one, or when an id or results location in it could not safely go into a URL (then *out holds
 * no id). A status word sluice does not know reads as SL_BATCH_RUNNING; so does Anthropic's
 * "ended" before its results_url is set, and Gemini's SUCCEEDED before "done". */
sl_err_t sl_batch_status_read(const sl_batch_target_t *t, const json_t *answer,
                              sl_batch_status_t *out);

/* The status call of batch id (as sl_batch_status_t.id). An id a provider could not have given
 * (OpenAI, Azure, Anthropic: [A-Za-z0-9_.-]+; Gemini: "batches/" and the same; never "..") is
 * SL_EINVAL: an id never adds a path segment or a query. */
sl_err_t sl_batch_status_request(const sl_batch_target_t *t, const char *id, sl_batch_http_t *out);
/* The cancel call of batch id. */
sl_err_t sl_batch_cancel_request(const sl_batch_target_t *t, const char *id, sl_batch_http_t *out);
/* The calls that read the results of an ended batch (OpenAI/Azure: one per non-empty file id,
 * Anthropic: results_url, used as given with anthropic-version; Gemini: none, inline):
 * out[0..*n-1], *n <= 2. The executor must follow an Anthropic results_url only when
 * sl_batch_url_same_origin(BASE, url) says so: the credential goes with it. */
sl_err_t sl_batch_results_requests(const sl_batch_target_t *t, const sl_batch_status_t *st,
                                   sl_batch_http_t out[2], int *n);

/* The list call that finds a batch by marker: page is "" for the first page, else the cursor
 * sl_batch_list_read returned. SL_ENOTFOUND for Anthropic, whose batches carry no label. */
sl_err_t sl_batch_list_request(const sl_batch_target_t *t, const char *page, sl_batch_http_t *out);
/* Reads a list page: *found = 1 and *st filled when a batch labelled marker is on it; next gets
 * the cursor of the next page ("" when this was the last; never cut: a cursor longer than
 * nextlen - 1 is SL_EPARSE, or "" when the batch was found). SL_EPARSE when page_answer is not a
 * list. SL_ENOTFOUND for Anthropic. */
sl_err_t sl_batch_list_read(const sl_batch_target_t *t, const json_t *page_answer,
                            const char *marker, sl_batch_status_t *st, int *found, char *next,
                            size_t nextlen);

/* One result line, as the usage event needs it: outcome, HTTP status (0 when the line never ran),
 * on success the provider-native answer body (read it with the deployment's adapter:
 * sl_adapter_response / sl_adapter_usage_of), else an error object {type, code, message}. All
 * borrowed for the time of the callback. */
typedef struct {
    const char *job_id;
    size_t index;         /* job_id's position in the job_ids given to sl_batch_results_read */
    sl_outcome_t outcome; /* ok; client_error, rate_limited, server_error, ... as an online answer
                           * of that status would be; not_sent when it never ran (expired,
                           * cancelled, missing) */
    int http_status;
    const json_t *body;  /* provider-native success body; NULL unless ok */
    const json_t *error; /* NULL when ok */
} sl_batch_line_t;

typedef void (*sl_batch_line_fn)(void *arg, const sl_batch_line_t *line);

/* Reads results: text (len bytes) is the JSONL of a results call (OpenAI/Azure output or error
 * file, Anthropic results) or, for Gemini, the status answer holding the inline responses;
 * job_ids (n, in the order the batch was created) name the batch's jobs: Gemini's entries are
 * matched by position (and checked against metadata.key when echoed). fn is called once per
 * line that names one of job_ids; a line that cannot be read or names another job is counted in
 * *bad (may be NULL) and skipped: a line over 16 MB or nested over 256 deep, a second line for
 * a job (only the first counts), a Gemini entry whose echoed metadata.key is not job_ids[i].
 * Jobs with no line are the caller's to call not_sent. Returns SL_OK or SL_ENOMEM (SL_EINVAL
 * for a NULL target or fn). */
sl_err_t sl_batch_results_read(const sl_batch_target_t *t, const char *text, size_t len,
                               const char *const *job_ids, size_t n, sl_batch_line_fn fn, void *arg,
                               size_t *bad);

/* 1 when url has the scheme, host and port of base (default ports filled in, host compared
 * without case), 0 otherwise, and for anything sluice would not follow: not http(s), user info
 * ("https://base@elsewhere"), a percent sign, a backslash or a bad port in the authority. */
int sl_batch_url_same_origin(const char *base, const char *url);

#endif
