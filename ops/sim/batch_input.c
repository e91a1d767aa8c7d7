/* batch_input.c - reading a batch's input into a line set (see batch_internal.h): an OpenAI or
 * Azure JSONL file, an Anthropic Message Batches create body, a Gemini batchGenerateContent body.
 *
 * Each line's body goes through the same parser and cost function as an online request of the
 * deployment's API (sl_sim_wire_parse, sl_sim_admit_cost), so its prompt estimate and completion
 * length are what an online call with that body would have had. Nothing here takes the lock or
 * touches the simulator's state.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "batch_internal.h"
#include "hmap.h"

/* The strings of a set: custom ids, messages and metadata. Inputs are at most 256 MB, and
 * escaping can grow a string sixfold; offsets are 32-bit. */
#define SET_TEXT_MAX ((size_t)UINT32_MAX - 1)

static sl_sim_batch_set_t *set_new(size_t bytes)
{
    sl_sim_batch_set_t *set = calloc(1, sizeof *set);
    if (set == NULL)
        return NULL;
    set->refs = 1;
    set->bytes = bytes;
    sl_buf_init(&set->text, SET_TEXT_MAX);
    return set;
}

void sl_sim_batch_set_unref(sl_sim_batch_set_t *set)
{
    if (set == NULL || --set->refs > 0)
        return;
    free(set->lines);
    sl_buf_free(&set->text);
    free(set);
}

/* Adds s to the set's text; *off gets where it starts. */
static sl_err_t add_text(sl_sim_batch_set_t *set, const char *s, uint32_t *off)
{
    *off = (uint32_t)set->text.len;
    return sl_buf_add(&set->text, s, strlen(s) + 1);
}

/* Adds s JSON-escaped to the set's text. */
static sl_err_t add_escaped(sl_sim_batch_set_t *set, const char *s, uint32_t *off)
{
    size_t cap = strlen(s) * 6 + 1;
    char *esc = malloc(cap);
    if (esc == NULL)
        return SL_ENOMEM;
    sl_sim_wire_escape(esc, cap, s);
    sl_err_t rc = add_text(set, esc, off);
    free(esc);
    return rc;
}

/* Adds a line: custom_id (raw, may be ""), meta (Gemini's metadata, or NULL) and body (the
 * request body; anything but an object is an invalid line). */
static sl_err_t add_line(sl_sim_batch_set_t *set, const sl_sim_dep_config_t *dc,
                         const char *custom_id, json_t *meta, json_t *body)
{
    if (sl_grow((void **)&set->lines, sizeof *set->lines, &set->lines_cap, set->n + 1,
                SIZE_MAX / sizeof *set->lines) != SL_OK)
        return SL_ENOMEM;
    sl_sim_batch_line_t line = {.meta_off = SL_SIM_BATCH_NO_TEXT,
                                .error_off = SL_SIM_BATCH_NO_TEXT};
    sl_err_t rc = add_escaped(set, custom_id, &line.id_off);
    if (rc == SL_OK && meta != NULL) {
        char *text = json_dumps(meta, JSON_COMPACT);
        rc = text == NULL ? SL_ENOMEM : add_text(set, text, &line.meta_off);
        free(text);
    }
    if (rc != SL_OK)
        return rc;
    char *text = json_is_object(body) ? json_dumps(body, JSON_COMPACT) : NULL;
    if (json_is_object(body) && text == NULL)
        return SL_ENOMEM;
    size_t len = text != NULL ? strlen(text) : 0;
    sl_sim_ask_t ask;
    sl_sim_error_t err;
    if (sl_sim_wire_parse(dc->api, text, len, &ask, &err)) {
        /* The same completion length an online request with this body would get. */
        sl_sim_request_t req = {.body = text, .body_len = len};
        sl_sim_chat_t chat;
        sl_sim_admit_cost(dc, &req, &ask, &chat);
        line.prompt_tokens = chat.prompt_tokens;
        line.completion_tokens = chat.completion_tokens;
        line.hit_max_tokens = chat.hit_max_tokens;
    } else {
        int64_t estimate = text != NULL ? sl_sim_prompt_estimate(text, len) : -1;
        line.prompt_tokens = estimate > 0 ? estimate : 0;
        rc = add_escaped(set, err.message, &line.error_off);
    }
    free(text);
    if (rc != SL_OK)
        return rc;
    set->lines[set->n++] = line;
    set->tokens += line.prompt_tokens;
    return SL_OK;
}

/* ---- OpenAI and Azure: a JSONL file ----------------------------------------------------- */

static void add_problem(sl_sim_batch_set_t *set, const char *code, int64_t line, const char *fmt,
                        ...) __attribute__((format(printf, 4, 5)));

static void add_problem(sl_sim_batch_set_t *set, const char *code, int64_t line, const char *fmt,
                        ...)
{
    if (set->n_problems == SL_SIM_BATCH_PROBLEMS_MAX)
        return;
    sl_sim_batch_problem_t *p = &set->problems[set->n_problems++];
    snprintf(p->code, sizeof p->code, "%s", code);
    char msg[sizeof p->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sl_sim_wire_escape(p->message, sizeof p->message, msg);
    p->line = line;
}

static bool is_blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return false;
    }
    return true;
}

/* Checks one line of a file; true when it may run. first_model holds the file's model so far. */
static bool check_line(sl_sim_batch_set_t *set, const sl_sim_dep_config_t *dc, json_t *root,
                       int64_t line_no, sl_hmap_t *seen, char *first_model, size_t model_cap,
                       sl_err_t *rc)
{
    const char *url = dc->api == SL_SIM_API_AZURE ? "/chat/completions" : "/v1/chat/completions";
    if (!json_is_object(root)) {
        add_problem(set, "invalid_json_line", line_no,
                    "Line %lld is not a valid JSON object. Each line must be a JSON object.",
                    (long long)line_no);
        return false;
    }
    json_t *id = json_object_get(root, "custom_id");
    if (!json_is_string(id) || json_string_length(id) == 0 ||
        json_string_length(id) > SL_SIM_BATCH_CUSTOM_ID_MAX) {
        add_problem(set, "invalid_custom_id", line_no,
                    "Line %lld: 'custom_id' must be a string of 1 to %d characters.",
                    (long long)line_no, SL_SIM_BATCH_CUSTOM_ID_MAX);
        return false;
    }
    if (sl_hmap_get(seen, json_string_value(id)) != NULL) {
        add_problem(set, "duplicate_custom_id", line_no,
                    "Line %lld: the custom_id '%.64s' is used by an earlier line; custom ids "
                    "must be unique within a batch.",
                    (long long)line_no, json_string_value(id));
        return false;
    }
    if (sl_hmap_put(seen, json_string_value(id), (void *)1) != SL_OK) {
        *rc = SL_ENOMEM;
        return false;
    }
    json_t *method = json_object_get(root, "method");
    if (!json_is_string(method) || strcmp(json_string_value(method), "POST") != 0) {
        add_problem(set, "invalid_method", line_no, "Line %lld: 'method' must be 'POST'.",
                    (long long)line_no);
        return false;
    }
    json_t *line_url = json_object_get(root, "url");
    if (!json_is_string(line_url) || strcmp(json_string_value(line_url), url) != 0) {
        add_problem(set, "invalid_url", line_no, "Line %lld: 'url' must be '%s'.",
                    (long long)line_no, url);
        return false;
    }
    json_t *body = json_object_get(root, "body");
    json_t *model = json_object_get(body, "model");
    if (!json_is_object(body) || !json_is_string(model) || json_string_length(model) == 0 ||
        json_string_length(model) > SL_SIM_BATCH_MODEL_MAX) {
        add_problem(set, "missing_model", line_no,
                    "Line %lld: 'body' must be an object with a 'model' of 1 to %d characters.",
                    (long long)line_no, SL_SIM_BATCH_MODEL_MAX);
        return false;
    }
    if (first_model[0] == '\0') {
        snprintf(first_model, model_cap, "%s", json_string_value(model));
        sl_sim_wire_escape(set->model, sizeof set->model, first_model);
        snprintf(set->url, sizeof set->url, "%s", url);
    } else if (strcmp(first_model, json_string_value(model)) != 0) {
        add_problem(set, "mixed_models", line_no,
                    "Line %lld: the model '%.64s' differs from the file's model '%.64s'; a batch "
                    "input file may name only one model.",
                    (long long)line_no, json_string_value(model), first_model);
        return false;
    }
    return true;
}

sl_err_t sl_sim_batch_read_jsonl(const sl_sim_dep_config_t *dc, const char *data, size_t len,
                                 sl_sim_batch_set_t **out)
{
    *out = NULL;
    sl_sim_batch_set_t *set = set_new(len);
    sl_hmap_t *seen = sl_hmap_new();
    if (set == NULL || seen == NULL) {
        sl_sim_batch_set_unref(set);
        sl_hmap_free(seen);
        return SL_ENOMEM;
    }
    char first_model[SL_SIM_BATCH_MODEL_MAX + 1] = "";
    sl_err_t rc = SL_OK;
    int64_t line_no = 0;
    int64_t requests = 0;
    const char *p = data;
    const char *end = data + len;
    while (rc == SL_OK && p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL)
            eol = end;
        const char *line = p;
        size_t n = (size_t)(eol - p);
        p = eol < end ? eol + 1 : end;
        line_no++;
        if (is_blank(line, n))
            continue;
        if (++requests > SL_SIM_BATCH_OPENAI_MAX_LINES)
            continue; /* counted, not read: the file fails below */
        json_t *root = json_loadb(line, n, 0, NULL);
        if (check_line(set, dc, root, line_no, seen, first_model, sizeof first_model, &rc))
            rc = add_line(set, dc, json_string_value(json_object_get(root, "custom_id")), NULL,
                          json_object_get(root, "body"));
        json_decref(root);
    }
    sl_hmap_free(seen);
    if (rc == SL_OK && requests > SL_SIM_BATCH_OPENAI_MAX_LINES) {
        /* The line count comes first, whatever else was found in the lines read. */
        if (set->n_problems == SL_SIM_BATCH_PROBLEMS_MAX)
            set->n_problems--;
        memmove(&set->problems[1], &set->problems[0], set->n_problems * sizeof *set->problems);
        set->n_problems++;
        size_t kept = set->n_problems;
        set->n_problems = 0;
        add_problem(set, "too_many_lines", 0,
                    "The input file has %lld requests; a batch may hold at most %d.",
                    (long long)requests, SL_SIM_BATCH_OPENAI_MAX_LINES);
        set->n_problems = kept;
    }
    if (rc == SL_OK && requests == 0)
        add_problem(set, "empty_file", 0, "The input file holds no requests.");
    if (rc != SL_OK) {
        sl_sim_batch_set_unref(set);
        return rc;
    }
    *out = set;
    return SL_OK;
}

/* ---- Anthropic: the create body --------------------------------------------------------- */

static bool anthropic_custom_id_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return false;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

sl_err_t sl_sim_batch_read_anthropic(const sl_sim_dep_config_t *dc, const char *body, size_t len,
                                     sl_sim_batch_set_t **out, sl_sim_error_t *err)
{
    *out = NULL;
    memset(err, 0, sizeof *err);
    err->kind = SL_SIM_ERR_INVALID;
    json_t *root = body != NULL && len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
    sl_sim_batch_set_t *set = NULL;
    sl_hmap_t *seen = NULL;
    sl_err_t rc = SL_EINVAL;
    if (!json_is_object(root)) {
        snprintf(err->message, sizeof err->message,
                 "There was an error parsing the body of your request: expected a JSON object.");
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (strcmp(key, "requests") != 0) {
            snprintf(err->message, sizeof err->message, "%.64s: Extra inputs are not permitted",
                     key);
            goto out;
        }
    }
    json_t *requests = json_object_get(root, "requests");
    if (!json_is_array(requests)) {
        snprintf(err->message, sizeof err->message, "requests: Field required");
        goto out;
    }
    size_t n = json_array_size(requests);
    if (n == 0 || n > SL_SIM_BATCH_ANTHROPIC_MAX_REQUESTS) {
        snprintf(err->message, sizeof err->message,
                 "requests: List should have at least 1 item and at most %d items after "
                 "validation, not %zu",
                 SL_SIM_BATCH_ANTHROPIC_MAX_REQUESTS, n);
        goto out;
    }
    set = set_new(len);
    seen = sl_hmap_new();
    if (set == NULL || seen == NULL) {
        rc = SL_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *item = json_array_get(requests, i);
        json_t *id = json_object_get(item, "custom_id");
        json_t *params = json_object_get(item, "params");
        if (!json_is_object(item) || !json_is_string(id) ||
            !anthropic_custom_id_ok(json_string_value(id))) {
            snprintf(err->message, sizeof err->message,
                     "requests.%zu.custom_id: String should match pattern "
                     "'^[a-zA-Z0-9_-]{1,64}$'",
                     i);
            goto out;
        }
        if (!json_is_object(params)) {
            snprintf(err->message, sizeof err->message, "requests.%zu.params: Field required", i);
            goto out;
        }
        json_object_foreach(item, key, val)
        {
            if (strcmp(key, "custom_id") != 0 && strcmp(key, "params") != 0) {
                snprintf(err->message, sizeof err->message,
                         "requests.%zu.%.64s: Extra inputs are not permitted", i, key);
                goto out;
            }
        }
        if (sl_hmap_get(seen, json_string_value(id)) != NULL) {
            snprintf(err->message, sizeof err->message,
                     "Duplicate custom_id values are not allowed within a batch: %s",
                     json_string_value(id));
            goto out;
        }
        rc = sl_hmap_put(seen, json_string_value(id), (void *)1);
        if (rc == SL_OK)
            rc = add_line(set, dc, json_string_value(id), NULL, params);
        if (rc != SL_OK)
            goto out;
        rc = SL_EINVAL;
    }
    rc = SL_OK;
    *out = set;
    set = NULL;
out:
    sl_hmap_free(seen);
    sl_sim_batch_set_unref(set);
    json_decref(root);
    return rc;
}

/* ---- Gemini: batchGenerateContent with inline requests ---------------------------------- */

/* Either spelling of a proto field. */
static json_t *field(json_t *obj, const char *camel, const char *snake)
{
    json_t *v = json_object_get(obj, camel);
    return v != NULL ? v : json_object_get(obj, snake);
}

sl_err_t sl_sim_batch_read_gemini(const sl_sim_dep_config_t *dc, const char *body, size_t len,
                                  sl_sim_batch_set_t **out, char *display_name,
                                  size_t display_name_cap, sl_sim_error_t *err)
{
    *out = NULL;
    display_name[0] = '\0';
    memset(err, 0, sizeof *err);
    err->kind = SL_SIM_ERR_INVALID;
    json_t *root = body != NULL && len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
    sl_sim_batch_set_t *set = NULL;
    sl_err_t rc = SL_EINVAL;
    if (!json_is_object(root)) {
        snprintf(err->message, sizeof err->message,
                 "Invalid JSON payload received. Expected a JSON object.");
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (strcmp(key, "batch") != 0) {
            snprintf(err->message, sizeof err->message,
                     "Invalid JSON payload received. Unknown name \"%.64s\": Cannot find field.",
                     key);
            goto out;
        }
    }
    json_t *batch = json_object_get(root, "batch");
    json_t *name = field(batch, "displayName", "display_name");
    json_t *input = field(batch, "inputConfig", "input_config");
    json_t *requests = json_object_get(json_object_get(input, "requests"), "requests");
    if (!json_is_object(batch) || !json_is_object(input)) {
        snprintf(err->message, sizeof err->message,
                 "* BatchGenerateContentRequest.batch.input_config: input_config is required\n");
        goto out;
    }
    if (name != NULL && (!json_is_string(name) || json_string_length(name) > 512)) {
        snprintf(err->message, sizeof err->message,
                 "* BatchGenerateContentRequest.batch.display_name: must be a string of at most "
                 "512 characters\n");
        goto out;
    }
    if (json_is_string(name))
        sl_sim_wire_escape(display_name, display_name_cap, json_string_value(name));
    if (!json_is_array(requests) || json_array_size(requests) == 0) {
        snprintf(err->message, sizeof err->message,
                 "* BatchGenerateContentRequest.batch.input_config.requests.requests: requests "
                 "must not be empty (the simulator takes inline requests only)\n");
        goto out;
    }
    set = set_new(len);
    if (set == NULL) {
        rc = SL_ENOMEM;
        goto out;
    }
    size_t i;
    json_t *item;
    json_array_foreach(requests, i, item)
    {
        json_t *meta = json_object_get(item, "metadata");
        json_t *request = json_object_get(item, "request");
        if (!json_is_object(item) || !json_is_object(request) ||
            (meta != NULL && !json_is_object(meta))) {
            snprintf(err->message, sizeof err->message,
                     "* BatchGenerateContentRequest.batch.input_config.requests.requests[%zu]: "
                     "needs a request object (and metadata, when present, an object)\n",
                     i);
            goto out;
        }
        json_t *k = json_object_get(meta, "key");
        rc = add_line(set, dc, json_is_string(k) ? json_string_value(k) : "", meta, request);
        if (rc != SL_OK)
            goto out;
        rc = SL_EINVAL;
    }
    rc = SL_OK;
    *out = set;
    set = NULL;
out:
    sl_sim_batch_set_unref(set);
    json_decref(root);
    return rc;
}
