/* seal.h - results sealed to their tenant: libsodium sealed boxes over a result's content.
 *
 * The one idea: a tenant that registers a box public key (X25519) gets its results' content
 * (response, usage, metadata and the error's message) encrypted to that key with
 * crypto_box_seal, so a reader of a shared results topic sees only the ids, the status and the
 * reason codes. Only the holder of the secret key opens it. The sealed part travels as one
 * base64 string in the result's "sealed" member; the members it holds are null (the message
 * "") in the clear. Stream chunks are sealed the same way (delta, tool_calls, usage).
 */
#ifndef SL_SEAL_H
#define SL_SEAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define SL_SEAL_KEY_BYTES 32

/* Creates a box key pair and writes both files as hex (secret 0600, public 0644). */
sl_err_t sl_seal_keygen(const char *secret_path, const char *public_path);
/* Reads a hex key file of SL_SEAL_KEY_BYTES bytes into key (SL_EIO: cannot read; SL_ECRYPTO:
 * not 64 hex digits). */
sl_err_t sl_seal_read_key(const char *path, uint8_t key[SL_SEAL_KEY_BYTES]);
/* The public key that belongs to a secret key. */
void sl_seal_public_of(const uint8_t sk[SL_SEAL_KEY_BYTES], uint8_t pk[SL_SEAL_KEY_BYTES]);

/* Seals the members named in keys (a NULL-terminated list) of the object doc to pk: their
 * values go into one sealed box, stored base64 in doc's "sealed"; each member then holds
 * `clear` (borrowed, copied; NULL = JSON null). Members doc lacks are left out. On failure
 * (SL_ENOMEM) doc is as it was. */
sl_err_t sl_seal_members(json_t *doc, const char *const *keys, const json_t *clear,
                         const uint8_t pk[SL_SEAL_KEY_BYTES]);
/* Opens doc's "sealed" with the key pair and puts the members back (removing "sealed").
 * SL_ENOTFOUND: doc is not sealed; SL_ECRYPTO: the box does not open with this key (another
 * tenant's key, or a damaged message); SL_EPARSE: it opened but holds no object. On failure
 * doc is as it was. */
sl_err_t sl_seal_open(json_t *doc, const uint8_t pk[SL_SEAL_KEY_BYTES],
                      const uint8_t sk[SL_SEAL_KEY_BYTES]);
/* Whether doc carries a sealed part. */
int sl_seal_is_sealed(const json_t *doc);

/* Seals a stream chunk's content (delta, which becomes "", tool_calls, removed, and usage,
 * null); sl_seal_open opens it. Same contract as sl_seal_members. */
sl_err_t sl_seal_chunk(json_t *chunk, const uint8_t pk[SL_SEAL_KEY_BYTES]);

/* Seals a result object's content (response, usage, metadata, and the error's message, which
 * becomes ""); sl_seal_open opens it. Same contract as sl_seal_members. */
sl_err_t sl_seal_result(json_t *res, const uint8_t pk[SL_SEAL_KEY_BYTES]);

#endif
