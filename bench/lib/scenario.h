/* scenario.h - the scenarios bench/compare runs, as data: one simulated deployment whose TPM
 * (counting prompt + max_tokens) is the binding limit, the tenants with their arrival
 * processes, what the simulator injects, and the sizes of the jobs.
 *
 * The idea to hold first: a scenario is a static const designated initialiser in scenario.c,
 * and a field left 0 means "the default of the scenarios" (b_scenario_with_defaults fills it
 * in). bench/scenarios, the fair-share benchmark, has scenarios of its own. */
#ifndef SL_BENCH_SCENARIO_H
#define SL_BENCH_SCENARIO_H

enum {
    B_TPM = 300000, /* the deployment's tokens per minute: the binding limit */
    B_RPM = 600000, /* its requests per minute: far from binding */
    B_INTERACTIVE_DEADLINE_MS = 5000,
    B_MAX_TENANTS = 8,
    B_NCLASSES = 3,
};

/* Class names, indexed by b_tenant_spec_t.cls: interactive, standard, batch. */
extern const char *const b_class_names[B_NCLASSES];

/* What the simulator injects (b_scenario_t.fault). */
enum { B_FAULT_NONE = 0, B_FAULT_429, B_FAULT_503, B_FAULT_CUT };

typedef struct {
    const char *name;
    int cls;           /* index into b_class_names */
    double rate;       /* Poisson arrivals, as a multiple of the jobs per second the limit serves */
    double burst_rate; /* the same during the burst window, instead of rate */
    double backlog;    /* jobs submitted at 0, as a multiple of what the limit serves in the
                        * whole measurement */
} b_tenant_spec_t;

typedef struct {
    const char *name;
    const char *what;
    double measure_min, quick_measure_min; /* measurement, in minutes */
    int ntenants;
    b_tenant_spec_t tenants[B_MAX_TENANTS];
    int fault;            /* B_FAULT_*: what the simulator injects */
    double burst_at;      /* start of the burst window, as a fraction of the measurement */
    double burst_minutes; /* its length */
    int jain_from;        /* Jain's index is over tenants[jain_from..]: those of equal demand */
    /* The jobs and the provider; 0 means the default of the scenarios. */
    int prompt_min, prompt_span; /* prompt characters (2,800 + 0 - 800) */
    int maxtok_min, maxtok_span; /* max_tokens (100 + 0 - 60) */
    int output_min, output_max;  /* the simulator's reply length (20 - 200) */
    double ms_per_token;         /* the simulator's generation time (0.2 ms a token) */
    double grace_min;            /* time after the stop for the calls in flight (a fifth) */
    double rpd_share;            /* a daily request quota of this share of the jobs (0: none) */
    int stream;                  /* every job asks for a streamed answer */
    double cancel_share;   /* share of jobs whose client gives up: a cancel 0 - 0.2 min later */
    int sluice_only;       /* the baseline has no counterpart (it does not stream) */
    int slices_per_minute; /* the provider's enforcement slices, both sides (0: the setup's) */
    int rolling_minute;    /* the simulator also enforces a rolling minute (sim key
                            * "rolling_minute"): it refuses a request that would take the exact
                            * trailing minute over a limit, and counts it in refused_rolling */
} b_scenario_t;

/* Every scenario, in the order compare runs them. */
extern const b_scenario_t b_scenarios[];
extern const int b_nscenarios;

/* The scenario called name, or NULL. */
const b_scenario_t *b_scenario_find(const char *name);

/* The scenario's position in b_scenarios (it seeds the scenario's workload). */
int b_scenario_index(const b_scenario_t *sc);

/* A copy of sc with its defaults filled in. */
b_scenario_t b_scenario_with_defaults(const b_scenario_t *sc);

/* The average job's cost in TPM (prompt + "Job jNNNNNNN: " + max_tokens) of a scenario with
 * its defaults filled in: sizes the arrival rates, which are given as multiples of what the
 * limit serves. */
double b_scenario_avg_job_tokens(const b_scenario_t *sc);

#endif
