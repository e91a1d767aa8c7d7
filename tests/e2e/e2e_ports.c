/* e2e_ports - a daemon whose metrics or admin address is taken refuses to start, so a second
 * stack on one machine cannot silently serve (or read) the first one's endpoints; and one whose
 * consumer group the broker refuses for good stops rather than wait for partitions forever.
 *
 * Asserts, with a port held by another listener:
 *   - the scheduler, ingest and dispatcher given it as metrics address exit with status 2 and
 *     log why ("Address already in use", "not starting");
 *   - the scheduler given it as admin address exits with status 2 and logs why;
 *   - with free addresses the same scheduler starts, serves, and stops cleanly (status 0);
 *   - against a broker that answers every JoinGroup with INVALID_SESSION_TIMEOUT (what a real
 *     broker answers a session timeout outside its group.min/max.session.timeout.ms), the
 *     scheduler, ingest and dispatcher in consumer groups exit with status 2 and say which
 *     setting to change.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "sign.h"
#include "util.h"

static const char *write_config_as(const char *name, int metrics_port, int admin_port,
                                   const char *membership)
{
    const char *dir = h_tmpdir();
    char hk[65], ha[65];
    h_key_hash_hex("sk-e2e-ports-1", hk);
    h_key_hash_hex("admin-e2e-ports", ha);
    char *keyfile = strdup(h_write("provider.key", "e2e-provider-key\n"));
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"kafka\": {\"bootstrap_file\": \"%s/bootstrap\", \"membership\": \"%s\"},"
             " \"scheduler\": {\"db\": \"%s/sluice.db\", \"metrics_listen\": \"127.0.0.1:%d\","
             "                 \"admin_listen\": \"127.0.0.1:%d\"},"
             " \"ingest\": {\"metrics_listen\": \"127.0.0.1:0\"},"
             " \"dispatcher\": {\"metrics_listen\": \"127.0.0.1:0\"},"
             " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
             "               \"public_key_file\": \"%s/dispatch.pub\"},"
             " \"deployments\": [{\"name\": \"sim\", \"model\": \"m\", \"api_key_file\": \"%s\","
             "   \"base_url\": \"http://127.0.0.1:9/sim/v1\", \"limits\": {\"rpm\": 600}}],"
             " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"sim\"]}],"
             " \"tenants\": [{\"name\": \"t1\", \"tokens_per_min\": 1000000}],"
             " \"keys\": [{\"id\": \"k1\", \"tenant\": \"t1\", \"hash\": \"%s\"}],"
             " \"admin_keys\": [{\"id\": \"ops\", \"hash\": \"%s\", \"role\": \"admin\"}]}",
             dir, membership, dir, metrics_port, admin_port, dir, dir, keyfile, hk, ha);
    free(keyfile);
    return strdup(h_write(name, cfg));
}

static const char *write_config(const char *name, int metrics_port, int admin_port)
{
    return write_config_as(name, metrics_port, admin_port, "auto");
}

/* Listens on 127.0.0.1:port as "another process" would; returns the socket or exits. */
static int hold_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 8) != 0) {
        perror("hold_port");
        exit(2);
    }
    return fd;
}

/* Whether <tmpdir>/<logname>.log contains text. */
static int log_has(const char *logname, const char *text)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s.log", h_tmpdir(), logname);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    char line[8192];
    int found = 0;
    while (!found && fgets(line, sizeof line, f) != NULL)
        found = strstr(line, text) != NULL;
    fclose(f);
    return found;
}

static void expect_refusal(const char *prog, const char *logname, const char *cfg,
                           const char *const *args, const char *what)
{
    int status = h_run(prog, logname, cfg, args, 20000);
    int why = log_has(logname, "Address already in use") && log_has(logname, "not starting");
    printf("  %s with %s taken: exit status %d%s\n", prog, what, status, why ? ", says why" : "");
    h_check(status == 2 && why, "%s with its %s taken exits 2 and says why (status %d)", prog, what,
            status);
}

int main(void)
{
    sl_crypto_init();
    printf("e2e ports: a taken metrics or admin address stops the daemon\n");
    int taken = h_free_port();
    int held = hold_port(taken);
    int free_metrics = h_free_port();
    int free_admin = h_free_port();
    const char *metrics_taken = write_config("metrics-taken.json", taken, free_admin);
    const char *admin_taken = write_config("admin-taken.json", free_metrics, taken);
    const char *all_free = write_config("free.json", free_metrics, free_admin);

    char bootstrap[4200];
    snprintf(bootstrap, sizeof bootstrap, "%s/bootstrap", h_tmpdir());
    pid_t kafka = h_spawn("sluice-devkafka", "devkafka", all_free, NULL);
    if (!h_wait_file(bootstrap, 20000)) {
        fprintf(stderr, "devkafka did not start\n");
        return 2;
    }

    expect_refusal("sluice-scheduler", "sched-metrics", metrics_taken, NULL, "metrics address");
    expect_refusal("sluice-scheduler", "sched-admin", admin_taken, NULL, "admin address");
    char taken_addr[32];
    snprintf(taken_addr, sizeof taken_addr, "127.0.0.1:%d", taken);
    const char *args[] = {"--metrics-listen", taken_addr, NULL};
    expect_refusal("sluice-ingest", "ingest-metrics", all_free, args, "metrics address");
    expect_refusal("sluice-dispatcher", "disp-metrics", all_free, args, "metrics address");

    pid_t sched = h_spawn("sluice-scheduler", "sched-free", all_free, NULL);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/healthz", free_metrics);
    char *health = NULL;
    for (int i = 0; i < 100 && health == NULL; i++) {
        usleep(100 * 1000);
        health = h_http_text(url);
    }
    h_check(health != NULL && h_alive(sched), "with free addresses the scheduler serves %s", url);
    free(health);
    int status = h_stop(sched, SIGTERM, 20000);
    h_check(status == 0, "and stops cleanly (status %d)", status);

    close(held);
    h_stop(kafka, SIGTERM, 10000);

    /* A broker that refuses the consumer group's session timeout: waiting cannot help. */
    const char *grouped = write_config_as("group.json", 0, 0, "group");
    const char *refuse[] = {"--refuse-joins", "26", NULL};
    unlink(bootstrap);
    kafka = h_spawn("sluice-devkafka", "devkafka-refusing", grouped, refuse);
    if (!h_wait_file(bootstrap, 20000)) {
        fprintf(stderr, "devkafka did not start\n");
        return 2;
    }
    const char *daemons[][2] = {{"sluice-scheduler", "sched-refused"},
                                {"sluice-ingest", "ingest-refused"},
                                {"sluice-dispatcher", "disp-refused"}};
    for (int i = 0; i < 3; i++) {
        double t0 = sl_mono_ms();
        int st = h_run(daemons[i][0], daemons[i][1], grouped, NULL, 30000);
        int why = log_has(daemons[i][1], "refuses this consumer group's session timeout") &&
                  log_has(daemons[i][1], "session.timeout.ms");
        printf("  %s refused its group: exit status %d after %.1f s%s\n", daemons[i][0], st,
               (sl_mono_ms() - t0) / 1000.0, why ? ", says which setting" : "");
        h_check(st == 2 && why,
                "%s stops with status 2 when the broker refuses its session timeout, naming "
                "the setting (status %d)",
                daemons[i][0], st);
    }
    h_stop(kafka, SIGTERM, 10000);
    free((char *)grouped);
    free((char *)metrics_taken);
    free((char *)admin_taken);
    free((char *)all_free);
    int status_code = h_summary("ports");
    h_cleanup(status_code != 0);
    return status_code;
}
