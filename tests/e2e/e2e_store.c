/* e2e_store - the scheduler's store knows when it is not the truth. One stack (dev Kafka, the
 * simulator, ingest, a dispatcher); the scheduler is started on four databases in turn:
 *
 *   old schema   a version 2 database holding queued jobs and a finished one: the scheduler
 *                migrates it, runs the queued jobs, answers the finished one from its stored
 *                result, and makes the file 0600;
 *   deleted      rm sluice.db sluice.db-wal sluice.db-shm while 300 jobs run: the scheduler
 *                exits with status 3 and says so, its last committed state is back at the
 *                path, and after a restart every job has its result and the finished ones are
 *                still answered from the store;
 *   corrupted    a damaged page, then a damaged header: the scheduler refuses to start (status
 *                3, "corrupted or not a sluice database"), commits nothing, and once the file is
 *                restored from a backup the jobs submitted meanwhile run;
 *   full disk    the database on a 1 MB tmpfs (or, where mounting is not allowed, a schema with
 *                a page limit): the scheduler exits with status 3 ("is full"), and after the
 *                file system is enlarged every job has its result.
 *
 * No job whose offsets the scheduler committed is lost: every job submitted ends succeeded,
 * with no conflicting results. Needs root for the tmpfs (it says when it falls back;
 * E2E_STORE_NO_TMPFS=1 takes the fallback on purpose). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hmap.h"
#include "sign.h"
#include "util.h"

enum { MINUTE_MS = 3000, TPM = 12000, DELETE_JOBS = 300, CORRUPT_JOBS = 20, FULL_JOBS = 300 };
/* The fallback's page limit (4 KiB pages): a new database takes about 20; 300 jobs need more. */
enum { FULL_PAGES = 80 };

static const char *const API_KEY = "sk-e2e-store-key";
static char key_hash[65];
static int sim_port;

/* Writes a scheduler config for a database and a schema directory; returns its path (copy). */
static char *write_config(const char *name, const char *db, const char *schema_dir)
{
    const char *dir = h_tmpdir();
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"minute_ms\": %d, \"schema_dir\": \"%s\","
             " \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
             " \"scheduler\": {\"db\": \"%s\", \"lease_ms\": 3000, \"max_attempts\": 10,"
             "               \"metrics_listen\": \"\", \"admin_listen\": \"\"},"
             " \"ingest\": {\"metrics_listen\": \"\"}, \"dispatcher\": {\"metrics_listen\": \"\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": [{\"name\": \"sim-a\","
             "   \"base_url\": \"http://127.0.0.1:%d/sim-a/v1\", \"model\": \"m\","
             "   \"api_key_file\": \"%s/provider.key\", \"limits\": {\"rpm\": 100000, \"tpm\": %d},"
             "   \"slices_per_minute\": 10, \"timeout_ms\": 2000}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"sim-a\"]}],"
             " \"tenants\": [{\"name\": \"solo\"}],"
             " \"keys\": [{\"id\": \"k\", \"tenant\": \"solo\", \"hash\": \"%s\"}]}",
             MINUTE_MS, schema_dir, dir, db, dir, dir, sim_port, dir, TPM, key_hash);
    return strdup(h_write(name, cfg));
}

/* The job id ingest gives (tenant, idempotency key) with the job-id key in the test's folder
 * (sl_ingest_job_id). The old database is made before the stack starts: the key is made here
 * then, as `sluice keys` would, and ingest uses the file it finds. */
static void job_id_of(const char *tenant, const char *idem, char out[33])
{
    char path[512];
    uint8_t key[SL_JOB_ID_KEY_BYTES];
    snprintf(path, sizeof path, "%s/job-id.key", h_tmpdir());
    if (access(path, F_OK) != 0 && sl_job_id_keygen(path) != SL_OK) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    if (sl_job_id_key_load(path, key) != SL_OK) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    sl_job_id(key, tenant, idem, out);
}

static void submit(rd_kafka_t *prod, const char *idem, int i)
{
    char req[512];
    int n = snprintf(req, sizeof req,
                     "{\"idempotency_key\": \"%s\", \"api_key\": \"%s\", \"route\": \"chat\","
                     " \"request\": {\"messages\": [{\"role\": \"user\", \"content\": \"Fact"
                     " number %d, please.\"}], \"max_tokens\": 100}}",
                     idem, API_KEY, i);
    h_produce(prod, "sluice.requests", idem, req, (size_t)n);
}

/* Results by idempotency key: the first one seen (text), and the counts. */
typedef struct {
    rd_kafka_t *cons;
    sl_hmap_t *first; /* idem -> result JSON text */
    int duplicates, conflicting;
} results_t;

/* Takes the results that arrive within timeout_ms (at least one poll). */
static void pump(results_t *r, int timeout_ms)
{
    double deadline = sl_mono_ms() + timeout_ms;
    do {
        json_t *doc = NULL;
        if (!h_poll_json(r->cons, 100, &doc))
            continue;
        const char *idem = json_string_value(json_object_get(doc, "idempotency_key"));
        const char *status = json_string_value(json_object_get(doc, "status"));
        if (idem != NULL && status != NULL) {
            char *prev = sl_hmap_get(r->first, idem);
            if (prev == NULL) {
                sl_hmap_put(r->first, idem, json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS));
            } else {
                json_t *p = json_loads(prev, 0, NULL);
                r->duplicates++;
                r->conflicting +=
                    strcmp(json_string_value(json_object_get(p, "status")), status) != 0;
                json_decref(p);
            }
        }
        json_decref(doc);
    } while (sl_mono_ms() < deadline);
}

/* Reads results for up to timeout_ms, or until every key with the prefix (n of them:
 * "<prefix>-0000" ...) has one; returns how many of those have one. */
static int collect(results_t *r, const char *prefix, int n, int timeout_ms)
{
    double deadline = sl_mono_ms() + timeout_ms;
    for (;;) {
        int have = 0;
        for (int i = 0; i < n; i++) {
            char idem[64];
            snprintf(idem, sizeof idem, "%s-%04d", prefix, i);
            have += sl_hmap_get(r->first, idem) != NULL;
        }
        if (have == n || sl_mono_ms() >= deadline)
            return have;
        pump(r, 100);
    }
}

/* How many of the prefix's n jobs succeeded. */
static int succeeded(results_t *r, const char *prefix, int n)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        char idem[64];
        snprintf(idem, sizeof idem, "%s-%04d", prefix, i);
        const char *text = sl_hmap_get(r->first, idem);
        ok += text != NULL && strstr(text, "\"status\":\"succeeded\"") != NULL;
    }
    return ok;
}

/* Waits up to timeout_ms for pid to exit; its status, 128 + signal, or -1 if it is still up. */
static int wait_exit(pid_t pid, int timeout_ms)
{
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        usleep(20 * 1000);
    }
    return -1;
}

/* How many times <tmpdir>/<log>.log contains text. */
static int log_count(const char *log, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.log", h_tmpdir(), log);
    char *body = NULL;
    if (sl_read_file(path, 64 << 20, &body, NULL) != SL_OK)
        return 0;
    int n = 0;
    for (const char *p = strstr(body, text); p != NULL; p = strstr(p + 1, text))
        n++;
    free(body);
    return n;
}

static int log_has(const char *log, const char *text)
{
    return log_count(log, text) > 0;
}

static unsigned mode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (unsigned)(st.st_mode & 07777) : 0;
}

static int exec_sql(const char *db, const char *sql)
{
    sqlite3 *h = NULL;
    int rc = sqlite3_open(db, &h);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(h, sql, NULL, NULL, NULL);
    sqlite3_close(h);
    return rc;
}

/* ---- old schema ----------------------------------------------------------------------------- */

/* A version 2 database (the frozen schema) with three queued jobs of tenant solo and one that
 * finished, its result marked so that sending it again can be told from running the job. */
static void make_v2_database(const char *db, int64_t now_ms)
{
    char *schema = NULL;
    if (sl_read_file("tests/fixtures/store/ledger-v2.sql", 1 << 20, &schema, NULL) != SL_OK ||
        exec_sql(db, schema) != SQLITE_OK) {
        fprintf(stderr, "cannot make the version 2 database\n");
        exit(2);
    }
    free(schema);
    for (int i = 0; i < 4; i++) {
        char idem[64], id[33], job[1024], sql[4096], result[512];
        if (i < 3)
            snprintf(idem, sizeof idem, "v2-%04d", i);
        else
            snprintf(idem, sizeof idem, "v2-done");
        job_id_of("solo", idem, id);
        /* The finished job's request is the one submit(prod, "v2-done", 0) sends: the same key
         * with another request would be answered idempotency_conflict instead. */
        const char *request =
            i < 3 ? "{\"messages\":[{\"role\":\"user\",\"content\":\"queued before"
                    " the upgrade\"}],\"max_tokens\":50}"
                  : "{\"messages\":[{\"role\":\"user\",\"content\":\"Fact number 0,"
                    " please.\"}],\"max_tokens\":100}";
        snprintf(job, sizeof job,
                 "{\"v\":1,\"job_id\":\"%s\",\"idempotency_key\":\"%s\",\"tenant\":\"solo\","
                 "\"app\":\"default\",\"env\":\"default\",\"key_id\":\"k\",\"route\":\"chat\","
                 "\"class\":\"standard\",\"submitted_ms\":%lld,\"deadline_ms\":%lld,"
                 "\"estimate\":{\"input\":12,\"output\":50,\"total\":62},\"request\":%s}",
                 id, idem, (long long)now_ms, (long long)(now_ms + 600000), request);
        snprintf(result, sizeof result,
                 "{\"v\":1,\"job_id\":\"%s\",\"idempotency_key\":\"%s\",\"tenant\":\"solo\","
                 "\"route\":\"chat\",\"class\":\"standard\",\"status\":\"succeeded\","
                 "\"attempts\":1,\"finished_ms\":%lld,\"metadata\":{\"marker\":\"stored-in-v2\"}}",
                 id, idem, (long long)now_ms);
        char *q = sqlite3_mprintf(
            "INSERT INTO jobs (job_id, idempotency_key, tenant, app, env, key_id, route, class,"
            " state, status, attempts, submitted_ms, deadline_ms, est_input, est_output,"
            " est_total, job_json, request_json, result_json, updated_ms) VALUES"
            " (%Q, %Q, 'solo', 'default', 'default', 'k', 'chat', 'standard', %Q, %Q, %d, %lld,"
            " %lld, 12, 50, 62, %Q, %Q, %Q, %lld)",
            id, idem, i < 3 ? "queued" : "done", i < 3 ? NULL : "succeeded", i < 3 ? 0 : 1,
            (long long)now_ms, (long long)(now_ms + 600000), job, request, i < 3 ? NULL : result,
            (long long)now_ms);
        snprintf(sql, sizeof sql, "%s", q);
        sqlite3_free(q);
        if (exec_sql(db, sql) != SQLITE_OK) {
            fprintf(stderr, "cannot add a job to the version 2 database\n");
            exit(2);
        }
    }
    chmod(db, 0644);
}

/* ---- full disk ------------------------------------------------------------------------------ */

/* A copy of schema/ under dir whose ledger.sql limits the database to max_pages (0: no limit);
 * the fallback for a full disk where a tmpfs cannot be mounted. */
static void write_schema_dir(const char *dir, int max_pages)
{
    mkdir(dir, 0700);
    DIR *d = opendir("schema");
    struct dirent *ent;
    while (d != NULL && (ent = readdir(d)) != NULL) {
        char from[512], to[1024];
        if (ent->d_name[0] == '.')
            continue;
        snprintf(from, sizeof from, "schema/%s", ent->d_name);
        snprintf(to, sizeof to, "%s/%s", dir, ent->d_name);
        if (h_copy_file(from, to) != 0) {
            fprintf(stderr, "cannot copy %s\n", from);
            exit(2);
        }
    }
    if (d != NULL)
        closedir(d);
    if (max_pages > 0) {
        char path[1024];
        snprintf(path, sizeof path, "%s/ledger.sql", dir);
        FILE *f = fopen(path, "a");
        if (f == NULL) {
            fprintf(stderr, "cannot write %s\n", path);
            exit(2);
        }
        fprintf(f, "\nPRAGMA max_page_count = %d;\n", max_pages);
        fclose(f);
    }
}

int main(void)
{
    sl_crypto_init();
    printf("e2e store: old schema, a database deleted while running, corrupted files, a full"
           " disk\n");
    sim_port = h_free_port();
    h_key_hash_hex(API_KEY, key_hash);
    const char *dir = h_tmpdir();
    h_write("provider.key", "any-bearer-token\n");
    char sim[1024];
    snprintf(sim, sizeof sim,
             "{\"minute_ms\": %d, \"deployments\": [{\"name\": \"sim-a\", \"rpm\": 100000,"
             " \"tpm\": %d, \"slices_per_minute\": 10, \"ttft_ms\": 100, \"ms_per_token\": 1,"
             " \"output_min\": 20, \"output_max\": 80}]}",
             MINUTE_MS, TPM);
    char *sim_cfg = strdup(h_write("sim.json", sim));
    char db_old[600], db_main[600], full_dir[600], db_full[700], schema_full[700];
    snprintf(db_old, sizeof db_old, "%s/old.db", dir);
    snprintf(db_main, sizeof db_main, "%s/sluice.db", dir);
    snprintf(full_dir, sizeof full_dir, "%s/full", dir);
    snprintf(db_full, sizeof db_full, "%s/sluice.db", full_dir);
    snprintf(schema_full, sizeof schema_full, "%s/schema-full", dir);
    char *cfg_old = write_config("sluice-old.json", db_old, "schema");
    char *cfg_main = write_config("sluice-main.json", db_main, "schema");

    /* ---- old schema: migrated, its jobs run, its finished job answered from the store ---- */
    make_v2_database(db_old, sl_now_ms());
    h_stack_t st;
    h_stack_up(&st, cfg_old, sim_cfg, sim_port);
    rd_kafka_t *prod = h_producer(st.bootstrap);
    results_t res = {h_consumer_from_start(st.bootstrap, "sluice.results"), sl_hmap_new(), 0, 0};
    submit(prod, "v2-done", 0);
    rd_kafka_flush(prod, 10000);
    int migrated = collect(&res, "v2", 3, 60000);
    const char *again = NULL;
    for (double until = sl_mono_ms() + 20000; again == NULL && sl_mono_ms() < until;) {
        again = sl_hmap_get(res.first, "v2-done");
        if (again == NULL)
            pump(&res, 200);
    }
    h_check(log_has("scheduler", "has schema version 2: migrating it to 4") &&
                h_sql_count(db_old, "PRAGMA user_version") == 4,
            "a version 2 database is migrated to version 4");
    h_check(migrated == 3 && succeeded(&res, "v2", 3) == 3,
            "its queued jobs run to success (%d/3)", succeeded(&res, "v2", 3));
    h_check(again != NULL && strstr(again, "stored-in-v2") != NULL,
            "its finished job, submitted again, is answered from its stored result");
    h_check(mode_of(db_old) == 0600 && log_has("scheduler", "was mode 0644"),
            "the 0644 file is made 0600, with a warning (mode now %04o)", mode_of(db_old));
    int status = h_stop(st.sched, SIGTERM, 15000);
    h_check(status == 0, "the scheduler stops cleanly on SIGTERM (%d)", status);

    /* ---- deleted while running ------------------------------------------------------------ */
    st.sched = h_spawn("sluice-scheduler", "sched-delete-1", cfg_main, NULL);
    for (int i = 0; i < DELETE_JOBS; i++) {
        char idem[64];
        snprintf(idem, sizeof idem, "del-%04d", i);
        submit(prod, idem, i);
    }
    rd_kafka_flush(prod, 30000);
    int before = collect(&res, "del", DELETE_JOBS / 3, 60000);
    /* a job finished before the deletion, and its result */
    char early[64] = "", first_result[8192] = "";
    for (int i = 0; i < DELETE_JOBS && early[0] == '\0'; i++) {
        char idem[64];
        snprintf(idem, sizeof idem, "del-%04d", i);
        const char *text = sl_hmap_get(res.first, idem);
        if (text != NULL) {
            snprintf(early, sizeof early, "%s", idem);
            snprintf(first_result, sizeof first_result, "%s", text);
        }
    }
    char path[700];
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s%s", db_main, suffixes[i]);
        unlink(path);
    }
    printf("  deleted %s, -wal and -shm after %d/%d results\n", db_main, before, DELETE_JOBS);
    status = wait_exit(st.sched, 10000);
    h_check(status == 3, "the scheduler exits with status 3 once the database is deleted (%d)",
            status);
    int said = log_count("sched-delete-1", "was deleted while the scheduler had it open");
    h_check(said == 1 && log_has("sched-delete-1", "written back"),
            "it says so once (%d), and that the last committed state was written back", said);
    h_check(access(db_main, F_OK) == 0 && mode_of(db_main) == 0600,
            "the database is back at its path, mode 0600 (%04o)", mode_of(db_main));
    if (status < 0)
        h_stop(st.sched, SIGKILL, 5000);
    st.sched = h_spawn("sluice-scheduler", "sched-delete-2", cfg_main, NULL);
    int done = collect(&res, "del", DELETE_JOBS, 120000);
    h_check(done == DELETE_JOBS && succeeded(&res, "del", DELETE_JOBS) == DELETE_JOBS,
            "after a restart no job is lost: %d/%d have a result, %d succeeded", done,
            DELETE_JOBS, succeeded(&res, "del", DELETE_JOBS));
    /* the idempotency history survived: a job finished before the deletion, submitted again, is
     * answered with its stored result, and the provider sees no call for it */
    pump(&res, 2000);
    json_t *stats = h_http_json(st.stats_url);
    int64_t admitted = h_sim_total(stats, "admitted");
    json_decref(stats);
    sl_hmap_t *saved = res.first;
    res.first = sl_hmap_new();
    submit(prod, early, 0);
    rd_kafka_flush(prod, 10000);
    for (double until = sl_mono_ms() + 30000;
         sl_hmap_get(res.first, early) == NULL && sl_mono_ms() < until;)
        pump(&res, 200);
    pump(&res, 3000);
    const char *second = sl_hmap_get(res.first, early);
    stats = h_http_json(st.stats_url);
    int64_t admitted_after = h_sim_total(stats, "admitted");
    json_decref(stats);
    h_check(first_result[0] != '\0' && second != NULL && strcmp(first_result, second) == 0 &&
                admitted_after == admitted,
            "%s, finished before the deletion and submitted again, gets its stored result and"
            " no provider call (admitted %lld -> %lld)",
            early, (long long)admitted, (long long)admitted_after);
    h_free_string_map(res.first);
    res.first = saved;
    status = h_stop(st.sched, SIGTERM, 15000);
    h_check(status == 0, "the restarted scheduler stops cleanly (%d)", status);
    st.sched = 0;

    /* ---- corrupted: refused at start, nothing committed ---------------------------------- */
    char backup[720];
    snprintf(backup, sizeof backup, "%s.backup", db_main);
    h_copy_file(db_main, backup);
    int64_t root = h_sql_count(db_main, "SELECT rootpage FROM sqlite_master WHERE name = 'jobs'");
    int64_t page = h_sql_count(db_main, "PRAGMA page_size");
    unsigned char junk[64];
    memset(junk, 0xa5, sizeof junk);
    int fd = open(db_main, O_WRONLY);
    if (fd < 0 || root < 2 ||
        pwrite(fd, junk, sizeof junk, (off_t)((root - 1) * page)) != (ssize_t)sizeof junk) {
        fprintf(stderr, "cannot damage %s\n", db_main);
        return 2;
    }
    close(fd);
    for (int i = 0; i < CORRUPT_JOBS; i++) {
        char idem[64];
        snprintf(idem, sizeof idem, "bad-%04d", i);
        submit(prod, idem, i);
    }
    rd_kafka_flush(prod, 10000);
    pid_t p = h_spawn("sluice-scheduler", "sched-corrupt-page", cfg_main, NULL);
    status = wait_exit(p, 20000);
    h_check(status == 3 && log_has("sched-corrupt-page", "corrupted or not a sluice database") &&
                log_has("sched-corrupt-page", "quick_check"),
            "a damaged page: the scheduler refuses to start, status 3 (%d), \"corrupted or not a"
            " sluice database\" (quick_check)",
            status);
    fd = open(db_main, O_WRONLY);
    if (fd < 0 || pwrite(fd, "NOT SQLITE AT ALL", 16, 0) != 16) {
        fprintf(stderr, "cannot damage %s\n", db_main);
        return 2;
    }
    close(fd);
    p = h_spawn("sluice-scheduler", "sched-corrupt-header", cfg_main, NULL);
    status = wait_exit(p, 20000);
    h_check(status == 3 && log_has("sched-corrupt-header", "corrupted or not a sluice database") &&
                !log_has("sched-corrupt-header", "schema version -1"),
            "a damaged header: status 3 (%d), \"corrupted or not a sluice database\", no \"schema"
            " version -1\"",
            status);
    if (status < 0)
        h_stop(p, SIGKILL, 5000);
    rename(backup, db_main);
    st.sched = h_spawn("sluice-scheduler", "sched-restored", cfg_main, NULL);
    done = collect(&res, "bad", CORRUPT_JOBS, 60000);
    h_check(done == CORRUPT_JOBS && succeeded(&res, "bad", CORRUPT_JOBS) == CORRUPT_JOBS,
            "restored from the backup, the jobs submitted while it refused run: %d/%d", done,
            CORRUPT_JOBS);
    status = h_stop(st.sched, SIGTERM, 15000);
    st.sched = 0;

    /* ---- full disk ------------------------------------------------------------------------ */
    mkdir(full_dir, 0700);
    int on_tmpfs = getenv("E2E_STORE_NO_TMPFS") == NULL &&
                   mount("tmpfs", full_dir, "tmpfs", 0, "size=1m,mode=0700") == 0;
    char *cfg_full = NULL;
    if (on_tmpfs) {
        printf("  the database is on a 1 MB tmpfs at %s\n", full_dir);
        cfg_full = write_config("sluice-full.json", db_full, "schema");
    } else {
        printf("  no tmpfs (%s): the database is limited by PRAGMA max_page_count = %d instead\n",
               getenv("E2E_STORE_NO_TMPFS") != NULL ? "E2E_STORE_NO_TMPFS" : strerror(errno),
               FULL_PAGES);
        write_schema_dir(schema_full, FULL_PAGES);
        cfg_full = write_config("sluice-full.json", db_full, schema_full);
    }
    st.sched = h_spawn("sluice-scheduler", "sched-full-1", cfg_full, NULL);
    for (int i = 0; i < FULL_JOBS; i++) {
        char idem[64];
        snprintf(idem, sizeof idem, "full-%04d", i);
        submit(prod, idem, i);
    }
    rd_kafka_flush(prod, 30000);
    status = wait_exit(st.sched, 90000);
    int at_full = collect(&res, "full", FULL_JOBS, 500);
    h_check(status == 3 && log_has("sched-full-1", "is full") &&
                log_has("sched-full-1", "offsets were not committed"),
            "the disk fills: the scheduler exits with status 3 (%d) after %d/%d results, saying"
            " the database is full and no offsets were committed",
            status, at_full, FULL_JOBS);
    if (status < 0)
        h_stop(st.sched, SIGKILL, 5000);
    if (on_tmpfs)
        mount("tmpfs", full_dir, "tmpfs", MS_REMOUNT, "size=64m,mode=0700");
    else
        write_schema_dir(schema_full, 0);
    st.sched = h_spawn("sluice-scheduler", "sched-full-2", cfg_full, NULL);
    done = collect(&res, "full", FULL_JOBS, 120000);
    h_check(done == FULL_JOBS && succeeded(&res, "full", FULL_JOBS) == FULL_JOBS,
            "with room again no job is lost: %d/%d have a result, %d succeeded", done, FULL_JOBS,
            succeeded(&res, "full", FULL_JOBS));

    h_check(res.conflicting == 0, "no job has conflicting results (%d)", res.conflicting);
    printf("  duplicate result deliveries (at-least-once, same status): %d\n", res.duplicates);
    stats = h_http_json(st.stats_url);
    int64_t refused = h_sim_total(stats, "refused");
    h_check(stats != NULL && refused == 0, "the simulator refused zero requests (%lld)",
            (long long)refused);
    json_decref(stats);
    rd_kafka_destroy(prod);
    rd_kafka_consumer_close(res.cons);
    rd_kafka_destroy(res.cons);
    int unclean = h_stack_down(&st);
    h_check(unclean == 0, "every process stopped cleanly on SIGTERM (%d did not)", unclean);
    int64_t open_jobs = h_sql_count(db_full, "SELECT COUNT(*) FROM jobs WHERE state <> 'done'");
    h_check(open_jobs == 0, "no job left unfinished in the store (%lld)", (long long)open_jobs);
    if (on_tmpfs)
        umount(full_dir);
    h_free_string_map(res.first);
    free(sim_cfg);
    free(cfg_old);
    free(cfg_main);
    free(cfg_full);
    int rc = h_summary("store");
    h_cleanup(rc != 0);
    return rc;
}
