/* rng.h - the simulator's reproducible randomness.
 *
 * The idea to hold first: nothing in the simulator is random. Fault draws come from a seeded
 * splitmix64 sequence per deployment, and everything decided about a request body (completion
 * length, cache hit, tool call) from a hash of that body, so the same config and the same
 * requests in the same order give the same run.
 */
#ifndef SL_SIM_RNG_H
#define SL_SIM_RNG_H

#include <stddef.h>
#include <stdint.h>

/* splitmix64's finaliser: spreads any 64-bit input over all 64 bits. */
uint64_t sl_sim_rng_mix64(uint64_t x);

/* FNV-1a; mixed differently for each thing derived from a body, so those are independent. */
uint64_t sl_sim_rng_fnv1a(const char *data, size_t len);

/* A uniform draw in [0, 1) from the sequence whose splitmix64 state is *state. */
double sl_sim_rng_next(uint64_t *state);

/* The same body always gets the same draw of a kind; kinds are independent. */
double sl_sim_rng_body(uint64_t body_hash, uint64_t kind);

#endif
