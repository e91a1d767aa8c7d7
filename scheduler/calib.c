/* calib.c - learned output and input estimates (see calib.h). */
#include "calib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int32_t outputs[SL_CALIB_WINDOW]; /* a ring of the recent real outputs */
    float ratios[SL_CALIB_WINDOW];    /* and of each one over its job's max_tokens (0: none) */
    int n, next;
    int since_p95; /* outputs added since p95 was computed */
    int64_t p95;
    double ratio_p95;
} cell_t;

struct sl_calib {
    int nroutes, nclasses;
    cell_t *cells;
    double *factor; /* per route */
};

/* Step sizes of the input factor: up 19 times faster than down, so it settles where 95 % of the
 * real/estimated ratios lie below it (a stochastic quantile follower). */
static const double STEP_UP = 0.019, STEP_DOWN = 0.001;
enum { P95_EVERY = 16 };

sl_calib_t *sl_calib_new(int nroutes, int nclasses)
{
    sl_calib_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->nroutes = nroutes;
    c->nclasses = nclasses;
    c->cells = calloc((size_t)(nroutes * nclasses) + 1, sizeof *c->cells);
    c->factor = calloc((size_t)nroutes + 1, sizeof *c->factor);
    if (c->cells == NULL || c->factor == NULL) {
        sl_calib_free(c);
        return NULL;
    }
    for (int r = 0; r < nroutes; r++)
        c->factor[r] = 1.0;
    return c;
}

void sl_calib_free(sl_calib_t *c)
{
    if (c == NULL)
        return;
    free(c->cells);
    free(c->factor);
    free(c);
}

static cell_t *cell(const sl_calib_t *c, int route, int cls)
{
    if (route < 0 || route >= c->nroutes || cls < 0 || cls >= c->nclasses)
        return NULL;
    return &c->cells[route * c->nclasses + cls];
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void compute_p95(cell_t *k)
{
    int32_t sorted[SL_CALIB_WINDOW];
    float ratios[SL_CALIB_WINDOW];
    memcpy(sorted, k->outputs, (size_t)k->n * sizeof *sorted);
    memcpy(ratios, k->ratios, (size_t)k->n * sizeof *ratios);
    qsort(sorted, (size_t)k->n, sizeof *sorted, cmp_i32);
    qsort(ratios, (size_t)k->n, sizeof *ratios, cmp_float);
    int idx = (int)ceil(0.95 * k->n) - 1;
    k->p95 = sorted[idx < 0 ? 0 : idx];
    k->ratio_p95 = ratios[idx < 0 ? 0 : idx];
    k->since_p95 = 0;
}

int64_t sl_calib_output(const sl_calib_t *c, int route, int cls, int64_t max_tokens)
{
    const cell_t *k = cell(c, route, cls);
    if (k == NULL || k->n < SL_CALIB_MIN_SAMPLES)
        return max_tokens;
    /* The larger of the two: a job whose max_tokens is far above the route's usual outputs is
     * held to the p95 of outputs only if its class's outputs are also a small part of their
     * max_tokens (a tenant of long answers asks for more). */
    int64_t est = k->p95;
    /* (less a hair: ratios are stored as floats, 0.3 as 0.30000001) */
    double by_ratio = ceil(k->ratio_p95 * (double)max_tokens - 1e-3);
    if (by_ratio > (double)est)
        est = by_ratio >= (double)max_tokens ? max_tokens : (int64_t)by_ratio;
    return est < max_tokens ? est : max_tokens;
}

double sl_calib_input_factor(const sl_calib_t *c, int route)
{
    return route >= 0 && route < c->nroutes ? c->factor[route] : 1.0;
}

int64_t sl_calib_input(const sl_calib_t *c, int route, int64_t est_input)
{
    return (int64_t)ceil((double)est_input * sl_calib_input_factor(c, route));
}

void sl_calib_observe(sl_calib_t *c, int route, int cls, int64_t est_input, int64_t real_input,
                      int64_t max_tokens, int64_t real_output)
{
    cell_t *k = cell(c, route, cls);
    if (k == NULL)
        return;
    if (real_output >= 0) {
        k->outputs[k->next] = real_output > INT32_MAX ? INT32_MAX : (int32_t)real_output;
        double r = max_tokens > 0 ? (double)real_output / (double)max_tokens : 0;
        k->ratios[k->next] = (float)(r < 1 ? r : 1);
        k->next = (k->next + 1) % SL_CALIB_WINDOW;
        if (k->n < SL_CALIB_WINDOW)
            k->n++;
        if (++k->since_p95 >= P95_EVERY || k->n == SL_CALIB_MIN_SAMPLES)
            compute_p95(k);
    }
    if (est_input > 0 && real_input >= 0) {
        double ratio = (double)real_input / (double)est_input;
        double *f = &c->factor[route];
        *f += ratio > *f ? STEP_UP : -STEP_DOWN;
        if (*f < SL_CALIB_MIN_FACTOR)
            *f = SL_CALIB_MIN_FACTOR;
        if (*f > SL_CALIB_MAX_FACTOR)
            *f = SL_CALIB_MAX_FACTOR;
    }
}
