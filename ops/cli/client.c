/* client.c - the admin API client (see client.h): where the API is, the admin key, and one
 * HTTP call per answer through libcurl.
 */
#include "client.h"

#include <curl/curl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cli.h"
#include "fields.h"
#include "util.h"

#define TIMEOUT_MS 10000L
#define ANSWER_MAX_BYTES ((size_t)32 << 20) /* a status of many thousands of tenants fits */
#define KEY_FILE_MAX_BYTES ((size_t)64 << 10)

struct sl_cli_admin {
    const char *prog; /* "sluice status": prefix of usage messages */
    char *base_url;   /* "http://host:port", no trailing slash */
    char *key;        /* the admin key; wiped when freed */
    int json;         /* --json: print answers as JSON */
    CURL *curl;
};

/* ---- Where the API is, and the key ------------------------------------------------------ */

/* The admin key: the first line of key_file, else $SLUICE_ADMIN_KEY. NULL with err set when
 * there is none (caller frees the key with free_key). */
static char *read_key(const char *key_file, char *err, size_t errlen)
{
    char *key = NULL;
    if (key_file != NULL) {
        char *data = NULL;
        size_t len = 0;
        sl_err_t rc = sl_read_file(key_file, KEY_FILE_MAX_BYTES, &data, &len);
        if (rc != SL_OK) {
            snprintf(err, errlen, "cannot read the admin key file %s: %s", key_file,
                     sl_strerror(rc));
            return NULL;
        }
        size_t start = strspn(data, " \t");
        size_t end = start + strcspn(data + start, "\r\n");
        while (end > start && (data[end - 1] == ' ' || data[end - 1] == '\t'))
            end--;
        if (end > start)
            key = strndup(data + start, end - start);
        sodium_memzero(data, len);
        free(data);
        if (key == NULL) {
            snprintf(err, errlen, "the first line of %s holds no admin key", key_file);
            return NULL;
        }
        return key;
    }
    const char *env = getenv("SLUICE_ADMIN_KEY");
    if (env == NULL || env[0] == '\0') {
        snprintf(err, errlen, "no admin key: give --admin-key-file FILE or set SLUICE_ADMIN_KEY");
        return NULL;
    }
    /* The key goes into a header line; a line break would forge headers. */
    if (strpbrk(env, "\r\n") != NULL) {
        snprintf(err, errlen, "SLUICE_ADMIN_KEY holds a line break");
        return NULL;
    }
    key = strdup(env);
    if (key == NULL)
        snprintf(err, errlen, "out of memory");
    return key;
}

static void free_key(char *key)
{
    if (key != NULL) {
        sodium_memzero(key, strlen(key));
        free(key);
    }
}

/* The API's base URL: --admin, else $SLUICE_ADMIN_URL, else http:// + the config's
 * scheduler.admin_listen (a wildcard host becomes the loopback). NULL with err set when the
 * config turns the API off. Caller frees. */
static char *resolve_url(const sl_config_t *cfg, const char *flag, char *err, size_t errlen)
{
    const char *url = flag;
    const char *env = getenv("SLUICE_ADMIN_URL");
    if (url == NULL && env != NULL && env[0] != '\0')
        url = env;
    char buf[1024];
    if (url == NULL) {
        const char *listen = cfg != NULL ? cfg->admin_listen : NULL;
        if (listen == NULL || listen[0] == '\0') {
            snprintf(err, errlen,
                     "the config turns the admin API off (scheduler.admin_listen is \"\"); "
                     "give --admin URL or set SLUICE_ADMIN_URL");
            return NULL;
        }
        if (strncmp(listen, "0.0.0.0:", 8) == 0)
            snprintf(buf, sizeof buf, "http://127.0.0.1:%s", listen + 8);
        else if (strncmp(listen, "[::]:", 5) == 0)
            snprintf(buf, sizeof buf, "http://[::1]:%s", listen + 5);
        else
            snprintf(buf, sizeof buf, "http://%s", listen);
    } else if (strstr(url, "://") == NULL) {
        snprintf(buf, sizeof buf, "http://%s", url);
    } else {
        snprintf(buf, sizeof buf, "%s", url);
    }
    size_t n = strlen(buf);
    while (n > 0 && buf[n - 1] == '/')
        buf[--n] = '\0';
    char *out = strdup(buf);
    if (out == NULL)
        snprintf(err, errlen, "out of memory");
    return out;
}

int sl_cli_admin_open(sl_proc_opts_t *proc, const char *prog, const sl_cli_admin_opts_t *opts,
                      sl_cli_admin_t **out)
{
    char err[512] = "";
    *out = NULL;
    sl_config_t *cfg = sl_cli_config(proc);
    sl_cli_admin_t *a = calloc(1, sizeof *a);
    if (a == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        sl_config_free(cfg);
        return 2;
    }
    a->prog = prog;
    a->json = opts->json;
    a->base_url = resolve_url(cfg, opts->admin_url, err, sizeof err);
    sl_config_free(cfg);
    if (a->base_url != NULL)
        a->key = read_key(opts->key_file, err, sizeof err);
    if (a->base_url == NULL || a->key == NULL) {
        fprintf(stderr, "%s: %s\n", prog, err);
        free(a->base_url);
        free(a);
        return 2;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "%s: libcurl failed to initialise\n", prog);
        free(a->base_url);
        free_key(a->key);
        free(a);
        return 2;
    }
    *out = a;
    return 0;
}

void sl_cli_admin_close(sl_cli_admin_t *a)
{
    if (a == NULL)
        return;
    if (a->curl != NULL)
        curl_easy_cleanup(a->curl);
    curl_global_cleanup();
    free(a->base_url);
    free_key(a->key);
    free(a);
}

const char *sl_cli_admin_prog(const sl_cli_admin_t *a)
{
    return a->prog;
}

const char *sl_cli_admin_url(const sl_cli_admin_t *a)
{
    return a->base_url;
}

int sl_cli_admin_json(const sl_cli_admin_t *a)
{
    return a->json;
}

/* ---- Calls ---------------------------------------------------------------------------- */

typedef struct {
    sl_buf_t body; /* capped at ANSWER_MAX_BYTES */
    int toobig;
} answer_buf_t;

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    answer_buf_t *b = ud;
    size_t n = size * nmemb;
    sl_err_t rc = sl_buf_add(&b->body, ptr, n);
    b->toobig |= rc == SL_ETOOBIG;
    return rc == SL_OK ? n : 0;
}

/* Ctrl-C during a call ends it at once instead of after the timeout. */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)ud;
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    return sl_stop_requested() ? 1 : 0;
}

/* Appends one header line; on failure the list stays as it was (and is still freed). */
static int add_header(struct curl_slist **list, const char *line)
{
    struct curl_slist *longer = curl_slist_append(*list, line);
    if (longer == NULL)
        return 0;
    *list = longer;
    return 1;
}

int sl_cli_admin_call(sl_cli_admin_t *a, const char *method, const char *path, const json_t *body,
                      json_t **answer, char *err, size_t errlen)
{
    *answer = NULL;
    int rc = 1;
    char url[2048];
    char curl_err[CURL_ERROR_SIZE] = "";
    char *auth = NULL;
    char *payload = NULL;
    struct curl_slist *headers = NULL;
    answer_buf_t buf = {.toobig = 0};
    sl_buf_init(&buf.body, ANSWER_MAX_BYTES);
    snprintf(url, sizeof url, "%s%s", a->base_url, path);
    if (a->curl == NULL)
        a->curl = curl_easy_init();
    if (a->curl == NULL || asprintf(&auth, "Authorization: Bearer %s", a->key) < 0) {
        auth = NULL;
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    CURL *c = a->curl;
    curl_easy_reset(c);
    /* An empty POST gets an empty Content-Type: curl would label nothing as a form. */
    const char *content_type = body != NULL                 ? "Content-Type: application/json"
                               : strcmp(method, "GET") != 0 ? "Content-Type:"
                                                            : NULL;
    int ok = add_header(&headers, auth) && add_header(&headers, "Accept: application/json") &&
             (content_type == NULL || add_header(&headers, content_type));
    if (body != NULL)
        payload = json_dumps(body, JSON_COMPACT);
    if (!ok || (body != NULL && payload == NULL)) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "sluice-cli");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &buf);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    if (strcmp(method, "GET") != 0) {
        /* POST with an empty body for pause/resume; PUT carries the JSON body. */
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload != NULL ? payload : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)(payload != NULL ? strlen(payload) : 0));
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    }
    CURLcode cc = curl_easy_perform(c);
    if (cc != CURLE_OK) {
        const char *detail = curl_err[0] != '\0' ? curl_err : curl_easy_strerror(cc);
        if (cc == CURLE_ABORTED_BY_CALLBACK)
            snprintf(err, errlen, "interrupted");
        else if (buf.toobig)
            snprintf(err, errlen, "%s: the answer is larger than %zu MiB", url,
                     ANSWER_MAX_BYTES >> 20);
        else if (cc == CURLE_COULDNT_CONNECT)
            snprintf(err, errlen,
                     "cannot connect to %s (%s); is the scheduler running? Its admin API may be "
                     "off (scheduler.admin_listen in its config), or use --admin URL",
                     url, detail);
        else if (cc == CURLE_OPERATION_TIMEDOUT)
            snprintf(err, errlen, "%s: no answer within %ld s", url, TIMEOUT_MS / 1000);
        else
            snprintf(err, errlen, "%s: %s", url, detail);
        goto out;
    }
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    json_t *doc = buf.body.ptr != NULL ? json_loadb(buf.body.ptr, buf.body.len, 0, NULL) : NULL;
    if (status >= 200 && status < 300 && doc != NULL) {
        *answer = doc;
        rc = 0;
        goto out;
    }
    const json_t *error = json_object_get(doc, "error");
    if (status >= 300 && json_is_string(json_object_get(error, "code")))
        snprintf(err, errlen, "%s: %s", sl_cli_get_str(error, "code", "?"),
                 sl_cli_get_str(error, "message", ""));
    else if (status >= 300)
        snprintf(err, errlen, "%s answered HTTP %ld", url, status);
    else
        snprintf(err, errlen, "%s answered something that is not JSON", url);
    json_decref(doc);
out:
    curl_slist_free_all(headers);
    if (auth != NULL) {
        sodium_memzero(auth, strlen(auth));
        free(auth);
    }
    free(payload);
    sl_buf_free(&buf.body);
    return rc;
}

int sl_cli_admin_request(sl_cli_admin_t *a, const char *method, const char *path,
                         const json_t *body, json_t **answer)
{
    char err[4096] = "";
    if (sl_cli_admin_call(a, method, path, body, answer, err, sizeof err) != 0) {
        fprintf(stderr, "sluice: %s\n", err);
        return 1;
    }
    return 0;
}

int sl_cli_print_json(const json_t *doc)
{
    char *text = json_dumps(doc, JSON_INDENT(2));
    if (text == NULL)
        return 1;
    puts(text);
    free(text);
    return 0;
}

int sl_cli_admin_unexpected(const sl_cli_admin_t *a)
{
    fprintf(stderr, "%s: the scheduler's answer is not what this sluice expects (try --json)\n",
            a->prog);
    return 1;
}

char *sl_cli_url_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = malloc(strlen(s) * 3 + 1);
    if (out == NULL)
        return NULL;
    char *o = out;
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~:", *p) != NULL) {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    return out;
}
