/* warmup.c - see warmup.h. */
#include "warmup.h"

#include <stdio.h>

#include "harness.h"
#include "request.h"
#include "result.h"
#include "util.h"

static void count_warm(void *arg, const b_result_t *r)
{
    int *done = arg;
    if (r->idem[0] == 'w')
        (*done)++;
}

int b_warm_up(rd_kafka_t *prod, rd_kafka_t *cons, const char *bench, int timeout_ms)
{
    for (int i = 0; i < B_WARM_JOBS; i++) {
        char idem[32];
        snprintf(idem, sizeof idem, "w%03d", i);
        b_request_produce(prod, bench, "warm", idem, "standard", 400, 16, 0);
    }
    rd_kafka_flush(prod, 10000);
    int done = 0;
    double until = sl_mono_ms() + timeout_ms;
    while (done < B_WARM_JOBS && sl_mono_ms() < until)
        b_result_poll(cons, 100, count_warm, &done);
    return done < B_WARM_JOBS ? -1 : 0;
}
