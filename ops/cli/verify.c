/* verify.c - signature checks of the results the CLI reads (see verify.h). */
#include "verify.h"

#include <stdio.h>

#include "auth.h"
#include "kafka.h"
#include "util.h"

int sl_cli_verify_init(sl_cli_verify_t *v, const sl_config_t *cfg, const char *cmd)
{
    *v = (sl_cli_verify_t){.cmd = cmd, .kr = NULL, .roles = 0, .refused = 0};
    char pk[1024];
    sl_resolve_path(cfg->signing_public_key_file, pk, sizeof pk);
    FILE *f = fopen(pk, "r");
    if (f == NULL) {
        fprintf(stderr,
                "%s: warning: no scheduler public key at %s; results are not checked "
                "(signing.public_key_file)\n",
                cmd, pk);
        return 0;
    }
    fclose(f);
    char err[512] = "";
    if (sl_crypto_init() != SL_OK ||
        sl_auth_keyring(cfg, SL_ROLE_BIT(SL_ROLE_SCHEDULER) | SL_ROLE_BIT(SL_ROLE_INGEST), &v->kr,
                        err, sizeof err) != SL_OK) {
        fprintf(stderr, "%s: %s\n", cmd, err[0] != '\0' ? err : "cannot set up signatures");
        return -1;
    }
    v->roles = sl_auth_writers(cfg, cfg->kafka.topic_results);
    return 0;
}

int sl_cli_verify_accept(sl_cli_verify_t *v, const rd_kafka_message_t *msg)
{
    if (v->kr == NULL)
        return 1;
    sl_auth_t why = sl_kafka_verify(v->kr, v->roles, msg);
    if (why == SL_AUTH_OK)
        return 1;
    if (v->refused++ == 0)
        fprintf(stderr,
                "%s: refused a result not signed by the scheduler or ingest (%s, partition %d "
                "offset %lld); it is not shown\n",
                v->cmd, sl_auth_name(why), (int)msg->partition, (long long)msg->offset);
    return 0;
}

void sl_cli_verify_done(sl_cli_verify_t *v)
{
    if (v->refused > 0)
        fprintf(stderr, "%s: refused %ld results that were not signed by the scheduler or ingest\n",
                v->cmd, v->refused);
    sl_keyring_free(v->kr);
    v->kr = NULL;
}
