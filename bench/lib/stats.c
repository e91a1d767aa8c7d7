/* stats.c - see stats.h. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state;

void b_rng_seed(uint64_t seed)
{
    rng_state = seed;
}

double b_rng_uniform(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

int b_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double b_pct(const double *sorted, int n, double p)
{
    if (n <= 0)
        return NAN;
    int i = (int)ceil(p * n) - 1;
    return sorted[i < 0 ? 0 : i >= n ? n - 1 : i];
}

double b_jain(const double *x, int n)
{
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++) {
        sum += x[i];
        sq += x[i] * x[i];
    }
    return sq > 0 ? sum * sum / (n * sq) : NAN;
}

json_t *b_jnum(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

double b_jget(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

double b_metric_sum(const char *text, const char *name)
{
    size_t nlen = strlen(name);
    double sum = NAN;
    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *next = strchr(line, '\n');
        if (strncmp(line, name, nlen) == 0 && (line[nlen] == ' ' || line[nlen] == '{')) {
            /* the value follows the labels, when there are any */
            const char *v = line[nlen] == '{' ? strchr(line + nlen, '}') : line + nlen;
            if (v != NULL)
                sum = (isnan(sum) ? 0 : sum) + strtod(v + 1, NULL);
        }
        line = next != NULL ? next + 1 : NULL;
    }
    return sum;
}
