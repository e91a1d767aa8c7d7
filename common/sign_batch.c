/* sign_batch.c - one Ed25519 signature over many messages: a hash tree (see sign.h). */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "sign.h"

enum { NODE = 32 };

/* Domain tags keep a leaf from passing for a node and a tree's root from passing for a single
 * message's digest. */
static const char leaf_tag[] = "sluice batch leaf v1";
static const char node_tag[] = "sluice batch node v1";
static const char root_tag[] = "sluice batch signature v1";

struct sl_batch {
    int n, added;
    uint8_t *nodes; /* every level, leaves first: level l starts at level_at[l] */
    int level_at[12], levels;
};

static void leaf_hash(const uint8_t digest[64], uint8_t out[NODE])
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, NODE);
    crypto_generichash_update(&st, (const unsigned char *)leaf_tag, sizeof leaf_tag);
    crypto_generichash_update(&st, digest, 64);
    crypto_generichash_final(&st, out, NODE);
}

static void node_hash(const uint8_t left[NODE], const uint8_t right[NODE], uint8_t out[NODE])
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, NODE);
    crypto_generichash_update(&st, (const unsigned char *)node_tag, sizeof node_tag);
    crypto_generichash_update(&st, left, NODE);
    crypto_generichash_update(&st, right, NODE);
    crypto_generichash_final(&st, out, NODE);
}

void sl_batch_signed_digest(sl_role_t role, int count, const uint8_t root[NODE], uint8_t out[64])
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 64);
    crypto_generichash_update(&st, (const unsigned char *)root_tag, sizeof root_tag);
    const char *rn = sl_role_name(role);
    crypto_generichash_update(&st, (const unsigned char *)rn, strlen(rn) + 1);
    uint8_t c[4] = {(uint8_t)(count >> 24), (uint8_t)(count >> 16), (uint8_t)(count >> 8),
                    (uint8_t)count};
    crypto_generichash_update(&st, c, sizeof c);
    crypto_generichash_update(&st, root, NODE);
    crypto_generichash_final(&st, out, 64);
}

sl_batch_t *sl_batch_new(int n)
{
    if (n < 2 || n > SL_BATCH_MAX)
        return NULL;
    sl_batch_t *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    /* A level of w nodes has ceil(w / 2) above it, up to the root. */
    b->n = n;
    int at = 0;
    for (int w = n;; w = (w + 1) / 2) {
        b->level_at[b->levels++] = at;
        at += w;
        if (w == 1)
            break;
    }
    b->nodes = malloc((size_t)at * NODE);
    if (b->nodes == NULL) {
        free(b);
        return NULL;
    }
    return b;
}

void sl_batch_free(sl_batch_t *b)
{
    if (b == NULL)
        return;
    free(b->nodes);
    free(b);
}

int sl_batch_add(sl_batch_t *b, sl_role_t role, const char *topic, const void *key, size_t key_len,
                 const void *value, size_t len)
{
    if (b->added >= b->n)
        return -1;
    uint8_t digest[64];
    sl_msg_digest(role, topic, key, key_len, value, len, digest);
    leaf_hash(digest, b->nodes + (size_t)b->added * NODE);
    return b->added++;
}

/* Width of level l (below the root) of b's tree. */
static int level_width(const sl_batch_t *b, int l)
{
    return b->level_at[l + 1] - b->level_at[l];
}

void sl_batch_sign(sl_batch_t *b, const sl_signer_t *s, sl_role_t role, char *sig_b64)
{
    /* A level's last node, when it has no partner, goes up unchanged. */
    for (int l = 0; l + 1 < b->levels; l++) {
        int w = level_width(b, l);
        const uint8_t *lo = b->nodes + (size_t)b->level_at[l] * NODE;
        uint8_t *up = b->nodes + (size_t)b->level_at[l + 1] * NODE;
        for (int i = 0; i < w; i += 2) {
            if (i + 1 < w)
                node_hash(lo + (size_t)i * NODE, lo + (size_t)(i + 1) * NODE,
                          up + (size_t)(i / 2) * NODE);
            else
                memcpy(up + (size_t)(i / 2) * NODE, lo + (size_t)i * NODE, NODE);
        }
    }
    uint8_t digest[64];
    sl_batch_signed_digest(role, b->n, b->nodes + (size_t)b->level_at[b->levels - 1] * NODE,
                           digest);
    sl_signer_sign(s, digest, sizeof digest, sig_b64);
}

size_t sl_batch_proof(const sl_batch_t *b, int i, uint8_t out[SL_BATCH_PROOF_MAX])
{
    out[0] = (uint8_t)(i >> 8);
    out[1] = (uint8_t)i;
    out[2] = (uint8_t)(b->n >> 8);
    out[3] = (uint8_t)b->n;
    size_t len = 4;
    for (int l = 0; l + 1 < b->levels; l++) {
        int w = level_width(b, l);
        int sib = i ^ 1;
        if (sib < w) {
            memcpy(out + len, b->nodes + (size_t)(b->level_at[l] + sib) * NODE, NODE);
            len += NODE;
        }
        i /= 2;
    }
    return len;
}

int sl_batch_root(const uint8_t digest[64], const uint8_t *proof, size_t len, uint8_t root[32],
                  int *count)
{
    if (proof == NULL || len < 4)
        return -1;
    int i = proof[0] << 8 | proof[1];
    int n = proof[2] << 8 | proof[3];
    if (n < 2 || n > SL_BATCH_MAX || i >= n)
        return -1;
    uint8_t cur[NODE];
    leaf_hash(digest, cur);
    size_t at = 4;
    for (int w = n; w > 1; w = (w + 1) / 2) {
        int sib = i ^ 1;
        if (sib < w) {
            if (at + NODE > len)
                return -1;
            if (i & 1)
                node_hash(proof + at, cur, cur);
            else
                node_hash(cur, proof + at, cur);
            at += NODE;
        }
        i /= 2;
    }
    if (at != len)
        return -1;
    memcpy(root, cur, NODE);
    *count = n;
    return 0;
}
