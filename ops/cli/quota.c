/* quota.c - `sluice quota get|set`: buckets' limits, levels and reset times, and run-time
 * changes to a bucket's limit or a tenant's share and daily limits.
 */
#include "quota.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "fields.h"
#include "render.h"
#include "util.h"

/* ---- The body of `quota set` ------------------------------------------------------------ */

/* A non-negative number, or null for "default"; NULL when s is neither. */
static json_t *parse_value(const char *s, int integer_only)
{
    if (strcmp(s, "default") == 0)
        return json_null();
    if (*s == '\0' || *s == '-' || *s == '+' || *s == ' ')
        return NULL;
    char *end = NULL;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    if (errno == 0 && *end == '\0')
        return json_integer((json_int_t)n);
    if (integer_only)
        return NULL;
    errno = 0;
    double d = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !isfinite(d) || d < 0)
        return NULL;
    return json_real(d);
}

json_t *sl_cli_quota_body(int tenant, int argc, char **argv, char *err, size_t errlen)
{
    static const struct {
        const char *name;
        int integer_only;
    } fields[] = {{"weight", 1}, {"guarantee", 0}, {"daily_requests", 1}, {"daily_tokens", 1}};
    json_t *body = json_object();
    if (body == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!tenant) {
        json_t *v = argc == 1 ? parse_value(argv[0], 0) : NULL;
        if (v == NULL) {
            snprintf(err, errlen, "LIMIT must be a non-negative number or \"default\"");
            json_decref(body);
            return NULL;
        }
        json_object_set_new(body, "limit", v);
        return body;
    }
    for (int i = 0; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        size_t f = sizeof fields / sizeof fields[0];
        if (eq != NULL) {
            for (f = 0; f < sizeof fields / sizeof fields[0]; f++) {
                if (strlen(fields[f].name) == (size_t)(eq - argv[i]) &&
                    strncmp(argv[i], fields[f].name, (size_t)(eq - argv[i])) == 0)
                    break;
            }
        }
        if (f == sizeof fields / sizeof fields[0]) {
            snprintf(err, errlen,
                     "%s: expected KEY=VALUE with KEY weight, guarantee, daily_requests or "
                     "daily_tokens",
                     argv[i]);
            json_decref(body);
            return NULL;
        }
        if (json_object_get(body, fields[f].name) != NULL) {
            snprintf(err, errlen, "%s is given twice", fields[f].name);
            json_decref(body);
            return NULL;
        }
        json_t *v = parse_value(eq + 1, fields[f].integer_only);
        if (v == NULL) {
            snprintf(err, errlen, "%s must be %s or \"default\"", fields[f].name,
                     fields[f].integer_only ? "a non-negative integer" : "a non-negative number");
            json_decref(body);
            return NULL;
        }
        json_object_set_new(body, fields[f].name, v);
    }
    if (json_object_size(body) == 0) {
        snprintf(err, errlen,
                 "name at least one of weight=, guarantee=, daily_requests=, "
                 "daily_tokens=");
        json_decref(body);
        return NULL;
    }
    return body;
}

/* ---- sluice quota ----------------------------------------------------------------------- */

static const char quota_usage[] =
    "usage: sluice quota get [BUCKET_ID | --tenant NAME | --prefix P]\n"
    "       sluice quota set BUCKET_ID LIMIT|default\n"
    "       sluice quota set --tenant NAME [weight=N] [guarantee=F] [daily_requests=N]\n"
    "                                      [daily_tokens=N]\n"
    "\n"
    "get prints buckets: one by id (e.g. deployment:sim-a:tpm), a tenant's (with its weight and\n"
    "guarantee), those whose id starts with P, or all. Columns: the limit per period, the\n"
    "ledger's level/capacity, how much is used, when it is full again or its window restarts,\n"
    "and whether a run-time override is in force.\n"
    "set changes a bucket's limit (per its period) or a tenant's settings at run time; they are\n"
    "stored by the scheduler and win over the config until set back to "
    "`default`.\n" SL_CLI_ADMIN_HELP;

/* Every bucket whose id starts with prefix (NULL = all), page after page. Returns 0 with a new
 * {"buckets": [...], "total": N, "next_offset": null} in *out (caller decrefs), else 1. */
static int list_buckets(sl_cli_admin_t *a, const char *prefix, json_t **out)
{
    *out = NULL;
    char *esc = prefix != NULL ? sl_cli_url_escape(prefix) : NULL;
    json_t *all = json_array();
    int rc = (all == NULL || (prefix != NULL && esc == NULL)) ? 1 : 0;
    int64_t offset = 0, total = 0;
    while (rc == 0) {
        char path[2048];
        snprintf(path, sizeof path, "/v1/buckets?offset=%lld%s%s", (long long)offset,
                 esc != NULL ? "&prefix=" : "", esc != NULL ? esc : "");
        json_t *page = NULL;
        rc = sl_cli_admin_request(a, "GET", path, NULL, &page);
        if (rc != 0)
            break;
        json_t *buckets = json_object_get(page, "buckets");
        json_t *next = json_object_get(page, "next_offset");
        total = sl_cli_get_i64(page, "total", total);
        if (!json_is_array(buckets)) {
            rc = sl_cli_admin_unexpected(a);
        } else {
            json_array_extend(all, buckets);
            if (!json_is_integer(next)) {
                json_decref(page);
                break; /* null: the last page */
            }
            /* A next_offset that does not move on would page forever. */
            if (json_integer_value(next) <= offset) {
                fprintf(stderr, "%s: the scheduler's next_offset does not advance\n",
                        sl_cli_admin_prog(a));
                rc = 1;
            }
            offset = json_integer_value(next);
        }
        json_decref(page);
    }
    free(esc);
    if (rc == 0) {
        *out =
            json_pack("{s:o, s:I, s:n}", "buckets", all, "total", (json_int_t)total, "next_offset");
        if (*out != NULL)
            return 0;
        rc = 1;
    } else {
        json_decref(all);
    }
    return rc;
}

/* The path of one bucket (bucket_id) or one tenant: "/v1/buckets/ID", "/v1/tenants/NAME".
 * Returns 0, or 1 when out of memory. */
static int item_path(const char *bucket_id, const char *tenant, char *path, size_t cap)
{
    char *esc = sl_cli_url_escape(bucket_id != NULL ? bucket_id : tenant);
    if (esc == NULL)
        return 1;
    snprintf(path, cap, "/v1/%s/%s", bucket_id != NULL ? "buckets" : "tenants", esc);
    free(esc);
    return 0;
}

/* An answer about one tenant (tenant != NULL) or one bucket, as JSON with --json, else text. */
static int print_item(sl_cli_admin_t *a, const json_t *answer, const char *tenant)
{
    if (sl_cli_admin_json(a))
        return sl_cli_print_json(answer);
    int64_t now_ms = sl_now_ms();
    int bad;
    if (tenant != NULL) {
        bad = sl_cli_render_tenant(answer, stdout, now_ms);
    } else {
        json_t *one = json_is_object(answer) ? json_pack("[O]", answer) : NULL;
        bad = sl_cli_render_buckets(one, stdout, now_ms);
        json_decref(one);
    }
    return bad != 0 ? sl_cli_admin_unexpected(a) : 0;
}

static int quota_get(sl_cli_admin_t *a, const char *bucket_id, const char *tenant,
                     const char *prefix)
{
    json_t *answer = NULL;
    char path[2048];
    int rc;
    if (bucket_id == NULL && tenant == NULL) {
        rc = list_buckets(a, prefix, &answer);
        if (rc == 0 && sl_cli_admin_json(a))
            rc = sl_cli_print_json(answer);
        else if (rc == 0 && sl_cli_render_buckets(json_object_get(answer, "buckets"), stdout,
                                                  sl_now_ms()) != 0)
            rc = sl_cli_admin_unexpected(a);
    } else {
        rc = item_path(bucket_id, tenant, path, sizeof path);
        if (rc == 0)
            rc = sl_cli_admin_request(a, "GET", path, NULL, &answer);
        if (rc == 0)
            rc = print_item(a, answer, tenant);
    }
    json_decref(answer);
    return rc;
}

static int quota_set(sl_cli_admin_t *a, const char *bucket_id, const char *tenant, json_t *body)
{
    json_t *answer = NULL;
    char path[2048];
    int rc = item_path(bucket_id, tenant, path, sizeof path);
    if (rc == 0)
        rc = sl_cli_admin_request(a, "PUT", path, body, &answer);
    if (rc == 0)
        rc = print_item(a, answer, tenant);
    json_decref(answer);
    return rc;
}

int sl_cli_quota(sl_proc_opts_t *opts, int argc, char **argv)
{
    const char *prog = "sluice quota";
    sl_cli_admin_opts_t admin = {0};
    const char *tenant = NULL, *prefix = NULL;
    const sl_proc_opt_t own[] = {{"tenant", &tenant, NULL},
                                 {"prefix", &prefix, NULL},
                                 SL_CLI_ADMIN_OPTIONS(&admin),
                                 {NULL, NULL, NULL}};
    const sl_proc_cmdline_t cl = {prog, quota_usage, own, SL_PROC_ARGS};
    int nargs = 0;
    int rc = sl_proc_args(&cl, argc, argv, opts, &nargs);
    if (rc != SL_PROC_GO_ON)
        return rc;
    const char *verb = nargs > 0 ? argv[1] : "";
    int set = strcmp(verb, "set") == 0;
    if (!set && strcmp(verb, "get") != 0) {
        fprintf(stderr, "%s: say get or set\n%s", prog, quota_usage);
        return 2;
    }
    if (set && prefix != NULL) {
        fprintf(stderr, "%s: unknown argument --prefix\n%s", prog, quota_usage);
        return 2;
    }
    /* The verb's positional arguments. */
    char **pos = argv + 2;
    int npos = nargs - 1;
    const char *bucket_id = NULL;
    json_t *body = NULL;
    if (!set) {
        if ((tenant != NULL) + (prefix != NULL) + (npos > 0) > 1 || npos > 1) {
            fprintf(stderr, "%s: give one of BUCKET_ID, --tenant or --prefix\n", prog);
            return 2;
        }
        if (npos == 1)
            bucket_id = pos[0];
    } else {
        char err[256] = "";
        if (tenant == NULL && npos >= 1)
            bucket_id = pos[0];
        if (tenant == NULL && npos != 2) {
            fprintf(stderr, "%s: set takes BUCKET_ID LIMIT, or --tenant NAME KEY=VALUE...\n", prog);
            return 2;
        }
        body = tenant != NULL ? sl_cli_quota_body(1, npos, pos, err, sizeof err)
                              : sl_cli_quota_body(0, 1, pos + 1, err, sizeof err);
        if (body == NULL) {
            fprintf(stderr, "%s: %s\n", prog, err);
            return 2;
        }
    }
    sl_cli_admin_t *a = NULL;
    rc = sl_cli_admin_open(opts, prog, &admin, &a);
    if (rc != 0) {
        json_decref(body);
        return rc;
    }
    rc = set ? quota_set(a, bucket_id, tenant, body) : quota_get(a, bucket_id, tenant, prefix);
    json_decref(body);
    sl_cli_admin_close(a);
    return rc;
}
