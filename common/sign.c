/* sign.c - API-key hashing, keyed job ids and Ed25519 message signatures (see sign.h). */
#include "sign.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* Domain separation: the same secret hashed for another purpose gives another digest. */
static const uint8_t keyhash_ctx[crypto_generichash_KEYBYTES] = "sluice api key hash v1";

sl_err_t sl_crypto_init(void)
{
    return sodium_init() < 0 ? SL_ECRYPTO : SL_OK;
}

void sl_keyhash(const char *api_key, size_t len, uint8_t out[32])
{
    crypto_generichash(out, 32, (const unsigned char *)api_key, len, keyhash_ctx,
                       sizeof keyhash_ctx);
}

/* Writes n bytes (at most 128) as one line of hex, with mode; the text is wiped after. */
static sl_err_t write_hex_file(const char *path, const uint8_t *bytes, size_t n, int mode)
{
    char hex[2 * 128 + 2];
    if (n > 128)
        return SL_EINVAL;
    sl_hex_encode(bytes, n, hex);
    strcat(hex, "\n");
    sl_err_t rc = sl_write_file(path, hex, strlen(hex), mode);
    sodium_memzero(hex, sizeof hex);
    return rc;
}

sl_err_t sl_key_files_write(const char *secret_path, uint8_t *sk, size_t sk_len,
                            const char *public_path, const uint8_t *pk, size_t pk_len)
{
    sl_err_t rc = pk_len > 128 ? SL_EINVAL : write_hex_file(secret_path, sk, sk_len, 0600);
    sodium_memzero(sk, sk_len);
    if (rc != SL_OK)
        return rc;
    return write_hex_file(public_path, pk, pk_len, 0644);
}

sl_err_t sl_sign_keygen(const char *secret_path, const char *public_path)
{
    unsigned char pk[crypto_sign_PUBLICKEYBYTES];
    unsigned char sk[crypto_sign_SECRETKEYBYTES];
    crypto_sign_keypair(pk, sk);
    return sl_key_files_write(secret_path, sk, sizeof sk, public_path, pk, sizeof pk);
}

sl_err_t sl_key_file_read(const char *path, uint8_t *out, size_t n)
{
    char *text = NULL;
    sl_err_t rc = sl_read_file(path, 4096, &text, NULL);
    if (rc != SL_OK)
        return rc;
    size_t len = strcspn(text, "\r\n \t");
    text[len] = '\0';
    rc = sl_hex_decode(text, out, n) == SL_OK ? SL_OK : SL_ECRYPTO;
    sodium_memzero(text, len);
    free(text);
    return rc;
}

struct sl_signer {
    unsigned char sk[crypto_sign_SECRETKEYBYTES];
};

sl_err_t sl_signer_load(const char *secret_path, sl_signer_t **out)
{
    *out = NULL;
    sl_signer_t *s = sodium_malloc(sizeof *s);
    if (s == NULL)
        return SL_ENOMEM;
    sl_err_t rc = sl_key_file_read(secret_path, s->sk, sizeof s->sk);
    if (rc != SL_OK) {
        sodium_free(s);
        return rc;
    }
    *out = s;
    return SL_OK;
}

void sl_signer_sign(const sl_signer_t *s, const void *msg, size_t len, char *sig_b64)
{
    unsigned char sig[crypto_sign_BYTES];
    crypto_sign_detached(sig, NULL, msg, len, s->sk);
    sodium_bin2base64(sig_b64, SL_SIG_B64_LEN, sig, sizeof sig, sodium_base64_VARIANT_ORIGINAL);
}

void sl_signer_free(sl_signer_t *s)
{
    if (s != NULL)
        sodium_free(s);
}

struct sl_verifier {
    unsigned char pk[crypto_sign_PUBLICKEYBYTES];
};

sl_err_t sl_verifier_load(const char *public_path, sl_verifier_t **out)
{
    *out = NULL;
    sl_verifier_t *v = malloc(sizeof *v);
    if (v == NULL)
        return SL_ENOMEM;
    sl_err_t rc = sl_key_file_read(public_path, v->pk, sizeof v->pk);
    if (rc != SL_OK) {
        free(v);
        return rc;
    }
    *out = v;
    return SL_OK;
}

/* Decodes a signature as its signer wrote it (sl_signer_sign): exactly SL_SIG_B64_LEN - 1
 * characters of standard base64 for crypto_sign_BYTES bytes, spelled as encoding them again
 * spells them. libsodium 1.0.18 decodes every byte from 0x80 up as '/', so decoding alone took
 * other spellings of a genuine signature (fuzz_verify found it). 0 on success. */
static int sig_decode(const char *b64, size_t len, unsigned char sig[crypto_sign_BYTES])
{
    size_t bin_len = 0;
    char again[SL_SIG_B64_LEN];
    if (len != SL_SIG_B64_LEN - 1 ||
        sodium_base642bin(sig, crypto_sign_BYTES, b64, len, NULL, &bin_len, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        bin_len != crypto_sign_BYTES)
        return -1;
    sodium_bin2base64(again, sizeof again, sig, crypto_sign_BYTES, sodium_base64_VARIANT_ORIGINAL);
    return memcmp(again, b64, len) == 0 ? 0 : -1;
}

sl_err_t sl_verifier_check(const sl_verifier_t *v, const void *msg, size_t len, const char *sig_b64,
                           size_t sig_len)
{
    unsigned char sig[crypto_sign_BYTES];
    if (sig_decode(sig_b64, sig_len, sig) != 0)
        return SL_ECRYPTO;
    return crypto_sign_verify_detached(sig, msg, len, v->pk) == 0 ? SL_OK : SL_ECRYPTO;
}

void sl_verifier_free(sl_verifier_t *v)
{
    free(v);
}

/* ---- Roles and message signatures ---------------------------------------------------- */

static const char *const role_names[SL_ROLE_COUNT] = {"ingest", "scheduler", "dispatcher"};

const char *sl_role_name(sl_role_t role)
{
    return (unsigned)role < SL_ROLE_COUNT ? role_names[role] : "?";
}

int sl_role_parse(const char *name, size_t len)
{
    for (int r = 0; r < SL_ROLE_COUNT; r++) {
        if (strlen(role_names[r]) == len && memcmp(role_names[r], name, len) == 0)
            return r;
    }
    return -1;
}

static const char *const auth_names[] = {
#define SL_AUTH_STR(name, str) str,
    SL_AUTH_MAP(SL_AUTH_STR)
#undef SL_AUTH_STR
};

const char *sl_auth_name(sl_auth_t a)
{
    return (unsigned)a < SL_AUTH_COUNT ? auth_names[a] : "?";
}

/* Lengths are framed big-endian, so no two (topic, key, value) give the same bytes. */
static void put_len(crypto_generichash_state *st, uint64_t n, int bytes)
{
    unsigned char b[8];
    for (int i = 0; i < bytes; i++)
        b[i] = (unsigned char)(n >> (8 * (bytes - 1 - i)));
    crypto_generichash_update(st, b, (unsigned long long)bytes);
}

/* The digest a message signature signs: BLAKE2b-512 over a domain tag, the role, the topic,
 * the key and the value. Ed25519 then signs 64 bytes whatever the
 * message's size: BLAKE2b reads the message once, where Ed25519 over the message itself reads
 * it with SHA-512 twice to sign and once to verify (bench/sign_bench.c has the figures). */
/* Where a message goes and what it says, length-prefixed: topic, key, value. */
static void frame(crypto_generichash_state *st, const char *topic, const void *key, size_t key_len,
                  const void *value, size_t value_len)
{
    size_t tl = strlen(topic);
    put_len(st, tl, 4);
    crypto_generichash_update(st, (const unsigned char *)topic, tl);
    /* No key and an empty key sign alike: Kafka clients do not all keep the difference. */
    if (key == NULL)
        key_len = 0;
    put_len(st, key_len, 4);
    if (key_len > 0)
        crypto_generichash_update(st, key, key_len);
    put_len(st, value_len, 8);
    if (value_len > 0)
        crypto_generichash_update(st, value, value_len);
}

void sl_msg_digest(sl_role_t role, const char *topic, const void *key, size_t key_len,
                   const void *value, size_t value_len, uint8_t out[64])
{
    static const char domain[] = "sluice message signature v1";
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 64);
    crypto_generichash_update(&st, (const unsigned char *)domain, sizeof domain);
    const char *rn = sl_role_name(role);
    crypto_generichash_update(&st, (const unsigned char *)rn, strlen(rn) + 1);
    frame(&st, topic, key, key_len, value, value_len);
    crypto_generichash_final(&st, out, 64);
}

void sl_signer_derive(const sl_signer_t *s, const char *context, uint8_t key[SL_MAC_KEY_BYTES])
{
    crypto_generichash(key, SL_MAC_KEY_BYTES, (const unsigned char *)context, strlen(context),
                       s->sk, crypto_generichash_KEYBYTES_MAX);
}

void sl_mac(const uint8_t mac_key[SL_MAC_KEY_BYTES], const char *topic, const void *key,
            size_t key_len, const void *value, size_t value_len, uint8_t out[SL_MAC_BYTES])
{
    static const char domain[] = "sluice message mac v1";
    crypto_generichash_state st;
    crypto_generichash_init(&st, mac_key, SL_MAC_KEY_BYTES, SL_MAC_BYTES);
    crypto_generichash_update(&st, (const unsigned char *)domain, sizeof domain);
    frame(&st, topic, key, key_len, value, value_len);
    crypto_generichash_final(&st, out, SL_MAC_BYTES);
}

int sl_mac_check(const uint8_t mac_key[SL_MAC_KEY_BYTES], const char *topic, const void *key,
                 size_t key_len, const void *value, size_t value_len,
                 const uint8_t mac[SL_MAC_BYTES])
{
    uint8_t want[SL_MAC_BYTES];
    sl_mac(mac_key, topic, key, key_len, value, value_len, want);
    return sodium_memcmp(want, mac, SL_MAC_BYTES) == 0;
}

sl_err_t sl_pair_key(const sl_signer_t *self, const uint8_t peer_pk[32], int self_writes,
                     uint8_t key[SL_MAC_KEY_BYTES])
{
    static const char domain[] = "sluice pair mac v1";
    unsigned char own_pk[crypto_sign_PUBLICKEYBYTES], x_peer[crypto_scalarmult_BYTES];
    unsigned char x_own[crypto_scalarmult_SCALARBYTES], shared[crypto_scalarmult_BYTES];
    crypto_sign_ed25519_sk_to_pk(own_pk, self->sk);
    if (crypto_sign_ed25519_pk_to_curve25519(x_peer, peer_pk) != 0 ||
        crypto_sign_ed25519_sk_to_curve25519(x_own, self->sk) != 0)
        return SL_ECRYPTO;
    int rc = crypto_scalarmult(shared, x_own, x_peer); /* -1 for a low-order peer key */
    sodium_memzero(x_own, sizeof x_own);
    if (rc != 0) {
        sodium_memzero(shared, sizeof shared);
        return SL_ECRYPTO;
    }
    crypto_generichash_state st;
    crypto_generichash_init(&st, shared, sizeof shared, SL_MAC_KEY_BYTES);
    crypto_generichash_update(&st, (const unsigned char *)domain, sizeof domain);
    crypto_generichash_update(&st, self_writes ? own_pk : peer_pk, crypto_sign_PUBLICKEYBYTES);
    crypto_generichash_update(&st, self_writes ? peer_pk : own_pk, crypto_sign_PUBLICKEYBYTES);
    crypto_generichash_final(&st, key, SL_MAC_KEY_BYTES);
    sodium_memzero(shared, sizeof shared);
    sodium_memzero(&st, sizeof st);
    return SL_OK;
}

void sl_msg_sign(const sl_signer_t *s, sl_role_t role, const char *topic, const void *key,
                 size_t key_len, const void *value, size_t value_len, char *sig_b64)
{
    unsigned char digest[64];
    sl_msg_digest(role, topic, key, key_len, value, value_len, digest);
    sl_signer_sign(s, digest, sizeof digest, sig_b64);
}

enum { KEYS_PER_ROLE = 2 };

/* How a slot's pair key was made: none yet, with this process writing, or reading. */
enum { PAIR_NONE, PAIR_AS_WRITER, PAIR_AS_READER };

typedef struct {
    char *path; /* NULL: slot unused */
    int loaded; /* pk holds the key */
    unsigned char pk[crypto_sign_PUBLICKEYBYTES];
    /* PAIR_*: pair[i] holds the key pk shares with the keyring's process, with its own key
     * (0) or, reading, its key before a rotation (1) */
    int paired[2];
    uint8_t pair[2][SL_MAC_KEY_BYTES];
} key_slot_t;

/* A batch whose signature was found valid: what the signature covers, and the signature. */
typedef struct {
    int used, count;
    sl_role_t role;
    uint8_t root[32];
    unsigned char sig[crypto_sign_BYTES];
} batch_seen_t;

struct sl_keyring {
    key_slot_t slot[SL_ROLE_COUNT][KEYS_PER_ROLE];
    const sl_signer_t *self[2]; /* set by sl_keyring_take_macs: own key, previous key */
    unsigned mac_writers;
    batch_seen_t seen[SL_KEYRING_BATCHES];
    int next_seen;
};

sl_keyring_t *sl_keyring_new(void)
{
    return calloc(1, sizeof(sl_keyring_t));
}

void sl_keyring_free(sl_keyring_t *kr)
{
    if (kr == NULL)
        return;
    for (int r = 0; r < SL_ROLE_COUNT; r++) {
        for (int k = 0; k < KEYS_PER_ROLE; k++)
            free(kr->slot[r][k].path);
    }
    sodium_memzero(kr, sizeof *kr); /* the pair keys */
    free(kr);
}

/* Reads slot's file when not read yet; returns whether its key is loaded. */
static int slot_ready(key_slot_t *ks)
{
    if (ks->path == NULL)
        return 0;
    if (!ks->loaded && sl_key_file_read(ks->path, ks->pk, sizeof ks->pk) == SL_OK)
        ks->loaded = 1;
    return ks->loaded;
}

sl_err_t sl_keyring_add(sl_keyring_t *kr, sl_role_t role, const char *public_path)
{
    if (public_path == NULL || public_path[0] == '\0')
        return SL_OK;
    if ((unsigned)role >= SL_ROLE_COUNT)
        return SL_EINVAL;
    key_slot_t *ks = NULL;
    for (int k = 0; k < KEYS_PER_ROLE && ks == NULL; k++) {
        if (kr->slot[role][k].path == NULL)
            ks = &kr->slot[role][k];
    }
    if (ks == NULL)
        return SL_EINVAL;
    char *path = strdup(public_path);
    if (path == NULL)
        return SL_ENOMEM;
    unsigned char pk[crypto_sign_PUBLICKEYBYTES];
    sl_err_t rc = sl_key_file_read(path, pk, sizeof pk);
    if (rc == SL_ECRYPTO) {
        free(path);
        return rc;
    }
    ks->path = path;
    ks->loaded = rc == SL_OK;
    memcpy(ks->pk, pk, sizeof pk);
    return SL_OK;
}

int sl_keyring_has(sl_keyring_t *kr, sl_role_t role)
{
    int n = 0;
    for (int k = 0; (unsigned)role < SL_ROLE_COUNT && k < KEYS_PER_ROLE; k++)
        n += slot_ready(&kr->slot[role][k]);
    return n > 0;
}

/* What a signed message's headers say before any key is tried: its role (as *role) and its
 * signature decoded, or why it is refused. */
/* The role a signer header names (as *role), if it may write the topic (roles), its kind of
 * authentication is one kr takes from it (takes: a mask of roles), and kr holds a key of it. */
static sl_auth_t claimed_role(sl_keyring_t *kr, unsigned roles, unsigned takes, const char *signer,
                              size_t signer_len, int *role)
{
    *role = signer != NULL ? sl_role_parse(signer, signer_len) : -1;
    if (*role < 0)
        return SL_AUTH_UNKNOWN_SIGNER;
    if ((roles & SL_ROLE_BIT(*role)) == 0)
        return SL_AUTH_WRONG_ROLE;
    if ((takes & SL_ROLE_BIT(*role)) == 0)
        return SL_AUTH_UNSIGNED; /* e.g. a MAC, for a reader that takes none */
    if (!sl_keyring_has(kr, (sl_role_t)*role))
        return SL_AUTH_UNKNOWN_SIGNER;
    return SL_AUTH_OK;
}

static sl_auth_t signed_by(sl_keyring_t *kr, unsigned roles, const char *signer, size_t signer_len,
                           const char *sig, size_t sig_len, int *role,
                           unsigned char bin[crypto_sign_BYTES])
{
    if (sig == NULL)
        return SL_AUTH_UNSIGNED;
    sl_auth_t why =
        claimed_role(kr, roles, SL_ROLE_BIT(SL_ROLE_COUNT) - 1, signer, signer_len, role);
    if (why != SL_AUTH_OK)
        return why;
    if (sig_decode(sig, sig_len, bin) != 0)
        return SL_AUTH_BAD_SIGNATURE;
    return SL_AUTH_OK;
}

/* Whether one of role's keys in kr made sig over digest. */
static int verified_by_role(sl_keyring_t *kr, int role, const unsigned char sig[crypto_sign_BYTES],
                            const uint8_t digest[64])
{
    for (int k = 0; k < KEYS_PER_ROLE; k++) {
        key_slot_t *ks = &kr->slot[role][k];
        if (ks->loaded && crypto_sign_verify_detached(sig, digest, 64, ks->pk) == 0)
            return 1;
    }
    return 0;
}

sl_auth_t sl_keyring_check(sl_keyring_t *kr, unsigned roles, const char *topic, const void *key,
                           size_t key_len, const void *value, size_t value_len, const char *signer,
                           size_t signer_len, const char *sig, size_t sig_len)
{
    int role = -1;
    unsigned char bin[crypto_sign_BYTES];
    sl_auth_t why = signed_by(kr, roles, signer, signer_len, sig, sig_len, &role, bin);
    if (why != SL_AUTH_OK)
        return why;
    uint8_t digest[64];
    sl_msg_digest((sl_role_t)role, topic, key, key_len, value, value_len, digest);
    return verified_by_role(kr, role, bin, digest) ? SL_AUTH_OK : SL_AUTH_BAD_SIGNATURE;
}

sl_auth_t sl_keyring_check_batch(sl_keyring_t *kr, unsigned roles, const char *topic,
                                 const void *key, size_t key_len, const void *value,
                                 size_t value_len, const char *signer, size_t signer_len,
                                 const char *sig, size_t sig_len, const void *proof,
                                 size_t proof_len)
{
    int role = -1;
    unsigned char bin[crypto_sign_BYTES];
    sl_auth_t why = signed_by(kr, roles, signer, signer_len, sig, sig_len, &role, bin);
    if (why != SL_AUTH_OK)
        return why;
    uint8_t digest[64], root[32];
    int count = 0;
    sl_msg_digest((sl_role_t)role, topic, key, key_len, value, value_len, digest);
    if (sl_batch_root(digest, proof, proof_len, root, &count) != 0)
        return SL_AUTH_BAD_SIGNATURE;
    for (int i = 0; i < SL_KEYRING_BATCHES; i++) {
        const batch_seen_t *b = &kr->seen[i];
        if (b->used && b->role == (sl_role_t)role && b->count == count &&
            memcmp(b->root, root, sizeof root) == 0 && memcmp(b->sig, bin, sizeof bin) == 0)
            return SL_AUTH_OK;
    }
    sl_batch_signed_digest((sl_role_t)role, count, root, digest);
    if (!verified_by_role(kr, role, bin, digest))
        return SL_AUTH_BAD_SIGNATURE;
    batch_seen_t *b = &kr->seen[kr->next_seen];
    kr->next_seen = (kr->next_seen + 1) % SL_KEYRING_BATCHES;
    b->used = 1;
    b->count = count;
    b->role = (sl_role_t)role;
    memcpy(b->root, root, sizeof root);
    memcpy(b->sig, bin, sizeof bin);
    return SL_AUTH_OK;
}

/* Whether slot's key is loaded and its pair key with self (which: 0 own key, 1 previous), made
 * as this process's side, is in ks->pair[which]. */
static int slot_pair(key_slot_t *ks, const sl_signer_t *self, int which, int side)
{
    if (self == NULL || !slot_ready(ks))
        return 0;
    if (ks->paired[which] != side) {
        ks->paired[which] = PAIR_NONE;
        if (sl_pair_key(self, ks->pk, side == PAIR_AS_WRITER, ks->pair[which]) != SL_OK)
            return 0;
        ks->paired[which] = side;
    }
    return 1;
}

void sl_keyring_take_macs(sl_keyring_t *kr, const sl_signer_t *self, const sl_signer_t *previous,
                          unsigned writers)
{
    kr->self[0] = self;
    kr->self[1] = self != NULL ? previous : NULL;
    kr->mac_writers = self != NULL ? writers : 0;
    for (int r = 0; r < SL_ROLE_COUNT; r++) {
        for (int k = 0; k < KEYS_PER_ROLE; k++)
            kr->slot[r][k].paired[1] = PAIR_NONE; /* made with another previous key */
    }
}

sl_auth_t sl_keyring_check_mac(sl_keyring_t *kr, unsigned roles, const char *topic, const void *key,
                               size_t key_len, const void *value, size_t value_len,
                               const char *signer, size_t signer_len, const void *mac,
                               size_t mac_len)
{
    if (mac == NULL)
        return SL_AUTH_UNSIGNED;
    int role = -1;
    sl_auth_t why = claimed_role(kr, roles, kr->mac_writers, signer, signer_len, &role);
    if (why != SL_AUTH_OK)
        return why;
    if (mac_len != SL_MAC_BYTES)
        return SL_AUTH_BAD_SIGNATURE;
    for (int which = 0; which < 2; which++) {
        for (int k = 0; k < KEYS_PER_ROLE; k++) {
            key_slot_t *ks = &kr->slot[role][k];
            if (slot_pair(ks, kr->self[which], which, PAIR_AS_READER) &&
                sl_mac_check(ks->pair[which], topic, key, key_len, value, value_len, mac))
                return SL_AUTH_OK;
        }
    }
    return SL_AUTH_BAD_SIGNATURE;
}

sl_err_t sl_keyring_writer_key(sl_keyring_t *kr, const sl_signer_t *self, sl_role_t reader,
                               uint8_t key[SL_MAC_KEY_BYTES])
{
    if ((unsigned)reader >= SL_ROLE_COUNT || self == NULL)
        return SL_ENOTFOUND;
    key_slot_t *only = NULL;
    for (int k = 0; k < KEYS_PER_ROLE; k++) {
        key_slot_t *ks = &kr->slot[reader][k];
        if (ks->path == NULL)
            continue;
        if (only != NULL)
            return SL_ENOTFOUND; /* current and next: a rotation */
        only = ks;
    }
    if (only == NULL || !slot_pair(only, self, 0, PAIR_AS_WRITER))
        return SL_ENOTFOUND;
    memcpy(key, only->pair[0], SL_MAC_KEY_BYTES);
    return SL_OK;
}

/* ---- Keyed job ids --------------------------------------------------------------------- */

sl_err_t sl_job_id_keygen(const char *path)
{
    unsigned char key[SL_JOB_ID_KEY_BYTES];
    randombytes_buf(key, sizeof key);
    sl_err_t rc = write_hex_file(path, key, sizeof key, 0600);
    sodium_memzero(key, sizeof key);
    return rc;
}

sl_err_t sl_job_id_key_load(const char *path, uint8_t key[SL_JOB_ID_KEY_BYTES])
{
    return sl_key_file_read(path, key, SL_JOB_ID_KEY_BYTES);
}

void sl_job_id(const uint8_t key[SL_JOB_ID_KEY_BYTES], const char *tenant,
               const char *idempotency_key, char *out)
{
    uint8_t digest[16];
    crypto_generichash_state st;
    crypto_generichash_init(&st, key, SL_JOB_ID_KEY_BYTES, sizeof digest);
    crypto_generichash_update(&st, (const unsigned char *)tenant, strlen(tenant) + 1);
    crypto_generichash_update(&st, (const unsigned char *)idempotency_key, strlen(idempotency_key));
    crypto_generichash_final(&st, digest, sizeof digest);
    sl_hex_encode(digest, sizeof digest, out);
}
