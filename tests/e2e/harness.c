/* harness.c - end-to-end test helpers (see harness.h). */
#include "harness.h"

#include "kafka.h"
#include "sign.h"
#include "util.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int n_pass, n_fail;
static char tmpdir[256];

void h_check(int ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("  [%s] ", ok ? "PASS" : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
    if (ok)
        n_pass++;
    else
        n_fail++;
}

int h_summary(const char *name)
{
    printf("e2e %s: %d passed, %d failed\n", name, n_pass, n_fail);
    return n_fail == 0 && n_pass > 0 ? 0 : 1;
}

const char *h_tmpdir(void)
{
    if (tmpdir[0] == '\0') {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/sluice-e2e-XXXXXX");
        if (mkdtemp(tmpdir) == NULL) {
            perror("mkdtemp");
            exit(2);
        }
    }
    return tmpdir;
}

void h_cleanup(int keep)
{
    /* E2E_KEEP=1 keeps the logs of a passing run too. */
    if (keep || getenv("E2E_KEEP") != NULL || tmpdir[0] == '\0') {
        if (tmpdir[0] != '\0')
            printf("  (logs and files kept in %s)\n", tmpdir);
        return;
    }
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
}

void h_key_hash_hex(const char *api_key, char hex[65])
{
    uint8_t h[32];
    sl_keyhash(api_key, strlen(api_key), h);
    sl_hex_encode(h, sizeof h, hex);
}

int h_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        perror("free port");
        exit(2);
    }
    close(fd);
    return ntohs(a.sin_port);
}

char *h_write(const char *name, const char *text)
{
    static char paths[16][PATH_MAX];
    static int next;
    char *path = paths[next++ % 16];
    snprintf(path, PATH_MAX, "%s/%s", h_tmpdir(), name);
    FILE *f = fopen(path, "w");
    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    return path;
}

pid_t h_spawn(const char *prog, const char *logname, const char *config, const char *const *args)
{
    /* The simulator stands in for a provider on other machines: SLUICE_SIM_BIN (the sanitizer
     * phase's choice) keeps it at full speed while sluice's own processes run instrumented. */
    const char *bin = getenv(strcmp(prog, "sluice-sim") == 0 && getenv("SLUICE_SIM_BIN") != NULL
                                 ? "SLUICE_SIM_BIN"
                                 : "SLUICE_BIN");
    char exe[PATH_MAX], log[PATH_MAX + 300];
    snprintf(exe, sizeof exe, "%s/%s", bin != NULL ? bin : "bin", prog);
    snprintf(log, sizeof log, "%s/%s.log", h_tmpdir(), logname);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        if (config != NULL)
            setenv("SLUICE_CONFIG", config, 1);
        const char *argv[32];
        int n = 0;
        argv[n++] = exe;
        for (int i = 0; args != NULL && args[i] != NULL && n < 31; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(exe, (char *const *)argv);
        perror("execv");
        _exit(127);
    }
    return pid;
}

int h_run(const char *prog, const char *logname, const char *config, const char *const *args,
          int timeout_ms)
{
    pid_t pid = h_spawn(prog, logname, config, args);
    for (int waited = 0; waited < timeout_ms; waited += 20) {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        usleep(20 * 1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

int h_alive(pid_t pid)
{
    return waitpid(pid, NULL, WNOHANG) == 0;
}

int h_stop(pid_t pid, int sig, int timeout_ms)
{
    kill(pid, sig);
    for (int waited = 0; waited < timeout_ms; waited += 20) {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        usleep(20 * 1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

int h_wait_file(const char *path, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 50) {
        if (access(path, F_OK) == 0)
            return 1;
        usleep(50 * 1000);
    }
    return 0;
}

typedef struct {
    char *data;
    size_t len;
} buf_t;

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    buf_t *b = arg;
    char *nd = realloc(b->data, b->len + size * n + 1);
    if (nd == NULL)
        return 0;
    b->data = nd;
    memcpy(b->data + b->len, p, size * n);
    b->len += size * n;
    b->data[b->len] = '\0';
    return size * n;
}

int h_wait_http_ok(const char *url, const char *bearer, int timeout_ms)
{
    double until = sl_mono_ms() + timeout_ms;
    for (;;) {
        long status = 0;
        json_decref(h_http_call("GET", url, bearer, NULL, &status));
        if (status == 200)
            return 1;
        if (sl_mono_ms() >= until)
            return 0;
        usleep(100 * 1000);
    }
}

char *h_http_text(const char *url)
{
    CURL *c = curl_easy_init();
    buf_t b = {NULL, 0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK || status != 200) {
        free(b.data);
        return NULL;
    }
    return b.data;
}

json_t *h_http_call(const char *method, const char *url, const char *bearer, const char *body,
                    long *status)
{
    CURL *c = curl_easy_init();
    buf_t b = {NULL, 0};
    struct curl_slist *hdrs = NULL;
    char auth[512];
    if (bearer != NULL) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", bearer);
        hdrs = curl_slist_append(hdrs, auth);
    }
    if (body != NULL) {
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    }
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 15000L);
    CURLcode rc = curl_easy_perform(c);
    *status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    json_t *doc = b.data != NULL ? json_loads(b.data, 0, NULL) : NULL;
    free(b.data);
    return doc;
}

json_t *h_http_json(const char *url)
{
    char *text = h_http_text(url);
    json_t *doc = text != NULL ? json_loads(text, 0, NULL) : NULL;
    free(text);
    return doc;
}

int h_promtool_check(const char *text)
{
    char *path = h_write("metrics.txt", text);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "promtool check metrics < '%s' > '%s.check' 2>&1", path, path);
    int rc = system(cmd);
    return rc == 0 ? 0 : -1;
}

double h_metrics_sample(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *line = text; line != NULL && *line != '\0';) {
        if (strncmp(line, series, n) == 0 && line[n] == ' ')
            return strtod(line + n + 1, NULL);
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    return -1;
}

int h_poll_json(rd_kafka_t *cons, int timeout_ms, json_t **doc)
{
    *doc = NULL;
    rd_kafka_message_t *m = rd_kafka_consumer_poll(cons, timeout_ms);
    if (m == NULL)
        return 0;
    if (!m->err)
        *doc = json_loadb(m->payload, m->len, 0, NULL);
    rd_kafka_message_destroy(m);
    return 1;
}

int64_t h_sim_total(json_t *stats, const char *field)
{
    int64_t total = 0;
    const char *name;
    json_t *dep;
    json_object_foreach(json_object_get(stats, "deployments"), name, dep)
    {
        total += json_integer_value(json_object_get(dep, field));
    }
    return total;
}

int h_sanitizers(void)
{
    const char *bin = getenv("SLUICE_BIN");
    size_t n = bin != NULL ? strlen(bin) : 0;
    return n >= 8 && strcmp(bin + n - 8, "bin-asan") == 0;
}

rd_kafka_t *h_producer(const char *bootstrap)
{
    return h_producer_dr(bootstrap, NULL, NULL);
}

rd_kafka_t *h_producer_dr(const char *bootstrap,
                          void (*dr_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *),
                          void *opaque)
{
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, err, sizeof err);
    rd_kafka_conf_set(conf, "linger.ms", "0", err, sizeof err);
    rd_kafka_conf_set(conf, "enable.idempotence", "true", err, sizeof err);
    if (dr_cb != NULL)
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_opaque(conf, opaque);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (rk == NULL) {
        fprintf(stderr, "producer: %s\n", err);
        exit(2);
    }
    return rk;
}

void h_produce_headers(rd_kafka_t *p, const char *topic, const char *key, const char *value,
                       size_t len, rd_kafka_headers_t *hdrs)
{
    for (;;) {
        rd_kafka_resp_err_t err = rd_kafka_producev(
            p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, key ? strlen(key) : 0),
            RD_KAFKA_V_VALUE((void *)value, len), RD_KAFKA_V_HEADERS(hdrs),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
            return; /* the headers are the message's now */
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            fprintf(stderr, "produce: %s\n", rd_kafka_err2str(err));
            exit(2);
        }
        rd_kafka_poll(p, 5);
    }
}

void h_produce(rd_kafka_t *p, const char *topic, const char *key, const char *value, size_t len)
{
    h_produce_headers(p, topic, key, value, len, NULL);
}

void h_produce_as(rd_kafka_t *p, const char *role, const char *topic, const char *key,
                  const char *value, size_t len)
{
    static sl_signer_t *signers[SL_ROLE_COUNT];
    int r = sl_role_parse(role, strlen(role));
    if (r < 0) {
        fprintf(stderr, "h_produce_as: no role %s\n", role);
        exit(2);
    }
    if (signers[r] == NULL) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s.key", h_tmpdir(),
                 r == SL_ROLE_SCHEDULER ? "dispatch" : role);
        if (!h_wait_file(path, 20000) || sl_signer_load(path, &signers[r]) != SL_OK) {
            fprintf(stderr, "h_produce_as: cannot load %s\n", path);
            exit(2);
        }
    }
    rd_kafka_headers_t *hdrs = rd_kafka_headers_new(2);
    sl_kafka_sign_headers(hdrs, signers[r], (sl_role_t)r, topic, key, key ? strlen(key) : 0, value,
                          len);
    h_produce_headers(p, topic, key, value, len, hdrs);
}

rd_kafka_t *h_consumer_from_start(const char *bootstrap, const char *topic)
{
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, err, sizeof err);
    rd_kafka_conf_set(conf, "group.id", "sluice-e2e-reader", err, sizeof err);
    rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof err);
    rd_kafka_conf_set(conf, "fetch.wait.max.ms", "1", err, sizeof err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (rk == NULL) {
        fprintf(stderr, "consumer: %s\n", err);
        exit(2);
    }
    rd_kafka_poll_set_consumer(rk);
    const rd_kafka_metadata_t *md = NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    if (rd_kafka_metadata(rk, 0, rkt, &md, 10000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        fprintf(stderr, "metadata for %s failed\n", topic);
        exit(2);
    }
    rd_kafka_topic_destroy(rkt);
    int np = md->topics[0].partition_cnt;
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(np);
    for (int i = 0; i < np; i++)
        rd_kafka_topic_partition_list_add(parts, topic, md->topics[0].partitions[i].id)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_metadata_destroy(md);
    rd_kafka_assign(rk, parts);
    rd_kafka_topic_partition_list_destroy(parts);
    return rk;
}

int64_t h_sql_count(const char *db, const char *sql)
{
    sqlite3 *h = NULL;
    int64_t n = -1;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            n = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(h);
    return n;
}

void h_request_fact(rd_kafka_t *prod, const char *idem, const char *api_key, long long n,
                    int max_tokens)
{
    char req[1024];
    int len = snprintf(req, sizeof req,
                       "{\"idempotency_key\": \"%s\", \"api_key\": \"%s\","
                       " \"route\": \"chat\", \"request\": {\"messages\": [{\"role\": \"user\","
                       " \"content\": \"Tell me fact number %lld.\"}], \"max_tokens\": %d}}",
                       idem, api_key, n, max_tokens);
    h_produce(prod, "sluice.requests", idem, req, (size_t)len);
}

void h_results_init(h_results_t *r)
{
    memset(r, 0, sizeof *r);
    r->seen = sl_hmap_new();
    if (r->seen == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
}

int h_results_take(h_results_t *r, json_t *result)
{
    const char *id = json_string_value(json_object_get(result, "job_id"));
    const char *status = json_string_value(json_object_get(result, "status"));
    if (id == NULL || status == NULL)
        return 0;
    const char *prev = sl_hmap_get(r->seen, id);
    if (prev != NULL) {
        r->duplicates++;
        r->conflicting += strcmp(prev, status) != 0;
        return 0;
    }
    sl_hmap_put(r->seen, id, strdup(status));
    r->done++;
    r->ok += strcmp(status, "succeeded") == 0;
    return 1;
}

void h_results_free(h_results_t *r)
{
    h_free_string_map(r->seen);
    r->seen = NULL;
}

char *h_member_config(const char *name, const char *body, const char *sched_extra, int sharded)
{
    const char *dir = h_tmpdir();
    size_t cap = strlen(body) + strlen(sched_extra) + 4096;
    char *cfg = malloc(cap), file[300];
    if (cfg == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    snprintf(cfg, cap,
             "{\"kafka\": {\"bootstrap_file\": \"%s/bootstrap\", \"membership\": \"group\","
             "            \"instance\": \"%s\"},"
             " \"scheduler\": {%s \"db\": \"%s/%s.db\", \"sharded\": %s,"
             "   \"metrics_listen\": \"127.0.0.1:%d\", \"admin_listen\": \"\"},"
             " \"ingest\": {\"metrics_listen\": \"127.0.0.1:%d\"},"
             " \"dispatcher\": {\"metrics_listen\": \"127.0.0.1:%d\"}, %s}",
             dir, name, sched_extra, dir, name, sharded ? "true" : "false", h_free_port(),
             h_free_port(), h_free_port(), body);
    snprintf(file, sizeof file, "%s.json", name);
    char *path = strdup(h_write(file, cfg));
    free(cfg);
    return path;
}

pid_t h_devkafka(const char *config, int partitions, char *bootstrap, size_t cap)
{
    char file[4096], parts[16];
    snprintf(file, sizeof file, "%s/bootstrap", h_tmpdir());
    snprintf(parts, sizeof parts, "%d", partitions);
    const char *args[] = {"--partitions", parts, NULL};
    pid_t pid = h_spawn("sluice-devkafka", "devkafka", config, args);
    FILE *f = h_wait_file(file, 20000) ? fopen(file, "r") : NULL;
    if (f == NULL || fgets(bootstrap, (int)cap, f) == NULL) {
        fprintf(stderr, "devkafka did not start\n");
        exit(2);
    }
    fclose(f);
    bootstrap[strcspn(bootstrap, "\r\n")] = '\0';
    return pid;
}

void h_stack_up(h_stack_t *st, const char *config, const char *sim_config, int sim_port)
{
    memset(st, 0, sizeof *st);
    st->config = config;
    st->sim_port = sim_port;
    snprintf(st->bootstrap_file, sizeof st->bootstrap_file, "%s/bootstrap", h_tmpdir());
    const char *kafka_args[] = {"--partitions", "16", NULL};
    st->kafka = h_spawn("sluice-devkafka", "devkafka", config, kafka_args);
    if (!h_wait_file(st->bootstrap_file, 20000)) {
        fprintf(stderr, "devkafka did not start\n");
        exit(2);
    }
    FILE *f = fopen(st->bootstrap_file, "r");
    if (f == NULL || fgets(st->bootstrap, sizeof st->bootstrap, f) == NULL) {
        fprintf(stderr, "cannot read %s\n", st->bootstrap_file);
        exit(2);
    }
    fclose(f);
    st->bootstrap[strcspn(st->bootstrap, "\r\n")] = '\0';
    char port[16];
    snprintf(port, sizeof port, "%d", sim_port);
    const char *sim_args[] = {"--config", sim_config, "--port", port, NULL};
    st->sim = h_spawn("sluice-sim", "sim", NULL, sim_args);
    snprintf(st->stats_url, sizeof st->stats_url, "http://127.0.0.1:%d/stats", sim_port);
    json_t *stats = NULL;
    for (int i = 0; i < 200 && stats == NULL; i++) {
        usleep(50 * 1000);
        stats = h_http_json(st->stats_url);
    }
    if (stats == NULL) {
        fprintf(stderr, "sluice-sim did not start\n");
        exit(2);
    }
    json_decref(stats);
    st->sched = h_spawn("sluice-scheduler", "scheduler", config, NULL);
    st->ingest = h_spawn("sluice-ingest", "ingest", config, NULL);
    st->disp = h_spawn("sluice-dispatcher", "dispatcher", config, NULL);
}

int h_stack_down(h_stack_t *st)
{
    pid_t order[] = {st->disp, st->ingest, st->sched, st->sim, st->kafka};
    const char *names[] = {"dispatcher", "ingest", "scheduler", "sim", "devkafka"};
    int bad = 0;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        if (order[i] <= 0)
            continue;
        int status = h_stop(order[i], SIGTERM, 15000);
        if (status != 0) {
            printf("  %s exited with status %d on SIGTERM (see %s/%s.log)\n", names[i], status,
                   h_tmpdir(), names[i]);
            bad++;
        }
    }
    return bad;
}

static void free_value(const char *key, void *value, void *arg)
{
    (void)key;
    (void)arg;
    free(value);
}

void h_free_string_map(sl_hmap_t *m)
{
    if (m == NULL)
        return;
    sl_hmap_each(m, free_value, NULL);
    sl_hmap_free(m);
}

int h_copy_file(const char *from, const char *to)
{
    char *body = NULL;
    size_t len = 0;
    if (sl_read_file(from, 1 << 30, &body, &len) != SL_OK)
        return -1;
    sl_err_t rc = sl_write_file(to, body, len, 0600);
    free(body);
    return rc == SL_OK ? 0 : -1;
}

long h_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

double h_wait_log(const char *path, long from, const char *needle, int timeout_ms)
{
    for (double until = sl_mono_ms() + timeout_ms; sl_mono_ms() < until; usleep(10 * 1000)) {
        char *text = NULL;
        size_t len = 0;
        if (sl_read_file(path, 256 << 20, &text, &len) == SL_OK) {
            int found = (long)len > from && strstr(text + from, needle) != NULL;
            free(text);
            if (found)
                return sl_mono_ms();
        }
    }
    return -1;
}

double h_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* A "<field>: N kB" line of /proc/<pid>/status, in KiB; -1 when unknown. */
static long status_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    size_t fl = strlen(field);
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, field, fl) == 0 && line[fl] == ':')
            kb = strtol(line + fl + 1, NULL, 10);
    }
    if (f != NULL)
        fclose(f);
    return kb;
}

long h_peak_rss_kb(pid_t pid)
{
    return status_kb(pid, "VmHWM");
}

long h_rss_kb(pid_t pid)
{
    return status_kb(pid, "VmRSS");
}

long h_rss_file_kb(pid_t pid)
{
    return status_kb(pid, "RssFile");
}

double h_cpu_seconds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* Fields after the ")" that closes the command name: state is field 3; utime 14, stime 15. */
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (p == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}
