/* metrics.c - Prometheus registry, text exposition and /metrics endpoint (see metrics.h).
 *
 * The idea to hold first: a series is found by its label values joined into one string key
 * (each value prefixed with its length, so no two label sets share a key), and every family
 * keeps its series both in that hash map (for updates) and in an array (for rendering in a
 * stable order). One mutex guards the whole registry; the HTTP thread takes it only inside
 * sl_metrics_render().
 */
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "buf.h"
#include "hmap.h"
#include "log.h"
#include "util.h"

#define STR_(x) #x
#define STR(x) STR_(x)
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define HTTP_CONNECTION_LIMIT 64u /* scrapers are few; bound what a stray client can hold */
#define HTTP_TIMEOUT_S 30u
/* A key holds, per label, its length in decimal, ':' and the value. */
#define KEY_BYTES (SL_METRICS_MAX_LABELS * (SL_METRICS_MAX_VALUE_BYTES + 5) + 1)

typedef struct {
    char *values[SL_METRICS_MAX_LABELS]; /* point into the same allocation */
    double value;                        /* counters and gauges */
    double sum;                          /* histograms: */
    uint64_t count;
    uint64_t buckets[]; /* nbounds + 1 (the last is +Inf); not cumulative */
} series_t;

typedef struct {
    sl_metric_kind_t kind;
    char *name;
    char *help; /* NULL: no # HELP line */
    int nlabels;
    char *labels[SL_METRICS_MAX_LABELS];
    int nbounds;
    double bounds[SL_METRICS_MAX_BOUNDS];
    series_t **series; /* creation order */
    size_t nseries;
    size_t series_cap;
    sl_hmap_t *index; /* key of the label values -> series (borrowed from series[]) */
} family_t;

/* The HTTP side; its own lock guards only the capture of libmicrohttpd's start-up messages. */
typedef struct {
    struct MHD_Daemon *daemon;
    pthread_mutex_t log_lock;
    bool capturing;
    char why[256]; /* first message libmicrohttpd logged while starting */
} server_t;

struct sl_metrics {
    pthread_mutex_t lock; /* guards everything below but server */
    family_t **fams;      /* registration order; the id is the index */
    int nfams;
    size_t fams_cap;
    sl_hmap_t *names; /* every name a family exposes -> its family */
    int dropped;      /* id of SL_METRICS_DROPPED_NAME */
    server_t *server; /* touched only by sl_metrics_serve and sl_metrics_free */
};

/* ---- Names and values --------------------------------------------------------------------- */

static bool is_letter_or_underscore(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool valid_metric_name(const char *name)
{
    if (name == NULL || !(is_letter_or_underscore(name[0]) || name[0] == ':'))
        return false;
    for (const char *c = name + 1; *c; c++) {
        if (!is_letter_or_underscore(*c) && !is_digit(*c) && *c != ':')
            return false;
    }
    return true;
}

static bool valid_label_name(const char *name, sl_metric_kind_t kind)
{
    if (!is_letter_or_underscore(name[0]))
        return false;
    for (const char *c = name + 1; *c; c++) {
        if (!is_letter_or_underscore(*c) && !is_digit(*c))
            return false;
    }
    if (strncmp(name, "__", 2) == 0)
        return false;
    return !(kind == SL_METRIC_HISTOGRAM && strcmp(name, "le") == 0);
}

/* Length of the well-formed UTF-8 character at s (n bytes available), 0 when there is none:
 * no overlong forms, surrogates or code points above U+10FFFF. */
static size_t utf8_char_len(const unsigned char *s, size_t n)
{
    if (s[0] < 0x80)
        return 1;
    size_t len;
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    if (s[0] >= 0xC2 && s[0] <= 0xDF) {
        len = 2;
    } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
        len = 3;
        if (s[0] == 0xE0)
            lo = 0xA0;
        else if (s[0] == 0xED)
            hi = 0x9F;
    } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
        len = 4;
        if (s[0] == 0xF0)
            lo = 0x90;
        else if (s[0] == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++) {
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    }
    return len;
}

/* Copies value into out, cut to SL_METRICS_MAX_VALUE_BYTES without splitting a character;
 * bytes that are not UTF-8 become '?', since one of them would make Prometheus reject the
 * whole scrape. Returns the length written. */
static size_t clean_value(const char *value, char out[SL_METRICS_MAX_VALUE_BYTES + 1])
{
    const unsigned char *s = (const unsigned char *)value;
    size_t n = strlen(value);
    size_t in = 0;
    size_t len = 0;
    while (in < n) {
        size_t clen = utf8_char_len(s + in, n - in);
        size_t olen = clen == 0 ? 1 : clen;
        if (len + olen > SL_METRICS_MAX_VALUE_BYTES)
            break;
        if (clen == 0)
            out[len] = '?';
        else
            memcpy(out + len, s + in, clen);
        len += olen;
        in += olen;
    }
    out[len] = '\0';
    return len;
}

/* Formats v so that Prometheus reads back the same double. */
static void format_number(double v, char out[32])
{
    if (isnan(v)) {
        strcpy(out, "NaN");
    } else if (isinf(v)) {
        strcpy(out, v > 0 ? "+Inf" : "-Inf");
    } else if (v == 0) {
        strcpy(out, "0"); /* not "-0" */
    } else if (v == trunc(v) && fabs(v) < 1e15) {
        snprintf(out, 32, "%.0f", v);
    } else {
        /* The shortest of these that reads back exactly: 0.1 stays "0.1" (as bucket bounds
         * are usually written in queries), not 0.10000000000000001. */
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(out, 32, "%.*g", prec, v);
            if (strtod(out, NULL) == v)
                break;
        }
    }
}

/* ---- Text buffer -------------------------------------------------------------------------- */

typedef struct {
    sl_buf_t buf; /* capped below SL_METRICS_MAX_TEXT_BYTES */
    bool failed;  /* out of memory or past the cap; later appends do nothing */
} text_t;

static void put_bytes(text_t *t, const char *s, size_t n)
{
    if (!t->failed && sl_buf_add(&t->buf, s, n) != SL_OK)
        t->failed = true;
}

static void put(text_t *t, const char *s)
{
    put_bytes(t, s, strlen(s));
}

static void put_number(text_t *t, double v)
{
    char num[32];
    format_number(v, num);
    put(t, num);
}

static void put_count(text_t *t, uint64_t n)
{
    char num[24];
    snprintf(num, sizeof num, "%" PRIu64, n);
    put(t, num);
}

/* Writes s escaped: backslash and newline always, double quote inside label values. */
static void put_escaped(text_t *t, const char *s, bool quote)
{
    const char *run = s;
    for (; *s; s++) {
        const char *esc = NULL;
        if (*s == '\\')
            esc = "\\\\";
        else if (*s == '\n')
            esc = "\\n";
        else if (*s == '"' && quote)
            esc = "\\\"";
        if (esc == NULL)
            continue;
        put_bytes(t, run, (size_t)(s - run));
        put(t, esc);
        run = s + 1;
    }
    put_bytes(t, run, (size_t)(s - run));
}

/* Writes name{labels} (and le="..." for a bucket; le may be NULL) then a space. */
static void put_sample_name(text_t *t, const family_t *fam, const char *suffix, const series_t *ser,
                            const char *le)
{
    put(t, fam->name);
    put(t, suffix);
    if (fam->nlabels > 0 || le != NULL) {
        put(t, "{");
        for (int i = 0; i < fam->nlabels; i++) {
            if (i > 0)
                put(t, ",");
            put(t, fam->labels[i]);
            put(t, "=\"");
            put_escaped(t, ser->values[i], true);
            put(t, "\"");
        }
        if (le != NULL) {
            put(t, fam->nlabels > 0 ? ",le=\"" : "le=\"");
            put(t, le);
            put(t, "\"");
        }
        put(t, "}");
    }
    put(t, " ");
}

static void render_family(text_t *t, const family_t *fam)
{
    static const char *const type_names[] = {"counter", "gauge", "histogram"};
    if (fam->help != NULL) {
        put(t, "# HELP ");
        put(t, fam->name);
        put(t, " ");
        put_escaped(t, fam->help, false);
        put(t, "\n");
    }
    put(t, "# TYPE ");
    put(t, fam->name);
    put(t, " ");
    put(t, type_names[fam->kind]);
    put(t, "\n");
    for (size_t s = 0; s < fam->nseries; s++) {
        const series_t *ser = fam->series[s];
        if (fam->kind != SL_METRIC_HISTOGRAM) {
            put_sample_name(t, fam, "", ser, NULL);
            put_number(t, ser->value);
            put(t, "\n");
            continue;
        }
        uint64_t cumulative = 0;
        for (int b = 0; b <= fam->nbounds; b++) {
            char le[32];
            if (b < fam->nbounds)
                format_number(fam->bounds[b], le);
            else
                strcpy(le, "+Inf");
            cumulative += ser->buckets[b];
            put_sample_name(t, fam, "_bucket", ser, le);
            put_count(t, cumulative);
            put(t, "\n");
        }
        put_sample_name(t, fam, "_sum", ser, NULL);
        put_number(t, ser->sum);
        put(t, "\n");
        put_sample_name(t, fam, "_count", ser, NULL);
        put_count(t, ser->count);
        put(t, "\n");
    }
}

char *sl_metrics_render(sl_metrics_t *m)
{
    text_t t = {.failed = false};
    sl_buf_init(&t.buf, SL_METRICS_MAX_TEXT_BYTES - 1);
    pthread_mutex_lock(&m->lock);
    for (int f = 0; f < m->nfams; f++)
        render_family(&t, m->fams[f]);
    pthread_mutex_unlock(&m->lock);
    if (t.buf.len == 0)
        put(&t, ""); /* an empty registry still renders a string */
    if (t.failed) {
        sl_buf_free(&t.buf);
        return NULL;
    }
    return sl_buf_take(&t.buf, NULL);
}

/* ---- Registry ----------------------------------------------------------------------------- */

static void family_free(family_t *fam)
{
    if (fam == NULL)
        return;
    for (size_t s = 0; s < fam->nseries; s++)
        free(fam->series[s]);
    free(fam->series);
    sl_hmap_free(fam->index);
    for (int i = 0; i < fam->nlabels; i++)
        free(fam->labels[i]);
    free(fam->name);
    free(fam->help);
    free(fam);
}

/* Builds the key of these (already cleaned) values into key (KEY_BYTES). */
static void series_key(const family_t *fam, char clean[][SL_METRICS_MAX_VALUE_BYTES + 1], char *key)
{
    size_t len = 0;
    key[0] = '\0';
    for (int i = 0; i < fam->nlabels; i++)
        len += (size_t)snprintf(key + len, KEY_BYTES - len, "%zu:%s", strlen(clean[i]), clean[i]);
}

/* Adds a series with these cleaned values; NULL (and the family as it was) when out of
 * memory. Caller holds the lock and has checked the cap. */
static series_t *series_create(family_t *fam, char clean[][SL_METRICS_MAX_VALUE_BYTES + 1],
                               const char *key)
{
    if (sl_grow((void **)&fam->series, sizeof *fam->series, &fam->series_cap, fam->nseries + 1,
                SIZE_MAX / sizeof *fam->series) != SL_OK)
        return NULL;
    size_t nbuckets = fam->kind == SL_METRIC_HISTOGRAM ? (size_t)fam->nbounds + 1 : 0;
    size_t head = sizeof(series_t) + nbuckets * sizeof(uint64_t);
    size_t strings = 0;
    for (int i = 0; i < fam->nlabels; i++)
        strings += strlen(clean[i]) + 1;
    series_t *ser = calloc(1, head + strings);
    if (ser == NULL)
        return NULL;
    char *p = (char *)ser + head;
    for (int i = 0; i < fam->nlabels; i++) {
        size_t n = strlen(clean[i]) + 1;
        memcpy(p, clean[i], n);
        ser->values[i] = p;
        p += n;
    }
    if (sl_hmap_put(fam->index, key, ser) != SL_OK) {
        free(ser);
        return NULL;
    }
    fam->series[fam->nseries++] = ser;
    return ser;
}

/* The series of family f for these values, created if there is room; NULL when the update
 * is to be ignored. Caller holds the lock. */
static series_t *series_get(sl_metrics_t *m, int f, sl_metric_kind_t kind,
                            const char *const *values)
{
    if (f < 0 || f >= m->nfams || m->fams[f]->kind != kind)
        return NULL;
    family_t *fam = m->fams[f];
    if (fam->nlabels > 0 && values == NULL)
        return NULL;
    char clean[SL_METRICS_MAX_LABELS][SL_METRICS_MAX_VALUE_BYTES + 1];
    for (int i = 0; i < fam->nlabels; i++) {
        if (values[i] == NULL)
            return NULL;
        clean_value(values[i], clean[i]);
    }
    char key[KEY_BYTES];
    series_key(fam, clean, key);
    series_t *ser = sl_hmap_get(fam->index, key);
    if (ser != NULL)
        return ser;
    if (fam->nseries >= SL_METRICS_MAX_SERIES) {
        /* The dropped family has one series per family, so it stops short of its own cap
         * unless there are over a thousand families; then it simply stops counting. */
        if (f != m->dropped) {
            const char *family[] = {fam->name, NULL};
            series_t *drop = series_get(m, m->dropped, SL_METRIC_COUNTER, family);
            if (drop != NULL)
                drop->value += 1;
        }
        return NULL;
    }
    return series_create(fam, clean, key);
}

/* The sample names family fam exposes (1, or 4 for a histogram) into names[4]; each is
 * malloc'ed. Returns how many, or -1 when out of memory. */
static int exposed_names(const char *name, sl_metric_kind_t kind, char *names[4])
{
    static const char *const suffixes[] = {"", "_bucket", "_sum", "_count"};
    int n = kind == SL_METRIC_HISTOGRAM ? 4 : 1;
    for (int i = 0; i < n; i++) {
        if (asprintf(&names[i], "%s%s", name, suffixes[i]) < 0) {
            while (i-- > 0)
                free(names[i]);
            return -1;
        }
    }
    return n;
}

/* Checks everything but the name clash; true when the family may be registered. */
static bool valid_family(sl_metric_kind_t kind, const char *name, const char *const *labels,
                         const double *bounds, int nbounds)
{
    if (kind != SL_METRIC_COUNTER && kind != SL_METRIC_GAUGE && kind != SL_METRIC_HISTOGRAM)
        return false;
    if (!valid_metric_name(name))
        return false;
    int nlabels = 0;
    for (; labels != NULL && labels[nlabels] != NULL; nlabels++) {
        if (nlabels == SL_METRICS_MAX_LABELS || !valid_label_name(labels[nlabels], kind))
            return false;
        for (int j = 0; j < nlabels; j++) {
            if (strcmp(labels[j], labels[nlabels]) == 0)
                return false;
        }
    }
    if (kind != SL_METRIC_HISTOGRAM)
        return true;
    if (nbounds < 0 || nbounds > SL_METRICS_MAX_BOUNDS || (nbounds > 0 && bounds == NULL))
        return false;
    for (int i = 0; i < nbounds; i++) {
        if (!isfinite(bounds[i]) || (i > 0 && !(bounds[i] > bounds[i - 1])))
            return false;
    }
    return true;
}

/* Registers with the lock held. */
static int family_add(sl_metrics_t *m, sl_metric_kind_t kind, const char *name, const char *help,
                      const char *const *labels, const double *bounds, int nbounds)
{
    if (!valid_family(kind, name, labels, bounds, nbounds))
        return -1;
    char *names[4];
    int nnames = exposed_names(name, kind, names);
    if (nnames < 0)
        return -1;
    int id = -1;
    int put_names = 0;
    family_t *fam = NULL;
    for (int i = 0; i < nnames; i++) {
        if (sl_hmap_get(m->names, names[i]) != NULL)
            goto fail;
    }
    if (sl_grow((void **)&m->fams, sizeof *m->fams, &m->fams_cap, (size_t)m->nfams + 1, INT_MAX) !=
        SL_OK)
        goto fail;
    fam = calloc(1, sizeof *fam);
    if (fam == NULL)
        goto fail;
    fam->kind = kind;
    fam->name = strdup(name);
    fam->help = help != NULL ? strdup(help) : NULL;
    fam->index = sl_hmap_new();
    if (fam->name == NULL || (help != NULL && fam->help == NULL) || fam->index == NULL)
        goto fail;
    for (; labels != NULL && labels[fam->nlabels] != NULL; fam->nlabels++) {
        fam->labels[fam->nlabels] = strdup(labels[fam->nlabels]);
        if (fam->labels[fam->nlabels] == NULL)
            goto fail;
    }
    if (kind == SL_METRIC_HISTOGRAM) {
        fam->nbounds = nbounds;
        if (nbounds > 0)
            memcpy(fam->bounds, bounds, (size_t)nbounds * sizeof *bounds);
    }
    if (fam->nlabels == 0 && series_create(fam, NULL, "") == NULL)
        goto fail;
    for (; put_names < nnames; put_names++) {
        if (sl_hmap_put(m->names, names[put_names], fam) != SL_OK)
            goto fail;
    }
    id = m->nfams;
    m->fams[m->nfams++] = fam;
    fam = NULL;
fail:
    if (id < 0) {
        for (int i = 0; i < put_names; i++)
            sl_hmap_del(m->names, names[i]);
    }
    family_free(fam);
    for (int i = 0; i < nnames; i++)
        free(names[i]);
    return id;
}

int sl_metrics_family(sl_metrics_t *m, sl_metric_kind_t kind, const char *name, const char *help,
                      const char *const *labels, const double *bounds, int nbounds)
{
    pthread_mutex_lock(&m->lock);
    int id = family_add(m, kind, name, help, labels, bounds, nbounds);
    pthread_mutex_unlock(&m->lock);
    return id;
}

sl_metrics_t *sl_metrics_new(void)
{
    sl_metrics_t *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    pthread_mutex_init(&m->lock, NULL);
    m->names = sl_hmap_new();
    if (m->names == NULL)
        goto fail;
    const char *labels[] = {"family", NULL};
    m->dropped = family_add(m, SL_METRIC_COUNTER, SL_METRICS_DROPPED_NAME,
                            "Updates of label sets not created because their family already "
                            "had " STR(SL_METRICS_MAX_SERIES) " series.",
                            labels, NULL, 0);
    if (m->dropped < 0)
        goto fail;
    return m;
fail:
    sl_metrics_free(m);
    return NULL;
}

void sl_metrics_add(sl_metrics_t *m, int f, const char *const *values, double v)
{
    pthread_mutex_lock(&m->lock);
    if (f >= 0 && f < m->nfams) {
        sl_metric_kind_t kind = m->fams[f]->kind;
        /* A counter only goes up: !(v >= 0) also refuses NaN. */
        if (kind == SL_METRIC_GAUGE || (kind == SL_METRIC_COUNTER && v >= 0)) {
            series_t *ser = series_get(m, f, kind, values);
            if (ser != NULL)
                ser->value += v;
        }
    }
    pthread_mutex_unlock(&m->lock);
}

void sl_metrics_set(sl_metrics_t *m, int f, const char *const *values, double v)
{
    pthread_mutex_lock(&m->lock);
    series_t *ser = series_get(m, f, SL_METRIC_GAUGE, values);
    if (ser != NULL)
        ser->value = v;
    pthread_mutex_unlock(&m->lock);
}

void sl_metrics_observe(sl_metrics_t *m, int f, const char *const *values, double v)
{
    pthread_mutex_lock(&m->lock);
    series_t *ser = series_get(m, f, SL_METRIC_HISTOGRAM, values);
    if (ser != NULL) {
        const family_t *fam = m->fams[f];
        int b = 0;
        /* NaN is in no finite bucket, only in +Inf (and makes the sum NaN), as client_golang
         * does. */
        while (b < fam->nbounds && !(v <= fam->bounds[b]))
            b++;
        ser->buckets[b]++;
        ser->count++;
        ser->sum += v;
    }
    pthread_mutex_unlock(&m->lock);
}

/* ---- HTTP --------------------------------------------------------------------------------- */

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    server_t *srv = cls;
    char msg[256];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    pthread_mutex_lock(&srv->log_lock);
    bool captured = srv->capturing;
    if (captured && srv->why[0] == '\0')
        snprintf(srv->why, sizeof srv->why, "%s", msg);
    pthread_mutex_unlock(&srv->log_lock);
    if (!captured)
        sl_warn("metrics http: %s", msg);
}

/* Queues a response; body is freed here when mode is MHD_RESPMEM_MUST_FREE. */
static enum MHD_Result respond(struct MHD_Connection *conn, unsigned int status,
                               const char *content_type, char *body,
                               enum MHD_ResponseMemoryMode mode, const char *allow)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), body, mode);
    if (resp == NULL) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (allow != NULL)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result ok = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ok;
}

/* A fixed plain-text answer. */
static enum MHD_Result respond_text(struct MHD_Connection *conn, unsigned int status,
                                    const char *text, const char *allow)
{
    /* MHD_RESPMEM_PERSISTENT only reads the buffer; its parameter is not const. */
    return respond(conn, status, "text/plain; charset=utf-8", (char *)text, MHD_RESPMEM_PERSISTENT,
                   allow);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    static int headers_seen; /* its address marks a request whose headers have arrived */
    (void)version;
    (void)upload_data;
    sl_metrics_t *m = cls;
    /* Answer only once the whole request is in, so a body (which no route uses) is read and
     * dropped rather than left on the connection. */
    if (*con_cls == NULL) {
        *con_cls = &headers_seen;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    bool is_metrics = strcmp(url, "/metrics") == 0;
    bool is_healthz = strcmp(url, "/healthz") == 0;
    if (!is_metrics && !is_healthz)
        return respond_text(conn, MHD_HTTP_NOT_FOUND, "not found\n", NULL);
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return respond_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n", "GET, HEAD");
    if (is_healthz)
        return respond_text(conn, MHD_HTTP_OK, "ok\n", NULL);
    char *text = sl_metrics_render(m);
    if (text == NULL) {
        sl_warn("metrics http: cannot render /metrics (out of memory or too large)");
        return respond_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot render\n", NULL);
    }
    return respond(conn, MHD_HTTP_OK, CONTENT_TYPE, text, MHD_RESPMEM_MUST_FREE, NULL);
}

static void server_stop(server_t *srv)
{
    if (srv == NULL)
        return;
    if (srv->daemon != NULL)
        MHD_stop_daemon(srv->daemon); /* joins its thread and closes the listening socket */
    pthread_mutex_destroy(&srv->log_lock);
    free(srv);
}

sl_err_t sl_metrics_serve(sl_metrics_t *m, const char *listen, int *port_out, char *err,
                          size_t errlen)
{
    sl_err_t rc = SL_OK;
    server_t *srv = NULL;
    char why[512] = "";
    struct sockaddr_in addr;
    if (m->server != NULL) {
        rc = SL_EEXISTS;
        snprintf(why, sizeof why, "this registry already serves its metrics");
        goto out;
    }
    if (!sl_parse_listen(listen, &addr)) {
        rc = SL_EINVAL;
        snprintf(why, sizeof why,
                 "bad listen address \"%.200s\" (want IPv4:PORT or localhost:PORT)",
                 listen != NULL ? listen : "(null)");
        goto out;
    }
    srv = calloc(1, sizeof *srv);
    if (srv == NULL) {
        rc = SL_EIO;
        snprintf(why, sizeof why, "out of memory");
        goto out;
    }
    pthread_mutex_init(&srv->log_lock, NULL);
    /* libmicrohttpd says why it failed (e.g. "Failed to bind to port 9100: Address already
     * in use") only through its logger, which it calls from this thread while starting. */
    srv->capturing = true;
    srv->daemon = MHD_start_daemon(
        MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, ntohs(addr.sin_port), NULL, NULL,
        on_request, m, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT, HTTP_CONNECTION_LIMIT,
        MHD_OPTION_CONNECTION_TIMEOUT, HTTP_TIMEOUT_S, MHD_OPTION_END);
    int start_errno = errno;
    pthread_mutex_lock(&srv->log_lock);
    srv->capturing = false;
    pthread_mutex_unlock(&srv->log_lock);
    if (srv->daemon == NULL) {
        rc = SL_EIO;
        snprintf(why, sizeof why, "cannot serve metrics on %.200s: %s", listen,
                 srv->why[0] != '\0' ? srv->why : strerror(start_errno));
        goto out;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    if (info == NULL || info->port == 0) {
        rc = SL_EIO;
        snprintf(why, sizeof why, "cannot learn the port bound for %.200s", listen);
        goto out;
    }
    if (port_out != NULL)
        *port_out = info->port;
    m->server = srv;
    srv = NULL;
out:
    server_stop(srv);
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s", why);
    return rc;
}

void sl_metrics_free(sl_metrics_t *m)
{
    if (m == NULL)
        return;
    /* First, so that no request renders while the families go away. */
    server_stop(m->server);
    for (int f = 0; f < m->nfams; f++)
        family_free(m->fams[f]);
    free(m->fams);
    sl_hmap_free(m->names);
    pthread_mutex_destroy(&m->lock);
    free(m);
}
