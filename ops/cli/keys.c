/* keys.c - `sluice hash-key` and `sluice keygen` (signing and box key pairs): the key material
 * an operator puts in the config, made without the config or a network.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

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
