/* sign.h - libsodium pieces: API-key hashing and dispatch-message signatures.
 *
 * API keys are high-entropy secrets, so a keyed BLAKE2b digest (domain-separated) is the right
 * "password hash": fast enough for every request, and the config never holds a key in clear.
 * Dispatch messages are signed with Ed25519 by the scheduler; dispatchers hold only the public
 * key, so nothing but the scheduler (the ledger's owner) can make a dispatcher call a provider.
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

typedef struct sl_verifier sl_verifier_t;
sl_err_t sl_verifier_load(const char *public_path, sl_verifier_t **out);
/* Returns SL_OK when sig_b64 (sig_len bytes, need not be NUL-terminated) is a valid signature
 * of msg, else SL_ECRYPTO. */
sl_err_t sl_verifier_check(const sl_verifier_t *v, const void *msg, size_t len,
                           const char *sig_b64, size_t sig_len);
void sl_verifier_free(sl_verifier_t *v);

#endif
