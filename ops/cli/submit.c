/* submit.c - `sluice submit`: feed a JSONL file of requests in, follow the results.
 *
 * Each line is a request (schema/request.json); api_key, route and class may come from flags
 * instead. A line without an idempotency_key gets "<run>-<line>", where run is a hash of the
 * file's contents: re-running the same file after a crash resubmits the same jobs, which the
 * scheduler does not run twice (it sends finished jobs' results again).
 *
 * `sluice results` and `sluice cancel`, the other commands that go through Kafka, are here too:
 * results reads the results topic with the consumer --follow uses.
 *
 * A tenant may have a results topic of its own and its results sealed to its box key
 * (docs/topic-acls.md): both commands then read its topic (the tenant comes from --tenant or
 * the API key) as well as the shared one, which carries the rejections of requests that name
 * no tenant, and open sealed results with --secret-key.
 */
#include <errno.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "hmap.h"
#include "kafka.h"
#include "seal.h"
#include "sign.h"
#include "util.h"
#include "verify.h"

static const char submit_usage[] =
    "usage: sluice submit --file FILE|- [--api-key KEY] [--route NAME] [--class CLASS]\n"
    "                     [--follow] [--out FILE] [--timeout SECONDS] [--secret-key FILE]\n"
    "\n"
    "Sends each line of FILE (JSON requests, one per line) to the requests topic, or those of\n"
    "class batch to the batch requests topic (ingest reads it after the other, so a backfill\n"
    "never delays interactive work). Flags fill fields a line does not set. With --follow, waits "
    "for every job's result, shows progress\n"
    "on a terminal and writes the results as JSONL to --out (default FILE.results.jsonl, or\n"
    "stdout for -). Results are read from the API key's tenant's results topic when it has one\n"
    "(and the shared one); results sealed to the tenant's key are opened with --secret-key\n"
    "FILE (see `sluice keygen --box`).\n"
    "Exit status: 0 all succeeded, 1 some failed or were rejected, 3 timeout.\n";

void sl_cli_line_key(const char *run_id, long line, char *out, size_t cap)
{
    snprintf(out, cap, "%s-%ld", run_id, line);
}

typedef struct {
    long total, succeeded, failed, rejected, expired, other;
    long long tokens_in, tokens_out;
    long by_batch;              /* served through a provider's batch API */
    double cost_usd, saved_usd; /* at the price paid; less than online on the batch path */
} progress_t;

static void show_progress(const progress_t *p, double started_ms, int final)
{
    long done = p->succeeded + p->failed + p->rejected + p->expired + p->other;
    double elapsed_s = (sl_mono_ms() - started_ms) / 1000.0;
    double rate = elapsed_s > 0 ? (double)done / elapsed_s : 0;
    long waiting = p->total - done;
    char eta[32] = "-";
    if (rate > 0 && waiting > 0)
        snprintf(eta, sizeof eta, "%.0fs", (double)waiting / rate);
    fprintf(stderr,
            "%sdone %ld/%ld | succeeded %ld failed %ld rejected %ld expired %ld | waiting %ld |"
            " by batch API %ld | tokens in %lld out %lld | cost $%.4f saved $%.4f |"
            " %.1f jobs/s | ETA %s%s",
            final ? "" : "\r", done, p->total, p->succeeded, p->failed, p->rejected, p->expired,
            waiting, p->by_batch, p->tokens_in, p->tokens_out, p->cost_usd, p->saved_usd, rate, eta,
            final ? "\n" : "   ");
    fflush(stderr);
}

/* Where a command reads results and how it opens sealed ones. */
typedef struct {
    const char *topics[2]; /* the tenant's own results topic (if any), then the shared one */
    int ntopics;
    int has_key;
    uint8_t pk[SL_SEAL_KEY_BYTES], sk[SL_SEAL_KEY_BYTES];
    const char *key_file;
    int unopened; /* sealed results that could not be opened */
} reader_t;

/* Fills rd for the tenant named by tenant, else by api_key (either may be NULL), and the secret
 * key in key_file (NULL: none). Returns 0, or 2 after saying what is wrong. */
static int reader_init(reader_t *rd, const sl_config_t *cfg, const char *cmd, const char *tenant,
                       const char *api_key, const char *key_file)
{
    memset(rd, 0, sizeof *rd);
    int t = -1;
    if (tenant != NULL) {
        t = sl_config_tenant(cfg, tenant);
        if (t < 0) {
            fprintf(stderr, "%s: the config has no tenant %s\n", cmd, tenant);
            return 2;
        }
    } else if (api_key != NULL && sl_crypto_init() == SL_OK) {
        uint8_t hash[32];
        sl_keyhash(api_key, strlen(api_key), hash);
        int k = sl_config_key_by_hash(cfg, hash);
        t = k >= 0 ? cfg->keys[k].tenant : -1;
    }
    const char *own = sl_config_results_topic(cfg, t);
    rd->topics[rd->ntopics++] = own;
    if (strcmp(own, cfg->kafka.topic_results) != 0)
        rd->topics[rd->ntopics++] = cfg->kafka.topic_results;
    if (key_file == NULL)
        return 0;
    if (sl_crypto_init() != SL_OK)
        return 2;
    sl_err_t rc = sl_seal_read_key(key_file, rd->sk);
    if (rc != SL_OK) {
        fprintf(stderr, "%s: --secret-key %s: %s\n", cmd, key_file,
                rc == SL_EIO ? "cannot read it" : "it must hold 64 hex digits");
        return 2;
    }
    sl_seal_public_of(rd->sk, rd->pk);
    rd->has_key = 1;
    rd->key_file = key_file;
    if (t >= 0 && sl_config_seal_key(cfg, t) != NULL &&
        memcmp(sl_config_seal_key(cfg, t), rd->pk, SL_SEAL_KEY_BYTES) != 0)
        fprintf(stderr,
                "%s: warning: --secret-key %s is not the key of tenant %s's "
                "result_public_key\n",
                cmd, key_file, cfg->tenants[t].name);
    return 0;
}

/* Opens res when it is sealed; says why not on stderr (and counts it) when it cannot be. */
static void reader_open(reader_t *rd, json_t *res, const char *cmd)
{
    if (!sl_seal_is_sealed(res))
        return;
    const char *id = json_string_value(json_object_get(res, "job_id"));
    if (!rd->has_key) {
        fprintf(stderr,
                "%s: the result of job %s is sealed to its tenant's key; give "
                "--secret-key FILE to read its response and usage\n",
                cmd, id ? id : "?");
        rd->unopened++;
        return;
    }
    sl_err_t rc = sl_seal_open(res, rd->pk, rd->sk);
    if (rc != SL_OK) {
        fprintf(stderr, "%s: the result of job %s does not open with --secret-key %s (%s)\n", cmd,
                id ? id : "?", rd->key_file,
                rc == SL_ECRYPTO ? "it was sealed to another key" : "its sealed part is damaged");
        rd->unopened++;
    }
}

/* Writes res as one JSON line. */
static void put_result(FILE *out, const json_t *res)
{
    char *text = json_dumps(res, JSON_COMPACT);
    if (text != NULL) {
        fputs(text, out);
        fputc('\n', out);
    }
    free(text);
}

/* Assigns every partition of the reader's topics at their current end, so --follow sees exactly
 * the results produced from now on (read before submitting: a fast job cannot slip past). */
static rd_kafka_t *results_consumer(const sl_config_t *cfg, const reader_t *rdr, int from_beginning,
                                    char *err, size_t errlen)
{
    char group[64];
    char rnd[17];
    sl_random_id(rnd, 8);
    snprintf(group, sizeof group, "sluice-cli-%s", rnd);
    rd_kafka_t *rk = NULL;
    if (sl_kafka_consumer_new(cfg, group, "sluice-cli", NULL, 0, NULL, &rk, err, errlen) != SL_OK)
        return NULL;
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(64);
    for (int ti = 0; ti < rdr->ntopics; ti++) {
        const char *topic = rdr->topics[ti];
        const rd_kafka_metadata_t *md = NULL;
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
        rd_kafka_resp_err_t kerr = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
        rd_kafka_topic_destroy(rkt);
        if (kerr != RD_KAFKA_RESP_ERR_NO_ERROR || md->topic_cnt != 1 ||
            md->topics[0].partition_cnt == 0) {
            const char *why =
                rd_kafka_err2str(kerr != RD_KAFKA_RESP_ERR_NO_ERROR ? kerr : md->topics[0].err);
            if (md != NULL)
                rd_kafka_metadata_destroy(md);
            /* A tenant with a topic of its own may well be denied the shared one by ACLs
             * (docs/topic-acls.md): then only the rejections that name no tenant are missed. */
            if (ti > 0) {
                fprintf(stderr,
                        "sluice: not reading %s (%s); results of requests that name no "
                        "tenant are there\n",
                        topic, why);
                continue;
            }
            snprintf(err, errlen, "cannot read metadata of %s: %s", topic, why);
            rd_kafka_topic_partition_list_destroy(parts);
            sl_kafka_consumer_close(rk);
            return NULL;
        }
        int np = md->topics[0].partition_cnt;
        for (int i = 0; i < np; i++) {
            int32_t p = md->topics[0].partitions[i].id;
            int64_t lo = 0, hi = 0;
            int64_t start = RD_KAFKA_OFFSET_BEGINNING;
            if (!from_beginning && rd_kafka_query_watermark_offsets(
                                       rk, topic, p, &lo, &hi, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR)
                start = hi;
            rd_kafka_topic_partition_list_add(parts, topic, p)->offset = start;
        }
        rd_kafka_metadata_destroy(md);
    }
    rd_kafka_assign(rk, parts);
    rd_kafka_topic_partition_list_destroy(parts);
    return rk;
}

static void count_result(progress_t *p, json_t *res)
{
    const char *status = json_string_value(json_object_get(res, "status"));
    json_t *usage = json_object_get(res, "usage");
    p->tokens_in += json_integer_value(json_object_get(usage, "input"));
    p->tokens_out += json_integer_value(json_object_get(usage, "output"));
    const char *path = json_string_value(json_object_get(res, "path"));
    double cost = json_number_value(json_object_get(res, "cost_usd"));
    json_t *online = json_object_get(res, "online_cost_usd");
    p->by_batch += path != NULL && strcmp(path, "batch") == 0;
    p->cost_usd += cost;
    if (json_is_number(online))
        p->saved_usd += json_number_value(online) - cost;
    if (status == NULL)
        p->other++;
    else if (strcmp(status, "succeeded") == 0)
        p->succeeded++;
    else if (strcmp(status, "failed") == 0)
        p->failed++;
    else if (strcmp(status, "rejected") == 0)
        p->rejected++;
    else if (strcmp(status, "expired") == 0)
        p->expired++;
    else
        p->other++;
}

/* The run id: a digest of the whole input (read once, in 64 KB pieces, then rewound), so the
 * same file gets the same keys again. NULL when out of memory or the input cannot be read. */
static char *run_id_of(FILE *f)
{
    uint8_t digest[8];
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, sizeof digest);
    static unsigned char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        crypto_generichash_update(&st, buf, n);
    if (ferror(f) || fseek(f, 0, SEEK_SET) != 0)
        return NULL;
    crypto_generichash_final(&st, digest, sizeof digest);
    char *hex = malloc(17);
    if (hex == NULL)
        return NULL;
    sl_hex_encode(digest, sizeof digest, hex);
    return hex;
}

/* The input as a file that can be read twice: FILE itself, or standard input copied to an
 * unnamed temporary file (streamed, so a large input is never held in memory). */
static FILE *open_input(const char *file)
{
    if (strcmp(file, "-") != 0)
        return fopen(file, "r");
    FILE *t = tmpfile();
    if (t == NULL)
        return NULL;
    static char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) {
        if (fwrite(buf, 1, n, t) != n) {
            fclose(t);
            return NULL;
        }
    }
    if (ferror(stdin) || fflush(t) != 0 || fseek(t, 0, SEEK_SET) != 0) {
        fclose(t);
        return NULL;
    }
    return t;
}

/* What `sluice submit` was asked to do. */
typedef struct {
    const char *file, *api_key, *route, *cls, *out_path, *secret_key;
    int follow;
    long long timeout_s;
} submit_args_t;

static int submit(const sl_config_t *cfg, const submit_args_t *args)
{
    const char *file = args->file, *api_key = args->api_key, *route = args->route;
    const char *cls = args->cls, *out_path = args->out_path;
    int follow = args->follow;
    long long timeout_s = args->timeout_s;
    FILE *in = open_input(file);
    if (in == NULL) {
        fprintf(stderr, "sluice submit: cannot read %s: %s\n", file, strerror(errno));
        return 2;
    }
    char *run_id = run_id_of(in);
    if (run_id == NULL) {
        fprintf(stderr, "sluice submit: cannot read %s\n", file);
        fclose(in);
        return 2;
    }

    char err[512] = "";
    reader_t rdr;
    if (reader_init(&rdr, cfg, "sluice submit", NULL, api_key, args->secret_key) != 0) {
        fclose(in);
        free(run_id);
        return 2;
    }
    rd_kafka_t *prod = NULL, *cons = NULL;
    if (sl_kafka_producer_new(cfg, "sluice-cli", NULL, NULL, &prod, err, sizeof err) != SL_OK ||
        (follow && (cons = results_consumer(cfg, &rdr, 0, err, sizeof err)) == NULL)) {
        fprintf(stderr, "sluice submit: kafka: %s\n", err);
        fclose(in);
        free(run_id);
        if (prod != NULL)
            rd_kafka_destroy(prod);
        return 2;
    }
    sl_hmap_t *mine = sl_hmap_new(); /* idempotency keys we submitted -> not yet seen */
    progress_t p = {0};
    long bad_lines = 0, lineno = 0;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t got;
    /* One line at a time. Empty lines are not counted, so the keys made for lines without an
     * idempotency key are those of earlier versions, which split the whole file on newlines. */
    while ((got = getline(&buf, &cap, in)) >= 0) {
        char *line = buf;
        if (got > 0 && line[got - 1] == '\n')
            line[--got] = '\0';
        if (got == 0)
            continue;
        lineno++;
        while (*line == ' ' || *line == '\t')
            line++;
        if (*line == '\0' || *line == '#')
            continue;
        json_error_t jerr;
        json_t *req = json_loads(line, 0, &jerr);
        if (!json_is_object(req)) {
            fprintf(stderr, "sluice submit: line %ld is not a JSON object (%s); not sent\n", lineno,
                    req == NULL ? jerr.text : "wrong type");
            json_decref(req);
            bad_lines++;
            continue;
        }
        if (api_key != NULL && json_object_get(req, "api_key") == NULL)
            json_object_set_new(req, "api_key", json_string(api_key));
        if (route != NULL && json_object_get(req, "route") == NULL)
            json_object_set_new(req, "route", json_string(route));
        if (cls != NULL && json_object_get(req, "class") == NULL)
            json_object_set_new(req, "class", json_string(cls));
        char key[96];
        const char *idem = json_string_value(json_object_get(req, "idempotency_key"));
        if (idem == NULL) {
            sl_cli_line_key(run_id, lineno, key, sizeof key);
            json_object_set_new(req, "idempotency_key", json_string(key));
        } else {
            snprintf(key, sizeof key, "%s", idem);
        }
        /* Batch requests go to the batch topic, which ingest reads after the other. */
        const char *topic =
            sl_requests_topic(&cfg->kafka, json_string_value(json_object_get(req, "class")));
        char *value = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        if (value == NULL)
            continue;
        if (sl_hmap_get(mine, key) == NULL) {
            sl_hmap_put(mine, key, (void *)1);
            p.total++;
        }
        if (sl_kafka_produce(prod, topic, key, value, strlen(value), NULL, NULL) != SL_OK) {
            fprintf(stderr, "sluice submit: line %ld could not be sent\n", lineno);
            bad_lines++;
            if (sl_hmap_del(mine, key) != NULL)
                p.total--;
        }
        free(value);
    }
    free(buf);
    fclose(in);
    if (rd_kafka_flush(prod, 60000) != RD_KAFKA_RESP_ERR_NO_ERROR)
        fprintf(stderr, "sluice submit: not every request reached the broker in 60 s\n");
    fprintf(stderr, "sluice submit: sent %ld requests (run %s)%s\n", p.total, run_id,
            bad_lines ? "; some lines were not sent" : "");
    rd_kafka_destroy(prod);
    free(run_id);
    int status = bad_lines > 0 ? 1 : 0;
    if (!follow) {
        sl_hmap_free(mine);
        return status;
    }

    char default_out[1024];
    if (out_path == NULL) {
        if (strcmp(file, "-") == 0) {
            out_path = "-";
        } else {
            snprintf(default_out, sizeof default_out, "%s.results.jsonl", file);
            out_path = default_out;
        }
    }
    FILE *out = strcmp(out_path, "-") == 0 ? stdout : fopen(out_path, "w");
    if (out == NULL) {
        fprintf(stderr, "sluice submit: cannot write %s\n", out_path);
        sl_kafka_consumer_close(cons);
        sl_hmap_free(mine);
        return 2;
    }
    sl_cli_verify_t ver;
    if (sl_cli_verify_init(&ver, cfg, "sluice submit") != 0) {
        if (out != stdout)
            fclose(out);
        sl_kafka_consumer_close(cons);
        sl_hmap_free(mine);
        return 2;
    }
    int tty = isatty(STDERR_FILENO);
    double started = sl_mono_ms(), last_show = 0;
    double deadline = started + (double)timeout_s * 1000.0;
    long seen = 0;
    while (seen < p.total && sl_mono_ms() < deadline && !sl_stop_requested()) {
        rd_kafka_message_t *msg = rd_kafka_consumer_poll(cons, 200);
        if (msg != NULL && msg->err == RD_KAFKA_RESP_ERR_NO_ERROR &&
            sl_cli_verify_accept(&ver, msg)) {
            json_t *res = json_loadb(msg->payload, msg->len, 0, NULL);
            const char *idem = json_string_value(json_object_get(res, "idempotency_key"));
            if (idem != NULL && sl_hmap_get(mine, idem) != NULL) {
                sl_hmap_del(mine, idem); /* a result can be delivered twice: count it once */
                seen++;
                reader_open(&rdr, res, "sluice submit");
                count_result(&p, res);
                put_result(out, res);
            }
            json_decref(res);
        }
        if (msg != NULL)
            rd_kafka_message_destroy(msg);
        if (tty && sl_mono_ms() - last_show > 200) {
            show_progress(&p, started, 0);
            last_show = sl_mono_ms();
        }
    }
    show_progress(&p, started, 1);
    sl_cli_verify_done(&ver);
    if (out != stdout)
        fclose(out);
    else
        fflush(out);
    sl_kafka_consumer_close(cons);
    sl_hmap_free(mine);
    if (out_path != NULL && strcmp(out_path, "-") != 0)
        fprintf(stderr, "sluice submit: results in %s\n", out_path);
    if (seen < p.total) {
        fprintf(stderr, "sluice submit: %ld results still outstanding\n", p.total - seen);
        return 3;
    }
    return (p.succeeded == p.total && status == 0) ? 0 : 1;
}

int sl_cli_submit(sl_proc_opts_t *opts, int argc, char **argv)
{
    submit_args_t args = {0};
    const char *timeout = NULL;
    const sl_proc_opt_t own[] = {{"file", &args.file, NULL},
                                 {"api-key", &args.api_key, NULL},
                                 {"route", &args.route, NULL},
                                 {"class", &args.cls, NULL},
                                 {"follow", NULL, &args.follow},
                                 {"out", &args.out_path, NULL},
                                 {"timeout", &timeout, NULL},
                                 {"secret-key", &args.secret_key, NULL},
                                 {NULL, NULL, NULL}};
    const sl_proc_cmdline_t cl = {"sluice submit", submit_usage, own, SL_PROC_NO_ARGS};
    int rc = sl_proc_args(&cl, argc, argv, opts, NULL);
    if (rc != SL_PROC_GO_ON)
        return rc;
    args.timeout_s = timeout != NULL ? sl_parse_count(timeout) : 3600;
    if (args.file == NULL || args.timeout_s < 0) {
        fputs(submit_usage, stderr);
        return 2;
    }
    if (args.cls != NULL && sl_class_parse(args.cls) < 0) {
        fprintf(stderr, "sluice submit: --class must be interactive, standard, partner or batch\n");
        return 2;
    }
    if (args.api_key == NULL)
        args.api_key = getenv("SLUICE_API_KEY");
    sl_config_t *cfg = sl_cli_config(opts);
    rc = submit(cfg, &args);
    sl_config_free(cfg);
    return rc;
}

static const char results_usage[] =
    "usage: sluice results [--timeout SECONDS] [--all] [--tenant NAME | --api-key KEY]\n"
    "                      [--secret-key FILE] JOB_ID|IDEMPOTENCY_KEY...\n"
    "\nReads the results topic from the beginning and prints (JSONL) the results\n"
    "of the given jobs (by job id or idempotency key), or every result with\n"
    "--all. A tenant with a results_topic of its own (named by --tenant, or by the\n"
    "API key, default $SLUICE_API_KEY) is read there, and on the shared topic.\n"
    "Results sealed to the tenant's result_public_key are opened with --secret-key\n"
    "FILE (its box secret key, from `sluice keygen --box`); without it, or with another\n"
    "key, they are printed sealed and the command says so.\n"
    "Exit status 0 when every job given was found and opened, else 1.\n";

/* Prints the results of the jobs in want (job ids or idempotency keys; found ones are taken
 * out), or every result with all. */
static int results(const sl_config_t *cfg, reader_t *rdr, sl_hmap_t *want, int all,
                   long long timeout_s)
{
    size_t wanted = sl_hmap_len(want);
    char err[512];
    rd_kafka_t *cons = results_consumer(cfg, rdr, 1, err, sizeof err);
    if (cons == NULL) {
        fprintf(stderr, "sluice results: kafka: %s\n", err);
        return 2;
    }
    sl_cli_verify_t ver;
    if (sl_cli_verify_init(&ver, cfg, "sluice results") != 0) {
        sl_kafka_consumer_close(cons);
        return 2;
    }
    /* Read until nothing new arrives for a while (the topic's end) or the timeout. */
    double deadline = sl_mono_ms() + (double)timeout_s * 1000.0;
    double idle_since = sl_mono_ms();
    size_t found = 0;
    while (sl_mono_ms() < deadline && (all || found < wanted) && sl_mono_ms() - idle_since < 2000) {
        rd_kafka_message_t *msg = rd_kafka_consumer_poll(cons, 200);
        if (msg == NULL)
            continue;
        idle_since = sl_mono_ms();
        if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR && sl_cli_verify_accept(&ver, msg)) {
            json_t *res = json_loadb(msg->payload, msg->len, 0, NULL);
            const char *id = json_string_value(json_object_get(res, "job_id"));
            const char *idem = json_string_value(json_object_get(res, "idempotency_key"));
            const char *hit = NULL;
            if (id != NULL && sl_hmap_get(want, id) != NULL)
                hit = id;
            else if (idem != NULL && sl_hmap_get(want, idem) != NULL)
                hit = idem;
            if (all || hit != NULL) {
                reader_open(rdr, res, "sluice results");
                put_result(stdout, res);
                if (hit != NULL) {
                    sl_hmap_del(want, hit);
                    found++;
                }
            }
            json_decref(res);
        }
        rd_kafka_message_destroy(msg);
    }
    sl_cli_verify_done(&ver);
    sl_kafka_consumer_close(cons);
    return found == wanted && rdr->unopened == 0 ? 0 : 1;
}

int sl_cli_results(sl_proc_opts_t *opts, int argc, char **argv)
{
    const char *timeout = NULL, *tenant = NULL, *api_key = NULL, *secret_key = NULL;
    int all = 0;
    const sl_proc_opt_t own[] = {{"timeout", &timeout, NULL},       {"all", NULL, &all},
                                 {"tenant", &tenant, NULL},         {"api-key", &api_key, NULL},
                                 {"secret-key", &secret_key, NULL}, {NULL, NULL, NULL}};
    const sl_proc_cmdline_t cl = {"sluice results", results_usage, own, SL_PROC_ARGS};
    int npos = 0;
    int rc = sl_proc_args(&cl, argc, argv, opts, &npos);
    if (rc != SL_PROC_GO_ON)
        return rc;
    long long timeout_s = timeout != NULL ? sl_parse_count(timeout) : 10;
    sl_hmap_t *want = sl_hmap_new();
    for (int i = 1; i <= npos; i++)
        sl_hmap_put(want, argv[i], (void *)1);
    if (sl_hmap_len(want) == 0 && !all) {
        fprintf(stderr, "sluice results: name at least one job id or key, or --all\n");
        sl_hmap_free(want);
        return 2;
    }
    if (api_key == NULL)
        api_key = getenv("SLUICE_API_KEY");
    sl_config_t *cfg = sl_cli_config(opts);
    reader_t rdr;
    rc = reader_init(&rdr, cfg, "sluice results", tenant, api_key, secret_key);
    if (rc == 0)
        rc = results(cfg, &rdr, want, all, timeout_s);
    sodium_memzero(rdr.sk, sizeof rdr.sk);
    sl_config_free(cfg);
    sl_hmap_free(want);
    return rc;
}

static const char cancel_usage[] =
    "usage: sluice cancel [--api-key KEY] IDEMPOTENCY_KEY...\n"
    "\n"
    "Asks to cancel your jobs, named by the idempotency keys they were submitted with (the API\n"
    "key, default $SLUICE_API_KEY, says whose). A job still queued gets a `cancelled` result on\n"
    "sluice.results; one already sent to a provider finishes normally. Exits 0 once every\n"
    "request reached the broker.\n";

/* Sends a cancel request for each of the n idempotency keys idem, as api_key. */
static int cancel(const sl_config_t *cfg, const char *api_key, int n, char **idem)
{
    char err[512] = "";
    rd_kafka_t *prod = NULL;
    if (sl_kafka_producer_new(cfg, "sluice-cli", NULL, NULL, &prod, err, sizeof err) != SL_OK) {
        fprintf(stderr, "sluice cancel: kafka: %s\n", err);
        return 2;
    }
    int status = 0;
    for (int i = 0; i < n; i++) {
        json_t *req = json_pack("{s:s, s:s}", "api_key", api_key, "cancel", idem[i]);
        char *value = req != NULL ? json_dumps(req, JSON_COMPACT) : NULL;
        json_decref(req);
        if (value == NULL || sl_kafka_produce(prod, cfg->kafka.topic_requests, idem[i], value,
                                              strlen(value), NULL, NULL) != SL_OK) {
            fprintf(stderr, "sluice cancel: %s could not be sent\n", idem[i]);
            status = 1;
        }
        free(value);
    }
    if (rd_kafka_flush(prod, 60000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        fprintf(stderr, "sluice cancel: not every request reached the broker in 60 s\n");
        status = 1;
    }
    rd_kafka_destroy(prod);
    return status;
}

int sl_cli_cancel(sl_proc_opts_t *opts, int argc, char **argv)
{
    const char *api_key = NULL;
    const sl_proc_opt_t own[] = {{"api-key", &api_key, NULL}, {NULL, NULL, NULL}};
    const sl_proc_cmdline_t cl = {"sluice cancel", cancel_usage, own, SL_PROC_ARGS};
    int npos = 0;
    int rc = sl_proc_args(&cl, argc, argv, opts, &npos);
    if (rc != SL_PROC_GO_ON)
        return rc;
    if (api_key == NULL)
        api_key = getenv("SLUICE_API_KEY");
    if (npos == 0 || api_key == NULL || argv[1][0] == '-') {
        fputs(cancel_usage, stderr);
        return 2;
    }
    sl_config_t *cfg = sl_cli_config(opts);
    rc = cancel(cfg, api_key, npos, argv + 1);
    sl_config_free(cfg);
    return rc;
}
