/* test_metrics.c - behaviour of the Prometheus registry and its endpoint (common/metrics.h):
 * the exact exposition text of each kind, escaping and cutting of label values, the series
 * cap, refused names, updates racing a render, and the HTTP server on a free port.
 */
#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/metrics.h"

/* The lines every registry starts with: the family it registers itself. */
#define DROPPED_HEAD                                                                               \
    "# HELP sluice_metrics_series_dropped_total Updates of label sets not created because "        \
    "their family already had 1000 series.\n"                                                      \
    "# TYPE sluice_metrics_series_dropped_total counter\n"

static const char *const no_labels[] = {NULL};

/* Renders m and compares it with want as a whole. */
static void assert_renders(sl_metrics_t *m, const char *want)
{
    char *text = sl_metrics_render(m);
    ck_assert_ptr_nonnull(text);
    ck_assert_str_eq(text, want);
    free(text);
}

START_TEST(counter_and_gauge_render_exactly)
{
    sl_metrics_t *m = sl_metrics_new();
    ck_assert_ptr_nonnull(m);
    int jobs = sl_metrics_family(m, SL_METRIC_COUNTER, "sluice_jobs_total", "Jobs accepted.", NULL,
                                 NULL, 0);
    const char *tenant_model[] = {"tenant", "model", NULL};
    int inflight = sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_inflight_requests",
                                     "Requests sent and not yet answered.", tenant_model, NULL, 0);
    int nohelp = sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_up", NULL, no_labels, NULL, 0);
    ck_assert_int_ge(jobs, 0);
    ck_assert_int_ge(inflight, 0);
    ck_assert_int_ge(nohelp, 0);

    /* Families without labels show 0 before any update. */
    assert_renders(m, DROPPED_HEAD "# HELP sluice_jobs_total Jobs accepted.\n"
                                   "# TYPE sluice_jobs_total counter\n"
                                   "sluice_jobs_total 0\n"
                                   "# HELP sluice_inflight_requests Requests sent and not yet "
                                   "answered.\n"
                                   "# TYPE sluice_inflight_requests gauge\n"
                                   "# TYPE sluice_up gauge\n"
                                   "sluice_up 0\n");

    sl_metrics_add(m, jobs, NULL, 2);
    sl_metrics_add(m, jobs, NULL, 3);
    sl_metrics_add(m, jobs, NULL, -7); /* a counter never goes down */
    sl_metrics_add(m, jobs, NULL, NAN);
    const char *a_mini[] = {"tenant-a", "gpt-4o-mini"};
    const char *b_mini[] = {"tenant-b", "gpt-4o-mini"};
    sl_metrics_set(m, inflight, b_mini, 4);
    sl_metrics_set(m, inflight, a_mini, 10);
    sl_metrics_add(m, inflight, a_mini, -2.5); /* a gauge goes both ways */
    sl_metrics_set(m, nohelp, NULL, 1);
    assert_renders(m, DROPPED_HEAD "# HELP sluice_jobs_total Jobs accepted.\n"
                                   "# TYPE sluice_jobs_total counter\n"
                                   "sluice_jobs_total 5\n"
                                   "# HELP sluice_inflight_requests Requests sent and not yet "
                                   "answered.\n"
                                   "# TYPE sluice_inflight_requests gauge\n"
                                   "sluice_inflight_requests{tenant=\"tenant-b\","
                                   "model=\"gpt-4o-mini\"} 4\n"
                                   "sluice_inflight_requests{tenant=\"tenant-a\","
                                   "model=\"gpt-4o-mini\"} 7.5\n"
                                   "# TYPE sluice_up gauge\n"
                                   "sluice_up 1\n");
    sl_metrics_free(m);
}
END_TEST

START_TEST(histogram_buckets_are_cumulative_with_inf_sum_and_count)
{
    sl_metrics_t *m = sl_metrics_new();
    const double bounds[] = {0.1, 0.5, 2.5};
    const char *route[] = {"route", NULL};
    int h = sl_metrics_family(m, SL_METRIC_HISTOGRAM, "sluice_wait_seconds", "Queue wait.", route,
                              bounds, 3);
    ck_assert_int_ge(h, 0);
    const char *fast[] = {"fast"};
    sl_metrics_observe(m, h, fast, 0.05);
    sl_metrics_observe(m, h, fast, 0.1); /* a bound is inclusive: le means <= */
    sl_metrics_observe(m, h, fast, 1);
    sl_metrics_observe(m, h, fast, 100);
    assert_renders(m, DROPPED_HEAD "# HELP sluice_wait_seconds Queue wait.\n"
                                   "# TYPE sluice_wait_seconds histogram\n"
                                   "sluice_wait_seconds_bucket{route=\"fast\",le=\"0.1\"} 2\n"
                                   "sluice_wait_seconds_bucket{route=\"fast\",le=\"0.5\"} 2\n"
                                   "sluice_wait_seconds_bucket{route=\"fast\",le=\"2.5\"} 3\n"
                                   "sluice_wait_seconds_bucket{route=\"fast\",le=\"+Inf\"} 4\n"
                                   "sluice_wait_seconds_sum{route=\"fast\"} 101.15\n"
                                   "sluice_wait_seconds_count{route=\"fast\"} 4\n");
    sl_metrics_free(m);

    /* Without labels the series exists from the start, all zero; no bounds means +Inf only. */
    m = sl_metrics_new();
    int bare = sl_metrics_family(m, SL_METRIC_HISTOGRAM, "sluice_bytes", "Sizes.", NULL, bounds, 2);
    int inf_only =
        sl_metrics_family(m, SL_METRIC_HISTOGRAM, "sluice_tries", "Tries.", NULL, NULL, 0);
    ck_assert_int_ge(bare, 0);
    ck_assert_int_ge(inf_only, 0);
    sl_metrics_observe(m, inf_only, NULL, 3);
    assert_renders(m, DROPPED_HEAD "# HELP sluice_bytes Sizes.\n"
                                   "# TYPE sluice_bytes histogram\n"
                                   "sluice_bytes_bucket{le=\"0.1\"} 0\n"
                                   "sluice_bytes_bucket{le=\"0.5\"} 0\n"
                                   "sluice_bytes_bucket{le=\"+Inf\"} 0\n"
                                   "sluice_bytes_sum 0\n"
                                   "sluice_bytes_count 0\n"
                                   "# HELP sluice_tries Tries.\n"
                                   "# TYPE sluice_tries histogram\n"
                                   "sluice_tries_bucket{le=\"+Inf\"} 1\n"
                                   "sluice_tries_sum 3\n"
                                   "sluice_tries_count 1\n");
    sl_metrics_free(m);
}
END_TEST

START_TEST(label_values_and_help_are_escaped)
{
    sl_metrics_t *m = sl_metrics_new();
    const char *labels[] = {"v", NULL};
    int g = sl_metrics_family(m, SL_METRIC_GAUGE, "g", "a \\ b\nc \"d\"", labels, NULL, 0);
    const char *odd[] = {"back\\slash \"quoted\"\nnew line"};
    sl_metrics_set(m, g, odd, 1);
    /* In HELP only backslash and newline are escaped; in label values the quote too. */
    assert_renders(m, DROPPED_HEAD "# HELP g a \\\\ b\\nc \"d\"\n"
                                   "# TYPE g gauge\n"
                                   "g{v=\"back\\\\slash \\\"quoted\\\"\\nnew line\"} 1\n");
    sl_metrics_free(m);
}
END_TEST

START_TEST(numbers_render_as_prometheus_parses_them)
{
    sl_metrics_t *m = sl_metrics_new();
    const char *labels[] = {"case", NULL};
    int g = sl_metrics_family(m, SL_METRIC_GAUGE, "n", NULL, labels, NULL, 0);
    struct {
        const char *name;
        double v;
    } cases[] = {
        {"whole", 42},        {"negative", -3},
        {"minus_zero", -0.0}, {"below_1e15", 999999999999999},
        {"at_1e15", 1e15},    {"tenth", 0.1},
        {"third", 1.0 / 3},   {"tiny", 1e-9},
        {"inf", INFINITY},    {"minus_inf", -INFINITY},
        {"nan", NAN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        sl_metrics_set(m, g, (const char *[]){cases[i].name}, cases[i].v);
    assert_renders(m, DROPPED_HEAD "# TYPE n gauge\n"
                                   "n{case=\"whole\"} 42\n"
                                   "n{case=\"negative\"} -3\n"
                                   "n{case=\"minus_zero\"} 0\n"
                                   "n{case=\"below_1e15\"} 999999999999999\n"
                                   "n{case=\"at_1e15\"} 1e+15\n"
                                   "n{case=\"tenth\"} 0.1\n"
                                   "n{case=\"third\"} 0.3333333333333333\n"
                                   "n{case=\"tiny\"} 1e-09\n"
                                   "n{case=\"inf\"} +Inf\n"
                                   "n{case=\"minus_inf\"} -Inf\n"
                                   "n{case=\"nan\"} NaN\n");
    /* Every rendered number reads back as the same double. */
    char *text = sl_metrics_render(m);
    ck_assert_ptr_nonnull(text);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "n{case=\"%s\"} ", cases[i].name);
        const char *at = strstr(text, prefix);
        ck_assert_ptr_nonnull(at);
        double back = strtod(at + strlen(prefix), NULL);
        ck_assert_msg(back == cases[i].v || (isnan(back) && isnan(cases[i].v)),
                      "%s does not read back", cases[i].name);
    }
    free(text);
    sl_metrics_free(m);
}
END_TEST

START_TEST(label_values_are_cut_on_a_character_boundary_and_made_utf8)
{
    sl_metrics_t *m = sl_metrics_new();
    const char *labels[] = {"v", NULL};
    int c = sl_metrics_family(m, SL_METRIC_COUNTER, "c_total", NULL, labels, NULL, 0);
    /* 127 ASCII bytes then a 2-byte character: it does not fit in 128 and is left out. */
    char long_value[300];
    memset(long_value, 'x', 127);
    strcpy(long_value + 127, "\xc3\xa9tail");
    sl_metrics_add(m, c, (const char *[]){long_value}, 1);
    /* A 1-byte character in its place fits: 128 bytes, a series of its own. */
    long_value[127] = 'y';
    sl_metrics_add(m, c, (const char *[]){long_value}, 1);
    /* A lone continuation byte and a truncated sequence become '?'. */
    sl_metrics_add(m, c,
                   (const char *[]){"a\x80"
                                    "b\xe2\x82"},
                   1);

    char want[1024];
    snprintf(want, sizeof want,
             DROPPED_HEAD "# TYPE c_total counter\n"
                          "c_total{v=\"%.127s\"} 1\n"
                          "c_total{v=\"%.127sy\"} 1\n"
                          "c_total{v=\"a?b??\"} 1\n",
             long_value, long_value);
    assert_renders(m, want);

    /* Values that differ only past the cut share one series. */
    long_value[200] = '\0';
    memset(long_value, 'z', 200);
    sl_metrics_add(m, c, (const char *[]){long_value}, 1);
    long_value[150] = 'q';
    sl_metrics_add(m, c, (const char *[]){long_value}, 1);
    char *text = sl_metrics_render(m);
    char line[200];
    snprintf(line, sizeof line, "c_total{v=\"%.128s\"} 2\n", long_value);
    ck_assert_ptr_nonnull(strstr(text, line));
    free(text);
    sl_metrics_free(m);
}
END_TEST

START_TEST(series_cap_drops_new_label_sets_and_counts_them)
{
    sl_metrics_t *m = sl_metrics_new();
    const char *labels[] = {"job", NULL};
    int c = sl_metrics_family(m, SL_METRIC_COUNTER, "sluice_per_job_total", "Per job.", labels,
                              NULL, 0);
    char job[32];
    for (int i = 0; i < SL_METRICS_MAX_SERIES + 5; i++) {
        snprintf(job, sizeof job, "job-%d", i);
        sl_metrics_add(m, c, (const char *[]){job}, 1);
    }
    /* Existing label sets keep counting past the cap. */
    sl_metrics_add(m, c, (const char *[]){"job-0"}, 1);
    sl_metrics_add(m, c, (const char *[]){"job-999"}, 1);
    char *text = sl_metrics_render(m);
    ck_assert_ptr_nonnull(text);
    int lines = 0;
    for (const char *p = text; (p = strstr(p, "sluice_per_job_total{")) != NULL; p++)
        lines++;
    ck_assert_int_eq(lines, SL_METRICS_MAX_SERIES);
    ck_assert_ptr_nonnull(strstr(text, "sluice_per_job_total{job=\"job-0\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(text, "sluice_per_job_total{job=\"job-999\"} 2\n"));
    ck_assert_ptr_null(strstr(text, "job-1000"));
    ck_assert_ptr_nonnull(strstr(text, DROPPED_HEAD "sluice_metrics_series_dropped_total"
                                                    "{family=\"sluice_per_job_total\"} 5\n"));
    free(text);
    sl_metrics_free(m);
}
END_TEST

START_TEST(invalid_names_and_labels_are_refused)
{
    sl_metrics_t *m = sl_metrics_new();
    const double bounds[] = {1, 2};
    ck_assert_int_ge(sl_metrics_family(m, SL_METRIC_COUNTER, "ok:name_1", NULL, NULL, NULL, 0), 0);
    ck_assert_int_ge(sl_metrics_family(m, SL_METRIC_HISTOGRAM, "h", NULL, NULL, bounds, 2), 0);

    const char *bad_names[] = {"", "1abc", "a-b", "a b", "é", "a.b"};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++)
        ck_assert_int_eq(sl_metrics_family(m, SL_METRIC_GAUGE, bad_names[i], NULL, NULL, NULL, 0),
                         -1);
    ck_assert_int_eq(sl_metrics_family(m, SL_METRIC_GAUGE, NULL, NULL, NULL, NULL, 0), -1);
    /* Duplicates, including the self-registered family and the names a histogram exposes. */
    ck_assert_int_eq(sl_metrics_family(m, SL_METRIC_GAUGE, "ok:name_1", NULL, NULL, NULL, 0), -1);
    ck_assert_int_eq(
        sl_metrics_family(m, SL_METRIC_COUNTER, SL_METRICS_DROPPED_NAME, NULL, NULL, NULL, 0), -1);
    ck_assert_int_eq(sl_metrics_family(m, SL_METRIC_GAUGE, "h_count", NULL, NULL, NULL, 0), -1);
    ck_assert_int_ge(sl_metrics_family(m, SL_METRIC_GAUGE, "x_sum", NULL, NULL, NULL, 0), 0);
    ck_assert_int_eq(sl_metrics_family(m, SL_METRIC_HISTOGRAM, "x", NULL, NULL, bounds, 2), -1);

    const char *const bad_labels[][3] = {
        {"", NULL},    {"1a", NULL}, {"a:b", NULL}, {"a-b", NULL},
        {"__x", NULL}, {"a", "a"},   {"ok", "b c"},
    };
    for (size_t i = 0; i < sizeof bad_labels / sizeof bad_labels[0]; i++)
        ck_assert_int_eq(
            sl_metrics_family(m, SL_METRIC_GAUGE, "labelled", NULL, bad_labels[i], NULL, 0), -1);
    const char *nine[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", NULL};
    ck_assert_int_eq(sl_metrics_family(m, SL_METRIC_GAUGE, "labelled", NULL, nine, NULL, 0), -1);
    nine[8] = NULL; /* eight is the most */
    ck_assert_int_ge(sl_metrics_family(m, SL_METRIC_GAUGE, "labelled", NULL, nine, NULL, 0), 0);
    const char *le[] = {"le", NULL};
    ck_assert_int_eq(sl_metrics_family(m, SL_METRIC_HISTOGRAM, "h2", NULL, le, bounds, 2), -1);
    ck_assert_int_ge(sl_metrics_family(m, SL_METRIC_GAUGE, "g_le", NULL, le, NULL, 0), 0);

    /* Histogram bounds: strictly ascending, finite, at most 32, present when counted. */
    const double unsorted[] = {1, 0.5};
    const double repeated[] = {1, 1};
    const double with_nan[] = {1, NAN};
    const double with_inf[] = {1, INFINITY};
    double many[SL_METRICS_MAX_BOUNDS + 1];
    for (int i = 0; i <= SL_METRICS_MAX_BOUNDS; i++)
        many[i] = i;
    ck_assert_int_eq(sl_metrics_family(m, SL_METRIC_HISTOGRAM, "h3", NULL, NULL, unsorted, 2), -1);
    ck_assert_int_eq(sl_metrics_family(m, SL_METRIC_HISTOGRAM, "h3", NULL, NULL, repeated, 2), -1);
    ck_assert_int_eq(sl_metrics_family(m, SL_METRIC_HISTOGRAM, "h3", NULL, NULL, with_nan, 2), -1);
    ck_assert_int_eq(sl_metrics_family(m, SL_METRIC_HISTOGRAM, "h3", NULL, NULL, with_inf, 2), -1);
    ck_assert_int_eq(sl_metrics_family(m, SL_METRIC_HISTOGRAM, "h3", NULL, NULL, NULL, 2), -1);
    ck_assert_int_eq(sl_metrics_family(m, SL_METRIC_HISTOGRAM, "h3", NULL, NULL, many, -1), -1);
    ck_assert_int_eq(sl_metrics_family(m, SL_METRIC_HISTOGRAM, "h3", NULL, NULL, many,
                                       SL_METRICS_MAX_BOUNDS + 1),
                     -1);
    ck_assert_int_ge(
        sl_metrics_family(m, SL_METRIC_HISTOGRAM, "h3", NULL, NULL, many, SL_METRICS_MAX_BOUNDS),
        0);
    /* Other kinds ignore bounds. */
    ck_assert_int_ge(sl_metrics_family(m, SL_METRIC_GAUGE, "g_bounds", NULL, NULL, unsorted, 99),
                     0);
    ck_assert_int_eq(sl_metrics_family(m, (sl_metric_kind_t)7, "kind", NULL, NULL, NULL, 0), -1);
    sl_metrics_free(m);
}
END_TEST

START_TEST(updates_that_do_not_fit_the_family_are_ignored)
{
    sl_metrics_t *m = sl_metrics_new();
    const char *labels[] = {"a", NULL};
    int c = sl_metrics_family(m, SL_METRIC_COUNTER, "c_total", NULL, NULL, NULL, 0);
    int lc = sl_metrics_family(m, SL_METRIC_COUNTER, "lc_total", NULL, labels, NULL, 0);
    sl_metrics_set(m, c, NULL, 5);     /* counters cannot be set */
    sl_metrics_observe(m, c, NULL, 5); /* nor observed */
    sl_metrics_add(m, -1, NULL, 1);    /* a failed registration's id */
    sl_metrics_add(m, 99, NULL, 1);
    sl_metrics_add(m, lc, NULL, 1);                   /* label values missing */
    sl_metrics_add(m, lc, (const char *[]){NULL}, 1); /* a NULL value */
    assert_renders(m, DROPPED_HEAD "# TYPE c_total counter\n"
                                   "c_total 0\n"
                                   "# TYPE lc_total counter\n");
    sl_metrics_free(m);
    sl_metrics_free(NULL);
}
END_TEST

/* ---- Concurrency -------------------------------------------------------------------------- */

#define RACE_UPDATES 20000

typedef struct {
    sl_metrics_t *m;
    int counter;
    int hist;
} race_t;

static void *update_main(void *arg)
{
    race_t *race = arg;
    char tenant[16];
    for (int i = 0; i < RACE_UPDATES; i++) {
        snprintf(tenant, sizeof tenant, "t%d", i % 7);
        sl_metrics_add(race->m, race->counter, (const char *[]){tenant}, 1);
        sl_metrics_observe(race->m, race->hist, NULL, (double)(i % 3));
    }
    return NULL;
}

START_TEST(concurrent_updates_while_rendering_add_up)
{
    race_t race = {.m = sl_metrics_new()};
    const char *labels[] = {"tenant", NULL};
    const double bounds[] = {0.5, 1.5};
    race.counter =
        sl_metrics_family(race.m, SL_METRIC_COUNTER, "race_total", NULL, labels, NULL, 0);
    race.hist =
        sl_metrics_family(race.m, SL_METRIC_HISTOGRAM, "race_seconds", NULL, NULL, bounds, 2);
    pthread_t updater[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&updater[i], NULL, update_main, &race), 0);
    for (int i = 0; i < 200; i++) {
        char *text = sl_metrics_render(race.m);
        ck_assert_ptr_nonnull(text);
        free(text);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(updater[i], NULL);

    char *text = sl_metrics_render(race.m);
    double total = 0;
    for (int t = 0; t < 7; t++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "race_total{tenant=\"t%d\"} ", t);
        const char *at = strstr(text, prefix);
        ck_assert_ptr_nonnull(at);
        total += strtod(at + strlen(prefix), NULL);
    }
    ck_assert_int_eq((long)total, 2 * RACE_UPDATES);
    /* i % 3 over 0..19999: 6667 zeros, 6667 ones, 6666 twos, twice. */
    ck_assert_ptr_nonnull(strstr(text, "race_seconds_bucket{le=\"0.5\"} 13334\n"
                                       "race_seconds_bucket{le=\"1.5\"} 26668\n"
                                       "race_seconds_bucket{le=\"+Inf\"} 40000\n"
                                       "race_seconds_sum 39998\n"
                                       "race_seconds_count 40000\n"));
    free(text);
    sl_metrics_free(race.m);
}
END_TEST

/* ---- HTTP --------------------------------------------------------------------------------- */

typedef struct {
    char data[16384];
    size_t len;
} buf_t;

static size_t collect(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    buf_t *buf = userdata;
    size_t n = size * nmemb;
    if (n > sizeof buf->data - 1 - buf->len)
        n = sizeof buf->data - 1 - buf->len;
    memcpy(buf->data + buf->len, ptr, n);
    buf->len += n;
    buf->data[buf->len] = '\0';
    return size * nmemb;
}

/* Makes one request; returns the status and fills the Content-Type and the body. */
static long http_call(int port, const char *method, const char *path, char *content_type,
                      size_t ctlen, buf_t *body)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    CURL *curl = curl_easy_init();
    ck_assert_ptr_nonnull(curl);
    memset(body, 0, sizeof *body);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    if (strcmp(method, "POST") == 0)
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "x=1");
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 5L);
    CURLcode cc = curl_easy_perform(curl);
    ck_assert_msg(cc == CURLE_OK, "curl: %s", curl_easy_strerror(cc));
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    char *ct = NULL;
    curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &ct);
    snprintf(content_type, ctlen, "%s", ct != NULL ? ct : "");
    curl_easy_cleanup(curl);
    return status;
}

/* Whether something accepts TCP connections on 127.0.0.1:port. */
static int port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = connect(fd, (struct sockaddr *)&addr, sizeof addr);
    int saved = errno;
    close(fd);
    if (rc != 0)
        ck_assert_int_eq(saved, ECONNREFUSED);
    return rc == 0;
}

START_TEST(http_serves_metrics_and_healthz_and_refuses_the_rest)
{
    sl_metrics_t *m = sl_metrics_new();
    int c = sl_metrics_family(m, SL_METRIC_COUNTER, "sluice_jobs_total", "Jobs.", NULL, NULL, 0);
    sl_metrics_add(m, c, NULL, 3);
    int port = 0;
    char err[256];
    ck_assert_int_eq(sl_metrics_serve(m, "127.0.0.1:0", &port, err, sizeof err), SL_OK);
    ck_assert_int_gt(port, 0);

    char ct[128];
    buf_t body;
    ck_assert_int_eq(http_call(port, "GET", "/metrics", ct, sizeof ct, &body), 200);
    ck_assert_str_eq(ct, "text/plain; version=0.0.4; charset=utf-8");
    char *text = sl_metrics_render(m);
    ck_assert_str_eq(body.data, text);
    free(text);
    ck_assert_ptr_nonnull(strstr(body.data, "\nsluice_jobs_total 3\n"));

    /* Later updates show in the next scrape. */
    sl_metrics_add(m, c, NULL, 1);
    ck_assert_int_eq(http_call(port, "GET", "/metrics", ct, sizeof ct, &body), 200);
    ck_assert_ptr_nonnull(strstr(body.data, "\nsluice_jobs_total 4\n"));

    ck_assert_int_eq(http_call(port, "GET", "/healthz", ct, sizeof ct, &body), 200);
    ck_assert_str_eq(body.data, "ok\n");
    ck_assert_int_eq(http_call(port, "HEAD", "/metrics", ct, sizeof ct, &body), 200);
    ck_assert_str_eq(ct, "text/plain; version=0.0.4; charset=utf-8");
    ck_assert_str_eq(body.data, "");
    ck_assert_int_eq(http_call(port, "GET", "/other", ct, sizeof ct, &body), 404);
    ck_assert_int_eq(http_call(port, "GET", "/metrics/x", ct, sizeof ct, &body), 404);
    ck_assert_int_eq(http_call(port, "POST", "/metrics", ct, sizeof ct, &body), 405);
    ck_assert_int_eq(http_call(port, "DELETE", "/healthz", ct, sizeof ct, &body), 405);
    /* The connection is still good after a refused request with a body. */
    ck_assert_int_eq(http_call(port, "GET", "/healthz", ct, sizeof ct, &body), 200);

    /* One server per registry. */
    ck_assert_int_eq(sl_metrics_serve(m, "127.0.0.1:0", NULL, err, sizeof err), SL_EEXISTS);
    sl_metrics_free(m);
}
END_TEST

START_TEST(free_stops_the_server)
{
    sl_metrics_t *m = sl_metrics_new();
    int port = 0;
    ck_assert_int_eq(sl_metrics_serve(m, "localhost:0", &port, NULL, 0), SL_OK);
    ck_assert(port_open(port));
    sl_metrics_free(m);
    ck_assert(!port_open(port));
}
END_TEST

START_TEST(bad_address_is_einval_and_a_taken_port_is_eio)
{
    sl_metrics_t *m = sl_metrics_new();
    char err[256];
    const char *bad[] = {NULL,           "",         "127.0.0.1",    "127.0.0.1:",
                         ":9100",        "1.2.3:80", "example:9100", "127.0.0.1:65536",
                         "127.0.0.1:-1", "[::1]:80", "127.0.0.1:8x", "127.0.0.1:123456"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        ck_assert_int_eq(sl_metrics_serve(m, bad[i], NULL, err, sizeof err), SL_EINVAL);
        ck_assert_msg(strstr(err, "bad listen address") != NULL, "err: %s", err);
    }

    int port = 0;
    ck_assert_int_eq(sl_metrics_serve(m, "127.0.0.1:0", &port, err, sizeof err), SL_OK);
    sl_metrics_t *other = sl_metrics_new();
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    err[0] = '\0';
    ck_assert_int_eq(sl_metrics_serve(other, listen, NULL, err, sizeof err), SL_EIO);
    ck_assert_msg(strstr(err, "in use") != NULL, "err: %s", err);
    /* The refused registry can still serve elsewhere. */
    ck_assert_int_eq(sl_metrics_serve(other, "127.0.0.1:0", NULL, err, sizeof err), SL_OK);
    sl_metrics_free(other);
    sl_metrics_free(m);
}
END_TEST

/* ---- promtool ----------------------------------------------------------------------------- */

START_TEST(promtool_accepts_a_rendered_sample)
{
    if (system("command -v promtool >/dev/null 2>&1") != 0) {
        printf("metrics: promtool not installed; skipping promtool_accepts_a_rendered_sample\n");
        return;
    }
    sl_metrics_t *m = sl_metrics_new();
    const char *labels[] = {"tenant", "model", NULL};
    const double bounds[] = {0.005, 0.1, 1, 10};
    int c = sl_metrics_family(m, SL_METRIC_COUNTER, "sluice_requests_total", "Requests sent.",
                              labels, NULL, 0);
    int g = sl_metrics_family(m, SL_METRIC_GAUGE, "sluice_queue_depth", "Jobs waiting.", labels,
                              NULL, 0);
    int h = sl_metrics_family(m, SL_METRIC_HISTOGRAM, "sluice_wait_seconds", "Queue wait.", labels,
                              bounds, 4);
    const char *odd[] = {"a \"quoted\" \\ tenant\nx", "gpt-4o"};
    const char *plain[] = {"t1", "claude"};
    sl_metrics_add(m, c, odd, 3);
    sl_metrics_add(m, c, plain, 1e20);
    sl_metrics_set(m, g, odd, NAN);
    sl_metrics_set(m, g, plain, -INFINITY);
    sl_metrics_observe(m, h, odd, 0.07);
    sl_metrics_observe(m, h, plain, 1.0 / 3);
    /* Push one family over its cap so the dropped counter has a sample too. */
    for (int i = 0; i <= SL_METRICS_MAX_SERIES; i++) {
        char tenant[16];
        snprintf(tenant, sizeof tenant, "t%d", i + 2);
        sl_metrics_set(m, g, (const char *[]){tenant, "m"}, i);
    }
    char *text = sl_metrics_render(m);
    ck_assert_ptr_nonnull(text);
    char path[] = "/tmp/sluice-metrics-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "promtool check metrics < %s", path);
    int rc = system(cmd);
    unlink(path);
    free(text);
    sl_metrics_free(m);
    ck_assert_msg(rc == 0, "promtool check metrics failed (%d)", rc);
}
END_TEST

static Suite *metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, counter_and_gauge_render_exactly);
    tcase_add_test(tc, histogram_buckets_are_cumulative_with_inf_sum_and_count);
    tcase_add_test(tc, label_values_and_help_are_escaped);
    tcase_add_test(tc, numbers_render_as_prometheus_parses_them);
    tcase_add_test(tc, label_values_are_cut_on_a_character_boundary_and_made_utf8);
    tcase_add_test(tc, series_cap_drops_new_label_sets_and_counts_them);
    tcase_add_test(tc, invalid_names_and_labels_are_refused);
    tcase_add_test(tc, updates_that_do_not_fit_the_family_are_ignored);
    tcase_add_test(tc, concurrent_updates_while_rendering_add_up);
    tcase_add_test(tc, promtool_accepts_a_rendered_sample);
    suite_add_tcase(s, tc);

    TCase *http = tcase_create("http");
    tcase_set_timeout(http, 20);
    tcase_add_test(http, http_serves_metrics_and_healthz_and_refuses_the_rest);
    tcase_add_test(http, free_stops_the_server);
    tcase_add_test(http, bad_address_is_einval_and_a_taken_port_is_eio);
    suite_add_tcase(s, http);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    SRunner *runner = srunner_create(metrics_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    curl_global_cleanup();
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
