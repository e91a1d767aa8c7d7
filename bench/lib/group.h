/* group.h - a benchmark runs each measurement in a child process with its own process group
 * (the child and the stack it starts), so that a runner stopped by SIGINT or SIGTERM stops all
 * of it, not only itself. */
#ifndef SL_BENCH_GROUP_H
#define SL_BENCH_GROUP_H

#include <signal.h>

/* The process group of the measurement in progress; 0 when there is none. */
extern volatile sig_atomic_t b_child_group;

/* Installs SIGINT and SIGTERM handlers that send sig_to_group to b_child_group's group (when
 * set), then end the runner with the signal it got. */
void b_forward_signals(int sig_to_group);

#endif
