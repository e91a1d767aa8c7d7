/* group.c - see group.h. */
#include "group.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

volatile sig_atomic_t b_child_group;
static volatile sig_atomic_t group_signal = SIGTERM;

static void forward_signal(int sig)
{
    if (b_child_group > 0)
        kill(-b_child_group, group_signal);
    signal(sig, SIG_DFL);
    raise(sig);
}

void b_forward_signals(int sig_to_group)
{
    group_signal = sig_to_group;
    signal(SIGINT, forward_signal);
    signal(SIGTERM, forward_signal);
}

static void write_all(int fd, const char *text, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (size_t)n;
    }
}

static json_t *broken(const json_t *head, const char *reason)
{
    json_t *res = json_deep_copy(head);
    json_object_set_new(res, "status", json_string("broken"));
    json_object_set_new(res, "reason", json_string(reason));
    return res;
}

/* Reads the child's report until it closes the pipe, the cap, or the deadline. Returns the
 * text (caller frees; NULL when out of memory); *timed_out says whether the deadline came. */
static char *read_report(int fd, int timeout_s, size_t cap, int *timed_out)
{
    char *text = malloc(cap + 1);
    size_t len = 0;
    *timed_out = 0;
    double deadline = sl_mono_ms() + 1000.0 * timeout_s;
    while (text != NULL && len < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN, .revents = 0};
        double left = deadline - sl_mono_ms();
        if (left <= 0) {
            *timed_out = 1;
            break;
        }
        int r = poll(&p, 1, left > 1000 ? 1000 : (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            continue;
        ssize_t n = read(fd, text + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    if (text != NULL)
        text[len] = '\0';
    return text;
}

json_t *b_run_in_child(void (*fn)(void *arg, json_t *report), void *arg, json_t *head,
                       json_t *parent_state, const char *label, int timeout_s, size_t result_cap)
{
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        return broken(head, "pipe failed");
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        close(fds[0]);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        double t0 = sl_mono_ms();
        fn(arg, head);
        json_object_set_new(head, "duration_s", json_real((sl_mono_ms() - t0) / 1000.0));
        char *text = json_dumps(head, JSON_COMPACT);
        if (text != NULL)
            write_all(fds[1], text, strlen(text));
        free(text);
        json_decref(head);
        json_decref(parent_state);
        close(fds[1]);
        exit(0);
    }
    close(fds[1]);
    if (pid < 0) {
        perror("fork");
        close(fds[0]);
        return broken(head, "fork failed");
    }
    setpgid(pid, pid); /* also here, so the group exists before we might signal it */
    b_child_group = pid;
    int timed_out = 0;
    char *text = read_report(fds[0], timeout_s, result_cap, &timed_out);
    close(fds[0]);
    if (timed_out) {
        printf("  %s: no report after %d s, stopping it\n", label, timeout_s);
        kill(-pid, SIGTERM);
        sleep(3);
        kill(-pid, SIGKILL);
    }
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    int exit_ok = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
    if (!exit_ok && !timed_out)
        kill(-pid, SIGTERM); /* the harness exits when a stack does not start: stop its rest */
    b_child_group = 0;
    json_t *res = text != NULL && exit_ok && !timed_out ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (res == NULL) {
        char why[128];
        snprintf(why, sizeof why,
                 timed_out ? "timed out" : "the run's process ended with status %d",
                 WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus));
        res = broken(head, why);
    }
    return res;
}
