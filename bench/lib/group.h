/* group.h - a benchmark runs each measurement in a child process with its own process group
 * (the child and the stack it starts), so that a runner stopped by SIGINT or SIGTERM stops all
 * of it, not only itself. */
#ifndef SL_BENCH_GROUP_H
#define SL_BENCH_GROUP_H

#include <jansson.h>
#include <signal.h>
#include <stddef.h>

/* The process group of the measurement in progress; 0 when there is none. */
extern volatile sig_atomic_t b_child_group;

/* Installs SIGINT and SIGTERM handlers that send sig_to_group to b_child_group's group (when
 * set), then end the runner with the signal it got. */
void b_forward_signals(int sig_to_group);

/* Runs fn(arg, report) in a child process with its own process group (b_child_group while it
 * runs) and returns the report it filled: head (the child's copy, which fn adds to) plus
 * "duration_s". When the child does not report within timeout_s (its group is then stopped),
 * ends badly, or reports more than result_cap bytes, returns a copy of head with "status":
 * "broken" and a "reason". label names the run in messages. The child releases head and
 * parent_state (the caller's JSON at the fork; may be NULL) before it exits, so a leak check in
 * it sees only its own. The caller frees the result and still owns head. */
json_t *b_run_in_child(void (*fn)(void *arg, json_t *report), void *arg, json_t *head,
                       json_t *parent_state, const char *label, int timeout_s, size_t result_cap);

#endif
