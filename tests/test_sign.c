/* test_sign.c - behaviour of the libsodium pieces (common/sign.h): key files, Ed25519
 * signatures of messages by role, keyrings with rotation, keyed job ids, and API-key hashing.
 */
#include <check.h>
#include <ftw.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/sign.h"
#include "../common/util.h"

/* ---- Helpers ---------------------------------------------------------------------------- */

static char dir[64];
static char sk_path[128], pk_path[128];

static void make_keys(void)
{
    snprintf(dir, sizeof dir, "/tmp/sluice-test-sign-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(sk_path, sizeof sk_path, "%s/dispatch.key", dir);
    snprintf(pk_path, sizeof pk_path, "%s/dispatch.pub", dir);
    ck_assert_int_eq(sl_sign_keygen(sk_path, pk_path), SL_OK);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void remove_dir(void)
{
    if (dir[0] != '\0')
        nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    dir[0] = '\0';
}

static sl_signer_t *signer(void)
{
    sl_signer_t *s = NULL;
    ck_assert_int_eq(sl_signer_load(sk_path, &s), SL_OK);
    ck_assert_ptr_nonnull(s);
    return s;
}

static sl_verifier_t *verifier(void)
{
    sl_verifier_t *v = NULL;
    ck_assert_int_eq(sl_verifier_load(pk_path, &v), SL_OK);
    ck_assert_ptr_nonnull(v);
    return v;
}

static const char MSG[] =
    "{\"v\":1,\"job_id\":\"0123abcd\",\"attempt\":1,\"deployment\":\"sim-a\"}";

static sl_err_t check_sig(const sl_verifier_t *v, const char *msg, size_t len, const char *sig)
{
    return sl_verifier_check(v, msg, len, sig, strlen(sig));
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* ---- Key files -------------------------------------------------------------------------- */

START_TEST(keygen_writes_hex_key_files_with_a_private_secret)
{
    make_keys();
    struct stat st;
    ck_assert_int_eq(stat(sk_path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    ck_assert_int_eq(stat(pk_path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0077 & ~0044, 0); /* public: nobody else may write */

    char buf[256];
    FILE *f = fopen(sk_path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(buf, sizeof buf, f));
    fclose(f);
    size_t n = strcspn(buf, "\n");
    ck_assert_uint_eq(n, 2 * crypto_sign_SECRETKEYBYTES);
    ck_assert_uint_eq(strspn(buf, "0123456789abcdef"), n);

    f = fopen(pk_path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(buf, sizeof buf, f));
    fclose(f);
    n = strcspn(buf, "\n");
    ck_assert_uint_eq(n, 2 * crypto_sign_PUBLICKEYBYTES);
    ck_assert_uint_eq(strspn(buf, "0123456789abcdef"), n);
    remove_dir();
}
END_TEST

START_TEST(keygen_makes_a_new_pair_each_time)
{
    make_keys();
    char first[256], second[256];
    FILE *f = fopen(pk_path, "r");
    ck_assert_ptr_nonnull(fgets(first, sizeof first, f));
    fclose(f);
    ck_assert_int_eq(sl_sign_keygen(sk_path, pk_path), SL_OK);
    f = fopen(pk_path, "r");
    ck_assert_ptr_nonnull(fgets(second, sizeof second, f));
    fclose(f);
    ck_assert_str_ne(first, second);
    remove_dir();
}
END_TEST

START_TEST(keygen_into_a_missing_folder_fails)
{
    ck_assert_int_ne(sl_sign_keygen("/nonexistent-sluice-dir/k", "/nonexistent-sluice-dir/p"),
                     SL_OK);
}
END_TEST

START_TEST(loading_a_missing_or_malformed_key_fails)
{
    make_keys();
    char path[160];
    sl_signer_t *s = (sl_signer_t *)0x1;
    sl_verifier_t *v = (sl_verifier_t *)0x1;
    snprintf(path, sizeof path, "%s/absent", dir);
    ck_assert_int_ne(sl_signer_load(path, &s), SL_OK);
    ck_assert_ptr_null(s);
    ck_assert_int_ne(sl_verifier_load(path, &v), SL_OK);
    ck_assert_ptr_null(v);

    snprintf(path, sizeof path, "%s/garbage", dir);
    write_text(path, "not hex at all\n");
    s = (sl_signer_t *)0x1;
    ck_assert_int_ne(sl_signer_load(path, &s), SL_OK);
    ck_assert_ptr_null(s);
    v = (sl_verifier_t *)0x1;
    ck_assert_int_ne(sl_verifier_load(path, &v), SL_OK);
    ck_assert_ptr_null(v);

    /* A key of the wrong length: the public key file is not a secret key, and vice versa. */
    s = (sl_signer_t *)0x1;
    ck_assert_int_ne(sl_signer_load(pk_path, &s), SL_OK);
    ck_assert_ptr_null(s);
    v = (sl_verifier_t *)0x1;
    ck_assert_int_ne(sl_verifier_load(sk_path, &v), SL_OK);
    ck_assert_ptr_null(v);
    remove_dir();
}
END_TEST

/* ---- Signatures ------------------------------------------------------------------------- */

START_TEST(signature_round_trips)
{
    make_keys();
    sl_signer_t *s = signer();
    sl_verifier_t *v = verifier();
    char sig[SL_SIG_B64_LEN];
    memset(sig, 'x', sizeof sig);
    sl_signer_sign(s, MSG, strlen(MSG), sig);
    ck_assert_uint_eq(strlen(sig), SL_SIG_B64_LEN - 1);
    ck_assert_ptr_null(strchr(sig, '\n'));
    ck_assert_int_eq(check_sig(v, MSG, strlen(MSG), sig), SL_OK);
    /* Ed25519 is deterministic: the same message gives the same signature. */
    char again[SL_SIG_B64_LEN];
    sl_signer_sign(s, MSG, strlen(MSG), again);
    ck_assert_str_eq(sig, again);
    /* The empty message can be signed too. */
    sl_signer_sign(s, "", 0, again);
    ck_assert_int_eq(check_sig(v, "", 0, again), SL_OK);
    ck_assert_int_eq(check_sig(v, MSG, strlen(MSG), again), SL_ECRYPTO);
    sl_signer_free(s);
    sl_verifier_free(v);
    remove_dir();
}
END_TEST

START_TEST(signature_need_not_be_nul_terminated)
{
    make_keys();
    sl_signer_t *s = signer();
    sl_verifier_t *v = verifier();
    char sig[SL_SIG_B64_LEN];
    sl_signer_sign(s, MSG, strlen(MSG), sig);
    /* As a Kafka header value arrives: a length, no NUL. */
    char header[SL_SIG_B64_LEN + 8];
    memcpy(header, sig, SL_SIG_B64_LEN - 1);
    memcpy(header + SL_SIG_B64_LEN - 1, "JUNKJUNK", 8);
    ck_assert_int_eq(sl_verifier_check(v, MSG, strlen(MSG), header, SL_SIG_B64_LEN - 1), SL_OK);
    /* ... but the junk is not part of a valid signature. */
    ck_assert_int_eq(sl_verifier_check(v, MSG, strlen(MSG), header, sizeof header), SL_ECRYPTO);
    sl_signer_free(s);
    sl_verifier_free(v);
    remove_dir();
}
END_TEST

START_TEST(flipped_byte_in_message_fails)
{
    make_keys();
    sl_signer_t *s = signer();
    sl_verifier_t *v = verifier();
    char sig[SL_SIG_B64_LEN];
    sl_signer_sign(s, MSG, strlen(MSG), sig);
    char msg[sizeof MSG];
    for (size_t i = 0; i < strlen(MSG); i++) {
        memcpy(msg, MSG, sizeof MSG);
        msg[i] ^= 0x01;
        if (check_sig(v, msg, strlen(MSG), sig) != SL_ECRYPTO)
            ck_abort_msg("a message changed at byte %zu still verifies", i);
    }
    /* A truncated or extended message fails too. */
    ck_assert_int_eq(check_sig(v, MSG, strlen(MSG) - 1, sig), SL_ECRYPTO);
    ck_assert_int_eq(check_sig(v, MSG, sizeof MSG, sig), SL_ECRYPTO); /* with the NUL */
    sl_signer_free(s);
    sl_verifier_free(v);
    remove_dir();
}
END_TEST

START_TEST(flipped_byte_in_signature_fails)
{
    make_keys();
    sl_signer_t *s = signer();
    sl_verifier_t *v = verifier();
    char sig[SL_SIG_B64_LEN];
    sl_signer_sign(s, MSG, strlen(MSG), sig);
    unsigned char bin[crypto_sign_BYTES];
    size_t bin_len = 0;
    ck_assert_int_eq(sodium_base642bin(bin, sizeof bin, sig, strlen(sig), NULL, &bin_len, NULL,
                                       sodium_base64_VARIANT_ORIGINAL),
                     0);
    ck_assert_uint_eq(bin_len, sizeof bin);
    for (size_t i = 0; i < sizeof bin; i++) {
        for (int bit = 0; bit < 8; bit += 7) {
            unsigned char bad[crypto_sign_BYTES];
            char bad_b64[SL_SIG_B64_LEN];
            memcpy(bad, bin, sizeof bad);
            bad[i] ^= (unsigned char)(1u << bit);
            sodium_bin2base64(bad_b64, sizeof bad_b64, bad, sizeof bad,
                              sodium_base64_VARIANT_ORIGINAL);
            if (check_sig(v, MSG, strlen(MSG), bad_b64) != SL_ECRYPTO)
                ck_abort_msg("a signature changed at byte %zu bit %d still verifies", i, bit);
        }
    }
    sl_signer_free(s);
    sl_verifier_free(v);
    remove_dir();
}
END_TEST

START_TEST(signature_from_another_key_fails)
{
    make_keys();
    sl_signer_t *s = signer();
    char other_sk[160], other_pk[160];
    snprintf(other_sk, sizeof other_sk, "%s/other.key", dir);
    snprintf(other_pk, sizeof other_pk, "%s/other.pub", dir);
    ck_assert_int_eq(sl_sign_keygen(other_sk, other_pk), SL_OK);
    sl_verifier_t *other = NULL;
    ck_assert_int_eq(sl_verifier_load(other_pk, &other), SL_OK);
    char sig[SL_SIG_B64_LEN];
    sl_signer_sign(s, MSG, strlen(MSG), sig);
    ck_assert_int_eq(check_sig(other, MSG, strlen(MSG), sig), SL_ECRYPTO);
    sl_signer_free(s);
    sl_verifier_free(other);
    remove_dir();
}
END_TEST

START_TEST(garbage_base64_fails)
{
    make_keys();
    sl_signer_t *s = signer();
    sl_verifier_t *v = verifier();
    char sig[SL_SIG_B64_LEN];
    sl_signer_sign(s, MSG, strlen(MSG), sig);

    ck_assert_int_eq(check_sig(v, MSG, strlen(MSG), ""), SL_ECRYPTO);
    ck_assert_int_eq(check_sig(v, MSG, strlen(MSG), "!!!!not base64!!!!"), SL_ECRYPTO);
    ck_assert_int_eq(check_sig(v, MSG, strlen(MSG), "AAAA"), SL_ECRYPTO); /* valid, too short */

    /* 88 characters of valid base64 that decode to zeros: the right length, a wrong signature. */
    char zeros[SL_SIG_B64_LEN];
    unsigned char zero_bin[crypto_sign_BYTES] = {0};
    sodium_bin2base64(zeros, sizeof zeros, zero_bin, sizeof zero_bin,
                      sodium_base64_VARIANT_ORIGINAL);
    ck_assert_int_eq(check_sig(v, MSG, strlen(MSG), zeros), SL_ECRYPTO);

    /* The real signature, cut short, with a stray character, or in the URL-safe alphabet. */
    ck_assert_int_eq(sl_verifier_check(v, MSG, strlen(MSG), sig, strlen(sig) - 4), SL_ECRYPTO);
    char bad[SL_SIG_B64_LEN];
    memcpy(bad, sig, sizeof bad);
    bad[10] = '*';
    ck_assert_int_eq(check_sig(v, MSG, strlen(MSG), bad), SL_ECRYPTO);
    char longer[SL_SIG_B64_LEN + 4];
    snprintf(longer, sizeof longer, "%sAAAA", sig);
    ck_assert_int_eq(check_sig(v, MSG, strlen(MSG), longer), SL_ECRYPTO);
    sl_signer_free(s);
    sl_verifier_free(v);
    remove_dir();
}
END_TEST

START_TEST(free_of_null_is_a_no_op)
{
    sl_signer_free(NULL);
    sl_verifier_free(NULL);
}
END_TEST

/* ---- API-key hashing -------------------------------------------------------------------- */

START_TEST(keyhash_is_deterministic_and_differs_between_keys)
{
    const char *a = "sk-acme-demo-0001";
    const char *b = "sk-acme-demo-0002";
    uint8_t h1[32], h2[32], h3[32];
    sl_keyhash(a, strlen(a), h1);
    sl_keyhash(a, strlen(a), h2);
    ck_assert_mem_eq(h1, h2, 32);
    sl_keyhash(b, strlen(b), h3);
    ck_assert(memcmp(h1, h3, 32) != 0);
    /* len is honoured: a prefix hashes like the shorter key, not like the full one. */
    sl_keyhash("sk-acme-demo-00019999", strlen(a), h2);
    ck_assert_mem_eq(h1, h2, 32);
    sl_keyhash(a, strlen(a) - 1, h2);
    ck_assert(memcmp(h1, h2, 32) != 0);
    /* It is a keyed hash, not a plain BLAKE2b of the key. */
    uint8_t plain[32];
    crypto_generichash(plain, 32, (const unsigned char *)a, strlen(a), NULL, 0);
    ck_assert(memcmp(h1, plain, 32) != 0);
}
END_TEST

START_TEST(keyhash_matches_the_example_config)
{
    /* The hash in examples/sluice.json for the demo key: the config format is stable. */
    static const uint8_t want[32] = {0x0b, 0xf5, 0x8a, 0x74, 0x19, 0xd8, 0x50, 0xb2,
                                     0x59, 0x63, 0x1d, 0x1b, 0xb3, 0x5e, 0x14, 0xe2,
                                     0xb7, 0x6d, 0xa5, 0x13, 0xab, 0xc6, 0xe8, 0x75,
                                     0x21, 0x18, 0xe9, 0xaf, 0x0b, 0x2c, 0xb5, 0x92};
    const char *a = "sk-acme-demo-0001";
    uint8_t h[32];
    sl_keyhash(a, strlen(a), h);
    ck_assert_mem_eq(h, want, 32);
}
END_TEST

START_TEST(keyhash_of_many_keys_has_no_collisions)
{
    enum { COUNT = 2000 };
    uint8_t(*h)[32] = malloc(COUNT * sizeof *h);
    ck_assert_ptr_nonnull(h);
    char key[32];
    for (int i = 0; i < COUNT; i++) {
        snprintf(key, sizeof key, "sk-test-%d", i);
        sl_keyhash(key, strlen(key), h[i]);
    }
    for (int i = 0; i < COUNT; i++) {
        for (int j = i + 1; j < COUNT; j++) {
            if (memcmp(h[i], h[j], 32) == 0)
                ck_abort_msg("keys %d and %d hash alike", i, j);
        }
    }
    free(h);
}
END_TEST

/* ---- Message signatures by role (sl_msg_sign, keyrings) ------------------------------------ */

/* A second pair in dir, for another role. */
static void other_pair(const char *name, char *sk, char *pk, size_t cap)
{
    snprintf(sk, cap, "%s/%s.key", dir, name);
    snprintf(pk, cap, "%s/%s.pub", dir, name);
    ck_assert_int_eq(sl_sign_keygen(sk, pk), SL_OK);
}

static sl_auth_t check_msg(sl_keyring_t *kr, unsigned roles, const char *topic, const char *key,
                           const char *value, const char *signer, const char *sig)
{
    return sl_keyring_check(kr, roles, topic, key, key != NULL ? strlen(key) : 0, value,
                            strlen(value), signer, signer != NULL ? strlen(signer) : 0, sig,
                            sig != NULL ? strlen(sig) : 0);
}

START_TEST(message_signature_binds_role_topic_key_and_value)
{
    make_keys();
    sl_signer_t *s = signer();
    sl_keyring_t *kr = sl_keyring_new();
    ck_assert_int_eq(sl_keyring_add(kr, SL_ROLE_DISPATCHER, pk_path), SL_OK);
    const unsigned usage = SL_ROLE_BIT(SL_ROLE_DISPATCHER);
    char sig[SL_SIG_B64_LEN];
    sl_msg_sign(s, SL_ROLE_DISPATCHER, "sluice.usage", "job-1", 5, MSG, strlen(MSG), sig);
    ck_assert_int_eq(check_msg(kr, usage, "sluice.usage", "job-1", MSG, "dispatcher", sig),
                     SL_AUTH_OK);
    /* Moved to another topic or key, or a byte of the value changed: refused. */
    ck_assert_int_eq(check_msg(kr, usage, "sluice.stream", "job-1", MSG, "dispatcher", sig),
                     SL_AUTH_BAD_SIGNATURE);
    ck_assert_int_eq(check_msg(kr, usage, "sluice.usage", "job-2", MSG, "dispatcher", sig),
                     SL_AUTH_BAD_SIGNATURE);
    ck_assert_int_eq(check_msg(kr, usage, "sluice.usage", NULL, MSG, "dispatcher", sig),
                     SL_AUTH_BAD_SIGNATURE);
    char tampered[sizeof MSG];
    memcpy(tampered, MSG, sizeof MSG);
    tampered[10] ^= 1;
    ck_assert_int_eq(check_msg(kr, usage, "sluice.usage", "job-1", tampered, "dispatcher", sig),
                     SL_AUTH_BAD_SIGNATURE);
    /* The same key claimed as another role's: the role is in the signed bytes. */
    ck_assert_int_eq(sl_keyring_add(kr, SL_ROLE_INGEST, pk_path), SL_OK);
    ck_assert_int_eq(check_msg(kr, usage | SL_ROLE_BIT(SL_ROLE_INGEST), "sluice.usage", "job-1",
                               MSG, "ingest", sig),
                     SL_AUTH_BAD_SIGNATURE);
    sl_keyring_free(kr);
    sl_signer_free(s);
    remove_dir();
}
END_TEST

/* The changelog's MAC: bound to topic, key and value, under a key only the secret key's holder
 * derives (another key pair, or another context, gives another key). */
START_TEST(a_mac_binds_topic_key_and_value_under_a_derived_key)
{
    make_keys();
    sl_signer_t *s = signer();
    uint8_t k[SL_MAC_KEY_BYTES], again[SL_MAC_KEY_BYTES], other[SL_MAC_KEY_BYTES];
    sl_signer_derive(s, "sluice scheduler changelog v1", k);
    sl_signer_derive(s, "sluice scheduler changelog v1", again);
    ck_assert_mem_eq(k, again, sizeof k);
    sl_signer_derive(s, "another use", other);
    ck_assert(memcmp(k, other, sizeof k) != 0);
    uint8_t mac[SL_MAC_BYTES];
    sl_mac(k, "sluice.changelog", "acme", 4, MSG, strlen(MSG), mac);
    ck_assert(sl_mac_check(k, "sluice.changelog", "acme", 4, MSG, strlen(MSG), mac));
    ck_assert(!sl_mac_check(other, "sluice.changelog", "acme", 4, MSG, strlen(MSG), mac));
    ck_assert(!sl_mac_check(k, "sluice.jobs", "acme", 4, MSG, strlen(MSG), mac));
    ck_assert(!sl_mac_check(k, "sluice.changelog", "acmf", 4, MSG, strlen(MSG), mac));
    ck_assert(!sl_mac_check(k, "sluice.changelog", "acme", 4, MSG, strlen(MSG) - 1, mac));
    mac[0] ^= 1;
    ck_assert(!sl_mac_check(k, "sluice.changelog", "acme", 4, MSG, strlen(MSG), mac));
    sl_signer_free(s);
    /* another scheduler key pair derives another key */
    remove_dir();
    make_keys();
    s = signer();
    sl_signer_derive(s, "sluice scheduler changelog v1", again);
    ck_assert(memcmp(k, again, sizeof k) != 0);
    sl_signer_free(s);
    remove_dir();
}
END_TEST

/* A signature header is the signer's 88 base64 characters exactly: libsodium 1.0.18 decodes
 * every byte from 0x80 up as '/', so a header with a '/' replaced by such a byte decoded to the
 * same signature and verified (found by fuzz_verify). Any other spelling is refused: padding
 * cut, bytes added, characters outside the alphabet. */
START_TEST(only_the_signers_own_spelling_of_a_signature_verifies)
{
    make_keys();
    sl_signer_t *s = signer();
    sl_keyring_t *kr = sl_keyring_new();
    ck_assert_int_eq(sl_keyring_add(kr, SL_ROLE_DISPATCHER, pk_path), SL_OK);
    const unsigned usage = SL_ROLE_BIT(SL_ROLE_DISPATCHER);
    sl_verifier_t *v = verifier();
    /* sign until the base64 holds a '/' (each signature is new only for another message) */
    char sig[SL_SIG_B64_LEN], msg[sizeof MSG + 16];
    int n = 0;
    do {
        snprintf(msg, sizeof msg, "%s %d", MSG, n++);
        sl_msg_sign(s, SL_ROLE_DISPATCHER, "sluice.usage", "job-1", 5, msg, strlen(msg), sig);
    } while (strchr(sig, '/') == NULL && n < 1000);
    ck_assert_ptr_nonnull(strchr(sig, '/'));
    ck_assert_int_eq(check_msg(kr, usage, "sluice.usage", "job-1", msg, "dispatcher", sig),
                     SL_AUTH_OK);
    size_t slash = (size_t)(strchr(sig, '/') - sig);
    for (int c = 0x80; c <= 0xff; c++) {
        char bad[SL_SIG_B64_LEN];
        memcpy(bad, sig, sizeof bad);
        bad[slash] = (char)c;
        ck_assert_msg(check_msg(kr, usage, "sluice.usage", "job-1", msg, "dispatcher", bad) ==
                          SL_AUTH_BAD_SIGNATURE,
                      "a header with '/' spelled 0x%02x verifies", c);
    }
    char cut[SL_SIG_B64_LEN];
    memcpy(cut, sig, sizeof cut);
    cut[strlen(cut) - 1] = '\0'; /* one '=' of the padding less */
    ck_assert_int_eq(check_msg(kr, usage, "sluice.usage", "job-1", msg, "dispatcher", cut),
                     SL_AUTH_BAD_SIGNATURE);
    char longer[SL_SIG_B64_LEN + 2];
    snprintf(longer, sizeof longer, "%s\n", sig);
    ck_assert_int_eq(check_msg(kr, usage, "sluice.usage", "job-1", msg, "dispatcher", longer),
                     SL_AUTH_BAD_SIGNATURE);
    /* the value-only verifier reads signatures the same way */
    char plain[SL_SIG_B64_LEN];
    sl_signer_sign(s, msg, strlen(msg), plain);
    ck_assert_int_eq(check_sig(v, msg, strlen(msg), plain), SL_OK);
    char *at = strchr(plain, '/') != NULL ? strchr(plain, '/') : strchr(plain, '+');
    if (at != NULL) {
        *at = (char)0xff;
        ck_assert_int_eq(check_sig(v, msg, strlen(msg), plain), SL_ECRYPTO);
    }
    sl_verifier_free(v);
    sl_keyring_free(kr);
    sl_signer_free(s);
    remove_dir();
}
END_TEST

START_TEST(unsigned_unknown_and_wrong_role_messages_are_refused)
{
    make_keys();
    sl_signer_t *s = signer();
    sl_keyring_t *kr = sl_keyring_new();
    ck_assert_int_eq(sl_keyring_add(kr, SL_ROLE_SCHEDULER, pk_path), SL_OK);
    char sig[SL_SIG_B64_LEN];
    sl_msg_sign(s, SL_ROLE_SCHEDULER, "sluice.jobs", "acme", 4, MSG, strlen(MSG), sig);
    const unsigned jobs = SL_ROLE_BIT(SL_ROLE_INGEST);
    ck_assert_int_eq(check_msg(kr, jobs, "sluice.jobs", "acme", MSG, NULL, NULL), SL_AUTH_UNSIGNED);
    ck_assert_int_eq(check_msg(kr, jobs, "sluice.jobs", "acme", MSG, NULL, sig),
                     SL_AUTH_UNKNOWN_SIGNER);
    ck_assert_int_eq(check_msg(kr, jobs, "sluice.jobs", "acme", MSG, "root", sig),
                     SL_AUTH_UNKNOWN_SIGNER);
    /* A genuine scheduler signature, on a topic only ingest writes. */
    ck_assert_int_eq(check_msg(kr, jobs, "sluice.jobs", "acme", MSG, "scheduler", sig),
                     SL_AUTH_WRONG_ROLE);
    /* Ingest may write it, but this keyring holds no ingest key. */
    ck_assert_int_eq(check_msg(kr, jobs, "sluice.jobs", "acme", MSG, "ingest", sig),
                     SL_AUTH_UNKNOWN_SIGNER);
    ck_assert_int_eq(check_msg(kr, SL_ROLE_BIT(SL_ROLE_SCHEDULER), "sluice.jobs", "acme", MSG,
                               "scheduler", "not base64!"),
                     SL_AUTH_BAD_SIGNATURE);
    ck_assert_str_eq(sl_auth_name(SL_AUTH_WRONG_ROLE), "wrong_role");
    sl_keyring_free(kr);
    sl_signer_free(s);
    remove_dir();
}
END_TEST

START_TEST(a_signature_by_another_key_of_the_role_is_refused)
{
    make_keys();
    char sk2[128], pk2[128];
    other_pair("attacker", sk2, pk2, sizeof sk2);
    sl_signer_t *forger = NULL;
    ck_assert_int_eq(sl_signer_load(sk2, &forger), SL_OK);
    sl_keyring_t *kr = sl_keyring_new();
    ck_assert_int_eq(sl_keyring_add(kr, SL_ROLE_INGEST, pk_path), SL_OK);
    char sig[SL_SIG_B64_LEN];
    sl_msg_sign(forger, SL_ROLE_INGEST, "sluice.jobs", "acme", 4, MSG, strlen(MSG), sig);
    ck_assert_int_eq(
        check_msg(kr, SL_ROLE_BIT(SL_ROLE_INGEST), "sluice.jobs", "acme", MSG, "ingest", sig),
        SL_AUTH_BAD_SIGNATURE);
    sl_keyring_free(kr);
    sl_signer_free(forger);
    remove_dir();
}
END_TEST

START_TEST(rotation_accepts_the_current_and_the_next_key)
{
    make_keys();
    char sk2[128], pk2[128], sk3[128], pk3[128];
    other_pair("next", sk2, pk2, sizeof sk2);
    other_pair("third", sk3, pk3, sizeof sk3);
    sl_signer_t *cur = signer(), *next = NULL;
    ck_assert_int_eq(sl_signer_load(sk2, &next), SL_OK);
    sl_keyring_t *kr = sl_keyring_new();
    ck_assert_int_eq(sl_keyring_add(kr, SL_ROLE_SCHEDULER, pk_path), SL_OK);
    ck_assert_int_eq(sl_keyring_add(kr, SL_ROLE_SCHEDULER, pk2), SL_OK);
    ck_assert_int_eq(sl_keyring_add(kr, SL_ROLE_SCHEDULER, pk3), SL_EINVAL);
    const unsigned d = SL_ROLE_BIT(SL_ROLE_SCHEDULER);
    char a[SL_SIG_B64_LEN], b[SL_SIG_B64_LEN];
    sl_msg_sign(cur, SL_ROLE_SCHEDULER, "sluice.dispatch", "j", 1, MSG, strlen(MSG), a);
    sl_msg_sign(next, SL_ROLE_SCHEDULER, "sluice.dispatch", "j", 1, MSG, strlen(MSG), b);
    ck_assert_int_eq(check_msg(kr, d, "sluice.dispatch", "j", MSG, "scheduler", a), SL_AUTH_OK);
    ck_assert_int_eq(check_msg(kr, d, "sluice.dispatch", "j", MSG, "scheduler", b), SL_AUTH_OK);
    sl_keyring_free(kr);
    sl_signer_free(cur);
    sl_signer_free(next);
    remove_dir();
}
END_TEST

START_TEST(a_public_key_written_later_is_read_when_first_needed)
{
    make_keys();
    char sk2[128], pk2[128];
    snprintf(sk2, sizeof sk2, "%s/late.key", dir);
    snprintf(pk2, sizeof pk2, "%s/late.pub", dir);
    sl_keyring_t *kr = sl_keyring_new();
    ck_assert_int_eq(sl_keyring_add(kr, SL_ROLE_INGEST, pk2), SL_OK);
    ck_assert_int_eq(sl_keyring_has(kr, SL_ROLE_INGEST), 0);
    ck_assert_int_eq(sl_sign_keygen(sk2, pk2), SL_OK);
    ck_assert_int_eq(sl_keyring_has(kr, SL_ROLE_INGEST), 1);
    /* A file that is there but is no key is an error at once. */
    write_text(pk2, "nonsense\n");
    ck_assert_int_eq(sl_keyring_add(kr, SL_ROLE_DISPATCHER, pk2), SL_ECRYPTO);
    sl_keyring_free(kr);
    sl_keyring_free(NULL);
    remove_dir();
}
END_TEST

START_TEST(job_id_key_files_round_trip_and_differ)
{
    make_keys();
    char p1[128], p2[128];
    snprintf(p1, sizeof p1, "%s/job-id-1.key", dir);
    snprintf(p2, sizeof p2, "%s/job-id-2.key", dir);
    ck_assert_int_eq(sl_job_id_keygen(p1), SL_OK);
    ck_assert_int_eq(sl_job_id_keygen(p2), SL_OK);
    struct stat st;
    ck_assert_int_eq(stat(p1, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    uint8_t k1[SL_JOB_ID_KEY_BYTES], k2[SL_JOB_ID_KEY_BYTES];
    ck_assert_int_eq(sl_job_id_key_load(p1, k1), SL_OK);
    ck_assert_int_eq(sl_job_id_key_load(p2, k2), SL_OK);
    char a[33], b[33];
    sl_job_id(k1, "acme", "demo-1", a);
    sl_job_id(k2, "acme", "demo-1", b);
    ck_assert_uint_eq(strlen(a), 32);
    ck_assert_str_ne(a, b);
    /* Tenant and key do not bleed into each other. */
    sl_job_id(k1, "acm", "edemo-1", b);
    ck_assert_str_ne(a, b);
    remove_dir();
}
END_TEST

/* ---- Pair MACs (sl_pair_key, sl_keyring_take_macs, sl_keyring_writer_key) ---------------- */

/* The scheduler (dir's pair), ingest and a dispatcher, each with its own pair. */
typedef struct {
    char ing_sk[128], ing_pk[128], disp_sk[128], disp_pk[128];
    sl_signer_t *sched, *ing, *disp;
} trio_t;

static void trio_make(trio_t *t)
{
    make_keys();
    other_pair("ingest", t->ing_sk, t->ing_pk, sizeof t->ing_sk);
    other_pair("dispatcher", t->disp_sk, t->disp_pk, sizeof t->disp_sk);
    t->sched = signer();
    ck_assert_int_eq(sl_signer_load(t->ing_sk, &t->ing), SL_OK);
    ck_assert_int_eq(sl_signer_load(t->disp_sk, &t->disp), SL_OK);
}

static void trio_free(trio_t *t)
{
    sl_signer_free(t->sched);
    sl_signer_free(t->ing);
    sl_signer_free(t->disp);
    remove_dir();
}

static void read_pk(const char *path, uint8_t pk[32])
{
    ck_assert_int_eq(sl_key_file_read(path, pk, 32), SL_OK);
}

static sl_auth_t check_mac(sl_keyring_t *kr, unsigned roles, const char *topic, const char *key,
                           const char *value, const char *signer, const uint8_t *mac,
                           size_t mac_len)
{
    return sl_keyring_check_mac(kr, roles, topic, key, key != NULL ? strlen(key) : 0, value,
                                strlen(value), signer, signer != NULL ? strlen(signer) : 0, mac,
                                mac_len);
}

START_TEST(a_pair_key_is_the_same_at_both_ends_and_no_one_elses)
{
    trio_t t;
    trio_make(&t);
    uint8_t sched_pk[32], ing_pk[32], disp_pk[32];
    read_pk(pk_path, sched_pk);
    read_pk(t.ing_pk, ing_pk);
    read_pk(t.disp_pk, disp_pk);
    uint8_t w[SL_MAC_KEY_BYTES], r[SL_MAC_KEY_BYTES], other[SL_MAC_KEY_BYTES];
    ck_assert_int_eq(sl_pair_key(t.ing, sched_pk, 1, w), SL_OK);
    ck_assert_int_eq(sl_pair_key(t.sched, ing_pk, 0, r), SL_OK);
    ck_assert_mem_eq(w, r, sizeof w);
    /* The dispatchers' key with the scheduler is another. */
    ck_assert_int_eq(sl_pair_key(t.disp, sched_pk, 1, other), SL_OK);
    ck_assert_mem_ne(w, other, sizeof w);
    /* So is the same pair with the directions swapped (the scheduler writing to ingest). */
    ck_assert_int_eq(sl_pair_key(t.ing, sched_pk, 0, other), SL_OK);
    ck_assert_mem_ne(w, other, sizeof w);
    /* A public key that is no curve point, or of low order, makes no key. */
    uint8_t zero[32] = {0};
    ck_assert_int_eq(sl_pair_key(t.ing, zero, 1, other), SL_ECRYPTO);
    trio_free(&t);
}
END_TEST

START_TEST(the_scheduler_takes_a_pair_mac_from_its_writer_only)
{
    trio_t t;
    trio_make(&t);
    /* Writers: ingest and the dispatcher, each with the scheduler's public key. */
    sl_keyring_t *ing_kr = sl_keyring_new(), *disp_kr = sl_keyring_new();
    ck_assert_int_eq(sl_keyring_add(ing_kr, SL_ROLE_SCHEDULER, pk_path), SL_OK);
    ck_assert_int_eq(sl_keyring_add(disp_kr, SL_ROLE_SCHEDULER, pk_path), SL_OK);
    uint8_t ing_key[SL_MAC_KEY_BYTES], disp_key[SL_MAC_KEY_BYTES];
    ck_assert_int_eq(sl_keyring_writer_key(ing_kr, t.ing, SL_ROLE_SCHEDULER, ing_key), SL_OK);
    ck_assert_int_eq(sl_keyring_writer_key(disp_kr, t.disp, SL_ROLE_SCHEDULER, disp_key), SL_OK);
    /* The reader: the scheduler, with their public keys. */
    sl_keyring_t *kr = sl_keyring_new();
    ck_assert_int_eq(sl_keyring_add(kr, SL_ROLE_INGEST, t.ing_pk), SL_OK);
    ck_assert_int_eq(sl_keyring_add(kr, SL_ROLE_DISPATCHER, t.disp_pk), SL_OK);
    const unsigned jobs = SL_ROLE_BIT(SL_ROLE_INGEST), usage = SL_ROLE_BIT(SL_ROLE_DISPATCHER);
    uint8_t mac[SL_MAC_BYTES], disp_mac[SL_MAC_BYTES];
    sl_mac(ing_key, "sluice.jobs", "acme", 4, MSG, strlen(MSG), mac);
    sl_mac(disp_key, "sluice.jobs", "acme", 4, MSG, strlen(MSG), disp_mac);
    /* Before it takes MACs, a MAC is no signature. */
    ck_assert_int_eq(check_mac(kr, jobs, "sluice.jobs", "acme", MSG, "ingest", mac, sizeof mac),
                     SL_AUTH_UNSIGNED);
    sl_keyring_take_macs(kr, t.sched, NULL, jobs | usage);
    ck_assert_int_eq(check_mac(kr, jobs, "sluice.jobs", "acme", MSG, "ingest", mac, sizeof mac),
                     SL_AUTH_OK);
    /* Moved to another topic or key, a byte changed, cut short, or no MAC: refused. */
    ck_assert_int_eq(check_mac(kr, jobs, "sluice.jobz", "acme", MSG, "ingest", mac, sizeof mac),
                     SL_AUTH_BAD_SIGNATURE);
    ck_assert_int_eq(check_mac(kr, jobs, "sluice.jobs", "acmf", MSG, "ingest", mac, sizeof mac),
                     SL_AUTH_BAD_SIGNATURE);
    char tampered[sizeof MSG];
    memcpy(tampered, MSG, sizeof MSG);
    tampered[3] ^= 4;
    ck_assert_int_eq(
        check_mac(kr, jobs, "sluice.jobs", "acme", tampered, "ingest", mac, sizeof mac),
        SL_AUTH_BAD_SIGNATURE);
    ck_assert_int_eq(check_mac(kr, jobs, "sluice.jobs", "acme", MSG, "ingest", mac, 31),
                     SL_AUTH_BAD_SIGNATURE);
    ck_assert_int_eq(check_mac(kr, jobs, "sluice.jobs", "acme", MSG, "ingest", NULL, 0),
                     SL_AUTH_UNSIGNED);
    /* The dispatchers' key makes no job: claimed as ingest it is a bad MAC, as itself the
     * wrong role for the topic. */
    ck_assert_int_eq(
        check_mac(kr, jobs, "sluice.jobs", "acme", MSG, "ingest", disp_mac, sizeof disp_mac),
        SL_AUTH_BAD_SIGNATURE);
    ck_assert_int_eq(
        check_mac(kr, jobs, "sluice.jobs", "acme", MSG, "dispatcher", disp_mac, sizeof disp_mac),
        SL_AUTH_WRONG_ROLE);
    ck_assert_int_eq(check_mac(kr, jobs, "sluice.jobs", "acme", MSG, "nobody", mac, sizeof mac),
                     SL_AUTH_UNKNOWN_SIGNER);
    /* A role the keyring takes no MAC from (the scheduler's own, on the capacity topic). */
    const unsigned cap = SL_ROLE_BIT(SL_ROLE_SCHEDULER);
    ck_assert_int_eq(
        check_mac(kr, cap, "sluice.capacity", "acme", MSG, "scheduler", mac, sizeof mac),
        SL_AUTH_UNSIGNED);
    sl_keyring_free(kr);
    sl_keyring_free(ing_kr);
    sl_keyring_free(disp_kr);
    trio_free(&t);
}
END_TEST

START_TEST(pair_macs_follow_key_rotations_and_late_key_files)
{
    trio_t t;
    trio_make(&t);
    char nsk[128], npk[128];
    other_pair("ingest-next", nsk, npk, sizeof nsk);
    sl_signer_t *ing_next = NULL;
    ck_assert_int_eq(sl_signer_load(nsk, &ing_next), SL_OK);
    /* A writer whose reader's key file is not there yet has no key, then has it. */
    char late[160];
    snprintf(late, sizeof late, "%s/late.pub", dir);
    sl_keyring_t *w = sl_keyring_new();
    ck_assert_int_eq(sl_keyring_add(w, SL_ROLE_SCHEDULER, late), SL_OK);
    uint8_t key[SL_MAC_KEY_BYTES], key2[SL_MAC_KEY_BYTES];
    ck_assert_int_eq(sl_keyring_writer_key(w, t.ing, SL_ROLE_SCHEDULER, key), SL_ENOTFOUND);
    char *text = NULL;
    ck_assert_int_eq(sl_read_file(pk_path, 4096, &text, NULL), SL_OK);
    write_text(late, text);
    free(text);
    ck_assert_int_eq(sl_keyring_writer_key(w, t.ing, SL_ROLE_SCHEDULER, key), SL_OK);
    /* While the reader's key rotates (a next key configured), the writer signs instead. */
    char rsk[128], rpk[128];
    other_pair("sched-next", rsk, rpk, sizeof rsk);
    ck_assert_int_eq(sl_keyring_add(w, SL_ROLE_SCHEDULER, rpk), SL_OK);
    ck_assert_int_eq(sl_keyring_writer_key(w, t.ing, SL_ROLE_SCHEDULER, key2), SL_ENOTFOUND);
    /* While the writer's key rotates, the reader takes MACs of its current and next key. */
    sl_keyring_t *nw = sl_keyring_new();
    ck_assert_int_eq(sl_keyring_add(nw, SL_ROLE_SCHEDULER, pk_path), SL_OK);
    ck_assert_int_eq(sl_keyring_writer_key(nw, ing_next, SL_ROLE_SCHEDULER, key2), SL_OK);
    sl_keyring_t *r = sl_keyring_new();
    ck_assert_int_eq(sl_keyring_add(r, SL_ROLE_INGEST, t.ing_pk), SL_OK);
    ck_assert_int_eq(sl_keyring_add(r, SL_ROLE_INGEST, npk), SL_OK);
    sl_keyring_take_macs(r, t.sched, NULL, SL_ROLE_BIT(SL_ROLE_INGEST));
    const unsigned jobs = SL_ROLE_BIT(SL_ROLE_INGEST);
    uint8_t a[SL_MAC_BYTES], b[SL_MAC_BYTES];
    sl_mac(key, "sluice.jobs", "k", 1, MSG, strlen(MSG), a);
    sl_mac(key2, "sluice.jobs", "k", 1, MSG, strlen(MSG), b);
    ck_assert_int_eq(check_mac(r, jobs, "sluice.jobs", "k", MSG, "ingest", a, sizeof a),
                     SL_AUTH_OK);
    ck_assert_int_eq(check_mac(r, jobs, "sluice.jobs", "k", MSG, "ingest", b, sizeof b),
                     SL_AUTH_OK);
    /* A keyring that was a writer's first checks as a reader with the reader's side. */
    sl_keyring_take_macs(w, t.ing, NULL, SL_ROLE_BIT(SL_ROLE_SCHEDULER));
    ck_assert_int_eq(check_mac(w, SL_ROLE_BIT(SL_ROLE_SCHEDULER), "sluice.jobs", "k", MSG,
                               "scheduler", a, sizeof a),
                     SL_AUTH_BAD_SIGNATURE);
    sl_keyring_free(w);
    sl_keyring_free(nw);
    sl_keyring_free(r);
    sl_signer_free(ing_next);
    trio_free(&t);
}
END_TEST

START_TEST(a_scheduler_after_its_rotation_takes_macs_made_for_its_previous_key)
{
    trio_t t;
    trio_make(&t);
    /* Ingest made a MAC with the scheduler's old public key (dir's pair). */
    sl_keyring_t *w = sl_keyring_new();
    ck_assert_int_eq(sl_keyring_add(w, SL_ROLE_SCHEDULER, pk_path), SL_OK);
    uint8_t old_key[SL_MAC_KEY_BYTES], new_key[SL_MAC_KEY_BYTES];
    ck_assert_int_eq(sl_keyring_writer_key(w, t.ing, SL_ROLE_SCHEDULER, old_key), SL_OK);
    uint8_t mac[SL_MAC_BYTES];
    sl_mac(old_key, "sluice.jobs", "k", 1, MSG, strlen(MSG), mac);
    /* The scheduler restarts on its new key: without its previous key it refuses that MAC. */
    char nsk[128], npk[128];
    other_pair("sched-new", nsk, npk, sizeof nsk);
    sl_signer_t *fresh = NULL;
    ck_assert_int_eq(sl_signer_load(nsk, &fresh), SL_OK);
    sl_keyring_t *r = sl_keyring_new();
    ck_assert_int_eq(sl_keyring_add(r, SL_ROLE_INGEST, t.ing_pk), SL_OK);
    const unsigned jobs = SL_ROLE_BIT(SL_ROLE_INGEST);
    sl_keyring_take_macs(r, fresh, NULL, jobs);
    ck_assert_int_eq(check_mac(r, jobs, "sluice.jobs", "k", MSG, "ingest", mac, sizeof mac),
                     SL_AUTH_BAD_SIGNATURE);
    /* With signing.previous_secret_key_file it takes it, and the new key's MACs too. */
    sl_keyring_take_macs(r, fresh, t.sched, jobs);
    ck_assert_int_eq(check_mac(r, jobs, "sluice.jobs", "k", MSG, "ingest", mac, sizeof mac),
                     SL_AUTH_OK);
    sl_keyring_t *w2 = sl_keyring_new();
    ck_assert_int_eq(sl_keyring_add(w2, SL_ROLE_SCHEDULER, npk), SL_OK);
    ck_assert_int_eq(sl_keyring_writer_key(w2, t.ing, SL_ROLE_SCHEDULER, new_key), SL_OK);
    sl_mac(new_key, "sluice.jobs", "k", 1, MSG, strlen(MSG), mac);
    ck_assert_int_eq(check_mac(r, jobs, "sluice.jobs", "k", MSG, "ingest", mac, sizeof mac),
                     SL_AUTH_OK);
    /* The previous key opens nothing for a role the keyring takes no MAC from. */
    ck_assert_int_eq(check_mac(r, SL_ROLE_BIT(SL_ROLE_DISPATCHER), "sluice.usage", "k", MSG,
                               "dispatcher", mac, sizeof mac),
                     SL_AUTH_UNSIGNED);
    sl_keyring_free(w);
    sl_keyring_free(w2);
    sl_keyring_free(r);
    sl_signer_free(fresh);
    trio_free(&t);
}
END_TEST

/* ---- Batch signatures (sl_batch_*, sl_keyring_check_batch) ------------------------------- */

enum { BATCH_TEST_MAX = 80 };

/* n dispatches "job-<i>" signed as one batch by s; sig and proofs[i] (lens[i]) out. */
static void batch_make(const sl_signer_t *s, int n, char values[][32], char *sig,
                       uint8_t proofs[][SL_BATCH_PROOF_MAX], size_t *lens)
{
    sl_batch_t *b = sl_batch_new(n);
    ck_assert_ptr_nonnull(b);
    for (int i = 0; i < n; i++) {
        snprintf(values[i], 32, "{\"job\":%d}", i);
        ck_assert_int_eq(sl_batch_add(b, SL_ROLE_SCHEDULER, "sluice.dispatch", "k", 1, values[i],
                                      strlen(values[i])),
                         i);
    }
    ck_assert_int_eq(sl_batch_add(b, SL_ROLE_SCHEDULER, "sluice.dispatch", "k", 1, "x", 1), -1);
    sl_batch_sign(b, s, SL_ROLE_SCHEDULER, sig);
    for (int i = 0; i < n; i++)
        lens[i] = sl_batch_proof(b, i, proofs[i]);
    sl_batch_free(b);
}

static sl_auth_t check_in_batch(sl_keyring_t *kr, const char *topic, const char *value,
                                const char *signer, const char *sig, const uint8_t *proof,
                                size_t len)
{
    return sl_keyring_check_batch(kr, SL_ROLE_BIT(SL_ROLE_SCHEDULER), topic, "k", 1, value,
                                  strlen(value), signer, strlen(signer), sig, strlen(sig), proof,
                                  len);
}

START_TEST(every_message_of_a_batch_of_any_size_verifies_alone)
{
    make_keys();
    sl_signer_t *s = signer();
    static char values[BATCH_TEST_MAX][32];
    static uint8_t proofs[BATCH_TEST_MAX][SL_BATCH_PROOF_MAX];
    size_t lens[BATCH_TEST_MAX];
    ck_assert_ptr_null(sl_batch_new(1));
    ck_assert_ptr_null(sl_batch_new(SL_BATCH_MAX + 1));
    for (int n = 2; n <= BATCH_TEST_MAX; n++) {
        sl_keyring_t *kr = sl_keyring_new(); /* a fresh one: no batch checked before */
        ck_assert_int_eq(sl_keyring_add(kr, SL_ROLE_SCHEDULER, pk_path), SL_OK);
        char sig[SL_SIG_B64_LEN];
        batch_make(s, n, values, sig, proofs, lens);
        for (int i = n - 1; i >= 0; i--) {
            ck_assert_msg(check_in_batch(kr, "sluice.dispatch", values[i], "scheduler", sig,
                                         proofs[i], lens[i]) == SL_AUTH_OK,
                          "message %d of %d", i, n);
            /* A message checked as a single one with the batch's signature is refused. */
            ck_assert_int_eq(check_msg(kr, SL_ROLE_BIT(SL_ROLE_SCHEDULER), "sluice.dispatch", "k",
                                       values[i], "scheduler", sig),
                             SL_AUTH_BAD_SIGNATURE);
        }
        /* Another message's proof does not carry a message. */
        ck_assert_int_eq(
            check_in_batch(kr, "sluice.dispatch", values[0], "scheduler", sig, proofs[1], lens[1]),
            SL_AUTH_BAD_SIGNATURE);
        sl_keyring_free(kr);
    }
    sl_signer_free(s);
    remove_dir();
}
END_TEST

START_TEST(a_batch_proof_binds_message_place_and_size)
{
    make_keys();
    sl_signer_t *s = signer();
    sl_keyring_t *kr = sl_keyring_new();
    ck_assert_int_eq(sl_keyring_add(kr, SL_ROLE_SCHEDULER, pk_path), SL_OK);
    static char values[3][32];
    static uint8_t proofs[3][SL_BATCH_PROOF_MAX];
    size_t lens[3];
    char sig[SL_SIG_B64_LEN];
    batch_make(s, 3, values, sig, proofs, lens);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(
            check_in_batch(kr, "sluice.dispatch", values[i], "scheduler", sig, proofs[i], lens[i]),
            SL_AUTH_OK);
    /* Value, topic or role changed: refused, though the batch is known. */
    ck_assert_int_eq(
        check_in_batch(kr, "sluice.dispatch", "{\"job\":7}", "scheduler", sig, proofs[0], lens[0]),
        SL_AUTH_BAD_SIGNATURE);
    ck_assert_int_eq(
        check_in_batch(kr, "sluice.results", values[0], "scheduler", sig, proofs[0], lens[0]),
        SL_AUTH_BAD_SIGNATURE);
    ck_assert_int_eq(
        check_in_batch(kr, "sluice.dispatch", values[0], "ingest", sig, proofs[0], lens[0]),
        SL_AUTH_WRONG_ROLE);
    /* Every byte of the proof matters, and so does its length. */
    for (size_t at = 0; at < lens[0]; at++) {
        uint8_t p[SL_BATCH_PROOF_MAX];
        memcpy(p, proofs[0], lens[0]);
        p[at] ^= 0x01;
        ck_assert_msg(check_in_batch(kr, "sluice.dispatch", values[0], "scheduler", sig, p,
                                     lens[0]) != SL_AUTH_OK,
                      "byte %zu", at);
    }
    ck_assert_int_eq(
        check_in_batch(kr, "sluice.dispatch", values[0], "scheduler", sig, proofs[0], lens[0] - 1),
        SL_AUTH_BAD_SIGNATURE);
    ck_assert_int_eq(
        check_in_batch(kr, "sluice.dispatch", values[0], "scheduler", sig, proofs[0], 3),
        SL_AUTH_BAD_SIGNATURE);
    /* The last of 3 went up the tree unchanged: claimed as the second of 2, with the first
     * pair's node as its sibling, its way leads to the same root, but the signature covers
     * the batch's size, and the checked batch is remembered with it. */
    uint8_t two[4 + 32] = {0, 1, 0, 2};
    memcpy(two + 4, proofs[2] + 4, 32);
    ck_assert_uint_eq(lens[2], 4 + 32);
    ck_assert_int_eq(
        check_in_batch(kr, "sluice.dispatch", values[2], "scheduler", sig, two, sizeof two),
        SL_AUTH_BAD_SIGNATURE);
    /* The same messages signed by another key: the same root, not the same signature; a
     * batch checked before does not let it through. */
    char sk2[128], pk2[128];
    other_pair("other", sk2, pk2, sizeof sk2);
    sl_signer_t *other = NULL;
    ck_assert_int_eq(sl_signer_load(sk2, &other), SL_OK);
    char sig2[SL_SIG_B64_LEN];
    batch_make(other, 3, values, sig2, proofs, lens);
    ck_assert_int_eq(
        check_in_batch(kr, "sluice.dispatch", values[1], "scheduler", sig2, proofs[1], lens[1]),
        SL_AUTH_BAD_SIGNATURE);
    sl_signer_free(other);
    sl_keyring_free(kr);
    sl_signer_free(s);
    remove_dir();
}
END_TEST

static Suite *sign_suite(void)
{
    Suite *s = suite_create("sign");
    TCase *keys = tcase_create("keys");
    tcase_add_test(keys, keygen_writes_hex_key_files_with_a_private_secret);
    tcase_add_test(keys, keygen_makes_a_new_pair_each_time);
    tcase_add_test(keys, keygen_into_a_missing_folder_fails);
    tcase_add_test(keys, loading_a_missing_or_malformed_key_fails);
    suite_add_tcase(s, keys);

    TCase *sig = tcase_create("signatures");
    tcase_add_test(sig, signature_round_trips);
    tcase_add_test(sig, signature_need_not_be_nul_terminated);
    tcase_add_test(sig, flipped_byte_in_message_fails);
    tcase_add_test(sig, flipped_byte_in_signature_fails);
    tcase_add_test(sig, signature_from_another_key_fails);
    tcase_add_test(sig, garbage_base64_fails);
    tcase_add_test(sig, free_of_null_is_a_no_op);
    tcase_add_test(sig, message_signature_binds_role_topic_key_and_value);
    tcase_add_test(sig, only_the_signers_own_spelling_of_a_signature_verifies);
    tcase_add_test(sig, unsigned_unknown_and_wrong_role_messages_are_refused);
    tcase_add_test(sig, a_signature_by_another_key_of_the_role_is_refused);
    tcase_add_test(sig, rotation_accepts_the_current_and_the_next_key);
    tcase_add_test(sig, a_public_key_written_later_is_read_when_first_needed);
    tcase_add_test(sig, job_id_key_files_round_trip_and_differ);
    tcase_add_test(sig, a_mac_binds_topic_key_and_value_under_a_derived_key);
    tcase_add_test(sig, a_pair_key_is_the_same_at_both_ends_and_no_one_elses);
    tcase_add_test(sig, the_scheduler_takes_a_pair_mac_from_its_writer_only);
    tcase_add_test(sig, pair_macs_follow_key_rotations_and_late_key_files);
    tcase_add_test(sig, a_scheduler_after_its_rotation_takes_macs_made_for_its_previous_key);
    tcase_add_test(sig, every_message_of_a_batch_of_any_size_verifies_alone);
    tcase_add_test(sig, a_batch_proof_binds_message_place_and_size);
    suite_add_tcase(s, sig);

    TCase *hash = tcase_create("keyhash");
    tcase_add_test(hash, keyhash_is_deterministic_and_differs_between_keys);
    tcase_add_test(hash, keyhash_matches_the_example_config);
    tcase_add_test(hash, keyhash_of_many_keys_has_no_collisions);
    suite_add_tcase(s, hash);
    return s;
}

int main(void)
{
    if (sl_crypto_init() != SL_OK)
        return 1;
    SRunner *sr = srunner_create(sign_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
