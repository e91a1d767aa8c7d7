/* http.h - the simulator's HTTP front: libmicrohttpd around sl_sim_handle().
 *
 * The idea to hold first: a 200 is decided as soon as its body has arrived but sent only after
 * the simulated generation time. Waiting connections are suspended (MHD_suspend_connection) and
 * sit in a min-heap of due times; one timer thread resumes each when it is due. So thousands of
 * slow responses in flight cost a heap entry each, not a thread each.
 *
 * The clock is CLOCK_MONOTONIC in milliseconds since sl_sim_server_start, passed to the
 * simulator as now_ms; create the simulator with now_ms 0.
 */
#ifndef SL_SIM_HTTP_H
#define SL_SIM_HTTP_H

#include <stdint.h>

#include "err.h"
#include "sim.h"

typedef struct sl_sim_server sl_sim_server_t;

/* Starts serving sim on listen_addr (a numeric IPv4 or IPv6 address, or "localhost" for
 * 127.0.0.1) and port (0 = any free port), with a few internal threads. sim is borrowed and must
 * outlive the server.
 * Returns SL_EINVAL (bad address), SL_EHTTP (cannot bind or start), SL_ENOMEM; *out is set only
 * on success and is stopped and freed with sl_sim_server_stop. */
sl_err_t sl_sim_server_start(sl_sim_t *sim, const char *listen_addr, uint16_t port,
                             sl_sim_server_t **out);

/* The port actually bound (useful with port 0). */
uint16_t sl_sim_server_port(const sl_sim_server_t *server);

/* Milliseconds since the server started: the now_ms it passes to the simulator. */
int64_t sl_sim_server_now_ms(const sl_sim_server_t *server);

/* Sends every waiting response at once, stops listening, joins all threads and frees server.
 * NULL is a no-op. */
void sl_sim_server_stop(sl_sim_server_t *server);

#endif
