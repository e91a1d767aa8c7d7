/* sign.c - API-key hashing and Ed25519 dispatch signatures (see sign.h). */
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

sl_err_t sl_key_files_write(const char *secret_path, uint8_t *sk, size_t sk_len,
                           const char *public_path, const uint8_t *pk, size_t pk_len)
{
    char hex[2 * 128 + 2];
    if (sk_len > 128 || pk_len > 128) {
        sodium_memzero(sk, sk_len);
        return SL_EINVAL;
    }
    sl_hex_encode(sk, sk_len, hex);
    strcat(hex, "\n");
    sl_err_t rc = sl_write_file(secret_path, hex, strlen(hex), 0600);
    sodium_memzero(sk, sk_len);
    sodium_memzero(hex, sizeof hex);
    if (rc != SL_OK)
        return rc;
    sl_hex_encode(pk, pk_len, hex);
    strcat(hex, "\n");
    return sl_write_file(public_path, hex, strlen(hex), 0644);
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
    sodium_bin2base64(sig_b64, SL_SIG_B64_LEN, sig, sizeof sig,
                      sodium_base64_VARIANT_ORIGINAL);
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

sl_err_t sl_verifier_check(const sl_verifier_t *v, const void *msg, size_t len,
                           const char *sig_b64, size_t sig_len)
{
    unsigned char sig[crypto_sign_BYTES];
    size_t bin_len = 0;
    if (sodium_base642bin(sig, sizeof sig, sig_b64, sig_len, NULL, &bin_len, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        bin_len != sizeof sig)
        return SL_ECRYPTO;
    return crypto_sign_verify_detached(sig, msg, len, v->pk) == 0 ? SL_OK : SL_ECRYPTO;
}

void sl_verifier_free(sl_verifier_t *v)
{
    free(v);
}
