/* fuzz_batchwire.c - the batch APIs' readers (dispatcher/batchwire.h) on what a provider
 * answers.
 *
 * Input: any bytes, read by each of the four providers' readers in turn (so the fixtures in
 * tests/fixtures/batch/ are seeds as they are): as a results file (OpenAI, Azure, Anthropic
 * JSONL; Gemini a status answer holding inline responses), and, when the bytes are JSON, as a
 * batch object and as a list page; a JSON object with "messages" is also sent through the create
 * call as a chat body. Contracts checked on every input:
 *   - results: the callback gets only jobs of the batch, each at most once; ok comes with a body,
 *     a 2xx status and no error, anything else with no body and an error {type, message strings;
 *     code string or null}; not_sent exactly when the status is 0;
 *   - status: SL_OK or SL_EPARSE; an id read is one the status, cancel and results calls accept,
 *     and their URLs stay under BASE with no query but Azure's api-version; every text field is
 *     NUL-terminated, valid UTF-8 (it goes to the admin API), a FAILED batch says why;
 *   - list: a batch found carries the marker asked for; a next cursor fits and makes a list URL
 *     with exactly its own query parameters;
 *   - create: the body (or JSONL) is JSON naming the job.
 */
#include <jansson.h>
#include <string.h>

#include "../../dispatcher/batchwire.h"
#include "config.h"
#include "fuzz.h"

#define MARKER "sl-b-000042"

static const char *const BASE[SL_PROVIDER_COUNT] = {
    "https://api.openai.com/v1",
    "https://res.openai.azure.com/openai",
    "https://api.anthropic.com/v1",
    "https://generativelanguage.googleapis.com/v1beta",
};

/* The job names of the fixtures, Gemini's first (its entries are matched by position). */
static const char *const JOBS[] = {"job-g1", "job-g2", "job-g3", "job-g4", "job-1",  "job-2",
                                   "job-3",  "job-4",  "job-5",  "job-6",  "job-7",  "job-8",
                                   "job-a1", "job-a2", "job-a3", "job-a4", "job-a5", "job-a6",
                                   "job-a7", "job-a8", "job-a9", "job-a10"};
#define NJOBS (sizeof JOBS / sizeof JOBS[0])

typedef struct {
    sl_deployment_cfg_t dep;
    sl_batch_target_t t;
} target_t;

static void target_init(target_t *x, sl_provider_t api)
{
    memset(x, 0, sizeof *x);
    x->dep.name = "dep";
    x->dep.api = api;
    x->dep.provider = sl_provider_name(api);
    x->dep.max_output_tokens = 8192;
    x->dep.timeout_ms = 60000;
    x->dep.api_version = api == SL_PROVIDER_AZURE ? "2024-10-21" : "";
    x->dep.base_url = BASE[api];
    x->dep.model = "model-x";
    x->t.dep = &x->dep;
    x->t.base_url = BASE[api];
    x->t.model = "model-batch";
}

static int count_char(const char *s, char c)
{
    int n = 0;
    for (; *s != '\0'; s++)
        n += *s == c;
    return n;
}

/* A URL the executor may call: under BASE, no fragment, no whitespace or control characters,
 * queries exactly as many parameters as expected. */
static void check_url(sl_provider_t api, const char *url, int params)
{
    FUZZ_CHECK(url != NULL);
    FUZZ_CHECK(strncmp(url, BASE[api], strlen(BASE[api])) == 0);
    for (const char *p = url; *p != '\0'; p++)
        FUZZ_CHECK((unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f && *p != '#');
    FUZZ_CHECK(strstr(url + strlen(BASE[api]), "..") == NULL);
    int azure = api == SL_PROVIDER_AZURE;
    int total = params + azure;
    FUZZ_CHECK(count_char(url, '?') == (total > 0));
    FUZZ_CHECK(count_char(url, '&') == (total > 0 ? total - 1 : 0));
}

static void check_text(const char *s, size_t cap)
{
    FUZZ_CHECK(strnlen(s, cap) < cap);
    json_t *j = json_string(s); /* NULL when not valid UTF-8 */
    FUZZ_CHECK(j != NULL);
    json_decref(j);
}

typedef struct {
    unsigned char seen[NJOBS];
} lines_t;

static void on_line(void *arg, const sl_batch_line_t *line)
{
    lines_t *l = arg;
    size_t i = 0;
    while (i < NJOBS && line->job_id != JOBS[i])
        i++;
    FUZZ_CHECK(i < NJOBS);
    FUZZ_CHECK(!l->seen[i]);
    l->seen[i] = 1;
    FUZZ_CHECK((int)line->outcome >= 0 && line->outcome < SL_OUTCOME_COUNT_);
    FUZZ_CHECK(line->http_status >= 0 && line->http_status <= 599);
    FUZZ_CHECK((line->outcome == SL_OUTCOME_NOT_SENT) == (line->http_status == 0));
    if (line->outcome == SL_OUTCOME_OK) {
        FUZZ_CHECK(line->body != NULL && line->error == NULL);
        FUZZ_CHECK(line->http_status >= 200 && line->http_status < 300);
        return;
    }
    FUZZ_CHECK(line->body == NULL);
    FUZZ_CHECK(json_is_object(line->error));
    FUZZ_CHECK(json_is_string(json_object_get(line->error, "type")));
    FUZZ_CHECK(json_is_string(json_object_get(line->error, "message")));
    const json_t *code = json_object_get(line->error, "code");
    FUZZ_CHECK(json_is_string(code) || json_is_null(code));
    char *dump = json_dumps(line->error, JSON_COMPACT);
    FUZZ_CHECK(dump != NULL);
    free(dump);
}

static void check_status(target_t *x, const sl_batch_status_t *st)
{
    sl_provider_t api = x->dep.api;
    FUZZ_CHECK(st->id[0] != '\0');
    check_text(st->id, sizeof st->id);
    check_text(st->marker, sizeof st->marker);
    check_text(st->status, sizeof st->status);
    check_text(st->error, sizeof st->error);
    FUZZ_CHECK(st->state == SL_BATCH_RUNNING || st->state == SL_BATCH_ENDED ||
               st->state == SL_BATCH_FAILED);
    FUZZ_CHECK((st->state == SL_BATCH_FAILED) == (st->error[0] != '\0'));
    FUZZ_CHECK(st->total >= -1 && st->succeeded >= -1 && st->failed >= -1 && st->pending >= -1);
    sl_batch_http_t h;
    FUZZ_CHECK(sl_batch_status_request(&x->t, st->id, &h) == SL_OK);
    check_url(api, h.url, 0);
    sl_batch_http_clear(&h);
    FUZZ_CHECK(sl_batch_cancel_request(&x->t, st->id, &h) == SL_OK);
    check_url(api, h.url, 0);
    FUZZ_CHECK(h.body != NULL);
    sl_batch_http_clear(&h);
    sl_batch_http_t out[2];
    int n = -1;
    FUZZ_CHECK(sl_batch_results_requests(&x->t, st, out, &n) == SL_OK);
    FUZZ_CHECK(n >= 0 && n <= 2);
    for (int i = 0; i < n; i++) {
        FUZZ_CHECK(strcmp(out[i].method, "GET") == 0);
        if (api == SL_PROVIDER_ANTHROPIC) {
            FUZZ_CHECK(strncmp(out[i].url, "https://", 8) == 0 ||
                       strncmp(out[i].url, "http://", 7) == 0);
            (void)sl_batch_url_same_origin(BASE[api], out[i].url);
        } else {
            check_url(api, out[i].url, 0);
        }
        sl_batch_http_clear(&out[i]);
    }
}

static void fuzz_json(target_t *x, const json_t *doc)
{
    sl_provider_t api = x->dep.api;
    sl_batch_status_t st;
    sl_err_t rc = sl_batch_status_read(&x->t, doc, &st);
    FUZZ_CHECK(rc == SL_OK || rc == SL_EPARSE);
    if (rc == SL_OK)
        check_status(x, &st);
    else
        FUZZ_CHECK(st.id[0] == '\0');

    int found = -1;
    char next[128];
    rc = sl_batch_list_read(&x->t, doc, MARKER, &st, &found, next, sizeof next);
    if (api == SL_PROVIDER_ANTHROPIC) {
        FUZZ_CHECK(rc == SL_ENOTFOUND && found == 0);
    } else {
        FUZZ_CHECK(rc == SL_OK || rc == SL_EPARSE);
        FUZZ_CHECK(found == 0 || found == 1);
        FUZZ_CHECK(strnlen(next, sizeof next) < sizeof next);
        if (rc == SL_OK && found) {
            FUZZ_CHECK(strcmp(st.marker, MARKER) == 0);
            check_status(x, &st);
        }
        if (rc == SL_OK && next[0] != '\0') {
            sl_batch_http_t h;
            FUZZ_CHECK(sl_batch_list_request(&x->t, next, &h) == SL_OK);
            check_url(api, h.url, 2);
            sl_batch_http_clear(&h);
        }
    }

    if (json_is_object(doc) && json_object_get(doc, "messages") != NULL) {
        sl_batch_item_t item = {"job-1", doc};
        sl_batch_http_t h;
        int second = -1;
        char err[256];
        rc = sl_batch_create_request(&x->t, MARKER, &item, 1, NULL, NULL, &h, &second, err,
                                     sizeof err);
        FUZZ_CHECK(rc == SL_OK || rc == SL_EINVAL || rc == SL_ETOOBIG);
        if (rc == SL_OK) {
            const char *text = h.body != NULL ? h.body : h.upload;
            FUZZ_CHECK(text != NULL && strstr(text, "job-1") != NULL);
            json_t *sent = json_loads(text, 0, NULL);
            FUZZ_CHECK(json_is_object(sent));
            json_decref(sent);
            FUZZ_CHECK(second == (api == SL_PROVIDER_OPENAI || api == SL_PROVIDER_AZURE));
        } else {
            FUZZ_CHECK(h.url == NULL && h.body == NULL && h.upload == NULL);
        }
        sl_batch_http_clear(&h);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    json_t *doc = json_loadb(text, size, 0, NULL);
    for (int api = 0; api < SL_PROVIDER_COUNT; api++) {
        target_t x;
        target_init(&x, (sl_provider_t)api);
        lines_t lines;
        memset(&lines, 0, sizeof lines);
        size_t bad = 0;
        sl_err_t rc = sl_batch_results_read(&x.t, text, size, JOBS, NJOBS, on_line, &lines, &bad);
        FUZZ_CHECK(rc == SL_OK);
        if (doc != NULL)
            fuzz_json(&x, doc);
    }
    json_decref(doc);
    return 0;
}
