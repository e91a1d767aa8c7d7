/* metrics.h - Prometheus metrics of a sluice daemon, and the HTTP endpoint that serves them.
 *
 * A registry holds families (counter, gauge, histogram), each with at most
 * SL_METRICS_MAX_SERIES label sets, so label cardinality and memory stay bounded whatever the
 * label values are. sl_metrics_render() writes the text exposition format 0.0.4;
 * sl_metrics_serve() answers GET /metrics and GET /healthz from libmicrohttpd's own thread.
 * Every function is thread-safe (one mutex per registry) except that sl_metrics_serve() and
 * sl_metrics_free() are setup calls the owner makes from one thread.
 */
#ifndef SL_METRICS_H
#define SL_METRICS_H

#include <stddef.h>

#include "err.h"

#define SL_METRICS_MAX_SERIES 1000            /* label sets per family */
#define SL_METRICS_MAX_LABELS 8               /* label names per family */
#define SL_METRICS_MAX_BOUNDS 32              /* histogram bounds, +Inf not counted */
#define SL_METRICS_MAX_VALUE_BYTES 128        /* a label value is cut to this many bytes */
#define SL_METRICS_MAX_TEXT_BYTES (64u << 20) /* a rendering larger than this fails */

/* The family the registry registers itself, labelled by "family". */
#define SL_METRICS_DROPPED_NAME "sluice_metrics_series_dropped_total"

typedef struct sl_metrics sl_metrics_t;
typedef enum { SL_METRIC_COUNTER = 0, SL_METRIC_GAUGE, SL_METRIC_HISTOGRAM } sl_metric_kind_t;

/* A registry (free with sl_metrics_free), already holding SL_METRICS_DROPPED_NAME; NULL when
 * out of memory. */
sl_metrics_t *sl_metrics_new(void);
/* Stops the registry's server (if any) first, then frees everything. NULL is a no-op. */
void sl_metrics_free(sl_metrics_t *m);

/* Registers a family; returns its id (>= 0), or -1 leaving the registry as it was when:
 * - name is not [a-zA-Z_:][a-zA-Z0-9_:]*, or it (or, for a histogram, one of the sample names
 *   name_bucket, name_sum, name_count) clashes with a name already exposed;
 * - a label name is not [a-zA-Z_][a-zA-Z0-9_]*, starts with "__" (reserved), repeats, or is
 *   "le" in a histogram; there are more than SL_METRICS_MAX_LABELS labels;
 * - a histogram's bounds are not finite and strictly ascending, bounds is NULL with
 *   nbounds > 0, or nbounds is outside 0..SL_METRICS_MAX_BOUNDS;
 * - memory runs out.
 * help may be NULL (no # HELP line); name, help and labels are copied. labels is a
 * NULL-terminated array of label names, or NULL for none. bounds are the histogram's upper
 * bounds (+Inf is implicit); other kinds ignore bounds and nbounds. A family without labels
 * exposes its one series (at 0) from the start; a labelled one, each label set once updated. */
int sl_metrics_family(sl_metrics_t *m, sl_metric_kind_t kind, const char *name, const char *help,
                      const char *const *labels, const double *bounds, int nbounds);

/* Update the series of family f with these label values: one per declared label, in order
 * (NULL for a family without labels). Values are copied, cut to SL_METRICS_MAX_VALUE_BYTES
 * on a character boundary, and bytes that are not UTF-8 become '?'; label sets equal after
 * that are one series.
 * When the family already has SL_METRICS_MAX_SERIES series, a new label set is not created
 * and SL_METRICS_DROPPED_NAME{family="<name>"} counts the update instead. An unknown f, a call
 * that does not fit the family's kind, and missing label values are ignored (so are updates
 * that find no memory): metrics never stop the daemon.
 *
 * sl_metrics_add: counters add v when v >= 0 (negative and NaN are ignored); gauges add v.
 * sl_metrics_set: gauges only.
 * sl_metrics_observe: histograms only. */
void sl_metrics_add(sl_metrics_t *m, int f, const char *const *values, double v);
void sl_metrics_set(sl_metrics_t *m, int f, const char *const *values, double v);
void sl_metrics_observe(sl_metrics_t *m, int f, const char *const *values, double v);

/* The text exposition format 0.0.4 (caller frees): families in registration order, each with
 * # HELP and # TYPE lines, series in creation order; histograms as cumulative
 * name_bucket{...,le="..."} lines ending with le="+Inf", then name_sum and name_count.
 * Numbers: whole values below 1e15 as integers, others in the shortest %.15g..%.17g form that
 * reads back exactly, and +Inf, -Inf, NaN. NULL when out of memory or past
 * SL_METRICS_MAX_TEXT_BYTES. Updates wait while it runs. */
char *sl_metrics_render(sl_metrics_t *m);

/* Serves, from libmicrohttpd's own thread, on listen = "HOST:PORT" (HOST an IPv4 address or
 * "localhost"; PORT 0 picks a free port):
 *   GET /metrics  200, Content-Type "text/plain; version=0.0.4; charset=utf-8", the rendering
 *   GET /healthz  200 "ok\n"
 * HEAD is answered like GET; other methods on these paths get 405 (with Allow), other paths
 * 404. *port_out (may be NULL) gets the bound port. Returns SL_EINVAL for a bad address,
 * SL_EEXISTS when this registry already serves, SL_EIO when it cannot listen or start, and
 * writes why into err (errlen bytes; err may be NULL when errlen is 0). sl_metrics_free()
 * stops the server. */
sl_err_t sl_metrics_serve(sl_metrics_t *m, const char *listen, int *port_out, char *err,
                          size_t errlen);

#endif
