/* keys.c - `sluice hash-key`, `sluice keygen` (signing and box key pairs) and `sluice keys`:
 * the key material an operator puts in the config or beside it, made without a network.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "auth.h"
#include "cli.h"
#include "seal.h"
#include "sign.h"
#include "util.h"

static const char hash_key_usage[] =
    "usage: sluice hash-key [KEY]   (reads KEY from stdin when absent)\n";

static const char keygen_usage[] =
    "usage: sluice keygen [--box] SECRET_FILE PUBLIC_FILE\n"
    "\n"
    "Writes a new key pair as hex (the secret file mode 0600): an Ed25519 pair for signing\n"
    "dispatches, or with --box an X25519 box pair for sealed results: put the public key in\n"
    "a tenant's result_public_key (or its file in result_public_key_file) and give the secret\n"
    "file to `sluice results --secret-key`.\n";

static const char keys_usage[] =
    "usage: sluice keys [--config FILE]\n"
    "\nCreates every key file the config's \"signing\" section names that is missing: the\n"
    "Ed25519 pairs of the scheduler (secret_key_file, public_key_file), ingest\n"
    "(ingest_secret_key_file, ingest_public_key_file) and the dispatcher\n"
    "(dispatcher_secret_key_file, dispatcher_public_key_file), and ingest's job-id key\n"
    "(job_id_key_file). Existing files are kept. Prints one line per file. Give each host only\n"
    "the secret key of its role and the public keys of the others (docs/security.md).\n";

int sl_cli_hash_key(sl_proc_opts_t *opts, int argc, char **argv)
{
    const sl_proc_cmdline_t cl = {"sluice hash-key", hash_key_usage, NULL, SL_PROC_ARGS};
    int npos = 0;
    int rc = sl_proc_args(&cl, argc, argv, opts, &npos);
    if (rc != SL_PROC_GO_ON)
        return rc;
    rc = 2;
    char buf[1024];
    const char *key = npos > 0 ? argv[1] : NULL;
    if (key == NULL && fgets(buf, sizeof buf, stdin) != NULL) {
        buf[strcspn(buf, "\r\n")] = '\0';
        key = buf;
    }
    if (key == NULL || strlen(key) < 8) {
        fprintf(stderr, "sluice hash-key: give a key of at least 8 characters\n");
    } else if (sl_crypto_init() == SL_OK) {
        uint8_t hash[32];
        char hex[65];
        sl_keyhash(key, strlen(key), hash);
        sl_hex_encode(hash, sizeof hash, hex);
        puts(hex);
        rc = 0;
    }
    return rc;
}

int sl_cli_keygen(sl_proc_opts_t *opts, int argc, char **argv)
{
    int box = 0;
    const sl_proc_opt_t own[] = {{"box", NULL, &box}, {NULL, NULL, NULL}};
    const sl_proc_cmdline_t cl = {"sluice keygen", keygen_usage, own, SL_PROC_ARGS};
    int npos = 0;
    int rc = sl_proc_args(&cl, argc, argv, opts, &npos);
    if (rc != SL_PROC_GO_ON)
        return rc;
    if (npos != 2 || sl_crypto_init() != SL_OK) {
        fputs(keygen_usage, stderr);
        return 2;
    }
    if ((box ? sl_seal_keygen(argv[1], argv[2]) : sl_sign_keygen(argv[1], argv[2])) != SL_OK) {
        fprintf(stderr, "sluice keygen: cannot write the key files\n");
        return 1;
    }
    return 0;
}

int sl_cli_keys(sl_proc_opts_t *opts, int argc, char **argv)
{
    const sl_proc_cmdline_t cl = {"sluice keys", keys_usage, NULL, SL_PROC_NO_ARGS};
    int rc = sl_proc_args(&cl, argc, argv, opts, NULL);
    if (rc != SL_PROC_GO_ON)
        return rc;
    if (sl_crypto_init() != SL_OK)
        return 1;
    sl_config_t *cfg = sl_cli_config(opts);
    rc = 0;
    for (int r = 0; r < SL_ROLE_COUNT && rc == 0; r++) {
        char sk[1024], pk[1024];
        sl_auth_key_paths(cfg, (sl_role_t)r, sk, pk, sizeof sk);
        FILE *f = fopen(sk, "r");
        if (f != NULL) {
            fclose(f);
            printf("%-10s kept     %s\n", sl_role_name((sl_role_t)r), sk);
        } else if (sl_sign_keygen(sk, pk) == SL_OK) {
            printf("%-10s created  %s and %s\n", sl_role_name((sl_role_t)r), sk, pk);
        } else {
            fprintf(stderr, "sluice keys: cannot write %s / %s\n", sk, pk);
            rc = 1;
        }
    }
    char path[1024];
    sl_resolve_path(cfg->signing_job_id_key_file, path, sizeof path);
    FILE *f = rc == 0 ? fopen(path, "r") : NULL;
    if (f != NULL) {
        fclose(f);
        printf("%-10s kept     %s\n", "job-id", path);
    } else if (rc == 0 && sl_job_id_keygen(path) == SL_OK) {
        printf("%-10s created  %s\n", "job-id", path);
    } else if (rc == 0) {
        fprintf(stderr, "sluice keys: cannot write %s\n", path);
        rc = 1;
    }
    sl_config_free(cfg);
    return rc;
}
