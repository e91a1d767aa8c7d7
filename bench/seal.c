/* bench/seal - what sealing a result to its tenant's key costs (common/seal.h).
 *
 * A result the size the scheduler writes for a chat answer (a response of --answer-bytes of
 * text, usage, metadata, timings) is built with sl_msg_result_json and serialised, as
 * scheduler/outcome.c does for every finished job: in the clear, then sealed to a box public
 * key (crypto_box_seal: one X25519 exchange, XSalsa20-Poly1305 over the content, base64), and
 * opened back with the key pair as `sluice results --secret-key` does. Each figure is the
 * median over --trials runs of --results results, in microseconds per result, with the bytes
 * on the wire. Writes bench/results/seal-<unix time>.json. Usage:
 *   bench/seal [--results N] [--trials K] [--answer-bytes B]
 */
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "msg_result.h"
#include "seal.h"
#include "stats.h"

static const char usage_text[] =
    "usage: bench/seal [--results N] [--trials K] [--answer-bytes B]\n"
    "\n"
    "Measures building and serialising a result in the clear, sealed to a tenant's box key,\n"
    "and opened again, per result (median of K trials of N results; defaults N 20000, K 5,\n"
    "B 600 bytes of answer text). BENCH_QUICK=1 makes N 2000 and K 3. Writes\n"
    "bench/results/seal-<unix time>.json.\n";

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, b_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Builds and serialises n results, sealed to pk when it is not NULL; returns µs per result
 * and the size of the last one in *bytes. */
static double build(int n, const json_t *response, const json_t *usage, const json_t *meta,
                    const uint8_t *pk, size_t *bytes)
{
    double t0 = now_us();
    for (int i = 0; i < n; i++) {
        sl_msg_result_t r;
        sl_msg_result_init(&r, "4f1c2a9be07d4c33a1f0e2b6c8d9a7e1", SL_STATUS_SUCCEEDED);
        r.idempotency_key = "run-1234abcd-17";
        r.tenant = "acme";
        r.route = "chat-small";
        r.cls = "standard";
        r.attempts = 1;
        r.deployment = "sim-a";
        r.response = response;
        r.usage = usage;
        r.metadata = meta;
        r.has_timings = 1;
        r.queued_ms = 12;
        r.provider_ms = 850;
        r.total_ms = 870;
        r.finished_ms = 1764800000000 + i;
        r.seal_pk = pk;
        json_t *doc = sl_msg_result_json(&r);
        char *text = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
        if (text == NULL) {
            fprintf(stderr, "bench/seal: out of memory\n");
            exit(1);
        }
        *bytes = strlen(text);
        json_decref(doc);
        free(text);
    }
    return (now_us() - t0) / n;
}

/* Parses and opens n copies of a sealed result; returns µs per result. */
static double open_all(int n, const char *sealed, const uint8_t *pk, const uint8_t *sk)
{
    double t0 = now_us();
    for (int i = 0; i < n; i++) {
        json_t *doc = json_loads(sealed, 0, NULL);
        if (doc == NULL || sl_seal_open(doc, pk, sk) != SL_OK) {
            fprintf(stderr, "bench/seal: a sealed result did not open\n");
            exit(1);
        }
        json_decref(doc);
    }
    return (now_us() - t0) / n;
}

int main(int argc, char **argv)
{
    int quick = getenv("BENCH_QUICK") != NULL && strcmp(getenv("BENCH_QUICK"), "1") == 0;
    long n = quick ? 2000 : 20000, trials = quick ? 3 : 5, answer_bytes = 600;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0) {
            fputs(usage_text, stdout);
            return 0;
        }
        long *dst = strcmp(argv[i], "--results") == 0        ? &n
                    : strcmp(argv[i], "--trials") == 0       ? &trials
                    : strcmp(argv[i], "--answer-bytes") == 0 ? &answer_bytes
                                                             : NULL;
        if (dst == NULL || i + 1 >= argc || (*dst = atol(argv[++i])) <= 0 ||
            (dst == &trials && trials > 99) || (dst == &answer_bytes && answer_bytes > 1 << 20)) {
            fprintf(stderr, "bench/seal: bad or unknown option %s\n%s", argv[i], usage_text);
            return 2;
        }
    }
    if (sodium_init() < 0)
        return 1;
    uint8_t pk[32], sk[32];
    crypto_box_keypair(pk, sk);
    char *answer = malloc((size_t)answer_bytes + 1);
    for (long i = 0; i < answer_bytes; i++)
        answer[i] = "Simulated reply text "[i % 21];
    answer[answer_bytes] = '\0';
    json_t *response = json_pack("{s:s, s:s, s:[{s:i, s:{s:s, s:s}, s:s}]}", "id", "cmpl-1",
                                 "object", "chat.completion", "choices", "index", 0, "message",
                                 "role", "assistant", "content", answer, "finish_reason", "stop");
    json_t *usage = json_pack("{s:i, s:i, s:i}", "input", 120, "output", 150, "cached", 0);
    json_t *meta = json_pack("{s:s}", "ticket", "T-1042");
    double clear[100], sealed[100], opened[100];
    size_t clear_bytes = 0, sealed_bytes = 0;
    for (int t = 0; t < trials; t++) {
        clear[t] = build((int)n, response, usage, meta, NULL, &clear_bytes);
        sealed[t] = build((int)n, response, usage, meta, pk, &sealed_bytes);
    }
    /* One sealed result to open again and again. */
    sl_msg_result_t r;
    sl_msg_result_init(&r, "4f1c2a9be07d4c33a1f0e2b6c8d9a7e1", SL_STATUS_SUCCEEDED);
    r.tenant = "acme";
    r.response = response;
    r.usage = usage;
    r.metadata = meta;
    r.seal_pk = pk;
    json_t *doc = sl_msg_result_json(&r);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    for (int t = 0; t < trials; t++)
        opened[t] = open_all((int)n, text, pk, sk);
    free(text);
    double c = median(clear, (int)trials), s = median(sealed, (int)trials);
    double o = median(opened, (int)trials);
    printf("bench/seal: %ld results x %ld trials, %ld bytes of answer (median, per result)\n", n,
           trials, answer_bytes);
    printf("  %-34s %9.2f us  %6zu bytes\n", "build + serialise, clear", c, clear_bytes);
    printf("  %-34s %9.2f us  %6zu bytes\n", "build + seal + serialise", s, sealed_bytes);
    printf("  %-34s %9.2f us\n", "sealing alone (difference)", s - c);
    printf("  %-34s %9.2f us\n", "parse + open (sluice results)", o);
    printf("  %-34s %9.0f results/s on one core\n", "sealed results", 1e6 / s);
    json_t *out = json_pack("{s:s, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:I, s:I}", "bench", "seal",
                            "results", (json_int_t)n, "trials", (json_int_t)trials,
                            "answer_bytes", (json_int_t)answer_bytes, "clear_us", c, "sealed_us",
                            s, "seal_cost_us", s - c, "open_us", o, "clear_bytes",
                            (json_int_t)clear_bytes, "sealed_bytes", (json_int_t)sealed_bytes);
    mkdir("bench/results", 0755);
    char path[128];
    snprintf(path, sizeof path, "bench/results/seal-%lld.json", (long long)time(NULL));
    if (out == NULL || json_dump_file(out, path, JSON_INDENT(2)) != 0)
        fprintf(stderr, "bench/seal: cannot write %s\n", path);
    else
        printf("  written to %s\n", path);
    json_decref(out);
    json_decref(response);
    json_decref(usage);
    json_decref(meta);
    free(answer);
    sodium_memzero(sk, sizeof sk);
    return 0;
}
