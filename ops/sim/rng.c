/* rng.c - splitmix64 mixing, FNV-1a body hashes and uniform draws (see rng.h). */
#include "rng.h"

uint64_t sl_sim_rng_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

uint64_t sl_sim_rng_fnv1a(const char *data, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)data[i];
        h *= 1099511628211ULL;
    }
    return h;
}

double sl_sim_rng_next(uint64_t *state)
{
    *state += 0x9e3779b97f4a7c15ULL;
    return (double)(sl_sim_rng_mix64(*state) >> 11) * 0x1p-53;
}

double sl_sim_rng_body(uint64_t body_hash, uint64_t kind)
{
    return (double)(sl_sim_rng_mix64(body_hash ^ kind) >> 11) * 0x1p-53;
}
