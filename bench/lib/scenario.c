/* scenario.c - the table of bench/compare's scenarios (see scenario.h). */
#include "scenario.h"

#include <stddef.h>
#include <string.h>

/* The defaults of b_scenario_t's job and provider fields. */
enum {
    PROMPT_CHARS_MIN = 2800, /* 700 - 900 prompt tokens at the simulator's 4 characters each */
    PROMPT_CHARS_SPAN = 800,
    MAX_TOKENS_MIN = 100, /* max_tokens 100 - 160 */
    MAX_TOKENS_SPAN = 60,
};

const char *const b_class_names[B_NCLASSES] = {"interactive", "standard", "batch"};

#define STEADY_TENANT(n, r)                                                                        \
    {                                                                                              \
        .name = n, .cls = 1, .rate = r                                                             \
    }
/* Four standard tenants a - d whose arrivals add up to total x what the limit serves. */
#define FOUR_STEADY_TENANTS(total)                                                                 \
    .ntenants = 4, .tenants = {STEADY_TENANT("a", (total) / 4), STEADY_TENANT("b", (total) / 4),   \
                               STEADY_TENANT("c", (total) / 4), STEADY_TENANT("d", (total) / 4)}
#define BURST_TENANT(n)                                                                            \
    {                                                                                              \
        .name = n, .cls = 1, .rate = 0.4 / 4, .burst_rate = 4.0 / 4                                \
    }

const b_scenario_t b_scenarios[] = {
    {.name = "steady",
     .what = "4 tenants, arrivals at 1.25x the binding limit all the time",
     .measure_min = 7,
     .quick_measure_min = 3,
     FOUR_STEADY_TENANTS(1.25)},
    {.name = "burst",
     .what = "4 tenants at 0.4x the limit, 10x that for a sixth of a minute (10 s scaled)",
     .measure_min = 7,
     .quick_measure_min = 3,
     .ntenants = 4,
     .tenants = {BURST_TENANT("a"), BURST_TENANT("b"), BURST_TENANT("c"), BURST_TENANT("d")},
     .burst_at = 0.5,
     .burst_minutes = 10.0 / 60.0},
    {.name = "noisy",
     .what = "a batch tenant with 100x the volume of each of 3 interactive tenants",
     .measure_min = 7,
     .quick_measure_min = 3,
     .ntenants = 4,
     /* 3 % of the limit each (3 jobs/s at 3-second minutes), and the batch tenant 100x one
      * interactive tenant's volume (3x what the limit serves in the measurement), at once. */
     .tenants = {{.name = "bulk", .cls = 2, .backlog = 3.0},
                 {.name = "i1", .cls = 0, .rate = 0.03},
                 {.name = "i2", .cls = 0, .rate = 0.03},
                 {.name = "i3", .cls = 0, .rate = 0.03}},
     .jain_from = 1},
    {.name = "storm",
     .what = "steady, and 30 % of admitted requests get a 429 (half with Retry-After)",
     .measure_min = 7,
     .quick_measure_min = 3,
     FOUR_STEADY_TENANTS(1.25),
     .fault = B_FAULT_429},
    {.name = "storm503",
     .what = "steady, and 30 % of requests get a 503 (provider overloaded)",
     .measure_min = 7,
     .quick_measure_min = 3,
     FOUR_STEADY_TENANTS(1.25),
     .fault = B_FAULT_503},
    {.name = "longctx",
     .what = "steady with prompts of 8,000 - 20,000 tokens (3 - 4 fill a provider slice)",
     .measure_min = 7,
     .quick_measure_min = 3,
     FOUR_STEADY_TENANTS(1.25),
     .prompt_min = 32000,
     .prompt_span = 48000,
     .maxtok_min = 500,
     .maxtok_span = 500},
    {.name = "maxout",
     .what = "steady with max_tokens 3,000 - 4,000 and replies of 1,500 - 4,000 tokens",
     .measure_min = 7,
     .quick_measure_min = 3,
     FOUR_STEADY_TENANTS(1.25),
     .prompt_min = 400,
     .prompt_span = 400,
     .maxtok_min = 3000,
     .maxtok_span = 1000,
     .output_min = 1500,
     .output_max = 4000,
     /* 25 tokens a second at real minutes: a 4,000-token reply takes 2 s here (160 s real). */
     .ms_per_token = 0.5,
     .grace_min = 1.0},
    {.name = "daily",
     .what = "4 tenants at 0.8x the limit; the provider's daily request quota runs out halfway",
     .measure_min = 7,
     .quick_measure_min = 3,
     FOUR_STEADY_TENANTS(0.8),
     .rpd_share = 0.5},
    {.name = "stream",
     .what = "streamed jobs at 0.9x; 15 % of streams cut by the provider, 10 % of clients "
             "give up",
     .measure_min = 7,
     .quick_measure_min = 3,
     FOUR_STEADY_TENANTS(0.9),
     .fault = B_FAULT_CUT,
     .stream = 1,
     .cancel_share = 0.1,
     .sluice_only = 1},
    {.name = "bigjobs",
     .what = "steady at 1.25x with jobs of 1 - 4 slices (60 a minute) against a provider that "
             "also enforces a rolling minute",
     .measure_min = 7,
     .quick_measure_min = 3,
     FOUR_STEADY_TENANTS(1.25),
     /* A slice is 5,000 tokens (TPM 300,000 / 60); each job's prompt + max_tokens is 5,004 -
      * 19,903 (prompts of 4,504 - 18,904 tokens with "Job jNNNNNNN: ", max_tokens 500 - 999):
      * max_tokens stays far below the deployment's max_output_tokens (4,096), so the prompt
      * carries the size. */
     .prompt_min = 18000,
     .prompt_span = 57600,
     .maxtok_min = 500,
     .maxtok_span = 500,
     .slices_per_minute = 60,
     .rolling_minute = 1},
};
const int b_nscenarios = (int)(sizeof b_scenarios / sizeof b_scenarios[0]);

const b_scenario_t *b_scenario_find(const char *name)
{
    for (int i = 0; i < b_nscenarios; i++) {
        if (strcmp(b_scenarios[i].name, name) == 0)
            return &b_scenarios[i];
    }
    return NULL;
}

int b_scenario_index(const b_scenario_t *sc)
{
    return (int)(sc - b_scenarios);
}

b_scenario_t b_scenario_with_defaults(const b_scenario_t *sc)
{
    b_scenario_t e = *sc;
    if (e.prompt_min == 0) {
        e.prompt_min = PROMPT_CHARS_MIN;
        e.prompt_span = PROMPT_CHARS_SPAN;
    }
    if (e.maxtok_min == 0) {
        e.maxtok_min = MAX_TOKENS_MIN;
        e.maxtok_span = MAX_TOKENS_SPAN;
    }
    if (e.output_max == 0) {
        e.output_min = 20;
        e.output_max = 200;
    }
    if (e.ms_per_token == 0)
        e.ms_per_token = 0.2;
    if (e.grace_min == 0)
        e.grace_min = 0.2;
    return e;
}

double b_scenario_avg_job_tokens(const b_scenario_t *sc)
{
    return (sc->prompt_min + sc->prompt_span / 2.0 + 14) / 4.0 + sc->maxtok_min +
           sc->maxtok_span / 2.0;
}
