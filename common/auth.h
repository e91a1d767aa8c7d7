/* auth.h - which role writes which internal topic, and the keys each daemon holds for it.
 *
 * The one idea: a daemon signs everything it produces with its own role's secret key
 * (sl_kafka_sign_as, set up by sl_auth_signer), and checks everything it consumes with the
 * PUBLIC keys of the roles that write that topic (sl_auth_writers, sl_auth_keyring), so no
 * daemon holds anything that lets it write as another role. On the two topics the scheduler
 * alone reads (jobs, usage) the writer puts a pair MAC instead (sl_kafka_mac_topics), which only
 * it and the scheduler can make. A refused message is never acted on: it is counted by topic and
 * reason and logged at a limited rate (sl_auth_refuse).
 */
#ifndef SL_AUTH_H
#define SL_AUTH_H

#include "config.h"
#include "err.h"
#include "metrics.h"
#include "sign.h"

/* The mask of roles that may write topic (0 for a topic no role of sluice writes, such as
 * the requests topics, written by tenants):
 *   jobs: ingest; dispatch, changelog: scheduler; usage, stream: dispatcher; results: scheduler and
 *   ingest (its rejections); a tenant's own results_topic and stream_topic as the shared
 *   ones. */
unsigned sl_auth_writers(const sl_config_t *cfg, const char *topic);

/* The secret and public key files of role in cfg (resolved paths, cap bytes each). */
void sl_auth_key_paths(const sl_config_t *cfg, sl_role_t role, char *secret, char *public_,
                       size_t cap);
/* The current and next public key files of role ("" when not configured), not resolved. */
void sl_auth_public_keys(const sl_config_t *cfg, sl_role_t role, const char **current,
                         const char **next);

/* Keys made at a first start are made under an exclusive lock on "<key_path>.lock" (it stays
 * there), so that two processes of one role started together do not each make their own and
 * sign with a key the other's public file does not hold. Returns the lock's descriptor, or -1
 * when it cannot be had (creation then goes on unlocked, as before); sl_auth_key_unlock
 * releases it. */
int sl_auth_key_lock(const char *key_path);
void sl_auth_key_unlock(int fd);

/* Loads role's signing key, first creating its key pair when the secret key file is missing
 * (a dev stack starts with none), and makes this process sign as role (sl_kafka_sign_as).
 * *out set only on success; the caller frees it with sl_signer_free after its last produce.
 * err names the file on failure. */
sl_err_t sl_auth_signer(const sl_config_t *cfg, sl_role_t role, sl_signer_t **out, char *err,
                        size_t errlen);

/* A keyring with the current and next public keys of every role in roles (a mask). Files not
 * there yet are read when first needed (sign.h). *out set only on success. */
sl_err_t sl_auth_keyring(const sl_config_t *cfg, unsigned roles, sl_keyring_t **out, char *err,
                         size_t errlen);

/* Loads ingest's job-id key, first creating the file when create and it is missing. */
sl_err_t sl_auth_job_id_key(const sl_config_t *cfg, int create, uint8_t key[SL_JOB_ID_KEY_BYTES],
                            char *err, size_t errlen);

/* Registers the counter family "<prefix>_messages_refused_total"{topic,reason} on m; returns
 * its id or -1 (sl_metrics_family). */
int sl_auth_refused_family(sl_metrics_t *m, const char *prefix);

/* Records one refused message: adds 1 to family {topic, reason} (m may be NULL) and logs it,
 * at most one line every 10 s per reason with the count held back. */
void sl_auth_refuse(sl_metrics_t *m, int family, const char *topic, sl_auth_t why);

#endif
