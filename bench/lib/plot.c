/* plot.c - see plot.h. */
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes a gnuplot data file: rows_or_null's [t, p50, p99, n] rows as "t p50 p99" (waits
 * of 1 ms at least, for the log scale), or else t and y side by side; returns 0 or -1. */
static int write_dat(const char *path, json_t *rows_or_null, json_t *t, json_t *y)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    size_t i;
    json_t *row;
    if (rows_or_null != NULL) {
        /* [t, p50, p99, n]; log scale: keep waits at 1 ms or more */
        json_array_foreach(rows_or_null, i, row)
        {
            json_t *a = json_array_get(row, 1), *b = json_array_get(row, 2);
            double p50 = json_is_number(a) ? fmax(1, json_number_value(a)) : NAN;
            double p99 = json_is_number(b) ? fmax(1, json_number_value(b)) : NAN;
            if (isfinite(p50))
                fprintf(f, "%.3f %.1f %.1f\n", json_number_value(json_array_get(row, 0)), p50, p99);
        }
    } else {
        json_array_foreach(t, i, row)
        {
            fprintf(f, "%.3f %.1f\n", json_number_value(row),
                    json_number_value(json_array_get(y, i)));
        }
    }
    return fclose(f) == 0 ? 0 : -1;
}

int b_plot(const b_scenario_t *sc, json_t *runs, double minute_ms, double xmax_s, const char *png)
{
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        printf("gnuplot is not installed: no plot (Debian package gnuplot-nox)\n");
        return -1;
    }
    char dir[] = "/tmp/sluice-compare-plot-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return -1;
    }
    char path[512], script_path[512];
    snprintf(script_path, sizeof script_path, "%s/plot.gp", dir);
    FILE *gp = fopen(script_path, "w");
    if (gp == NULL)
        return -1;
    int n = (int)json_array_size(runs);
    double limit = (double)B_TPM / minute_ms * 1000.0;
    fprintf(gp,
            "set terminal pngcairo size %d,760 font 'sans,9'\nset output '%s'\n"
            "set multiplot layout 2,%d title \"%s: %s (B_TPM %d over %.0f ms minutes)\"\n"
            "set grid\nset key top right\nset xrange [0:%.1f]\n",
            360 * (n < 2 ? 2 : n), png, n, sc->name, sc->what, B_TPM, minute_ms, xmax_s);
    int rc = 0;
    size_t i;
    json_t *r;
    /* Row 1: admitted tokens/s against the limit. */
    json_array_foreach(runs, i, r)
    {
        json_t *ser = json_object_get(json_object_get(r, "figures"), "series");
        json_t *t_s = json_object_get(ser, "t_s");
        fprintf(gp,
                "set title '%s'\nset xlabel 's'\nset ylabel 'admitted tokens/s'\n"
                "unset logscale y\nset yrange [0:%.0f]\n",
                json_string_value(json_object_get(r, "system")), limit * 2.0);
        if (json_array_size(t_s) == 0) {
            fprintf(gp, "plot %.0f with lines dt 2 lc rgb 'red' title 'limit (no data)'\n", limit);
            continue;
        }
        snprintf(path, sizeof path, "%s/tokens-%zu.dat", dir, i);
        rc |= write_dat(path, NULL, t_s, json_object_get(ser, "tokens_per_s"));
        fprintf(gp,
                "plot '%s' using 1:2 with lines lw 2 title 'admitted', %.0f with lines dt 2 lc "
                "rgb 'red' title 'limit'\n",
                path, limit);
    }
    /* Row 2: queue wait per class (p50 solid, p99 dashed), by submit time, log scale. */
    json_array_foreach(runs, i, r)
    {
        json_t *ser = json_object_get(json_object_get(r, "figures"), "series");
        json_t *w = json_object_get(ser, "queue_wait_ms");
        fprintf(gp,
                "set title '%s: queue wait of the jobs starting'\nset xlabel 's'\n"
                "set ylabel 'ms'\nset logscale y\nset yrange [1:*]\n",
                json_string_value(json_object_get(r, "system")));
        const char *cls;
        json_t *rows;
        int k = 0;
        char plotcmd[2048] = "plot ";
        size_t pl = strlen(plotcmd);
        json_object_foreach(w, cls, rows)
        {
            if (json_array_size(rows) == 0)
                continue;
            snprintf(path, sizeof path, "%s/wait-%zu-%s.dat", dir, i, cls);
            rc |= write_dat(path, rows, NULL, NULL);
            pl += (size_t)snprintf(plotcmd + pl, sizeof plotcmd - pl,
                                   "%s'%s' using 1:2 with linespoints lw 2 pt 7 ps 0.4 lc %d "
                                   "title '%s p50', '%s' using 1:3 with lines dt 2 lc %d "
                                   "title '%s p99'",
                                   k ? ", " : "", path, k + 1, cls, path, k + 1, cls);
            k++;
        }
        if (k == 0)
            fprintf(gp, "set yrange [1:10]\nplot 2 title 'no data'\n");
        else
            fprintf(gp, "%s\n", plotcmd);
    }
    fprintf(gp, "unset multiplot\n");
    if (fclose(gp) != 0)
        rc = -1;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "gnuplot '%s' > '%s/gnuplot.log' 2>&1", script_path, dir);
    if (rc == 0 && system(cmd) != 0) {
        printf("gnuplot failed: see %s/gnuplot.log\n", dir);
        return -1;
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}
