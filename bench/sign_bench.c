/* bench/sign_bench - what authenticating one internal message costs, by primitive and size,
 * on one core: the sign (producer) and verify (consumer) time of
 *   - ed25519:        Ed25519 over the message itself (crypto_sign_detached);
 *   - ed25519+b2b:    Ed25519 over a BLAKE2b-512 digest of the message, what sluice does
 *                     (sl_msg_sign / sl_keyring_check, with the role, topic and key framed in);
 *   - hmac-sha512256: crypto_auth (HMAC-SHA-512-256), a shared key;
 *   - blake2b-keyed:  crypto_generichash with a 32-byte key, a shared key;
 *   - pair-mac:       what sluice puts on jobs and usage events: sl_mac under the key the writer
 *                     and the scheduler derive (sl_pair_key), checked with sl_keyring_check_mac;
 *   - batch-64:       what sluice does for the dispatches of one loop turn: 64 messages signed
 *                     together (sl_batch_*), and each of them checked (sl_keyring_check_batch,
 *                     one Ed25519 check per batch); the figures are per message, and the batches
 *                     checked in turn are more than the keyring remembers;
 * for messages of 300 B (a usage event), 4 KB (a job) and 64 KB (a large result).
 * The two shared-key primitives are measured for comparison only: a verifier holding the key
 * could forge as the writer. Usage: bench/sign_bench [--seconds S] [--trials K]; BENCH_QUICK=1
 * in bench/run.sh passes a short run. */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "opts.h"
#include "sign.h"
#include "util.h"

static const size_t sizes[] = {300, 4096, 65536};
enum { NSIZES = 3, NPRIMS = 6, BATCH = 64, BATCHES = SL_KEYRING_BATCHES + 1 };
static const char *const prim_names[NPRIMS] = {"ed25519",       "ed25519+b2b", "hmac-sha512256",
                                               "blake2b-keyed", "pair-mac",    "batch-64"};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct {
    unsigned char pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
    unsigned char auth_key[crypto_auth_KEYBYTES], hash_key[32];
    sl_signer_t *signer, *reader;
    sl_keyring_t *kr, *mac_kr;
    uint8_t pair[SL_MAC_KEY_BYTES];
    unsigned char *msg;
    size_t len;
    /* batch-64: BATCHES batches of BATCH messages (the first byte tells the batches apart) */
    char sigs[BATCHES][SL_SIG_B64_LEN];
    uint8_t (*proofs)[BATCH][SL_BATCH_PROOF_MAX]; /* BATCHES of them */
    size_t proof_lens[BATCHES][BATCH];
    int next;
} ctx_t;

/* Signs batch b of c->msg copies (keys "k<i>"), its first byte b, and keeps its proofs. */
static void batch_sign(ctx_t *c, int b)
{
    sl_batch_t *bt = sl_batch_new(BATCH);
    if (bt == NULL)
        exit(1);
    c->msg[0] = (unsigned char)('A' + b);
    for (int i = 0; i < BATCH; i++) {
        char key[8];
        int kl = snprintf(key, sizeof key, "k%d", i);
        sl_batch_add(bt, SL_ROLE_SCHEDULER, "sluice.dispatch", key, (size_t)kl, c->msg, c->len);
    }
    sl_batch_sign(bt, c->signer, SL_ROLE_SCHEDULER, c->sigs[b]);
    for (int i = 0; i < BATCH; i++)
        c->proof_lens[b][i] = sl_batch_proof(bt, i, c->proofs[b][i]);
    sl_batch_free(bt);
}

/* Checks every message of batch b; 0 when one failed. */
static int batch_check(ctx_t *c, int b)
{
    c->msg[0] = (unsigned char)('A' + b);
    for (int i = 0; i < BATCH; i++) {
        char key[8];
        int kl = snprintf(key, sizeof key, "k%d", i);
        if (sl_keyring_check_batch(c->kr, SL_ROLE_BIT(SL_ROLE_SCHEDULER), "sluice.dispatch", key,
                                   (size_t)kl, c->msg, c->len, "scheduler", 9, c->sigs[b],
                                   strlen(c->sigs[b]), c->proofs[b][i],
                                   c->proof_lens[b][i]) != SL_AUTH_OK)
            return 0;
    }
    return 1;
}

static volatile unsigned sink;

/* One sign (verify = 0) or verify (1) of c->msg with primitive p; returns 0 when a verify
 * failed (it must not). */
static int op(ctx_t *c, int p, int verify, unsigned char *tag, char *sig_b64)
{
    switch (p) {
    case 0:
        if (!verify)
            crypto_sign_detached(tag, NULL, c->msg, c->len, c->sk);
        else
            return crypto_sign_verify_detached(tag, c->msg, c->len, c->pk) == 0;
        break;
    case 1:
        if (!verify)
            sl_msg_sign(c->signer, SL_ROLE_DISPATCHER, "sluice.usage", "0123456789abcdef", 16,
                        c->msg, c->len, sig_b64);
        else
            return sl_keyring_check(c->kr, SL_ROLE_BIT(SL_ROLE_DISPATCHER), "sluice.usage",
                                    "0123456789abcdef", 16, c->msg, c->len, "dispatcher", 10,
                                    sig_b64, strlen(sig_b64)) == SL_AUTH_OK;
        break;
    case 2:
        if (!verify)
            crypto_auth(tag, c->msg, c->len, c->auth_key);
        else
            return crypto_auth_verify(tag, c->msg, c->len, c->auth_key) == 0;
        break;
    case 4:
        if (!verify)
            sl_mac(c->pair, "sluice.usage", "0123456789abcdef", 16, c->msg, c->len, tag);
        else
            return sl_keyring_check_mac(c->mac_kr, SL_ROLE_BIT(SL_ROLE_DISPATCHER), "sluice.usage",
                                        "0123456789abcdef", 16, c->msg, c->len, "dispatcher", 10,
                                        tag, SL_MAC_BYTES) == SL_AUTH_OK;
        break;
    case 5:
        /* A whole batch: time_op divides by BATCH. */
        if (!verify) {
            batch_sign(c, 0);
        } else {
            int b = c->next;
            c->next = (c->next + 1) % BATCHES;
            return batch_check(c, b);
        }
        break;
    default: {
        unsigned char out[32];
        crypto_generichash(out, sizeof out, c->msg, c->len, c->hash_key, sizeof c->hash_key);
        if (!verify)
            memcpy(tag, out, sizeof out);
        else
            return sodium_memcmp(out, tag, sizeof out) == 0;
        break;
    }
    }
    sink += tag[0];
    return 1;
}

/* Microseconds per operation over about seconds of work. */
static double time_op(ctx_t *c, int p, int verify, double seconds)
{
    unsigned char tag[crypto_sign_BYTES];
    char sig_b64[SL_SIG_B64_LEN];
    op(c, p, 0, tag, sig_b64);
    long n = 0;
    double t0 = now_s(), t = t0;
    while (t - t0 < seconds) {
        for (int i = 0; i < 16; i++) {
            if (!op(c, p, verify, tag, sig_b64)) {
                fprintf(stderr, "sign_bench: %s verify failed\n", prim_names[p]);
                exit(1);
            }
        }
        n += 16;
        t = now_s();
    }
    return (t - t0) * 1e6 / (double)n / (p == 5 ? BATCH : 1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sign_bench [--seconds S] [--trials K] [--help]\n"
               "\n"
               "Microseconds per sign and per verify of one message of 300 B, 4 KB and 64 KB,\n"
               "for Ed25519 (over the message, and over its BLAKE2b digest as sluice signs),\n"
               "HMAC-SHA-512-256, keyed BLAKE2b, sluice's pair MAC (jobs, usage) and a\n"
               "message of a batch of 64 signed together (dispatches); the median of K trials\n"
               "(default 3) of S seconds (default 0.3) each.\n");
}

int main(int argc, char **argv)
{
    double seconds = 0.3;
    int trials = 3;
    const b_opt_t options[] = {{"seconds", B_OPT_NUM, &seconds, 0.001, 60},
                               {"trials", B_OPT_INT, &trials, 1, 99},
                               {NULL, 0, NULL, 0, 0}};
    int parsed = b_opt_parse("sign_bench", argc, argv, options, usage);
    if (parsed != 0)
        return parsed == 1 ? 0 : parsed;
    if (sl_crypto_init() != SL_OK)
        return 1;
    ctx_t c;
    memset(&c, 0, sizeof c);
    char dir[] = "/tmp/sluice-sign-bench-XXXXXX";
    char sk_path[64], pk_path[64];
    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(sk_path, sizeof sk_path, "%s/k.key", dir);
    snprintf(pk_path, sizeof pk_path, "%s/k.pub", dir);
    c.kr = sl_keyring_new();
    if (sl_sign_keygen(sk_path, pk_path) != SL_OK || sl_signer_load(sk_path, &c.signer) != SL_OK ||
        c.kr == NULL || sl_keyring_add(c.kr, SL_ROLE_DISPATCHER, pk_path) != SL_OK) {
        fprintf(stderr, "sign_bench: cannot make keys in %s\n", dir);
        return 1;
    }
    /* pair-mac: the dispatcher (c.signer) writes, a scheduler (reader) reads. */
    char rsk[64], rpk[64];
    snprintf(rsk, sizeof rsk, "%s/r.key", dir);
    snprintf(rpk, sizeof rpk, "%s/r.pub", dir);
    sl_keyring_t *writer_kr = sl_keyring_new();
    c.mac_kr = sl_keyring_new();
    if (writer_kr == NULL || c.mac_kr == NULL || sl_sign_keygen(rsk, rpk) != SL_OK ||
        sl_signer_load(rsk, &c.reader) != SL_OK ||
        sl_keyring_add(writer_kr, SL_ROLE_SCHEDULER, rpk) != SL_OK ||
        sl_keyring_writer_key(writer_kr, c.signer, SL_ROLE_SCHEDULER, c.pair) != SL_OK ||
        sl_keyring_add(c.mac_kr, SL_ROLE_DISPATCHER, pk_path) != SL_OK ||
        sl_keyring_add(c.kr, SL_ROLE_SCHEDULER, pk_path) != SL_OK) {
        fprintf(stderr, "sign_bench: cannot make the pair keys in %s\n", dir);
        return 1;
    }
    sl_keyring_take_macs(c.mac_kr, c.reader, NULL, SL_ROLE_BIT(SL_ROLE_DISPATCHER));
    sl_keyring_free(writer_kr);
    remove(sk_path);
    remove(pk_path);
    remove(rsk);
    remove(rpk);
    remove(dir);
    crypto_sign_keypair(c.pk, c.sk);
    randombytes_buf(c.auth_key, sizeof c.auth_key);
    randombytes_buf(c.hash_key, sizeof c.hash_key);
    c.msg = malloc(sizes[NSIZES - 1]);
    c.proofs = malloc(BATCHES * sizeof *c.proofs);
    if (c.msg == NULL || c.proofs == NULL)
        return 1;
    /* JSON-like bytes: the cost does not depend on them, but a reader of a profile may. */
    for (size_t i = 0; i < sizes[NSIZES - 1]; i++)
        c.msg[i] = (unsigned char)"{\"v\":1,\"job_id\":\"abc\",\"x\":\"lorem ipsum\"}"[i % 42];
    printf("sluice sign benchmark: microseconds per message, median of %d trials of %.2f s\n",
           trials, seconds);
    printf("%-16s %8s %10s %10s %12s\n", "primitive", "bytes", "sign_us", "verify_us", "verify/s");
    double *samples = calloc((size_t)trials, sizeof *samples);
    if (samples == NULL)
        return 1;
    for (int p = 0; p < NPRIMS; p++) {
        for (int z = 0; z < NSIZES; z++) {
            c.len = sizes[z];
            for (int b = 0; p == 5 && b < BATCHES; b++)
                batch_sign(&c, b); /* the batches verify ops check in turn */
            double med[2];
            for (int v = 0; v < 2; v++) {
                for (int t = 0; t < trials; t++)
                    samples[t] = time_op(&c, p, v, seconds);
                qsort(samples, (size_t)trials, sizeof *samples, cmp_double);
                med[v] = samples[trials / 2];
            }
            printf("%-16s %8zu %10.2f %10.2f %12.0f\n", prim_names[p], sizes[z], med[0], med[1],
                   1e6 / med[1]);
        }
    }
    free(samples);
    free(c.msg);
    free(c.proofs);
    sl_signer_free(c.signer);
    sl_signer_free(c.reader);
    sl_keyring_free(c.kr);
    sl_keyring_free(c.mac_kr);
    return 0;
}
