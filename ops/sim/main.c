/* main.c - sluice-sim: a provider simulator (OpenAI, Azure OpenAI, Anthropic, Gemini) for
 * development and tests.
 *
 * Wiring only: options, config, signals. The decisions live in admit.c and faults.c, the HTTP
 * server in http.c. Exit status: 0 after SIGTERM/SIGINT, 2 for bad options or config, 1 when the
 * server cannot start.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "http.h"
#include "log.h"
#include "sim.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: sluice-sim --config FILE [options]\n"
            "\n"
            "A provider simulator that enforces RPM/TPM (and ITPM/OTPM/RPD) the way the\n"
            "providers do, answers in the OpenAI, Azure, Anthropic or Gemini format, streams,\n"
            "and injects faults on request.\n"
            "\n"
            "  --config FILE      JSON config: minute_ms and deployments (see ops/sim/README.md)\n"
            "  --listen ADDR      numeric IP address or localhost (default 127.0.0.1)\n"
            "  --port N           port (default 8089; 0 = pick a free port)\n"
            "  --port-file PATH   write the bound port and a newline there once listening\n"
            "  --minute-ms N      length of a simulated minute in ms (overrides the config)\n"
            "  --log-level L      debug, info, warn or error (default info)\n"
            "  --help             print this and exit\n");
}

/* Parses a whole decimal number within [min, max]; returns 0 on success. */
static int parse_number(const char *text, long long min, long long max, long long *out)
{
    errno = 0;
    char *end = NULL;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Writes "port\n" to path through a temporary file, so a reader never sees half of it. */
static int write_port_file(const char *path, unsigned port)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return -1;
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return -1;
    int bad = fprintf(f, "%u\n", port) < 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        remove(tmp);
        return -1;
    }
    return 0;
}

/* Thousands of parked responses each hold a socket: take all the descriptors allowed. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int main(int argc, char **argv)
{
    enum { OPT_CONFIG = 1, OPT_LISTEN, OPT_PORT, OPT_PORT_FILE, OPT_MINUTE_MS, OPT_LOG_LEVEL };
    static const struct option options[] = {
        {"config", required_argument, NULL, OPT_CONFIG},
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"port", required_argument, NULL, OPT_PORT},
        {"port-file", required_argument, NULL, OPT_PORT_FILE},
        {"minute-ms", required_argument, NULL, OPT_MINUTE_MS},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *config_path = NULL;
    const char *listen_addr = "127.0.0.1";
    const char *port_file = NULL;
    long long port = 8089;
    long long minute_ms = -1; /* -1: keep the config's */
    int log_level = SL_LOG_INFO;

    sl_log_init("sluice-sim", SL_LOG_INFO);
    int opt;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
        case OPT_CONFIG:
            config_path = optarg;
            break;
        case OPT_LISTEN:
            listen_addr = optarg;
            break;
        case OPT_PORT:
            if (parse_number(optarg, 0, 65535, &port) != 0) {
                fprintf(stderr, "sluice-sim: --port must be 0..65535, got \"%s\"\n", optarg);
                return 2;
            }
            break;
        case OPT_PORT_FILE:
            port_file = optarg;
            break;
        case OPT_MINUTE_MS:
            if (parse_number(optarg, 1, 3600000, &minute_ms) != 0) {
                fprintf(stderr, "sluice-sim: --minute-ms must be 1..3600000, got \"%s\"\n", optarg);
                return 2;
            }
            break;
        case OPT_LOG_LEVEL:
            log_level = sl_log_level_parse(optarg);
            if (log_level < 0) {
                fprintf(stderr, "sluice-sim: --log-level must be debug|info|warn|error\n");
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "sluice-sim: unexpected argument \"%s\"\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (config_path == NULL) {
        fprintf(stderr, "sluice-sim: --config FILE is required\n");
        usage(stderr);
        return 2;
    }
    sl_log_init("sluice-sim", (sl_log_level_t)log_level);

    char err[512];
    sl_sim_config_t *cfg = NULL;
    if (sl_sim_config_load(config_path, &cfg, err, sizeof err) != SL_OK) {
        fprintf(stderr, "sluice-sim: config %s: %s\n", config_path, err);
        return 2;
    }
    if (minute_ms > 0)
        sl_sim_config_set_minute_ms(cfg, minute_ms);
    minute_ms = sl_sim_config_minute_ms(cfg);
    size_t n_deps = sl_sim_config_deployment_count(cfg);

    /* Signals are taken by sigwait below; block them before any thread starts so none of the
     * server's threads is interrupted by one. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();

    sl_sim_t *sim = NULL;
    if (sl_sim_new(cfg, 0 /* now_ms: the server's clock starts here */, &sim) != SL_OK) {
        fprintf(stderr, "sluice-sim: cannot create the simulator\n");
        sl_sim_config_free(cfg);
        return 1;
    }
    sl_sim_server_t *server = NULL;
    sl_err_t rc = sl_sim_server_start(sim, listen_addr, (uint16_t)port, &server);
    if (rc != SL_OK) {
        if (rc == SL_EINVAL)
            fprintf(stderr, "sluice-sim: --listen must be a numeric IP address, got \"%s\"\n",
                    listen_addr);
        else
            fprintf(stderr, "sluice-sim: cannot listen on %s port %lld: %s\n", listen_addr, port,
                    sl_strerror(rc));
        sl_sim_free(sim);
        return rc == SL_EINVAL ? 2 : 1;
    }
    unsigned bound = sl_sim_server_port(server);
    char host[128];
    snprintf(host, sizeof host, strchr(listen_addr, ':') != NULL ? "[%s]:%u" : "%s:%u", listen_addr,
             bound);
    sl_sim_set_host(sim, host);
    if (port_file != NULL && write_port_file(port_file, bound) != 0) {
        fprintf(stderr, "sluice-sim: cannot write --port-file %s\n", port_file);
        sl_sim_server_stop(server);
        sl_sim_free(sim);
        return 1;
    }
    sl_info("listening on %s port %u: %zu deployment(s), minute_ms=%lld", listen_addr, bound,
            n_deps, minute_ms);

    int sig = 0;
    sigwait(&stop_signals, &sig);
    sl_info("signal %d: stopping", sig);
    sl_sim_server_stop(server);
    sl_sim_free(sim);
    return 0;
}
