/* http.c - libmicrohttpd front of the provider simulator (see http.h).
 *
 * One exchange per request: the body is gathered (capped at sl_sim_body_limit: 4 MiB, more for
 * batch uploads), the simulator decides, and the response is either queued at once or parked:
 * the connection is suspended and a heap entry remembers when to resume it. A stream is queued at
 * once as a chunked response whose content callback hands over each event when it is due, and parks
 * the connection the same way until then (returning 0 bytes while suspended, as libmicrohttpd
 * allows). Lock order is server->lock, then libmicrohttpd's internal lock (taken by
 * MHD_suspend/resume_connection); the simulator's own lock is never held together with
 * server->lock.
 */
#include "http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "log.h"

#define WORKER_THREADS 4
#define IDLE_TIMEOUT_S 120
#define LISTEN_BACKLOG 4096
#define STOP_DRAIN_MS 1000
#define MAX_REQUEST_HEADERS 64 /* headers passed to the simulator; more are ignored */
#define MAX_QUERY_ARGS 16
#define STREAM_BLOCK_SIZE 4096

/* One request on a connection, from its first header to its completion callback. */
typedef struct {
    sl_sim_server_t *server;
    struct MHD_Connection *conn;
    char *body;
    size_t body_len;
    size_t body_cap;
    size_t body_max;         /* the cap: sl_sim_body_limit of the path */
    bool too_large;          /* the body went over the cap and was dropped */
    sl_sim_response_t *resp; /* set once decided */
    bool waiting;            /* suspended, or resumed and not yet answered; or streaming */
    int64_t decided_ms;      /* when resp was decided: stream event times count from here */
    size_t chunk;            /* the stream event being sent */
    size_t chunk_offset;     /* bytes of it already handed over */
} exchange_t;

typedef struct {
    int64_t due_ms;
    uint64_t order; /* FIFO among equal due times */
    exchange_t *ex;
} pending_t;

struct sl_sim_server {
    sl_sim_t *sim;
    struct MHD_Daemon *daemon;
    uint16_t port;
    struct timespec origin; /* CLOCK_MONOTONIC at start */

    pthread_mutex_t lock; /* guards everything below */
    pthread_cond_t wake;
    bool stopping;
    pending_t *heap; /* min-heap on (due_ms, order) */
    size_t heap_len;
    size_t heap_cap;
    uint64_t order;
    size_t waiting; /* exchanges parked or resumed but not yet answered */
    pthread_t timer;
    bool timer_started;
};

int64_t sl_sim_server_now_ms(const sl_sim_server_t *server)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)(ts.tv_sec - server->origin.tv_sec) * 1000 +
           (ts.tv_nsec - server->origin.tv_nsec) / 1000000;
}

uint16_t sl_sim_server_port(const sl_sim_server_t *server)
{
    return server->port;
}

/* ---- Heap of parked responses (caller holds server->lock) ------------------------------- */

static bool before(const pending_t *a, const pending_t *b)
{
    return a->due_ms < b->due_ms || (a->due_ms == b->due_ms && a->order < b->order);
}

static bool heap_push(sl_sim_server_t *server, int64_t due_ms, exchange_t *ex)
{
    if (sl_grow((void **)&server->heap, sizeof *server->heap, &server->heap_cap,
                server->heap_len + 1, SIZE_MAX / sizeof *server->heap) != SL_OK)
        return false;
    size_t i = server->heap_len++;
    pending_t item = {due_ms, server->order++, ex};
    while (i > 0 && before(&item, &server->heap[(i - 1) / 2])) {
        server->heap[i] = server->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    server->heap[i] = item;
    return true;
}

static exchange_t *heap_pop(sl_sim_server_t *server)
{
    exchange_t *top = server->heap[0].ex;
    pending_t last = server->heap[--server->heap_len];
    size_t n = server->heap_len;
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && before(&server->heap[child + 1], &server->heap[child]))
            child++;
        if (!before(&server->heap[child], &last))
            break;
        server->heap[i] = server->heap[child];
        i = child;
    }
    if (n > 0)
        server->heap[i] = last;
    return top;
}

/* Resumes every parked connection when it is due. */
static void *timer_main(void *arg)
{
    sl_sim_server_t *server = arg;
    pthread_mutex_lock(&server->lock);
    while (!server->stopping) {
        if (server->heap_len == 0) {
            pthread_cond_wait(&server->wake, &server->lock);
            continue;
        }
        int64_t due_ms = server->heap[0].due_ms;
        if (due_ms <= sl_sim_server_now_ms(server)) {
            exchange_t *ex = heap_pop(server);
            MHD_resume_connection(ex->conn);
            continue;
        }
        struct timespec at = server->origin;
        at.tv_sec += due_ms / 1000;
        at.tv_nsec += (due_ms % 1000) * 1000000;
        if (at.tv_nsec >= 1000000000) {
            at.tv_sec++;
            at.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&server->wake, &server->lock, &at);
    }
    pthread_mutex_unlock(&server->lock);
    return NULL;
}

/* ---- libmicrohttpd callbacks ------------------------------------------------------------ */

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    /* Dropped answers and cut streams (injected faults) close connections on purpose. */
    if (strstr(msg, "Application reported internal error") != NULL ||
        strstr(msg, "application error generating response") != NULL) {
        sl_debug("libmicrohttpd: %s", msg);
        return;
    }
    sl_warn("libmicrohttpd: %s", msg);
}

/* Appends to the body; past the cap the body is dropped and only remembered as too large. */
static void append_body(exchange_t *ex, const char *data, size_t len)
{
    if (ex->too_large)
        return;
    if (len > ex->body_max - ex->body_len) {
        ex->too_large = true;
        free(ex->body);
        ex->body = NULL;
        ex->body_len = 0;
        return;
    }
    if (ex->body_len + len > ex->body_cap) {
        size_t cap = ex->body_cap == 0 ? 4096 : ex->body_cap;
        while (cap < ex->body_len + len)
            cap *= 2;
        if (cap > ex->body_max)
            cap = ex->body_max;
        char *body = realloc(ex->body, cap);
        if (body == NULL) {
            /* Treat like an oversized body: the client gets a clear 413, not a hang. */
            sl_warn("sim http: out of memory buffering a request body");
            ex->too_large = true;
            free(ex->body);
            ex->body = NULL;
            ex->body_len = 0;
            return;
        }
        ex->body = body;
        ex->body_cap = cap;
    }
    memcpy(ex->body + ex->body_len, data, len);
    ex->body_len += len;
}

/* Parks ex until due_ms: suspends its connection and lets the timer thread resume it. Returns
 * false (nothing changed) when stopping or out of memory: then answer at once. Call only from
 * a libmicrohttpd callback of ex's connection. */
static bool park(sl_sim_server_t *server, exchange_t *ex, int64_t due_ms)
{
    pthread_mutex_lock(&server->lock);
    /* Suspending before the entry can be popped means a resume never precedes its suspend. */
    bool parked = !server->stopping && heap_push(server, due_ms, ex);
    if (parked) {
        MHD_suspend_connection(ex->conn);
        if (!ex->waiting) {
            ex->waiting = true;
            server->waiting++;
        }
        if (server->heap[0].ex == ex)
            pthread_cond_signal(&server->wake);
    }
    pthread_mutex_unlock(&server->lock);
    return parked;
}

/* Content callback of a stream: the next event once it is due, the end after the last one (an
 * error for a cut stream, which makes libmicrohttpd close the connection without the final
 * empty chunk, so the client sees a truncated transfer). */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    exchange_t *ex = cls;
    sl_sim_server_t *server = ex->server;
    sl_sim_response_t *resp = ex->resp;
    if (ex->chunk == sl_sim_response_chunk_count(resp))
        return sl_sim_response_dropped(resp) ? MHD_CONTENT_READER_END_WITH_ERROR
                                             : MHD_CONTENT_READER_END_OF_STREAM;
    size_t len = 0;
    int64_t at_ms = 0;
    const char *text = sl_sim_response_chunk(resp, ex->chunk, &len, &at_ms);
    int64_t now_ms = sl_sim_server_now_ms(server);
    if (ex->chunk_offset == 0 && ex->decided_ms + at_ms > now_ms &&
        park(server, ex, ex->decided_ms + at_ms))
        return 0;
    size_t take = len - ex->chunk_offset < max ? len - ex->chunk_offset : max;
    memcpy(buf, text + ex->chunk_offset, take);
    if (ex->chunk_offset == 0)
        sl_sim_chunk_sent(server->sim, resp, ex->chunk, now_ms);
    ex->chunk_offset += take;
    if (ex->chunk_offset == len) {
        ex->chunk++;
        ex->chunk_offset = 0;
    }
    return (ssize_t)take;
}

static enum MHD_Result reply(sl_sim_server_t *server, exchange_t *ex)
{
    sl_sim_response_t *resp = ex->resp;
    bool stream = sl_sim_response_chunk_count(resp) > 0;
    if (ex->waiting) {
        pthread_mutex_lock(&server->lock);
        ex->waiting = false;
        server->waiting--;
        pthread_mutex_unlock(&server->lock);
    }
    /* A dropped answer: close the connection without a response (on_completed finishes it). */
    if (!stream && sl_sim_response_dropped(resp))
        return MHD_NO;
    struct MHD_Response *mr;
    if (stream) {
        mr = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK_SIZE, stream_read, ex,
                                               NULL);
    } else {
        size_t len = 0;
        const char *body = sl_sim_response_body(resp, &len);
        mr = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    }
    if (mr == NULL)
        return MHD_NO;
    for (size_t i = 0; i < sl_sim_response_header_count(resp); i++) {
        const char *value;
        const char *name = sl_sim_response_header(resp, i, &value);
        MHD_add_response_header(mr, name, value);
    }
    enum MHD_Result ok =
        MHD_queue_response(ex->conn, (unsigned int)sl_sim_response_status(resp), mr);
    MHD_destroy_response(mr);
    if (!stream) {
        sl_sim_finish(server->sim, resp);
    } else if (ok == MHD_YES) {
        /* Events must leave as they are produced, not when a segment fills up. */
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(ex->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        int one = 1;
        if (info != NULL)
            setsockopt(info->connect_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        /* Streaming counts as waiting until the connection completes. */
        pthread_mutex_lock(&server->lock);
        ex->waiting = true;
        server->waiting++;
        pthread_mutex_unlock(&server->lock);
    }
    return ok;
}

/* Collects name, value pairs (NULL-terminated) for sl_sim_request_t. */
typedef struct {
    const char **items;
    size_t n;
    size_t cap; /* entries of items, the terminating NULL included */
} kv_list_t;

static enum MHD_Result collect_kv(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    (void)kind;
    kv_list_t *kv = cls;
    if (kv->n + 3 > kv->cap)
        return MHD_NO; /* full: the rest is ignored */
    kv->items[kv->n++] = key;
    kv->items[kv->n++] = value;
    kv->items[kv->n] = NULL;
    return MHD_YES;
}

static enum MHD_Result decide(sl_sim_server_t *server, exchange_t *ex, const char *url,
                              const char *method)
{
    int64_t now_ms = sl_sim_server_now_ms(server);
    const char *headers[2 * MAX_REQUEST_HEADERS + 1] = {NULL};
    const char *query[2 * MAX_QUERY_ARGS + 1] = {NULL};
    kv_list_t header_list = {headers, 0, sizeof headers / sizeof headers[0]};
    kv_list_t query_list = {query, 0, sizeof query / sizeof query[0]};
    MHD_get_connection_values(ex->conn, MHD_HEADER_KIND, collect_kv, &header_list);
    MHD_get_connection_values(ex->conn, MHD_GET_ARGUMENT_KIND, collect_kv, &query_list);
    sl_sim_request_t req = {
        .method = method,
        .path = url,
        .authorization =
            MHD_lookup_connection_value(ex->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
        .idempotency_key =
            MHD_lookup_connection_value(ex->conn, MHD_HEADER_KIND, "Idempotency-Key"),
        .headers = headers,
        .query = query,
        .body = ex->body,
        .body_len = ex->body_len,
        .body_too_large = ex->too_large,
    };
    sl_sim_response_t *resp = NULL;
    if (sl_sim_handle(server->sim, &req, now_ms, &resp) != SL_OK) {
        sl_warn("sim http: out of memory deciding a request; closing its connection");
        return MHD_NO;
    }
    /* Parked responses can number in the thousands: keep only what is needed to answer. */
    free(ex->body);
    ex->body = NULL;
    ex->body_cap = 0;
    ex->resp = resp;
    ex->decided_ms = now_ms;

    /* When stopping, or without memory for the heap, answer at once. */
    int64_t delay_ms = sl_sim_response_delay_ms(resp);
    if (delay_ms > 0 && park(server, ex, now_ms + delay_ms))
        return MHD_YES;
    return reply(server, ex);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    sl_sim_server_t *server = cls;
    exchange_t *ex = *con_cls;
    if (ex == NULL) {
        ex = calloc(1, sizeof *ex);
        if (ex == NULL)
            return MHD_NO;
        ex->server = server;
        ex->conn = conn;
        ex->body_max = sl_sim_body_limit(server->sim, url);
        *con_cls = ex;
        const char *length =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (length != NULL && strtoull(length, NULL, 10) > ex->body_max) {
            /* Answer 413 now rather than read a body that would be dropped anyway. */
            ex->too_large = true;
            return decide(server, ex, url, method);
        }
        return MHD_YES;
    }
    if (ex->resp != NULL) /* resumed: its time has come */
        return reply(server, ex);
    if (*upload_data_size > 0) {
        append_body(ex, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    return decide(server, ex, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    (void)toe;
    sl_sim_server_t *server = cls;
    exchange_t *ex = *con_cls;
    if (ex == NULL)
        return;
    if (ex->waiting) {
        pthread_mutex_lock(&server->lock);
        server->waiting--;
        pthread_mutex_unlock(&server->lock);
    }
    sl_sim_finish(server->sim, ex->resp);
    sl_sim_response_free(ex->resp);
    free(ex->body);
    free(ex);
    *con_cls = NULL;
}

/* ---- Start and stop --------------------------------------------------------------------- */

/* Connections allowed: as many as the descriptor limit leaves room for. */
static unsigned int connection_limit(void)
{
    struct rlimit rl;
    rlim_t n = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        n = rl.rlim_cur == RLIM_INFINITY ? 65536 : rl.rlim_cur;
    n = n > 128 ? n - 64 : 64;
    return n > 65536 ? 65536u : (unsigned int)n;
}

sl_err_t sl_sim_server_start(sl_sim_t *sim, const char *listen_addr, uint16_t port,
                             sl_sim_server_t **out)
{
    *out = NULL;
    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof addr);
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                         MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (strcmp(listen_addr, "localhost") == 0)
        listen_addr = "127.0.0.1";
    struct sockaddr_in *v4 = (struct sockaddr_in *)&addr;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&addr;
    if (inet_pton(AF_INET, listen_addr, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
    } else if (inet_pton(AF_INET6, listen_addr, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        flags |= MHD_USE_IPv6;
    } else {
        return SL_EINVAL;
    }

    sl_sim_server_t *server = calloc(1, sizeof *server);
    if (server == NULL)
        return SL_ENOMEM;
    server->sim = sim;
    clock_gettime(CLOCK_MONOTONIC, &server->origin);
    pthread_condattr_t cattr;
    pthread_condattr_init(&cattr);
    pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
    pthread_mutex_init(&server->lock, NULL);
    pthread_cond_init(&server->wake, &cattr);
    pthread_condattr_destroy(&cattr);

    sl_err_t rc = SL_EHTTP;
    if (pthread_create(&server->timer, NULL, timer_main, server) != 0)
        goto fail;
    server->timer_started = true;

    /* The logger goes first so that libmicrohttpd reports option problems through it too. */
    server->daemon = MHD_start_daemon(
        flags, port, NULL, NULL, on_request, server, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
        server, MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)WORKER_THREADS,
        MHD_OPTION_CONNECTION_LIMIT, connection_limit(), MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned int)IDLE_TIMEOUT_S, MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned int)LISTEN_BACKLOG,
        MHD_OPTION_END);
    if (server->daemon == NULL)
        goto fail;
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(server->daemon, MHD_DAEMON_INFO_BIND_PORT);
    if (info == NULL || info->port == 0) {
        sl_error("sim http: cannot learn the bound port");
        goto fail;
    }
    server->port = info->port;
    *out = server;
    return SL_OK;
fail:
    sl_sim_server_stop(server);
    return rc;
}

void sl_sim_server_stop(sl_sim_server_t *server)
{
    if (server == NULL)
        return;
    pthread_mutex_lock(&server->lock);
    server->stopping = true;
    pthread_cond_signal(&server->wake);
    pthread_mutex_unlock(&server->lock);
    if (server->timer_started)
        pthread_join(server->timer, NULL);

    if (server->daemon != NULL) {
        /* Stop accepting, answer everything parked now, and give those answers a moment to
         * leave: libmicrohttpd must not be stopped with connections still suspended. */
        MHD_socket listen_fd = MHD_quiesce_daemon(server->daemon);
        pthread_mutex_lock(&server->lock);
        while (server->heap_len > 0)
            MHD_resume_connection(heap_pop(server)->conn);
        pthread_mutex_unlock(&server->lock);
        for (int waited_ms = 0; waited_ms < STOP_DRAIN_MS; waited_ms += 5) {
            pthread_mutex_lock(&server->lock);
            size_t waiting = server->waiting;
            pthread_mutex_unlock(&server->lock);
            if (waiting == 0)
                break;
            nanosleep(&(struct timespec){0, 5000000}, NULL);
        }
        MHD_stop_daemon(server->daemon);
        if (listen_fd != MHD_INVALID_SOCKET)
            close(listen_fd);
    }
    free(server->heap);
    pthread_cond_destroy(&server->wake);
    pthread_mutex_destroy(&server->lock);
    free(server);
}
