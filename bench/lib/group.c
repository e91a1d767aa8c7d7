/* group.c - see group.h. */
#include "group.h"

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
