/* fuzz_verify.c - the check every consumer of an internal topic runs before it acts on a message:
 * sl_kafka_verify(keyring, sl_auth_writers(cfg, topic), msg) (common/kafka.c, common/auth.c,
 * common/sign.c), as the scheduler and the dispatcher call it in their loops.
 *
 * The message is a real librdkafka message: produced with its headers to a producer handle that
 * has no broker, purged at once, and checked in the delivery report, which hands over the same
 * rd_kafka_message_t (topic handle, key, payload, headers) a consumer gets; only librdkafka's
 * own parsing of headers off the wire is left out. The keyring is the daemons' own
 * (sl_auth_keyring on examples/sluice.json) with every role's current and next key, the
 * signers those of sl_auth_signer, and signing goes through sl_kafka_sign_headers as
 * sl_kafka_produce does. acme has its own results and stream topics.
 *
 * The keyring also takes pair MACs as the scheduler does (sl_keyring_take_macs with the
 * scheduler's current key, from ingest and the dispatcher).
 *
 * The first byte of the input picks what the rest is:
 *   even: a message as an outsider writes it: topic, key, headers (any names, repeated, null
 *         values) and value all from the input. It never verifies: no outsider holds a key.
 *   1 (mod 8): a message signed here as a role, with the role's current or next key, another
 *         role's key or an outsider's, over a topic, key and value from the input. It verifies
 *         exactly when the key is the role's and the role writes the topic (a role that does not
 *         is refused as wrong_role, an outsider's or another role's key as bad_signature). Sent
 *         again with one byte flipped in the value, the key, the topic or the signature, or
 *         with the signer header naming another role, it never verifies.
 *   5 (mod 8): the same signed in a batch (sl_batch_*): the message is one of 2 - 10 (its
 *         place and their number from the flip position), the others fillers without a key.
 *         The same mutations, and one flipped byte of the batch header, never verify (unless
 *         the message is one of the fillers: then it is genuinely at their places too).
 *   3 (mod 4): the same with a pair MAC instead of a signature, made with the key the chosen
 *         secret key shares with the scheduler's public key, as sl_kafka_produce makes it on
 *         the jobs and usage topics. It verifies exactly when the key is the role's, the role
 *         writes the topic and the scheduler takes its MACs (ingest, dispatcher); the
 *         scheduler's own MAC is refused as unsigned. The same mutations (the MAC header for
 *         the signature) never verify, but one: a MAC made with another role's key, with the
 *         signer header changed to name that role, is that role's genuine MAC and verifies
 *         where that role writes (a signature names its role inside, a MAC by its key).
 * Layout (tests/fuzz/corpus.py writes seeds of it); a field is a length byte (255: absent) and
 * that many bytes, a topic a byte picking one of topics[] or, past them, a field naming it:
 *   even: topic, key field, header count (% 9), per header a name and a value field, value;
 *   odd:  role (% 3), key (% 4: current, next, another role's, outsider's), the other role
 *         (% 2), topic, flip position (2 bytes), flip mask, key field, value.
 */
#include <dirent.h>
#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "config.h"
#include "fuzz.h"
#include "kafka.h"
#include "sign.h"

static sl_config_t *cfg;
static sl_keyring_t *keyring;
static sl_signer_t *current[SL_ROLE_COUNT], *next[SL_ROLE_COUNT], *outsider;
static uint8_t sched_pk[32]; /* the scheduler's current public key, for pair MACs */

/* The topics a consumer meets: sluice's own and acme's. */
enum {
    T_REQUESTS,
    T_REQUESTS_BATCH,
    T_JOBS,
    T_DISPATCH,
    T_RESULTS,
    T_USAGE,
    T_STREAM,
    T_ACME_RESULTS,
    T_ACME_STREAM,
    NTOPICS
};
static const char *topics[NTOPICS];
#define ING SL_ROLE_BIT(SL_ROLE_INGEST)
#define SCH SL_ROLE_BIT(SL_ROLE_SCHEDULER)
#define DSP SL_ROLE_BIT(SL_ROLE_DISPATCHER)
/* Who may write each, as docs/security.md and auth.h give it, written out again here so the
 * target also checks sl_auth_writers. The requests topics are the tenants': no role. */
static const unsigned writers[NTOPICS] = {0, 0, ING, SCH, SCH | ING, DSP, DSP, SCH | ING, DSP};

/* The index of topic in topics[], or -1. */
static int topic_index(const char *topic)
{
    for (int t = 0; t < NTOPICS; t++) {
        if (strcmp(topic, topics[t]) == 0)
            return t;
    }
    return -1;
}

static unsigned writers_of(const char *topic)
{
    int t = topic_index(topic);
    return t >= 0 ? writers[t] : 0;
}

/* ---- Messages through librdkafka -------------------------------------------------------- */

/* A producer with no broker: nothing it queues ever leaves; rd_kafka_purge hands each message
 * back in a delivery report. librdkafka keeps a handle per topic it has seen and looks them up
 * one by one, so the handle is made again after FOREIGN_TOPICS messages to other topics. */
enum { FOREIGN_TOPICS = 256 };
static rd_kafka_t *rk;
static int foreign;

typedef struct {
    int produced;  /* queued, so a delivery report is due */
    int delivered; /* checked in its delivery report */
    sl_auth_t auth;
    int mutation; /* M_* below */
} outcome_t;

static void on_delivery(rd_kafka_t *handle, const rd_kafka_message_t *msg, void *opaque)
{
    (void)handle;
    (void)opaque;
    outcome_t *o = msg->_private;
    FUZZ_CHECK(msg->err == RD_KAFKA_RESP_ERR__PURGE_QUEUE);
    /* What the scheduler and the dispatcher do with each consumed message. */
    const char *topic = rd_kafka_topic_name(msg->rkt);
    o->auth = sl_kafka_verify(keyring, sl_auth_writers(cfg, topic), msg);
    FUZZ_CHECK((unsigned)o->auth < SL_AUTH_COUNT);
    o->delivered = 1;
}

static void producer_new(void)
{
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    FUZZ_CHECK(rd_kafka_conf_set(conf, "log_level", "0", err, sizeof err) == RD_KAFKA_CONF_OK);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    FUZZ_CHECK(rk != NULL);
    foreign = 0;
}

/* Queues a message; takes hdrs. key NULL: none. Returns 0 when librdkafka refuses it (a topic
 * name no broker would have), so no consumer could be handed it. */
static int produce(const char *topic, const void *key, size_t key_len, const void *value,
                   size_t len, rd_kafka_headers_t *hdrs, outcome_t *o)
{
    if (topic_index(topic) < 0)
        foreign++;
    memset(o, 0, sizeof *o);
    rd_kafka_resp_err_t err = rd_kafka_producev(
        rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, key_len),
        RD_KAFKA_V_VALUE((void *)value, len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_OPAQUE(o), RD_KAFKA_V_END);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_headers_destroy(hdrs);
        return 0;
    }
    o->produced = 1;
    return 1;
}

/* Hands every queued message to on_delivery. */
static void deliver(outcome_t *o, int n)
{
    FUZZ_CHECK(rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT) ==
               RD_KAFKA_RESP_ERR_NO_ERROR);
    FUZZ_CHECK(rd_kafka_flush(rk, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR);
    for (int i = 0; i < n; i++)
        FUZZ_CHECK(o[i].delivered == o[i].produced);
}

/* ---- Reading the input ------------------------------------------------------------------- */

typedef struct {
    const uint8_t *p;
    size_t left;
} input_t;

static unsigned take_byte(input_t *in)
{
    if (in->left == 0)
        return 0;
    in->left--;
    return *in->p++;
}

/* A field: a length byte, then that many bytes (fewer at the end). Length 255: absent (NULL). */
static const char *take_field(input_t *in, size_t *len)
{
    unsigned n = take_byte(in);
    *len = 0;
    if (n == 255)
        return NULL;
    const char *f = (const char *)in->p;
    *len = n < in->left ? n : in->left;
    in->p += *len;
    in->left -= *len;
    return f;
}

/* A topic: one of topics[] or, past them, a field (up to its first NUL: a topic is a C string
 * to librdkafka, as it is to the check). buf holds 256 bytes. */
static const char *take_topic(input_t *in, char *buf)
{
    unsigned t = take_byte(in) % (NTOPICS + 1);
    if (t < NTOPICS)
        return topics[t];
    size_t len = 0;
    const char *f = take_field(in, &len);
    memcpy(buf, f != NULL ? f : "", len);
    buf[len] = '\0';
    return buf;
}

/* ---- The two kinds of message ------------------------------------------------------------ */

static void fuzz_outsider(input_t *in)
{
    char topic_buf[256];
    const char *topic = take_topic(in, topic_buf);
    size_t key_len = 0;
    const char *key = take_field(in, &key_len);
    unsigned nhdrs = take_byte(in) % 9;
    rd_kafka_headers_t *hdrs = rd_kafka_headers_new(nhdrs);
    for (unsigned i = 0; i < nhdrs; i++) {
        size_t name_len = 0, val_len = 0;
        const char *name = take_field(in, &name_len);
        const char *val = take_field(in, &val_len);
        if (name != NULL)
            rd_kafka_header_add(hdrs, name, (ssize_t)name_len, val, (ssize_t)val_len);
    }
    outcome_t o;
    if (produce(topic, key, key_len, in->p, in->left, hdrs, &o)) {
        deliver(&o, 1);
        /* Nobody outside holds a key: whatever the headers say, it is refused. */
        FUZZ_CHECK(o.auth != SL_AUTH_OK);
    }
}

/* Replaces header name of hdrs by val (len bytes). */
static void header_set(rd_kafka_headers_t *hdrs, const char *name, const char *val, size_t len)
{
    rd_kafka_header_remove(hdrs, name);
    rd_kafka_header_add(hdrs, name, -1, val, (ssize_t)len);
}

enum { M_NONE, M_VALUE, M_KEY, M_TOPIC, M_SIG, M_SIGNER, M_PROOF, NMUTATIONS };
static const char *const changed[NMUTATIONS] = {
    "nothing", "value", "key", "topic", "signature header", "signer header", "batch header"};

/* How a message is authenticated: signed alone, a pair MAC, or signed in a batch. */
typedef enum { AUTH_SIG, AUTH_MAC, AUTH_BATCH } auth_kind_t;

/* The other messages of a batch, i of them: no key, and this text with i's digit. */
static size_t filler(int i, char out[32])
{
    return (size_t)snprintf(out, 32, "sluice fuzz filler %d", i);
}

/* The headers s writes as role for (topic, key, value): its signature, its pair MAC with the
 * scheduler, or a batch of count messages signed together in which it is message index (the
 * others fillers with no key). */
static rd_kafka_headers_t *auth_headers(const sl_signer_t *s, sl_role_t role, auth_kind_t kind,
                                        int count, int index, const char *topic, const char *key,
                                        size_t key_len, const char *value, size_t len)
{
    rd_kafka_headers_t *hdrs = rd_kafka_headers_new(3);
    if (kind == AUTH_SIG) {
        sl_kafka_sign_headers(hdrs, s, role, topic, key, key_len, value, len);
        return hdrs;
    }
    if (kind == AUTH_BATCH) {
        sl_batch_t *b = sl_batch_new(count);
        FUZZ_CHECK(b != NULL);
        for (int i = 0; i < count; i++) {
            if (i == index)
                sl_batch_add(b, role, topic, key, key_len, value, len);
            else {
                char f[32];
                size_t flen = filler(i, f);
                sl_batch_add(b, role, topic, NULL, 0, f, flen);
            }
        }
        char sig[SL_SIG_B64_LEN];
        uint8_t proof[SL_BATCH_PROOF_MAX];
        sl_batch_sign(b, s, role, sig);
        size_t plen = sl_batch_proof(b, index, proof);
        sl_batch_free(b);
        rd_kafka_header_add(hdrs, SL_SIG_HEADER, -1, sig, (ssize_t)strlen(sig));
        rd_kafka_header_add(hdrs, SL_SIGNER_HEADER, -1, sl_role_name(role), -1);
        rd_kafka_header_add(hdrs, SL_BATCH_HEADER, -1, proof, (ssize_t)plen);
        return hdrs;
    }
    uint8_t pair[SL_MAC_KEY_BYTES], tag[SL_MAC_BYTES];
    FUZZ_CHECK(sl_pair_key(s, sched_pk, 1, pair) == SL_OK);
    sl_mac(pair, topic, key, key_len, value, len, tag);
    rd_kafka_header_add(hdrs, SL_MAC_HEADER, -1, tag, sizeof tag);
    rd_kafka_header_add(hdrs, SL_SIGNER_HEADER, -1, sl_role_name(role), -1);
    return hdrs;
}

static void fuzz_signed(input_t *in, auth_kind_t kind)
{
    int mac = kind == AUTH_MAC;
    sl_role_t role = (sl_role_t)(take_byte(in) % SL_ROLE_COUNT);
    unsigned which_key = take_byte(in) % 4;
    sl_role_t other = (sl_role_t)((role + 1 + take_byte(in) % 2) % SL_ROLE_COUNT);
    const sl_signer_t *s = which_key == 0   ? current[role]
                           : which_key == 1 ? next[role]
                           : which_key == 2 ? current[other]
                                            : outsider;
    int own_key = which_key < 2;
    char topic_buf[256];
    const char *topic = take_topic(in, topic_buf);
    size_t at = take_byte(in) << 8;
    at |= take_byte(in);
    char mask = (char)take_byte(in);
    if (mask == 0)
        mask = 0x01;
    size_t key_len = 0;
    const char *key = take_field(in, &key_len);
    const char *value = (const char *)in->p;
    size_t len = in->left;

    /* A batch's size and the message's place in it, from the flip position. */
    int count = 2 + (int)(at % 9), index = (int)(at / 9) % count;

    /* Signed as sl_kafka_produce signs, then sent as signed and once per mutation: a copy with
     * one byte flipped in one part, or the signer header naming another role. */
    rd_kafka_headers_t *signed_hdrs =
        auth_headers(s, role, kind, count, index, topic, key, key_len, value, len);
    outcome_t o[NMUTATIONS];
    int n = 0;
    for (int m = M_NONE; m < NMUTATIONS; m++) {
        char k[256], t[256], v[4096];
        if ((m == M_KEY && key_len == 0) || (m == M_VALUE && (len == 0 || len > sizeof v)) ||
            (m == M_TOPIC && topic[0] == '\0') || (m == M_PROOF && kind != AUTH_BATCH))
            continue;
        memcpy(k, key != NULL ? key : "", key_len);
        memcpy(t, topic, strlen(topic) + 1);
        if (m == M_VALUE)
            memcpy(v, value, len);
        rd_kafka_headers_t *hdrs = rd_kafka_headers_copy(signed_hdrs);
        if (m == M_KEY)
            k[at % key_len] ^= mask;
        if (m == M_VALUE)
            v[at % len] ^= mask;
        if (m == M_TOPIC)
            t[at % strlen(t)] ^= mask; /* a NUL makes it a shorter topic, maybe another of ours */
        if (m == M_SIG) {
            const char *name = mac ? SL_MAC_HEADER : SL_SIG_HEADER;
            const void *sig = NULL;
            size_t sig_len = 0;
            FUZZ_CHECK(rd_kafka_header_get_last(hdrs, name, &sig, &sig_len) ==
                       RD_KAFKA_RESP_ERR_NO_ERROR);
            FUZZ_CHECK(sig_len == (mac ? SL_MAC_BYTES : SL_SIG_B64_LEN - 1));
            char flipped[SL_SIG_B64_LEN];
            memcpy(flipped, sig, sig_len);
            flipped[at % sig_len] ^= mask;
            header_set(hdrs, name, flipped, sig_len);
        }
        if (m == M_SIGNER)
            header_set(hdrs, SL_SIGNER_HEADER, sl_role_name(other), strlen(sl_role_name(other)));
        if (m == M_PROOF) {
            const void *proof = NULL;
            size_t proof_len = 0;
            FUZZ_CHECK(rd_kafka_header_get_last(hdrs, SL_BATCH_HEADER, &proof, &proof_len) ==
                       RD_KAFKA_RESP_ERR_NO_ERROR);
            char flipped[SL_BATCH_PROOF_MAX];
            FUZZ_CHECK(proof_len >= 4 && proof_len <= sizeof flipped);
            memcpy(flipped, proof, proof_len);
            flipped[(at >> 4) % proof_len] ^= mask;
            header_set(hdrs, SL_BATCH_HEADER, flipped, proof_len);
        }
        if (!produce(t, key != NULL ? k : NULL, key_len, m == M_VALUE ? v : value, len, hdrs,
                     &o[n]))
            FUZZ_CHECK(topic_index(t) < 0); /* only a made-up topic may be refused */
        o[n++].mutation = m;
    }
    rd_kafka_headers_destroy(signed_hdrs);
    deliver(o, n);

    if (o[0].produced) {
        if ((writers_of(topic) & SL_ROLE_BIT(role)) == 0)
            FUZZ_CHECK(o[0].auth == SL_AUTH_WRONG_ROLE);
        else if (mac && role == SL_ROLE_SCHEDULER)
            FUZZ_CHECK(o[0].auth == SL_AUTH_UNSIGNED);
        else if (own_key)
            FUZZ_CHECK(o[0].auth == SL_AUTH_OK);
        else
            FUZZ_CHECK(o[0].auth == SL_AUTH_BAD_SIGNATURE);
    }
    /* A MAC does not name its role (its key does): made with another role's key and the signer
     * header changed to that role, it is that role's genuine MAC. */
    int genuine_as_other = mac && which_key == 2 && other != SL_ROLE_SCHEDULER &&
                           (writers_of(topic) & SL_ROLE_BIT(other)) != 0;
    /* A message that is also one of the fillers is genuinely at their places too: its batch
     * header changed may name one of those. */
    int is_filler = 0;
    for (int i = 0; kind == AUTH_BATCH && key_len == 0 && i < count; i++) {
        char f[32];
        size_t flen = filler(i, f);
        is_filler |= i != index && len == flen && memcmp(value, f, flen) == 0;
    }
    for (int i = 1; i < n; i++) {
        if (o[i].mutation == M_SIGNER && genuine_as_other) {
            FUZZ_CHECK(!o[i].produced || o[i].auth == SL_AUTH_OK);
            continue;
        }
        if (o[i].mutation == M_PROOF && is_filler)
            continue;
        if (o[i].produced && o[i].auth == SL_AUTH_OK)
            fprintf(stderr, "fuzz_verify: verifies with its %s changed\n", changed[o[i].mutation]);
        FUZZ_CHECK(!o[i].produced || o[i].auth != SL_AUTH_OK);
    }
}

/* ---- Set-up: the daemons' keys on the example config ------------------------------------ */

/* Writes a key pair made from a fixed seed (tag, n), so a finding replays with the same
 * signatures. */
static void write_pair(char tag, int n, const char *secret_path, const char *public_path)
{
    unsigned char seed[crypto_sign_SEEDBYTES] = {(unsigned char)tag, (unsigned char)n};
    unsigned char pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
    FUZZ_CHECK(crypto_sign_seed_keypair(pk, sk, seed) == 0);
    FUZZ_CHECK(sl_key_files_write(secret_path, sk, sizeof sk, public_path, pk, sizeof pk) == SL_OK);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    FUZZ_CHECK(sl_crypto_init() == SL_OK);
    char dir[] = "/tmp/sluice-fuzz-verify-XXXXXX";
    FUZZ_CHECK(mkdtemp(dir) != NULL);

    /* The example config with its keys in dir, a next key for every role (a rotation under
     * way), and acme's own results and stream topics. */
    char path[4096], err[512], sk[1024], pk[1024];
    fuzz_repo_path("examples/sluice.json", path, sizeof path);
    json_t *doc = json_load_file(path, 0, NULL);
    FUZZ_CHECK(doc != NULL);
    json_t *signing = json_object();
    snprintf(sk, sizeof sk, "%s/dispatch.key", dir);
    json_object_set_new(signing, "secret_key_file", json_string(sk));
    snprintf(pk, sizeof pk, "%s/dispatch.pub", dir);
    json_object_set_new(signing, "public_key_file", json_string(pk));
    for (int r = 0; r < SL_ROLE_COUNT; r++) {
        const char *name = sl_role_name((sl_role_t)r);
        char opt[64];
        snprintf(opt, sizeof opt, "%s%snext_public_key_file", r == SL_ROLE_SCHEDULER ? "" : name,
                 r == SL_ROLE_SCHEDULER ? "" : "_");
        snprintf(pk, sizeof pk, "%s/%s-next.pub", dir, name);
        json_object_set_new(signing, opt, json_string(pk));
    }
    json_object_set_new(doc, "signing", signing);
    json_t *acme = json_array_get(json_object_get(doc, "tenants"), 0);
    FUZZ_CHECK(strcmp(json_string_value(json_object_get(acme, "name")), "acme") == 0);
    json_object_set_new(acme, "results_topic", json_string("sluice.results.acme"));
    json_object_set_new(acme, "stream_topic", json_string("sluice.stream.acme"));
    char *text = json_dumps(doc, 0);
    json_decref(doc);
    FUZZ_CHECK(text != NULL);
    char cfg_path[64];
    int fd = fuzz_file_open((const uint8_t *)text, strlen(text), cfg_path, sizeof cfg_path);
    free(text);
    if (sl_config_load(cfg_path, &cfg, err, sizeof err) != SL_OK) {
        fprintf(stderr, "fuzz_verify: %s\n", err);
        abort();
    }
    fuzz_file_close(fd);

    /* Each daemon's own set-up (sl_auth_signer, sl_auth_keyring) on those files. */
    for (int r = 0; r < SL_ROLE_COUNT; r++) {
        sl_auth_key_paths(cfg, (sl_role_t)r, sk, pk, sizeof sk);
        write_pair('c', r, sk, pk);
        FUZZ_CHECK(sl_auth_signer(cfg, (sl_role_t)r, &current[r], err, sizeof err) == SL_OK);
        const char *cur = NULL, *nxt = NULL;
        sl_auth_public_keys(cfg, (sl_role_t)r, &cur, &nxt);
        snprintf(sk, sizeof sk, "%s/%s-next.key", dir, sl_role_name((sl_role_t)r));
        write_pair('n', r, sk, nxt);
        FUZZ_CHECK(sl_signer_load(sk, &next[r]) == SL_OK);
    }
    sl_kafka_sign_as(NULL, SL_ROLE_INGEST); /* set by sl_auth_signer; nothing here produces */
    FUZZ_CHECK(sl_auth_keyring(cfg, SL_ROLE_BIT(SL_ROLE_COUNT) - 1, &keyring, err, sizeof err) ==
               SL_OK);
    snprintf(sk, sizeof sk, "%s/outsider.key", dir);
    snprintf(pk, sizeof pk, "%s/outsider.pub", dir);
    write_pair('o', 0, sk, pk);
    FUZZ_CHECK(sl_signer_load(sk, &outsider) == SL_OK);
    for (int r = 0; r < SL_ROLE_COUNT; r++)
        FUZZ_CHECK(sl_keyring_has(keyring, (sl_role_t)r));
    /* The scheduler's reading of pair MACs, and its public key for the writers' side. */
    sl_keyring_take_macs(keyring, current[SL_ROLE_SCHEDULER], NULL,
                         SL_ROLE_BIT(SL_ROLE_INGEST) | SL_ROLE_BIT(SL_ROLE_DISPATCHER));
    sl_auth_key_paths(cfg, SL_ROLE_SCHEDULER, sk, pk, sizeof sk);
    FUZZ_CHECK(sl_key_file_read(pk, sched_pk, sizeof sched_pk) == SL_OK);
    /* Everything is loaded: the files go. */
    DIR *d = opendir(dir);
    FUZZ_CHECK(d != NULL);
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.')
            FUZZ_CHECK(unlink(path) == 0);
    }
    closedir(d);
    FUZZ_CHECK(rmdir(dir) == 0);

    const sl_kafka_cfg_t *k = &cfg->kafka;
    const char *t[NTOPICS] = {k->topic_requests,
                              k->topic_requests_batch,
                              k->topic_jobs,
                              k->topic_dispatch,
                              k->topic_results,
                              k->topic_usage,
                              k->topic_stream,
                              cfg->tenants[0].results_topic,
                              cfg->tenants[0].stream_topic};
    memcpy(topics, t, sizeof topics);
    for (int i = 0; i < NTOPICS; i++)
        FUZZ_CHECK(topics[i] != NULL && sl_auth_writers(cfg, topics[i]) == writers[i]);
    producer_new();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Between inputs, so that no message is queued on the handle dropped. */
    if (foreign > FOREIGN_TOPICS) {
        rd_kafka_destroy(rk);
        producer_new();
    }
    input_t in = {data, size};
    unsigned kind = take_byte(&in) % 8;
    if (kind % 2 == 0)
        fuzz_outsider(&in);
    else
        fuzz_signed(&in, kind == 1 ? AUTH_SIG : kind == 5 ? AUTH_BATCH : AUTH_MAC);
    return 0;
}
