/* admin.c - the admin API's HTTP server: requests in, answered by the scheduler's loop (see
 * admin.h). */
#include "admin.h"

#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "console_assets.h"
#include "log.h"
#include "util.h"

/* Each connection has its own thread (a request waits there for the loop's answer, so one slow
 * client never blocks another's). What a client can hold is bounded instead: an idle or slow
 * connection is closed after CONNECTION_TIMEOUT_S, one address holds at most PER_IP_LIMIT
 * connections (the rest are closed as they come), and all of them at most CONNECTION_LIMIT. */
enum { CONNECTION_LIMIT = 512, PER_IP_LIMIT = 32, CONNECTION_TIMEOUT_S = 5 };

typedef enum { P_WAITING = 0, P_TAKEN, P_DONE } pstate_t;

/* One request on its way to the loop and back. */
typedef struct pending {
    sl_admin_req_t req;
    sl_admin_resp_t resp;
    pstate_t state;
    struct pending *next;
} pending_t;

struct sl_admin {
    struct MHD_Daemon *daemon;
    pthread_mutex_t lock;
    pthread_cond_t done;
    pending_t *head, *tail; /* waiting for the loop */
    int stopping;
};

/* Per connection: the body read so far. */
typedef struct {
    char *body;
    size_t len;
    int too_large;
} conn_t;

static enum MHD_Result respond(struct MHD_Connection *conn, int status, char *body)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (r == NULL) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ok = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result respond_error(struct MHD_Connection *conn, int status, const char *code,
                                     const char *message)
{
    json_t *e = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", message);
    char *text = e != NULL ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    return text != NULL ? respond(conn, status, text) : MHD_NO;
}

/* The console's page and assets (GET or HEAD, no key: they hold no data); "/" leads there. A
 * strict content policy: the page runs only its own script and talks only to this origin. */
static enum MHD_Result respond_console(struct MHD_Connection *conn, const char *url)
{
    const char *data = "", *type = "text/plain";
    size_t len = 0;
    int status = 200;
    if (strcmp(url, "/") == 0 || strcmp(url, "/console") == 0) {
        status = 302;
    } else if (!sl_console_asset(url, &data, &len, &type)) {
        status = 404;
        data = "no such file in the console\n";
        len = strlen(data);
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_PERSISTENT);
    if (r == NULL)
        return MHD_NO;
    if (status == 302)
        MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, "/console/");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'none'; script-src 'self'; style-src 'self'; "
                            "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
                            "base-uri 'none'; form-action 'none'");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    enum MHD_Result ok = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value)
{
    (void)kind;
    json_object_set_new(cls, key, json_string(value != NULL ? value : ""));
    return MHD_YES;
}

/* Queues p for the loop and waits for its answer; 0 when none came in time (p then left the
 * queue, or was never taken). */
static int wait_answer(sl_admin_t *a, pending_t *p)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += SL_ADMIN_WAIT_MS / 1000;
    pthread_mutex_lock(&a->lock);
    if (a->stopping) {
        pthread_mutex_unlock(&a->lock);
        return 0;
    }
    if (a->tail != NULL)
        a->tail->next = p;
    else
        a->head = p;
    a->tail = p;
    int rc = 0;
    while (p->state != P_DONE && !a->stopping && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&a->done, &a->lock, &until);
    /* Taken by the loop: its answer comes, however late (the loop never blocks long). */
    while (p->state == P_TAKEN)
        pthread_cond_wait(&a->done, &a->lock);
    if (p->state == P_WAITING) {
        pending_t **pp = &a->head;
        a->tail = NULL;
        while (*pp != NULL) {
            if (*pp == p)
                *pp = p->next;
            else {
                a->tail = *pp;
                pp = &(*pp)->next;
            }
        }
    }
    int answered = p->state == P_DONE;
    pthread_mutex_unlock(&a->lock);
    return answered;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    sl_admin_t *a = cls;
    conn_t *c = *con_cls;
    if (c == NULL) {
        c = calloc(1, sizeof *c);
        if (c == NULL)
            return MHD_NO;
        *con_cls = c;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (c->too_large || c->len + n > SL_ADMIN_MAX_BODY) {
            c->too_large = 1;
            return MHD_YES;
        }
        char *nb = realloc(c->body, c->len + n + 1);
        if (nb == NULL)
            return MHD_NO;
        memcpy(nb + c->len, upload_data, n);
        c->body = nb;
        c->len += n;
        c->body[c->len] = '\0';
        return MHD_YES;
    }
    if (c->too_large)
        return respond_error(conn, 413, "too_large", "the request body is over 64 KiB");
    if ((strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) &&
        (strcmp(url, "/") == 0 || strncmp(url, "/console", 8) == 0))
        return respond_console(conn, url);
    pending_t p;
    memset(&p, 0, sizeof p);
    p.req.method = method;
    p.req.path = url;
    p.req.auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    p.req.query = json_object();
    p.req.body = c->body != NULL ? c->body : "";
    p.req.body_len = c->len;
    if (p.req.query == NULL)
        return MHD_NO;
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, add_arg, p.req.query);
    int answered = wait_answer(a, &p);
    json_decref(p.req.query);
    if (!answered) {
        free(p.resp.body);
        return respond_error(conn, 503, "unavailable",
                             "the scheduler did not answer in time (busy or stopping)");
    }
    char *body = p.resp.body != NULL ? p.resp.body : strdup("{}");
    if (body == NULL)
        return MHD_NO;
    return respond(conn, p.resp.status > 0 ? p.resp.status : 200, body);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    (void)toe;
    conn_t *c = *con_cls;
    if (c != NULL) {
        free(c->body);
        free(c);
        *con_cls = NULL;
    }
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[256];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\r\n")] = '\0';
    sl_warn("admin http: %s", msg);
}

sl_err_t sl_admin_start(const char *listen, sl_admin_t **out, int *port_out, char *err,
                        size_t errlen)
{
    *out = NULL;
    struct sockaddr_in addr;
    if (!sl_parse_listen(listen, &addr)) {
        snprintf(err, errlen, "bad admin listen address \"%.200s\" (want IPv4:PORT)",
                 listen != NULL ? listen : "(null)");
        return SL_EINVAL;
    }
    sl_admin_t *a = calloc(1, sizeof *a);
    if (a == NULL) {
        snprintf(err, errlen, "out of memory");
        return SL_ENOMEM;
    }
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->done, NULL);
    a->daemon = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG,
        ntohs(addr.sin_port), NULL, NULL, on_request, a, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
        NULL, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONNECTION_LIMIT,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)PER_IP_LIMIT, MHD_OPTION_END);
    if (a->daemon == NULL) {
        snprintf(err, errlen, "cannot serve the admin API on %.200s: %s", listen,
                 strerror(errno));
        sl_admin_stop(a);
        return SL_EIO;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(a->daemon, MHD_DAEMON_INFO_BIND_PORT);
    if (port_out != NULL)
        *port_out = info != NULL ? info->port : 0;
    *out = a;
    return SL_OK;
}

int sl_admin_poll(sl_admin_t *a, sl_admin_fn fn, void *arg)
{
    if (a == NULL)
        return 0;
    pthread_mutex_lock(&a->lock);
    pending_t *list = a->head;
    a->head = a->tail = NULL;
    for (pending_t *p = list; p != NULL; p = p->next)
        p->state = P_TAKEN;
    pthread_mutex_unlock(&a->lock);
    int n = 0;
    for (pending_t *p = list; p != NULL;) {
        pending_t *next = p->next; /* p belongs to its waiter once DONE */
        fn(&p->req, &p->resp, arg);
        pthread_mutex_lock(&a->lock);
        p->state = P_DONE;
        pthread_cond_broadcast(&a->done);
        pthread_mutex_unlock(&a->lock);
        p = next;
        n++;
    }
    return n;
}

void sl_admin_stop(sl_admin_t *a)
{
    if (a == NULL)
        return;
    pthread_mutex_lock(&a->lock);
    a->stopping = 1;
    pthread_cond_broadcast(&a->done);
    pthread_mutex_unlock(&a->lock);
    if (a->daemon != NULL)
        MHD_stop_daemon(a->daemon);
    pthread_cond_destroy(&a->done);
    pthread_mutex_destroy(&a->lock);
    free(a);
}
