/* bench/baseline - the client-side baseline sluice is compared with: one tenant's client, in C
 * over libcurl's multi interface, following the algorithm of the OpenAI cookbook's
 * api_request_parallel_processor.py.
 *
 * The idea to hold first: the client paces itself with its own two per-minute buckets and
 * nothing else. Each bucket holds a whole minute of its configured limit and refills
 * continuously (limit per minute); a request starts when the request bucket holds 1 and the
 * token bucket holds its estimate (prompt characters / 4 + max_tokens), which is then
 * subtracted and never given back. A 429 pauses every new start for a quarter of a minute from
 * the time it arrived (the cookbook's 15 seconds); a failed attempt, 429 or any other error, goes
 * to a retry queue that is served before new requests, until the request has had its attempts
 * (5). The client knows nothing of other clients, of the provider's shorter enforcement slices,
 * or of Retry-After.
 *
 * Input: a JSON-lines file, one request a line, sorted by due time:
 *   {"id": "j0000001", "class": "standard", "due_ms": 12.5, "body": {chat completions body}}
 * A request is submitted at its due time (milliseconds after --start-ms). Like the cookbook, the
 * client reads the next line only when it is about to use it, so the requests not yet started
 * wait in the file and memory stays bounded by what is in flight.
 *
 * Output (--out): one JSON line per request read: finished ones when they finish, the rest
 * ("unfinished") at the stop. Times are milliseconds after --start-ms (wall clock, so several
 * clients and the runner share one time base). A summary line goes to stdout at the end.
 *
 * Deviations from the cookbook, each small: the token estimate counts characters / 4 (the
 * cookbook uses tiktoken plus a few tokens of framing per message; characters / 4 is what the
 * simulator counts, so the estimate is exact here); a 429 is recognised by its HTTP status
 * (the cookbook looks for "Rate limit" in the message; the simulator's 429s all say it); the
 * loop may start one request per 1 ms turn, as the cookbook's asyncio loop does. */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "opts.h"
#include "util.h"

enum {
    LINE_MAX_BYTES = 1 << 20, /* a request line larger than this is an error */
    RESP_MAX_BYTES = 1 << 20, /* a response body larger than this fails the attempt */
};

typedef struct req {
    char id[64];
    char cls[16];
    char *body; /* owned */
    size_t body_len;
    int64_t tokens; /* the cookbook's token consumption: prompt estimate + max_tokens */
    double submit_ms, first_start_ms, start_ms, end_ms;
    int attempts, attempts_left, n429, nerr;
    long http_status;
    int64_t prompt_tokens, completion_tokens;
    char *resp; /* response body of the attempt in flight (owned) */
    size_t resp_len;
    int resp_too_big;
    CURL *easy;
    struct curl_slist *hdrs;
    struct req *next;              /* retry queue */
    struct req *fl_prev, *fl_next; /* in-flight list */
} req_t;

typedef struct {
    /* settings */
    const char *url, *api_key, *requests_path, *out_path;
    double rpm, tpm, minute_ms, pause_ms;
    int max_attempts, max_in_flight;
    double start_epoch_ms, stop_ms, grace_ms;
    /* state */
    FILE *in, *out;
    char *line;
    size_t line_cap;
    int eof;
    req_t *ahead; /* read from the file, not due yet */
    req_t *next;  /* the request waiting for capacity */
    req_t *retry_head, *retry_tail;
    double req_cap, tok_cap, last_update_ms, last_429_ms;
    CURLM *multi;
    int in_flight;
    req_t *flying; /* requests with an attempt in flight */
    char auth[512];
    /* counters */
    long n_read, n_succeeded, n_failed, n_attempts, n_429, n_other_err, n_transport_err;
    long n_pauses, max_in_flight_seen;
} client_t;

static double wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static void req_free(req_t *r)
{
    if (r == NULL)
        return;
    free(r->body);
    free(r->resp);
    curl_slist_free_all(r->hdrs);
    free(r);
}

/* UTF-8 code points of s (continuation bytes are not counted). */
static int64_t utf8_chars(const char *s, size_t len)
{
    int64_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

/* The cookbook's num_tokens_consumed_from_request for a chat request, with characters / 4 in
 * place of tiktoken: the prompt estimate plus n x max_tokens (15 when absent, as there). */
static int64_t token_consumption(json_t *body)
{
    int64_t chars = 0;
    size_t i;
    json_t *msg;
    json_array_foreach(json_object_get(body, "messages"), i, msg)
    {
        json_t *content = json_object_get(msg, "content");
        if (json_is_string(content)) {
            chars += utf8_chars(json_string_value(content), json_string_length(content));
        } else if (json_is_array(content)) {
            size_t k;
            json_t *part;
            json_array_foreach(content, k, part)
            {
                json_t *text = json_object_get(part, "text");
                if (json_is_string(text))
                    chars += utf8_chars(json_string_value(text), json_string_length(text));
            }
        }
    }
    json_t *mt = json_object_get(body, "max_tokens");
    if (mt == NULL)
        mt = json_object_get(body, "max_completion_tokens");
    int64_t max_tokens = json_is_integer(mt) ? json_integer_value(mt) : 15;
    json_t *n = json_object_get(body, "n");
    int64_t choices = json_is_integer(n) ? json_integer_value(n) : 1;
    return (chars + 3) / 4 + choices * max_tokens;
}

/* Reads and parses the next line into a request; NULL at the end of the file. Exits on a bad
 * line: the input is the runner's, so a bad one is a bug. */
static req_t *read_request(client_t *c)
{
    for (;;) {
        errno = 0;
        ssize_t len = getline(&c->line, &c->line_cap, c->in);
        if (len < 0) {
            if (errno != 0) {
                perror("baseline: reading requests");
                exit(1);
            }
            c->eof = 1;
            return NULL;
        }
        if ((size_t)len > LINE_MAX_BYTES) {
            fprintf(stderr, "baseline: a request line is over %d bytes\n", LINE_MAX_BYTES);
            exit(1);
        }
        if (len <= 1)
            continue;
        json_error_t jerr;
        json_t *doc = json_loadb(c->line, (size_t)len, 0, &jerr);
        json_t *body = json_object_get(doc, "body");
        const char *id = json_string_value(json_object_get(doc, "id"));
        json_t *due = json_object_get(doc, "due_ms");
        if (!json_is_object(body) || id == NULL || !json_is_number(due)) {
            fprintf(stderr, "baseline: bad request line %ld: %s\n", c->n_read + 1,
                    doc == NULL ? jerr.text : "needs id, due_ms and body");
            exit(1);
        }
        req_t *r = calloc(1, sizeof *r);
        char *text = json_dumps(body, JSON_COMPACT);
        if (r == NULL || text == NULL) {
            fprintf(stderr, "baseline: out of memory\n");
            exit(1);
        }
        snprintf(r->id, sizeof r->id, "%s", id);
        const char *cls = json_string_value(json_object_get(doc, "class"));
        snprintf(r->cls, sizeof r->cls, "%s", cls != NULL ? cls : "-");
        r->body = text;
        r->body_len = strlen(text);
        r->tokens = token_consumption(body);
        r->submit_ms = json_number_value(due);
        r->first_start_ms = -1;
        r->start_ms = -1;
        r->end_ms = -1;
        r->attempts_left = c->max_attempts;
        json_decref(doc);
        c->n_read++;
        return r;
    }
}

static const char *const status_names[] = {"succeeded", "failed", "unfinished"};

static void write_record(client_t *c, const req_t *r, int status)
{
    fprintf(c->out,
            "{\"id\":\"%s\",\"class\":\"%s\",\"status\":\"%s\",\"submit_ms\":%.3f,"
            "\"first_start_ms\":%.3f,\"start_ms\":%.3f,\"end_ms\":%.3f,\"attempts\":%d,"
            "\"n429\":%d,\"nerr\":%d,\"http_status\":%ld,\"tokens_estimate\":%lld,"
            "\"prompt_tokens\":%lld,\"completion_tokens\":%lld}\n",
            r->id, r->cls, status_names[status], r->submit_ms, r->first_start_ms, r->start_ms,
            r->end_ms, r->attempts, r->n429, r->nerr, r->http_status, (long long)r->tokens,
            (long long)r->prompt_tokens, (long long)r->completion_tokens);
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    req_t *r = arg;
    size_t add = size * n;
    if (r->resp_len + add > RESP_MAX_BYTES) {
        r->resp_too_big = 1;
        return 0; /* fails the transfer */
    }
    char *nb = realloc(r->resp, r->resp_len + add + 1);
    if (nb == NULL)
        return 0;
    r->resp = nb;
    memcpy(r->resp + r->resp_len, p, add);
    r->resp_len += add;
    r->resp[r->resp_len] = '\0';
    return add;
}

/* Starts one attempt of r. Returns 0, or -1 when curl could not take it (r is then treated as
 * a failed attempt by the caller). */
static int start_attempt(client_t *c, req_t *r, double now_ms)
{
    r->attempts++;
    r->attempts_left--;
    c->n_attempts++;
    if (r->first_start_ms < 0)
        r->first_start_ms = now_ms;
    r->start_ms = now_ms;
    free(r->resp);
    r->resp = NULL;
    r->resp_len = 0;
    r->resp_too_big = 0;
    if (r->hdrs == NULL) {
        r->hdrs = curl_slist_append(NULL, c->auth);
        struct curl_slist *h2 =
            r->hdrs != NULL ? curl_slist_append(r->hdrs, "Content-Type: application/json") : NULL;
        if (h2 == NULL)
            return -1;
        r->hdrs = h2;
    }
    CURL *e = curl_easy_init();
    if (e == NULL)
        return -1;
    if (curl_easy_setopt(e, CURLOPT_URL, c->url) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->hdrs) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)r->body_len) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_WRITEDATA, r) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_PRIVATE, r) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 60000L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
        curl_multi_add_handle(c->multi, e) != CURLM_OK) {
        curl_easy_cleanup(e);
        return -1;
    }
    r->easy = e;
    r->fl_prev = NULL;
    r->fl_next = c->flying;
    if (c->flying != NULL)
        c->flying->fl_prev = r;
    c->flying = r;
    c->in_flight++;
    if (c->in_flight > c->max_in_flight_seen)
        c->max_in_flight_seen = c->in_flight;
    return 0;
}

static void flying_remove(client_t *c, req_t *r)
{
    if (r->fl_prev != NULL)
        r->fl_prev->fl_next = r->fl_next;
    else
        c->flying = r->fl_next;
    if (r->fl_next != NULL)
        r->fl_next->fl_prev = r->fl_prev;
    r->fl_prev = NULL;
    r->fl_next = NULL;
}

static void retry_push(client_t *c, req_t *r)
{
    r->next = NULL;
    if (c->retry_tail != NULL)
        c->retry_tail->next = r;
    else
        c->retry_head = r;
    c->retry_tail = r;
}

static req_t *retry_pop(client_t *c)
{
    req_t *r = c->retry_head;
    if (r != NULL) {
        c->retry_head = r->next;
        if (c->retry_head == NULL)
            c->retry_tail = NULL;
        r->next = NULL;
    }
    return r;
}

/* An attempt that did not succeed: back to the retry queue, or failed when its attempts are
 * used up (the cookbook's handling of any error). */
static void attempt_failed(client_t *c, req_t *r, double now_ms)
{
    if (r->attempts_left > 0) {
        retry_push(c, r);
        return;
    }
    r->end_ms = now_ms;
    c->n_failed++;
    write_record(c, r, 1);
    req_free(r);
}

static void on_done(client_t *c, CURL *e, CURLcode result, double now_ms)
{
    req_t *r = NULL;
    curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&r);
    long status = 0;
    if (result == CURLE_OK)
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    curl_multi_remove_handle(c->multi, e);
    curl_easy_cleanup(e);
    c->in_flight--;
    if (r == NULL)
        return;
    flying_remove(c, r);
    r->easy = NULL;
    r->http_status = status;
    if (result != CURLE_OK) {
        c->n_transport_err++;
        r->nerr++;
        attempt_failed(c, r, now_ms);
        return;
    }
    if (status == 200) {
        json_t *doc = r->resp != NULL ? json_loadb(r->resp, r->resp_len, 0, NULL) : NULL;
        json_t *usage = json_object_get(doc, "usage");
        if (usage != NULL) {
            r->prompt_tokens = json_integer_value(json_object_get(usage, "prompt_tokens"));
            r->completion_tokens = json_integer_value(json_object_get(usage, "completion_tokens"));
            json_decref(doc);
            r->end_ms = now_ms;
            c->n_succeeded++;
            write_record(c, r, 0);
            req_free(r);
            return;
        }
        json_decref(doc);
        /* A 200 without usage is an error to the cookbook too (no "usage" to save). */
    }
    if (status == 429) {
        /* Every new request pauses for pause_ms from now (the cookbook's 15 s cool-down). */
        if (now_ms >= c->last_429_ms + c->pause_ms)
            c->n_pauses++;
        c->last_429_ms = now_ms;
        c->n_429++;
        r->n429++;
    } else {
        c->n_other_err++;
        r->nerr++;
    }
    attempt_failed(c, r, now_ms);
}

/* Continuous refill of both buckets up to a whole minute of the limit. */
static void refill(client_t *c, double now_ms)
{
    double dt = now_ms - c->last_update_ms;
    if (dt <= 0)
        return;
    c->req_cap = fmin(c->req_cap + c->rpm * dt / c->minute_ms, c->rpm);
    c->tok_cap = fmin(c->tok_cap + c->tpm * dt / c->minute_ms, c->tpm);
    c->last_update_ms = now_ms;
}

static void drain_done(client_t *c)
{
    int left = 0;
    CURLMsg *m = curl_multi_info_read(c->multi, &left);
    while (m != NULL) {
        if (m->msg == CURLMSG_DONE)
            on_done(c, m->easy_handle, m->data.result, wall_ms() - c->start_epoch_ms);
        m = curl_multi_info_read(c->multi, &left);
    }
}

/* At the stop: everything read and not finished is written as "unfinished". */
static void write_unfinished(client_t *c)
{
    for (req_t *r = retry_pop(c); r != NULL; r = retry_pop(c)) {
        write_record(c, r, 2);
        req_free(r);
    }
    if (c->next != NULL) {
        write_record(c, c->next, 2);
        req_free(c->next);
        c->next = NULL;
    }
    if (c->ahead != NULL && c->ahead->submit_ms <= c->stop_ms) {
        write_record(c, c->ahead, 2);
    }
    req_free(c->ahead);
    c->ahead = NULL;
    while (c->flying != NULL) {
        req_t *fr = c->flying;
        flying_remove(c, fr);
        curl_multi_remove_handle(c->multi, fr->easy);
        curl_easy_cleanup(fr->easy);
        fr->easy = NULL;
        c->in_flight--;
        write_record(c, fr, 2);
        req_free(fr);
    }
}

static void run(client_t *c)
{
    c->req_cap = c->rpm; /* the cookbook starts with full buckets */
    c->tok_cap = c->tpm;
    c->last_429_ms = -1e18;
    /* Wait for the common start. */
    for (;;) {
        double wait = c->start_epoch_ms - wall_ms();
        if (wait <= 0)
            break;
        struct timespec ts = {.tv_sec = (time_t)(wait / 1000),
                              .tv_nsec = (long)(fmod(wait, 1000.0) * 1e6)};
        nanosleep(&ts, NULL);
    }
    c->last_update_ms = 0;
    for (;;) {
        double now = wall_ms() - c->start_epoch_ms;
        if (sl_stop_requested())
            break;
        int stopping = now >= c->stop_ms;
        if (stopping && (c->in_flight == 0 || now >= c->stop_ms + c->grace_ms))
            break;
        if (!stopping) {
            if (c->ahead == NULL && !c->eof)
                c->ahead = read_request(c);
            if (c->next == NULL) {
                c->next = retry_pop(c);
                if (c->next == NULL && c->ahead != NULL && c->ahead->submit_ms <= now) {
                    c->next = c->ahead;
                    c->ahead = NULL;
                }
            }
            if (c->next == NULL && c->ahead == NULL && c->eof && c->in_flight == 0)
                break; /* everything done */
            refill(c, now);
            if (c->next != NULL && now >= c->last_429_ms + c->pause_ms &&
                c->in_flight < c->max_in_flight && c->req_cap >= 1 &&
                c->tok_cap >= (double)c->next->tokens) {
                c->req_cap -= 1;
                c->tok_cap -= (double)c->next->tokens;
                req_t *r = c->next;
                c->next = NULL;
                if (start_attempt(c, r, now) != 0) {
                    c->n_transport_err++;
                    r->nerr++;
                    attempt_failed(c, r, now);
                }
            }
        }
        int running = 0;
        if (curl_multi_perform(c->multi, &running) != CURLM_OK) {
            fprintf(stderr, "baseline: curl_multi_perform failed\n");
            break;
        }
        drain_done(c);
        /* The cookbook sleeps 1 ms a turn; here the wait ends early when a transfer moves. */
        if (curl_multi_poll(c->multi, NULL, 0, 1, NULL) != CURLM_OK) {
            fprintf(stderr, "baseline: curl_multi_poll failed\n");
            break;
        }
    }
    write_unfinished(c);
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: baseline --url URL --requests FILE --out FILE --rpm N --tpm N\n"
        "                [--api-key KEY] [--minute-ms N] [--pause-ms N] [--max-attempts N]\n"
        "                [--start-ms EPOCH_MS] [--stop-ms N] [--grace-ms N]\n"
        "                [--max-in-flight N] [--help]\n"
        "One tenant's client following the OpenAI cookbook's api_request_parallel_processor:\n"
        "per-minute request and token buckets of --rpm / --tpm (capacity one minute,\n"
        "continuous refill), a pause of --pause-ms (default a quarter of --minute-ms, the\n"
        "cookbook's 15 s) after any 429, retries until --max-attempts (default 5).\n"
        "bench/compare runs one per tenant. It records, for every request, its submit, start and\n"
        "end times, attempts, HTTP status and tokens, and prints a JSON summary at the end.\n"
        "  --url URL         the chat completions endpoint\n"
        "  --api-key KEY     the bearer token it sends (default \"baseline\")\n"
        "  --rpm N, --tpm N  its requests and tokens per minute (at least 1 each)\n"
        "  --requests FILE   JSON lines {\"id\",\"class\",\"due_ms\",\"body\"}, sorted by due_ms\n"
        "  --out FILE        one JSON line per request (times in ms after --start-ms)\n"
        "  --minute-ms N     length of a minute (default 60000)\n"
        "  --start-ms T      wall-clock epoch ms at which due_ms 0 falls (default: now)\n"
        "  --stop-ms N       stop starting requests N ms after the start (default: never)\n"
        "  --grace-ms N      then wait at most N ms for requests in flight (default 600)\n"
        "  --max-in-flight N safety bound on concurrent calls, 1 - 100000 (default 4096)\n"
        "  -h, --help        this text\n");
}

int main(int argc, char **argv)
{
    client_t c = {0};
    c.api_key = "baseline";
    c.minute_ms = 60000;
    c.pause_ms = -1;
    c.max_attempts = 5;
    c.max_in_flight = 4096;
    c.start_epoch_ms = -1;
    c.stop_ms = INFINITY;
    c.grace_ms = 600;
    const b_opt_t options[] = {
        {"url", B_OPT_TEXT, &c.url, 0, 0},
        {"api-key", B_OPT_TEXT, &c.api_key, 0, 0},
        {"requests", B_OPT_TEXT, &c.requests_path, 0, 0},
        {"out", B_OPT_TEXT, &c.out_path, 0, 0},
        {"rpm", B_OPT_NUM, &c.rpm, 1, 1e12},
        {"tpm", B_OPT_NUM, &c.tpm, 1, 1e12},
        {"minute-ms", B_OPT_NUM, &c.minute_ms, 1, 1e9},
        {"pause-ms", B_OPT_NUM, &c.pause_ms, 0, 1e9},
        {"max-attempts", B_OPT_INT, &c.max_attempts, 1, 100},
        {"start-ms", B_OPT_NUM, &c.start_epoch_ms, 0, 1e15},
        {"stop-ms", B_OPT_NUM, &c.stop_ms, 0, 1e12},
        {"grace-ms", B_OPT_NUM, &c.grace_ms, 0, 1e12},
        {"max-in-flight", B_OPT_INT, &c.max_in_flight, 1, 100000},
        {NULL, B_OPT_FLAG, NULL, 0, 0},
    };
    int rc = b_opt_parse("baseline", argc, argv, options, usage);
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    if (c.url == NULL || c.requests_path == NULL || c.out_path == NULL || c.rpm < 1 || c.tpm < 1) {
        fprintf(stderr, "baseline: --url, --requests, --out, --rpm and --tpm are needed"
                        " (bin/bench/baseline --help lists the options)\n");
        return 2;
    }
    if (c.pause_ms < 0)
        c.pause_ms = c.minute_ms * 15.0 / 60.0;
    if (c.start_epoch_ms < 0)
        c.start_epoch_ms = wall_ms();
    snprintf(c.auth, sizeof c.auth, "Authorization: Bearer %s", c.api_key);
    c.in = fopen(c.requests_path, "r");
    if (c.in == NULL) {
        fprintf(stderr, "baseline: cannot open %s: %s\n", c.requests_path, strerror(errno));
        return 1;
    }
    c.out = fopen(c.out_path, "w");
    if (c.out == NULL) {
        fprintf(stderr, "baseline: cannot create %s: %s\n", c.out_path, strerror(errno));
        fclose(c.in);
        return 1;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "baseline: libcurl did not initialise\n");
        return 1;
    }
    c.multi = curl_multi_init();
    if (c.multi == NULL) {
        fprintf(stderr, "baseline: libcurl did not initialise\n");
        return 1;
    }
    /* Keep enough idle connections for the calls in flight (keep-alive, as aiohttp's pool). */
    curl_multi_setopt(c.multi, CURLMOPT_MAXCONNECTS, 512L);
    sl_signals_install();
    run(&c);
    rc = 0; /* from here on, the exit status */
    if (ferror(c.out) || fclose(c.out) != 0) {
        fprintf(stderr, "baseline: writing %s failed\n", c.out_path);
        rc = 1;
    }
    fclose(c.in);
    free(c.line);
    curl_multi_cleanup(c.multi);
    curl_global_cleanup();
    struct rusage ru;
    long rss_kb = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
    printf("{\"read\":%ld,\"succeeded\":%ld,\"failed\":%ld,\"attempts\":%ld,\"http_429\":%ld,"
           "\"other_errors\":%ld,\"transport_errors\":%ld,\"pauses\":%ld,"
           "\"max_in_flight\":%ld,\"peak_rss_kb\":%ld}\n",
           c.n_read, c.n_succeeded, c.n_failed, c.n_attempts, c.n_429, c.n_other_err,
           c.n_transport_err, c.n_pauses, c.max_in_flight_seen, rss_kb);
    return rc;
}
