/* collect.c - see collect.h. */
#include "collect.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "stats.h"

int b_sim_stats_read(const char *url, b_sim_stats_t *s)
{
    json_t *stats = h_http_json(url);
    if (stats == NULL)
        return -1;
    s->sim_ms = (double)json_integer_value(json_object_get(stats, "now_ms"));
    s->tokens = h_sim_total(stats, "tokens_charged");
    s->admitted = h_sim_total(stats, "admitted");
    s->refused = h_sim_total(stats, "refused");
    s->refused_rolling = h_sim_total(stats, "refused_rolling");
    s->fault_429 = h_sim_total(stats, "fault_429");
    s->fault_503 = h_sim_total(stats, "fault_503");
    s->errors = h_sim_total(stats, "errors");
    s->replayed = h_sim_total(stats, "replayed");
    s->dropped = h_sim_total(stats, "dropped");
    s->in_flight = h_sim_total(stats, "in_flight");
    s->batches = s->batch_lines_ok = s->batch_lines_duplicate = 0;
    const char *name;
    json_t *dep;
    json_object_foreach(json_object_get(stats, "deployments"), name, dep)
    {
        json_t *b = json_object_get(dep, "batch");
        s->batches += json_integer_value(json_object_get(b, "batches_created"));
        s->batch_lines_ok += json_integer_value(json_object_get(b, "lines_succeeded"));
        s->batch_lines_duplicate += json_integer_value(json_object_get(b, "lines_duplicate"));
    }
    json_decref(stats);
    return 0;
}

int b_metrics_scrape(int port, const char *const names[], int n, double out[])
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", port);
    char *text = h_http_text(url);
    int rc = text != NULL ? 0 : -1;
    for (int i = 0; i < n; i++)
        out[i] = text != NULL ? b_metric_sum(text, names[i]) : NAN;
    free(text);
    return rc;
}
