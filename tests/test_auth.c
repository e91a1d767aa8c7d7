/* test_auth.c - the keys each daemon holds (common/auth.h): made once at a first start, even when
 * two processes of one role start together. */
#include <check.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "auth.h"
#include "config.h"
#include "kafka.h"
#include "sign.h"
#include "util.h"

static char dir[64];

static sl_config_t *config_in_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/sluice-test-auth-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[160], key[160], text[2048], err[512] = "";
    snprintf(key, sizeof key, "%s/provider.key", dir);
    FILE *f = fopen(key, "w");
    ck_assert_ptr_nonnull(f);
    fputs("any-key\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/sluice.json", dir);
    snprintf(text, sizeof text,
             "{\"signing\": {\"dispatcher_secret_key_file\": \"%s/d.key\","
             "              \"dispatcher_public_key_file\": \"%s/d.pub\"},"
             " \"deployments\": [{\"name\": \"d\", \"base_url\": \"http://127.0.0.1:1/v1\","
             " \"model\": \"m\", \"api_key_file\": \"%s\"}],"
             " \"routes\": [{\"name\": \"r\", \"deployments\": [\"d\"]}]}",
             dir, dir, key);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    sl_config_t *cfg = NULL;
    ck_assert_msg(sl_config_load(path, &cfg, err, sizeof err) == SL_OK, "%s", err);
    return cfg;
}

static char *read_text(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    return sl_read_file(path, 4096, &text, &len) == SL_OK ? text : NULL;
}

/* Regression: two dispatchers started together each made a key pair, the second overwriting
 * the first's files, so one signed with a key the public file did not hold and every message
 * of it was refused (seen in e2e_shards). Another process holds the lock while this one
 * starts: it waits, finds the key that process made, and keeps it. */
START_TEST(a_key_made_by_a_process_starting_alongside_is_kept)
{
    sl_config_t *cfg = config_in_dir();
    char sk[200], pk[200];
    snprintf(sk, sizeof sk, "%s/d.key", dir);
    snprintf(pk, sizeof pk, "%s/d.pub", dir);
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t other = fork();
    ck_assert_int_ge(other, 0);
    if (other == 0) {
        /* the other process: takes the lock, makes the pair a little later, lets go */
        int fd = sl_auth_key_lock(sk);
        if (write(ready[1], "x", 1) != 1)
            _exit(3);
        usleep(200 * 1000);
        int rc = sl_sign_keygen(sk, pk) == SL_OK ? 0 : 2;
        sl_auth_key_unlock(fd);
        _exit(fd >= 0 ? rc : 4);
    }
    char c;
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    sl_signer_t *s = NULL;
    char err[512] = "";
    ck_assert_msg(sl_auth_signer(cfg, SL_ROLE_DISPATCHER, &s, err, sizeof err) == SL_OK, "%s",
                  err);
    int status = 0;
    ck_assert_int_eq(waitpid(other, &status, 0), other);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* the pair on disk is the other's, and this process signs with it */
    char *pub = read_text(pk);
    ck_assert_ptr_nonnull(pub);
    uint8_t pkb[32];
    ck_assert_int_eq(sl_key_file_read(pk, pkb, sizeof pkb), SL_OK);
    char sig[SL_SIG_B64_LEN];
    sl_signer_sign(s, "m", 1, sig);
    unsigned char raw[crypto_sign_BYTES];
    size_t rawlen = 0;
    ck_assert_int_eq(sodium_base642bin(raw, sizeof raw, sig, strlen(sig), NULL, &rawlen, NULL,
                                       sodium_base64_VARIANT_ORIGINAL),
                     0);
    ck_assert_int_eq(crypto_sign_verify_detached(raw, (const unsigned char *)"m", 1, pkb), 0);
    free(pub);
    sl_signer_free(s);
    sl_kafka_sign_as(NULL, SL_ROLE_DISPATCHER);
    sl_config_free(cfg);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    if (sl_crypto_init() != SL_OK)
        return EXIT_FAILURE;
    Suite *s = suite_create("auth");
    TCase *tc = tcase_create("keys");
    tcase_add_test(tc, a_key_made_by_a_process_starting_alongside_is_kept);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
