/* auth.c - roles, topics and the keys each daemon holds (see auth.h). */
#include "auth.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "kafka.h"
#include "log.h"
#include "util.h"

unsigned sl_auth_writers(const sl_config_t *cfg, const char *topic)
{
    if (sl_is_jobs_topic(&cfg->kafka, topic))
        return SL_ROLE_BIT(SL_ROLE_INGEST);
    if (strcmp(topic, cfg->kafka.topic_dispatch) == 0 ||
        strcmp(topic, cfg->kafka.topic_changelog) == 0 ||
        strcmp(topic, cfg->kafka.topic_capacity) == 0)
        return SL_ROLE_BIT(SL_ROLE_SCHEDULER);
    if (strcmp(topic, cfg->kafka.topic_usage) == 0 || strcmp(topic, cfg->kafka.topic_stream) == 0)
        return SL_ROLE_BIT(SL_ROLE_DISPATCHER);
    if (strcmp(topic, cfg->kafka.topic_results) == 0)
        return SL_ROLE_BIT(SL_ROLE_SCHEDULER) | SL_ROLE_BIT(SL_ROLE_INGEST);
    /* A tenant's own results and stream topics have the writers of the shared ones. */
    for (int t = 0; t < cfg->ntenants; t++) {
        const char *results = cfg->tenants[t].results_topic;
        const char *stream = cfg->tenants[t].stream_topic;
        if (results != NULL && strcmp(topic, results) == 0)
            return SL_ROLE_BIT(SL_ROLE_SCHEDULER) | SL_ROLE_BIT(SL_ROLE_INGEST);
        if (stream != NULL && strcmp(topic, stream) == 0)
            return SL_ROLE_BIT(SL_ROLE_DISPATCHER);
    }
    return 0;
}

void sl_auth_public_keys(const sl_config_t *cfg, sl_role_t role, const char **current,
                         const char **next)
{
    switch (role) {
    case SL_ROLE_INGEST:
        *current = cfg->signing_ingest_public_key_file;
        *next = cfg->signing_ingest_next_public_key_file;
        break;
    case SL_ROLE_DISPATCHER:
        *current = cfg->signing_dispatcher_public_key_file;
        *next = cfg->signing_dispatcher_next_public_key_file;
        break;
    default:
        *current = cfg->signing_public_key_file;
        *next = cfg->signing_next_public_key_file;
        break;
    }
}

void sl_auth_key_paths(const sl_config_t *cfg, sl_role_t role, char *secret, char *public_,
                       size_t cap)
{
    const char *sk = role == SL_ROLE_INGEST       ? cfg->signing_ingest_secret_key_file
                     : role == SL_ROLE_DISPATCHER ? cfg->signing_dispatcher_secret_key_file
                                                  : cfg->signing_secret_key_file;
    const char *pk = NULL, *next = NULL;
    sl_auth_public_keys(cfg, role, &pk, &next);
    sl_resolve_path(sk, secret, cap);
    sl_resolve_path(pk, public_, cap);
}

static int file_exists(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    fclose(f);
    return 1;
}

int sl_auth_key_lock(const char *key_path)
{
    char lock[1100];
    snprintf(lock, sizeof lock, "%s.lock", key_path);
    int fd = open(lock, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

void sl_auth_key_unlock(int fd)
{
    if (fd >= 0)
        close(fd);
}

sl_err_t sl_auth_signer(const sl_config_t *cfg, sl_role_t role, sl_signer_t **out, char *err,
                        size_t errlen)
{
    *out = NULL;
    char sk[1024], pk[1024];
    sl_auth_key_paths(cfg, role, sk, pk, sizeof sk);
    int lock = sl_auth_key_lock(sk);
    if (!file_exists(sk)) {
        if (sl_sign_keygen(sk, pk) != SL_OK) {
            sl_auth_key_unlock(lock);
            snprintf(err, errlen, "cannot create the %s signing keys %s / %s", sl_role_name(role),
                     sk, pk);
            return SL_EIO;
        }
        sl_info("created the %s signing key pair: %s (secret), %s (public)", sl_role_name(role), sk,
                pk);
    }
    sl_auth_key_unlock(lock);
    sl_signer_t *s = NULL;
    if (sl_signer_load(sk, &s) != SL_OK) {
        snprintf(err, errlen, "cannot load the %s signing key %s", sl_role_name(role), sk);
        return SL_ECRYPTO;
    }
    sl_kafka_sign_as(s, role);
    *out = s;
    return SL_OK;
}

sl_err_t sl_auth_keyring(const sl_config_t *cfg, unsigned roles, sl_keyring_t **out, char *err,
                         size_t errlen)
{
    *out = NULL;
    sl_keyring_t *kr = sl_keyring_new();
    if (kr == NULL)
        return SL_ENOMEM;
    for (int r = 0; r < SL_ROLE_COUNT; r++) {
        if ((roles & SL_ROLE_BIT(r)) == 0)
            continue;
        const char *files[2];
        sl_auth_public_keys(cfg, (sl_role_t)r, &files[0], &files[1]);
        for (int k = 0; k < 2; k++) {
            if (files[k] == NULL || files[k][0] == '\0')
                continue;
            char path[1024];
            sl_resolve_path(files[k], path, sizeof path);
            sl_err_t rc = sl_keyring_add(kr, (sl_role_t)r, path);
            if (rc != SL_OK) {
                snprintf(err, errlen, "%s public key %s: %s", sl_role_name((sl_role_t)r), path,
                         rc == SL_ECRYPTO ? "not a key" : sl_strerror(rc));
                sl_keyring_free(kr);
                return rc;
            }
        }
    }
    *out = kr;
    return SL_OK;
}

sl_err_t sl_auth_job_id_key(const sl_config_t *cfg, int create, uint8_t key[SL_JOB_ID_KEY_BYTES],
                            char *err, size_t errlen)
{
    char path[1024];
    sl_resolve_path(cfg->signing_job_id_key_file, path, sizeof path);
    int lock = create ? sl_auth_key_lock(path) : -1;
    if (create && !file_exists(path)) {
        if (sl_job_id_keygen(path) != SL_OK) {
            sl_auth_key_unlock(lock);
            snprintf(err, errlen, "cannot create the job id key %s", path);
            return SL_EIO;
        }
        sl_info("created the job id key %s", path);
    }
    sl_auth_key_unlock(lock);
    if (sl_job_id_key_load(path, key) != SL_OK) {
        snprintf(err, errlen, "cannot load the job id key %s", path);
        return SL_ECRYPTO;
    }
    return SL_OK;
}

int sl_auth_refused_family(sl_metrics_t *m, const char *prefix)
{
    static const char *const labels[] = {"topic", "reason", NULL};
    char name[128];
    snprintf(name, sizeof name, "%s_messages_refused_total", prefix);
    return sl_metrics_family(m, SL_METRIC_COUNTER, name,
                             "Messages of internal topics refused unread, by topic and reason: "
                             "unsigned, unknown_signer, wrong_role (a role that does not write "
                             "the topic), bad_signature (forged, tampered or moved).",
                             labels, NULL, 0);
}

void sl_auth_refuse(sl_metrics_t *m, int family, const char *topic, sl_auth_t why)
{
    if (m != NULL && family >= 0) {
        const char *v[] = {topic, sl_auth_name(why)};
        sl_metrics_add(m, family, v, 1);
    }
    /* One call site per reason, so a flood of one kind does not hide the first of another. */
    switch (why) {
    case SL_AUTH_UNSIGNED:
        sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN, "refused an unsigned message on %s", topic);
        break;
    case SL_AUTH_UNKNOWN_SIGNER:
        sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN,
                     "refused a message on %s: no known signer, or no public key of it", topic);
        break;
    case SL_AUTH_WRONG_ROLE:
        sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN,
                     "refused a message on %s signed by a role that does not write it", topic);
        break;
    default:
        sl_log_every(SL_LOG_REPEAT_MS, SL_LOG_WARN,
                     "refused a message on %s: its signature does not match", topic);
        break;
    }
}
