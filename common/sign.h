/* sign.h - libsodium pieces: API-key hashing, keyed job ids and message signatures.
 *
 * API keys are high-entropy secrets, so a keyed BLAKE2b digest (domain-separated) is the right
 * "password hash": fast enough for every request, and the config never holds a key in clear.
 *
 * Every message a daemon writes to an internal topic is signed with Ed25519 by its role
 * (ingest: its rejections; scheduler: dispatches and results; dispatcher: stream chunks). A
 * consumer holds only the writer role's public keys, so it can check but never forge. The
 * signature covers the role, the topic, the key and the value (sl_msg_sign), so a message cannot
 * be moved to another topic or key, nor claimed by another role. Where the scheduler is the only
 * reader (jobs and cancels from ingest, usage from the dispatchers) a pair MAC stands in for the
 * signature (sl_pair_key): a key only that writer and the scheduler can derive. Job ids are a
 * keyed BLAKE2b of tenant and idempotency key (sl_job_id), so outsiders cannot predict them.
 * docs/security.md has the threat model.
 */
#ifndef SL_SIGN_H
#define SL_SIGN_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define SL_SIG_B64_LEN 89 /* base64 of a 64-byte signature plus NUL */

/* Initialises libsodium; call once at start. Returns SL_ECRYPTO when it cannot. */
sl_err_t sl_crypto_init(void);

/* Hashes an API key into out (32 bytes). */
void sl_keyhash(const char *api_key, size_t len, uint8_t out[32]);

/* Writes a key pair as two hex files (the secret 0600, the public 0644) and wipes sk; keys of at
 * most 128 bytes. */
sl_err_t sl_key_files_write(const char *secret_path, uint8_t *sk, size_t sk_len,
                            const char *public_path, const uint8_t *pk, size_t pk_len);
/* Reads a hex key file of exactly n bytes into out: SL_ECRYPTO when it holds no such key, the
 * read's error when it cannot be read. */
sl_err_t sl_key_file_read(const char *path, uint8_t *out, size_t n);

/* Creates a new Ed25519 key pair and writes both files (secret 0600) as hex. */
sl_err_t sl_sign_keygen(const char *secret_path, const char *public_path);

typedef struct sl_signer sl_signer_t;
/* Loads a secret key (hex file). *out set only on success; free with sl_signer_free. */
sl_err_t sl_signer_load(const char *secret_path, sl_signer_t **out);
/* Signs msg; writes base64 (no newline) into sig_b64, which holds SL_SIG_B64_LEN bytes. */
void sl_signer_sign(const sl_signer_t *s, const void *msg, size_t len, char *sig_b64);
void sl_signer_free(sl_signer_t *s);

/* ---- Roles and message signatures ---------------------------------------------------- */

/* The roles that write internal topics. Bits of a role mask are 1 << role. */
typedef enum { SL_ROLE_INGEST = 0, SL_ROLE_SCHEDULER, SL_ROLE_DISPATCHER, SL_ROLE_COUNT } sl_role_t;
#define SL_ROLE_BIT(r) (1u << (r))

/* "ingest", "scheduler", "dispatcher". */
const char *sl_role_name(sl_role_t role);
/* The role named by name (len bytes, need not be NUL-terminated); -1 when none. */
int sl_role_parse(const char *name, size_t len);

/* Kafka headers: the base64 signature, and the role that made it. */
#define SL_SIG_HEADER "sluice-sig"
#define SL_SIGNER_HEADER "sluice-signer"

/* The 64-byte digest a signature covers: a domain tag, role, topic, key (NULL or empty: none)
 * and value, each length-framed (BLAKE2b-512). */
void sl_msg_digest(sl_role_t role, const char *topic, const void *key, size_t key_len,
                   const void *value, size_t value_len, uint8_t out[64]);

/* Signs what a message says and where it goes: role, topic, key (NULL or empty: none) and
 * value. Writes base64 into sig_b64 (SL_SIG_B64_LEN bytes). */
void sl_msg_sign(const sl_signer_t *s, sl_role_t role, const char *topic, const void *key,
                 size_t key_len, const void *value, size_t value_len, char *sig_b64);

/* MACs, for a topic one role both writes and reads (the scheduler's changelog): a key derived
 * from that role's secret signing key, so only its holders can make or check one, and a keyed
 * BLAKE2b over topic, key and value as signatures frame them. About a microsecond for a job,
 * where an Ed25519 signature and its check cost tens. Carried in the SL_MAC_HEADER header. */
#define SL_MAC_HEADER "sluice-mac"
enum { SL_MAC_KEY_BYTES = 32, SL_MAC_BYTES = 32 };
/* The key for context (a fixed name per use) derived from s's secret key. */
void sl_signer_derive(const sl_signer_t *s, const char *context, uint8_t key[SL_MAC_KEY_BYTES]);
void sl_mac(const uint8_t mac_key[SL_MAC_KEY_BYTES], const char *topic, const void *key,
            size_t key_len, const void *value, size_t value_len, uint8_t out[SL_MAC_BYTES]);
/* 1 when mac is (topic, key, value)'s under mac_key (compared in constant time). */
int sl_mac_check(const uint8_t mac_key[SL_MAC_KEY_BYTES], const char *topic, const void *key,
                 size_t key_len, const void *value, size_t value_len,
                 const uint8_t mac[SL_MAC_BYTES]);

/* Pair MACs, for a topic that one role writes and one other role alone reads (jobs: ingest to
 * the scheduler; usage: dispatchers to the scheduler). The writer and the reader each derive the
 * same key from their own Ed25519 secret key and the other's public key (X25519 on the keys
 * libsodium converts, then BLAKE2b over both public keys in writer-then-reader order), so no
 * key file is added and only those two roles can make or check such a MAC; a third role holds
 * nothing that makes one. The MAC is sl_mac's, in SL_MAC_HEADER, with SL_SIGNER_HEADER naming
 * the writer role. SL_ECRYPTO when a key cannot be converted (not a valid point). */
sl_err_t sl_pair_key(const sl_signer_t *self, const uint8_t peer_pk[32], int self_writes,
                     uint8_t key[SL_MAC_KEY_BYTES]);

/* Batch signatures: one Ed25519 signature for the n messages a writer sends at once (the
 * scheduler's dispatches of one loop turn), each message carrying the way from its own digest
 * to the signed root. The leaves are the messages' sl_msg_digest; a node is BLAKE2b-256 of its
 * two children (a level's last node without a partner goes up unchanged); leaves, nodes and the
 * signed root each have their own domain tag, and the signature covers the role, n and the
 * root. Header SL_BATCH_HEADER: index (2 bytes, big-endian), n (2 bytes), then the sibling of
 * each level the message's node has one on (32 bytes each, from the leaves up); SL_SIG_HEADER
 * holds the batch's signature, the same in every message of the batch. A reader checks the
 * signature once per batch (sl_keyring_check_batch keeps the last ones it checked) and hashes
 * log2(n) nodes per message. */
#define SL_BATCH_HEADER "sluice-batch"
enum { SL_BATCH_MAX = 1024, SL_BATCH_PROOF_MAX = 4 + 10 * 32 };
typedef struct sl_batch sl_batch_t;
/* A batch of n messages, 2 <= n <= SL_BATCH_MAX; NULL otherwise or out of memory. */
sl_batch_t *sl_batch_new(int n);
void sl_batch_free(sl_batch_t *b);
/* Adds the next message; returns its index, or -1 when the batch has its n already. */
int sl_batch_add(sl_batch_t *b, sl_role_t role, const char *topic, const void *key, size_t key_len,
                 const void *value, size_t len);
/* Once all n are added: signs the root as role (base64 into sig_b64, SL_SIG_B64_LEN bytes). */
void sl_batch_sign(sl_batch_t *b, const sl_signer_t *s, sl_role_t role, char *sig_b64);
/* The header value of message i (after sl_batch_sign); returns its length. */
size_t sl_batch_proof(const sl_batch_t *b, int i, uint8_t out[SL_BATCH_PROOF_MAX]);
/* The root a message's digest and header value lead to, and the batch's n: 0, or -1 for a
 * header that is not one (index past n, n out of range, a length not the one n and index
 * give). */
int sl_batch_root(const uint8_t digest[64], const uint8_t *proof, size_t len, uint8_t root[32],
                  int *count);
/* What a batch's signature covers. */
void sl_batch_signed_digest(sl_role_t role, int count, const uint8_t root[32], uint8_t out[64]);

/* Why a message was refused; SL_AUTH_OK when it was not. The names are the metric labels. */
#define SL_AUTH_MAP(X)                                                                             \
    X(OK, "ok")                                                                                    \
    X(UNSIGNED, "unsigned")             /* no signature header */                                  \
    X(UNKNOWN_SIGNER, "unknown_signer") /* no or no known role header, or no key of that role */   \
    X(WRONG_ROLE, "wrong_role")         /* a role that does not write this topic */                \
    X(BAD_SIGNATURE, "bad_signature")   /* forged, tampered, or moved to another topic or key */

typedef enum {
#define SL_AUTH_ENUM(name, str) SL_AUTH_##name,
    SL_AUTH_MAP(SL_AUTH_ENUM)
#undef SL_AUTH_ENUM
        SL_AUTH_COUNT
} sl_auth_t;
const char *sl_auth_name(sl_auth_t a);

/* The public keys a consumer checks messages with: per role, the current key and, during a
 * rotation, the next one. Not thread-safe. */
typedef struct sl_keyring sl_keyring_t;
/* An empty keyring; NULL when out of memory. Free with sl_keyring_free (NULL is a no-op). */
sl_keyring_t *sl_keyring_new(void);
void sl_keyring_free(sl_keyring_t *kr);
/* Adds a public key file of role (at most two per role; "" or NULL is ignored and SL_OK).
 * A file that cannot be read yet is remembered and read again at each check that needs it, so
 * a consumer may start before the writer made its key. Returns SL_ECRYPTO when a readable file
 * holds no valid key, SL_EINVAL when the role has two files already. */
sl_err_t sl_keyring_add(sl_keyring_t *kr, sl_role_t role, const char *public_path);
/* Whether role has at least one key loaded (trying the files not read yet). */
int sl_keyring_has(sl_keyring_t *kr, sl_role_t role);

/* Checks one message: roles is the mask of roles that may write topic; signer and sig are the
 * header values (NULL when absent). Tries the current key of the role, then the next one. */
sl_auth_t sl_keyring_check(sl_keyring_t *kr, unsigned roles, const char *topic, const void *key,
                           size_t key_len, const void *value, size_t value_len, const char *signer,
                           size_t signer_len, const char *sig, size_t sig_len);

/* As sl_keyring_check, for a message of a batch: proof is its SL_BATCH_HEADER value. The
 * signature is checked over the batch's root, once: kr remembers the last SL_KEYRING_BATCHES
 * roots and signatures it found valid, and a message whose root and signature are one of them
 * needs no Ed25519 check. A header that is no proof is bad_signature. */
enum { SL_KEYRING_BATCHES = 16 };
sl_auth_t sl_keyring_check_batch(sl_keyring_t *kr, unsigned roles, const char *topic,
                                 const void *key, size_t key_len, const void *value,
                                 size_t value_len, const char *signer, size_t signer_len,
                                 const char *sig, size_t sig_len, const void *proof,
                                 size_t proof_len);

/* Makes kr take pair MACs (sl_pair_key) from the roles in writers, checked with the key each of
 * their public keys in kr shares with self, this process's own secret key, or with previous
 * (NULL: none), its secret key before a rotation, for MACs made with its old public key (both
 * borrowed: they must outlive kr's use). Without this call kr takes no MAC. Only for a reader
 * that is the one role reading what those roles write with a MAC. */
void sl_keyring_take_macs(sl_keyring_t *kr, const sl_signer_t *self, const sl_signer_t *previous,
                          unsigned writers);
/* As sl_keyring_check, for a message that carries a MAC (mac, mac_len: the header's value)
 * instead of a signature: SL_AUTH_UNSIGNED when kr takes no MAC from the role it names. */
sl_auth_t sl_keyring_check_mac(sl_keyring_t *kr, unsigned roles, const char *topic, const void *key,
                               size_t key_len, const void *value, size_t value_len,
                               const char *signer, size_t signer_len, const void *mac,
                               size_t mac_len);
/* The key self, as writer, shares with reader's public key in kr, for sl_mac. SL_ENOTFOUND
 * while that key file cannot be read yet, and while reader has a next key configured (its
 * rotation is under way: messages then go signed, which both its keys can check). */
sl_err_t sl_keyring_writer_key(sl_keyring_t *kr, const sl_signer_t *self, sl_role_t reader,
                               uint8_t key[SL_MAC_KEY_BYTES]);

/* ---- Keyed job ids --------------------------------------------------------------------- */

#define SL_JOB_ID_KEY_BYTES 32

/* Creates a random job-id key file (hex, 0600). */
sl_err_t sl_job_id_keygen(const char *path);
/* Reads a job-id key file into key. */
sl_err_t sl_job_id_key_load(const char *path, uint8_t key[SL_JOB_ID_KEY_BYTES]);
/* The job id of (tenant, idempotency key): 32 hex digits of a BLAKE2b keyed with key, over
 * tenant, a NUL and the idempotency key. out holds 33 bytes. */
void sl_job_id(const uint8_t key[SL_JOB_ID_KEY_BYTES], const char *tenant,
               const char *idempotency_key, char *out);

typedef struct sl_verifier sl_verifier_t;
sl_err_t sl_verifier_load(const char *public_path, sl_verifier_t **out);
/* Returns SL_OK when sig_b64 (sig_len bytes, need not be NUL-terminated) is a valid signature
 * of msg, else SL_ECRYPTO. */
sl_err_t sl_verifier_check(const sl_verifier_t *v, const void *msg, size_t len, const char *sig_b64,
                           size_t sig_len);
void sl_verifier_free(sl_verifier_t *v);

#endif
