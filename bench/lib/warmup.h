/* warmup.h - the jobs a benchmark sends before it measures: a few small ones from tenant
 * "warm", whose results say that every consumer group of the fresh stack has settled. */
#ifndef SL_BENCH_WARMUP_H
#define SL_BENCH_WARMUP_H

#include <librdkafka/rdkafka.h>

enum { B_WARM_JOBS = 10 };

/* Produces B_WARM_JOBS standard jobs "w000".. of tenant "warm" (API key as b_request_api_key
 * gives it for bench) through prod, and reads cons until all their results are in, for at
 * most timeout_ms. Returns 0 when they all came, -1 when not. */
int b_warm_up(rd_kafka_t *prod, rd_kafka_t *cons, const char *bench, int timeout_ms);

#endif
