/* harness.h - helpers for end-to-end tests that run the real sluice processes: a temporary
 * directory, spawning and killing processes, the dev Kafka broker, HTTP to the simulator,
 * reading results and the scheduler's SQLite file, and a pass/fail tally. */
#ifndef SL_HARNESS_H
#define SL_HARNESS_H

#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <stdint.h>
#include <sys/types.h>

#include "hmap.h"

/* Records one check; prints it. */
void h_check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "e2e <name>: N passed, N failed" and returns the exit status. */
int h_summary(const char *name);

/* A fresh directory under /tmp for this run (kept on failure for inspection). */
const char *h_tmpdir(void);
void h_cleanup(int keep);
/* The hash the config stores for an API key, as 64 hex digits plus NUL (see sl_keyhash). */
void h_key_hash_hex(const char *api_key, char hex[65]);
/* A loopback TCP port that was free a moment ago. */
int h_free_port(void);
/* Writes text to dir/name; returns the full path (static buffer per call site: copy it). */
char *h_write(const char *name, const char *text);

/* Spawns bin/<prog> with args (NULL-terminated), SLUICE_CONFIG=config, output to
 * <tmpdir>/<logname>.log. Returns the pid. */
pid_t h_spawn(const char *prog, const char *logname, const char *config, const char *const *args);
/* Sends sig and waits up to timeout_ms for the process to exit. Returns its exit status,
 * 128 + the signal that ended it, or -1 when it had to be killed after the timeout. */
int h_stop(pid_t pid, int sig, int timeout_ms);
int h_alive(pid_t pid);
/* Runs bin/<prog> like h_spawn and waits for it (at most timeout_ms); returns its exit status,
 * or -1 when it had to be killed. */
int h_run(const char *prog, const char *logname, const char *config, const char *const *args,
          int timeout_ms);
int h_wait_file(const char *path, int timeout_ms);

/* GET url; returns the parsed JSON body or NULL. */
json_t *h_http_json(const char *url);
/* method url with "Authorization: Bearer <bearer>" (when not NULL) and a JSON body (when not
 * NULL); *status gets the HTTP status (0: no answer). Returns the parsed body, or NULL. */
json_t *h_http_call(const char *method, const char *url, const char *bearer, const char *body,
                    long *status);
/* Polls GET url (with the bearer, when not NULL) every 100 ms until it answers 200, for at most
 * timeout_ms: a listener that opens after the stack is up (the scheduler's admin API). 1 when
 * it answered. */
int h_wait_http_ok(const char *url, const char *bearer, int timeout_ms);
/* GET url; returns the body of a 200 answer (caller frees) or NULL. */
char *h_http_text(const char *url);
/* Runs `promtool check metrics` on a /metrics text (written under the test directory); 0 when
 * it passes, -1 when it fails or promtool is missing (ops/install-deps.sh installs it). */
int h_promtool_check(const char *text);
/* The value of the sample named exactly series (name and labels, as exposed) in a /metrics
 * text; -1 when text is NULL or has no such sample. */
double h_metrics_sample(const char *text, const char *series);
/* The sum over the simulator's deployments of a /stats field. */
int64_t h_sim_total(json_t *stats, const char *field);

/* Whether the daemons under test are the sanitizer build (SLUICE_BIN ends in bin-asan): drivers
 * whose length is set by a provider's rate or a volume run less of it there, since that phase is
 * for memory errors and the timing figures are the plain phase's. */
int h_sanitizers(void);

rd_kafka_t *h_producer(const char *bootstrap);
/* The same, with a delivery report callback (run by rd_kafka_poll) and the client's opaque. */
rd_kafka_t *h_producer_dr(const char *bootstrap,
                          void (*dr_cb)(rd_kafka_t *, const rd_kafka_message_t *, void *),
                          void *opaque);
/* Produces value (copied) with hdrs (may be NULL; the message's once produced), waiting while
 * the producer's queue is full; exits the test on any other error. */
void h_produce_headers(rd_kafka_t *p, const char *topic, const char *key, const char *value,
                       size_t len, rd_kafka_headers_t *hdrs);
/* Produces value to topic (copy); blocks while the queue is full. */
void h_produce(rd_kafka_t *p, const char *topic, const char *key, const char *value, size_t len);
/* h_produce with the headers of a message signed by role ("ingest", "scheduler" uses
 * dispatch.key, "dispatcher") with that role's secret key in the test folder, as the daemon
 * signs (common/auth.h): what a holder of that key could write. Waits up to 20 s for the
 * file; exits 2 when it cannot load it. */
void h_produce_as(rd_kafka_t *p, const char *role, const char *topic, const char *key,
                  const char *value, size_t len);
/* Polls cons once (up to timeout_ms): 0 when nothing arrived; 1 when a message did, with *doc
 * its value parsed as JSON (caller decrefs), or NULL for an error or a value that is not JSON. */
int h_poll_json(rd_kafka_t *cons, int timeout_ms, json_t **doc);
/* A consumer assigned to every partition of topic from the beginning. */
rd_kafka_t *h_consumer_from_start(const char *bootstrap, const char *topic);

/* Runs a single-integer SQL query on a SQLite file (read-only); -1 on error. */
int64_t h_sql_count(const char *db, const char *sql);

/* The five processes of a local stack. */
typedef struct {
    pid_t kafka, sim, sched, ingest, disp;
    char bootstrap[256];
    char bootstrap_file[4096];
    const char *config; /* sluice config path */
    int sim_port;
    char stats_url[64]; /* the simulator's GET /stats */
} h_stack_t;

/* Starts devkafka (bootstrap file from the config's directory: <tmpdir>/bootstrap), the
 * simulator on sim_port, then scheduler, ingest and dispatcher; exits the test on failure. */
void h_stack_up(h_stack_t *st, const char *config, const char *sim_config, int sim_port);
/* SIGTERMs everything, in reverse order; returns how many did not exit with status 0 (a
 * sanitizer build exits non-zero on a leak or error), naming them on stdout. */
int h_stack_down(h_stack_t *st);

/* Several processes of a role (sharded schedulers, two dispatchers): member NAME's config,
 * written to <tmpdir>/NAME.json and returned (caller frees): `body` (the JSON members every
 * process shares: minute_ms, signing, deployments, routes, tenants, keys; no trailing comma)
 * plus its own kafka section (the dev broker's bootstrap file, group membership, instance
 * NAME), scheduler (its own database <tmpdir>/NAME.db, `sharded` or not, its own metrics port,
 * no admin API; `sched_extra` more members, e.g. "\"lease_ms\": 3000," or ""), and its own
 * ingest and dispatcher metrics ports. */
char *h_member_config(const char *name, const char *body, const char *sched_extra, int sharded);
/* Starts sluice-devkafka with `partitions` per topic (its config: any member's) and returns
 * its pid; the bootstrap address into bootstrap (cap bytes). Exits the test on failure. */
pid_t h_devkafka(const char *config, int partitions, char *bootstrap, size_t cap);

/* Produces to sluice.requests, keyed by idem, a request on route "chat" under idempotency key
 * idem and api_key: one user message "Tell me fact number N." with max_tokens. */
void h_request_fact(rd_kafka_t *prod, const char *idem, const char *api_key, long long n,
                    int max_tokens);

/* Terminal results as a client de-duplicating by job id sees them. */
typedef struct {
    sl_hmap_t *seen; /* job id -> its first status (malloc'd) */
    int done;        /* jobs with a result */
    int ok;          /* of them, succeeded */
    int duplicates;  /* results of a job already seen (at-least-once delivery) */
    int conflicting; /* of them, with another status than the first */
} h_results_t;
void h_results_init(h_results_t *r);
/* Takes one result message: 1 when it is a job's first result, 0 for a repeat or a message
 * without a job id and status. */
int h_results_take(h_results_t *r, json_t *result);
void h_results_free(h_results_t *r);

/* Frees a map whose values are malloc'd strings, and the map. */
void h_free_string_map(sl_hmap_t *m);

/* Wall-clock time in milliseconds with sub-millisecond precision. */
/* Copies the file at from to to (mode 0600, up to 1 GiB); 0, or -1 when it cannot. */
int h_copy_file(const char *from, const char *to);
/* A file's size in bytes (0 when it is not there). */
long h_file_size(const char *path);
/* The time (sl_mono_ms) at which the file at path (a process's log) first held needle past
 * offset from, polled every 10 ms up to timeout_ms; -1 when it did not. */
double h_wait_log(const char *path, long from, const char *needle, int timeout_ms);

double h_wall_ms(void);

/* Peak resident memory (VmHWM) of a running process in KiB; -1 when unknown. */
long h_peak_rss_kb(pid_t pid);
/* Resident memory now (VmRSS) of a running process in KiB; -1 when unknown. */
long h_rss_kb(pid_t pid);
/* Of it, the pages mapped from files (RssFile), e.g. a store read through its memory map. */
long h_rss_file_kb(pid_t pid);
/* CPU seconds (user + system) a running process has used so far; -1 when unknown. */
double h_cpu_seconds(pid_t pid);

#endif
