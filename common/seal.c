/* seal.c - results sealed to their tenant (see seal.h). */
#include "seal.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "sign.h"
#include "util.h"

/* The members of the error object sealed with a result: its message may quote the provider. */
#define ERROR_MESSAGE_KEY "error.message"


sl_err_t sl_seal_keygen(const char *secret_path, const char *public_path)
{
    uint8_t pk[crypto_box_PUBLICKEYBYTES], sk[crypto_box_SECRETKEYBYTES];
    crypto_box_keypair(pk, sk);
    return sl_key_files_write(secret_path, sk, sizeof sk, public_path, pk, sizeof pk);
}

sl_err_t sl_seal_read_key(const char *path, uint8_t key[SL_SEAL_KEY_BYTES])
{
    sl_err_t rc = sl_key_file_read(path, key, SL_SEAL_KEY_BYTES);
    return rc == SL_OK || rc == SL_ECRYPTO ? rc : SL_EIO;
}

void sl_seal_public_of(const uint8_t sk[SL_SEAL_KEY_BYTES], uint8_t pk[SL_SEAL_KEY_BYTES])
{
    crypto_scalarmult_base(pk, sk);
}

int sl_seal_is_sealed(const json_t *doc)
{
    return json_is_string(json_object_get(doc, "sealed"));
}

/* Seals box (an object, serialised) to pk into doc's "sealed" (base64). */
static sl_err_t put_box(json_t *doc, const json_t *box, const uint8_t pk[SL_SEAL_KEY_BYTES])
{
    char *plain = json_dumps(box, JSON_COMPACT);
    if (plain == NULL)
        return SL_ENOMEM;
    size_t plain_len = strlen(plain);
    size_t sealed_len = plain_len + crypto_box_SEALBYTES;
    unsigned char *sealed = malloc(sealed_len);
    size_t b64_len = sodium_base64_ENCODED_LEN(sealed_len, sodium_base64_VARIANT_ORIGINAL);
    char *b64 = malloc(b64_len);
    sl_err_t rc = SL_ENOMEM;
    if (sealed != NULL && b64 != NULL) {
        if (crypto_box_seal(sealed, (const unsigned char *)plain, plain_len, pk) != 0) {
            rc = SL_ECRYPTO;
        } else {
            sodium_bin2base64(b64, b64_len, sealed, sealed_len, sodium_base64_VARIANT_ORIGINAL);
            rc = json_object_set_new(doc, "sealed", json_string(b64)) == 0 ? SL_OK : SL_ENOMEM;
        }
    }
    sodium_memzero(plain, plain_len);
    free(plain);
    free(sealed);
    free(b64);
    return rc;
}

sl_err_t sl_seal_members(json_t *doc, const char *const *keys, const json_t *clear,
                         const uint8_t pk[SL_SEAL_KEY_BYTES])
{
    json_t *box = json_object();
    if (box == NULL)
        return SL_ENOMEM;
    sl_err_t rc = SL_OK;
    for (int i = 0; rc == SL_OK && keys[i] != NULL; i++) {
        json_t *v = json_object_get(doc, keys[i]);
        if (v != NULL && json_object_set(box, keys[i], v) != 0)
            rc = SL_ENOMEM;
    }
    if (rc == SL_OK)
        rc = put_box(doc, box, pk);
    /* Only once the box is in place are the members replaced, so a failure changes nothing. */
    for (int i = 0; rc == SL_OK && keys[i] != NULL; i++) {
        if (json_object_get(box, keys[i]) == NULL)
            continue;
        json_t *c = clear != NULL ? json_deep_copy(clear) : json_null();
        json_object_set_new(doc, keys[i], c != NULL ? c : json_null());
    }
    json_decref(box);
    return rc;
}

/* The box of doc's "sealed", opened with the key pair: a new object (caller frees) or NULL
 * with *rc set. */
static json_t *open_box(const json_t *doc, const uint8_t pk[SL_SEAL_KEY_BYTES],
                        const uint8_t sk[SL_SEAL_KEY_BYTES], sl_err_t *rc)
{
    const char *b64 = json_string_value(json_object_get(doc, "sealed"));
    if (b64 == NULL) {
        *rc = SL_ENOTFOUND;
        return NULL;
    }
    size_t b64_len = strlen(b64);
    unsigned char *sealed = malloc(b64_len + 1);
    if (sealed == NULL) {
        *rc = SL_ENOMEM;
        return NULL;
    }
    size_t sealed_len = 0;
    json_t *box = NULL;
    *rc = SL_ECRYPTO;
    if (sodium_base642bin(sealed, b64_len + 1, b64, b64_len, NULL, &sealed_len, NULL,
                          sodium_base64_VARIANT_ORIGINAL) == 0 &&
        sealed_len >= crypto_box_SEALBYTES) {
        size_t plain_len = sealed_len - crypto_box_SEALBYTES;
        unsigned char *plain = malloc(plain_len + 1);
        if (plain == NULL) {
            *rc = SL_ENOMEM;
        } else if (crypto_box_seal_open(plain, sealed, sealed_len, pk, sk) == 0) {
            box = json_loadb((const char *)plain, plain_len, 0, NULL);
            *rc = json_is_object(box) ? SL_OK : SL_EPARSE;
            if (*rc != SL_OK) {
                json_decref(box);
                box = NULL;
            }
            sodium_memzero(plain, plain_len);
        }
        free(plain);
    }
    free(sealed);
    return box;
}

sl_err_t sl_seal_open(json_t *doc, const uint8_t pk[SL_SEAL_KEY_BYTES],
                      const uint8_t sk[SL_SEAL_KEY_BYTES])
{
    sl_err_t rc;
    json_t *box = open_box(doc, pk, sk, &rc);
    if (box == NULL)
        return rc;
    const char *key;
    json_t *v;
    json_object_foreach(box, key, v)
    {
        if (strcmp(key, ERROR_MESSAGE_KEY) == 0) {
            json_t *e = json_object_get(doc, "error");
            if (json_is_object(e))
                json_object_set(e, "message", v);
        } else {
            json_object_set(doc, key, v);
        }
    }
    json_object_del(doc, "sealed");
    json_decref(box);
    return SL_OK;
}

sl_err_t sl_seal_result(json_t *res, const uint8_t pk[SL_SEAL_KEY_BYTES])
{
    /* The error's message goes into the box under its own name; the other members of the
     * error (type, reason, decision) stay readable: they are what a shared reader may see. */
    json_t *e = json_object_get(res, "error");
    json_t *msg = json_is_object(e) ? json_object_get(e, "message") : NULL;
    sl_err_t rc = SL_OK;
    if (msg != NULL)
        rc = json_object_set(res, ERROR_MESSAGE_KEY, msg) == 0 ? SL_OK : SL_ENOMEM;
    static const char *const keys[] = {"response", "usage", "metadata", ERROR_MESSAGE_KEY, NULL};
    if (rc == SL_OK)
        rc = sl_seal_members(res, keys, NULL, pk);
    json_object_del(res, ERROR_MESSAGE_KEY);
    if (rc == SL_OK && msg != NULL)
        json_object_set_new(e, "message", json_string(""));
    return rc;
}

sl_err_t sl_seal_chunk(json_t *chunk, const uint8_t pk[SL_SEAL_KEY_BYTES])
{
    static const char *const keys[] = {"delta", "tool_calls", "usage", NULL};
    sl_err_t rc = sl_seal_members(chunk, keys, NULL, pk);
    if (rc != SL_OK)
        return rc;
    /* The schema's shape in the clear: delta a string, tool_calls an array when present. */
    json_object_set_new(chunk, "delta", json_string(""));
    json_object_del(chunk, "tool_calls");
    return SL_OK;
}
