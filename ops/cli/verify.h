/* verify.h - what the CLI reads from the results topic is checked before it is believed.
 *
 * Results are written by the scheduler and, for rejections, by ingest, each signing with its
 * role's key (common/auth.h). When the scheduler's public key file (signing.public_key_file)
 * is there, `sluice submit --follow` and `sluice results` refuse a result that carries no
 * valid signature of one of those two roles, say so on stderr and count it; without that file
 * (a client far from the stack's keys) results are taken as they are, with a warning.
 */
#ifndef SL_CLI_VERIFY_H
#define SL_CLI_VERIFY_H

#include <librdkafka/rdkafka.h>

#include "config.h"
#include "sign.h"

typedef struct {
    const char *cmd;  /* "sluice submit", for the messages */
    sl_keyring_t *kr; /* NULL: nothing checked */
    unsigned roles;   /* who may write the results topic */
    long refused;
} sl_cli_verify_t;

/* Sets v up for cfg. Returns 0, or -1 when a key file is there but holds no key (said on
 * stderr). */
int sl_cli_verify_init(sl_cli_verify_t *v, const sl_config_t *cfg, const char *cmd);
/* Whether msg (from the results topic) may be believed; a refused one is counted, and the
 * first is named on stderr. */
int sl_cli_verify_accept(sl_cli_verify_t *v, const rd_kafka_message_t *msg);
/* Says on stderr how many results were refused (when any), and frees what v holds. */
void sl_cli_verify_done(sl_cli_verify_t *v);

#endif
