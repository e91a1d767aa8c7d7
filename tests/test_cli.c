/* test_cli.c - the text side of the admin commands (ops/cli/render.h and the helpers beside
 * it): fixtures shaped exactly as scheduler/ADMIN-API.md describes go through the renderers,
 * and the tests read the text that comes out (bars, percentages, reset times, the tenant table
 * and its truncation, a partner's status without pools, job explanations), the `quota set` body
 * builder (`default` is JSON null) and the percent-encoding of path segments. Then the command
 * line: every command's --help and usage errors, the common options anywhere on the line,
 * --opt=value, missing values, and parsing twice in one process. No network is involved: each
 * case stops before a command loads the config.
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../ops/cli/cli.h"
#include "../ops/cli/client.h"
#include "../ops/cli/format.h"
#include "../ops/cli/quota.h"
#include "../ops/cli/render.h"

/* 2026-12-03 12:13:20 UTC: the scheduler's clock in every fixture. */
#define NOW_MS 1796300000000LL

/* An admin's status: one pool with two deployments. sim-a's tpm has a run-time override; sim-b
 * is paused after a 429 and its bucket is untouched. */
static const char status_admin_json[] =
    "{\"now_ms\": 1796300000000, \"role\": \"admin\","
    " \"totals\": {\"queued\": 126, \"held\": 0, \"delayed\": 2, \"in_flight\": 6},"
    " \"pools\": [{\"route\": \"default\","
    "   \"queued\": {\"interactive\": 0, \"standard\": 3, \"partner\": 0, \"batch\": 123},"
    "   \"blocked_ms\": 0,"
    "   \"deployments\": ["
    "     {\"name\": \"sim-a\", \"in_flight\": 4, \"paused_ms\": 0, \"buckets\": ["
    "       {\"id\": \"deployment:sim-a:rpm\", \"scope\": \"deployment:sim-a\", \"name\": \"rpm\","
    "        \"dimension\": \"requests\", \"algorithm\": \"token_bucket\", \"strict\": false,"
    "        \"limit\": 500, \"period_ms\": 60000, \"configured_limit\": 500,"
    "        \"override\": false, \"capacity\": 500, \"level\": 345, \"used\": 0.31,"
    "        \"reset_ms\": 1796300012300},"
    "       {\"id\": \"deployment:sim-a:tpm\", \"scope\": \"deployment:sim-a\", \"name\": \"tpm\","
    "        \"dimension\": \"total_tokens\", \"algorithm\": \"token_bucket\", \"strict\": false,"
    "        \"limit\": 100000, \"period_ms\": 60000, \"configured_limit\": 80000,"
    "        \"override\": true, \"capacity\": 16666.7, \"level\": 8000.5, \"used\": 0.52,"
    "        \"reset_ms\": 1796300028000}]},"
    "     {\"name\": \"sim-b\", \"in_flight\": 2, \"paused_ms\": 2500, \"buckets\": ["
    "       {\"id\": \"deployment:sim-b:tpm\", \"scope\": \"deployment:sim-b\", \"name\": \"tpm\","
    "        \"dimension\": \"total_tokens\", \"algorithm\": \"token_bucket\", \"strict\": false,"
    "        \"limit\": 2000000, \"period_ms\": 60000, \"configured_limit\": 2000000,"
    "        \"override\": false, \"capacity\": 333333.3, \"level\": 333333.3, \"used\": 0,"
    "        \"reset_ms\": 1796300000000}]}]}],"
    " \"tenants\": ["
    "   {\"tenant\": \"acme\", \"weight\": 1, \"guarantee\": 0.2, \"paused\": false,"
    "    \"configured_weight\": 1, \"configured_guarantee\": 0.2,"
    "    \"queued\": {\"interactive\": 0, \"standard\": 3, \"partner\": 0, \"batch\": 120},"
    "    \"held\": 0, \"delayed\": 0, \"in_flight\": 2,"
    "    \"keys\": [{\"id\": \"acme-prod\", \"paused\": false}]},"
    "   {\"tenant\": \"globex\", \"weight\": 2, \"guarantee\": 0, \"paused\": true,"
    "    \"configured_weight\": 1, \"configured_guarantee\": 0,"
    "    \"queued\": {\"interactive\": 0, \"standard\": 0, \"partner\": 0, \"batch\": 0},"
    "    \"held\": 3, \"delayed\": 2, \"in_flight\": 4,"
    "    \"keys\": [{\"id\": \"globex-1\", \"paused\": false}]}]}";

/* A partner key's status: no "pools" key at all. */
static const char status_partner_json[] =
    "{\"now_ms\": 1796300000000, \"role\": \"partner\","
    " \"totals\": {\"queued\": 3, \"held\": 0, \"delayed\": 0, \"in_flight\": 1},"
    " \"tenants\": ["
    "   {\"tenant\": \"acme\", \"weight\": 1, \"guarantee\": 0.2, \"paused\": false,"
    "    \"configured_weight\": 1, \"configured_guarantee\": 0.2,"
    "    \"queued\": {\"interactive\": 1, \"standard\": 2, \"partner\": 0, \"batch\": 0},"
    "    \"held\": 0, \"delayed\": 0, \"in_flight\": 1,"
    "    \"keys\": [{\"id\": \"acme-prod\", \"paused\": false}]}]}";

/* The bucket of the spec's example, 4 s before it is full again. */
static const char bucket_json[] =
    "{\"id\": \"deployment:sim-a:tpm\", \"scope\": \"deployment:sim-a\", \"name\": \"tpm\","
    " \"dimension\": \"total_tokens\", \"algorithm\": \"token_bucket\", \"strict\": false,"
    " \"limit\": 100000, \"period_ms\": 60000, \"configured_limit\": 100000, \"override\": false,"
    " \"capacity\": 16666.7, \"level\": 12000.5, \"used\": 0.28, \"reset_ms\": 1796300004000}";

/* A daily app quota raised at run time over the config's 1000000. */
static const char override_bucket_json[] =
    "{\"id\": \"app:acme/prod/web:daily_tokens\", \"scope\": \"app:acme/prod/web\","
    " \"name\": \"daily_tokens\", \"dimension\": \"total_tokens\", \"algorithm\": \"calendar\","
    " \"strict\": true, \"limit\": 2000000, \"period_ms\": 86400000,"
    " \"configured_limit\": 1000000, \"override\": true, \"capacity\": 2000000,"
    " \"level\": 500000, \"used\": 0.75, \"reset_ms\": 1796310800000}";

static const char tenant_json[] =
    "{\"tenant\": \"acme\", \"weight\": 3, \"guarantee\": 0.2, \"paused\": true,"
    " \"configured_weight\": 1, \"configured_guarantee\": 0.2,"
    " \"queued\": {\"interactive\": 0, \"standard\": 3, \"partner\": 0, \"batch\": 120},"
    " \"held\": 123, \"delayed\": 0, \"in_flight\": 2,"
    " \"keys\": [{\"id\": \"acme-prod\", \"paused\": false}, {\"id\": \"acme-dev\","
    " \"paused\": true}],"
    " \"buckets\": [{\"id\": \"tenant:acme:daily_requests\", \"scope\": \"tenant:acme\","
    "   \"name\": \"daily_requests\", \"dimension\": \"requests\", \"algorithm\": \"calendar\","
    "   \"strict\": true, \"limit\": 10000, \"period_ms\": 86400000,"
    "   \"configured_limit\": 10000, \"override\": false, \"capacity\": 10000,"
    "   \"level\": 9000, \"used\": 0.1, \"reset_ms\": 1796342400000}]}";

static json_t *load(const char *text)
{
    json_error_t jerr;
    json_t *doc = json_loads(text, 0, &jerr);
    ck_assert_msg(doc != NULL, "fixture does not parse: %s (line %d)", jerr.text, jerr.line);
    return doc;
}

/* Output captured in memory; text is NUL-terminated after cap_end. */
typedef struct {
    FILE *f;
    char *text;
    size_t len;
} capture_t;

static FILE *cap_begin(capture_t *c)
{
    c->text = NULL;
    c->len = 0;
    c->f = open_memstream(&c->text, &c->len);
    ck_assert_ptr_nonnull(c->f);
    return c->f;
}

static char *cap_end(capture_t *c)
{
    fclose(c->f);
    return c->text;
}

static char *render_status(const char *fixture)
{
    json_t *status = load(fixture);
    capture_t c;
    ck_assert_int_eq(sl_cli_render_status(status, cap_begin(&c), NOW_MS), 0);
    json_decref(status);
    return cap_end(&c);
}

static char *render_buckets(json_t *buckets)
{
    capture_t c;
    ck_assert_int_eq(sl_cli_render_buckets(buckets, cap_begin(&c), NOW_MS), 0);
    return cap_end(&c);
}

/* The line of text that contains needle (copied; caller frees), or NULL. */
static char *line_with(const char *text, const char *needle)
{
    const char *hit = strstr(text, needle);
    if (hit == NULL)
        return NULL;
    if (needle[0] == '\n')
        hit++; /* "\nname": the line that starts with name */
    const char *start = hit;
    while (start > text && start[-1] != '\n')
        start--;
    size_t len = strcspn(start, "\n");
    return strndup(start, len);
}

static size_t longest_line(const char *text)
{
    size_t longest = 0;
    for (const char *p = text; *p != '\0';) {
        size_t len = strcspn(p, "\n");
        if (len > longest)
            longest = len;
        p += len + (p[len] == '\n');
    }
    return longest;
}

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

START_TEST(status_shows_bars_levels_limits_and_reset_times)
{
    char *text = render_status(status_admin_json);
    char *line = line_with(text, "    rpm");
    ck_assert_ptr_nonnull(line);
    ck_assert_ptr_nonnull(strstr(line, "[###.......]  31%"));
    ck_assert_ptr_nonnull(strstr(line, "345/500"));
    ck_assert_ptr_nonnull(strstr(line, "500/min"));
    ck_assert_ptr_nonnull(strstr(line, "resets in 12.3s"));
    free(line);
    /* sim-a's tpm: compact numbers, the override marked with '*'. */
    line = line_with(text, "8k/16.7k");
    ck_assert_ptr_nonnull(line);
    ck_assert_ptr_nonnull(strstr(line, "[#####.....]  52%"));
    ck_assert_ptr_nonnull(strstr(line, "100k/min*"));
    ck_assert_ptr_nonnull(strstr(line, "resets in 28.0s"));
    free(line);
    /* sim-b's untouched bucket is full, not "resets in 0.0s". */
    line = line_with(text, "333k/333k");
    ck_assert_ptr_nonnull(line);
    ck_assert_ptr_nonnull(strstr(line, "[..........]   0%"));
    ck_assert_ptr_nonnull(strstr(line, "2M/min"));
    ck_assert_ptr_nonnull(strstr(line, "full"));
    free(line);
    free(text);
}
END_TEST

START_TEST(status_shows_header_pools_and_deployments)
{
    char *text = render_status(status_admin_json);
    ck_assert_msg(strncmp(text,
                          "2026-12-03 12:13:20  role admin  queued 126  held 0  delayed 2  "
                          "in flight 6\n",
                          strlen("2026-12-03 12:13:20  role admin  queued 126  held 0  "
                                 "delayed 2  in flight 6\n")) == 0,
                  "header is: %.120s", text);
    ck_assert_ptr_nonnull(
        strstr(text, "pool default  queued: interactive 0  standard 3  partner 0  batch 123\n"));
    char *line = line_with(text, "  sim-a ");
    ck_assert_ptr_nonnull(line);
    ck_assert_ptr_nonnull(strstr(line, "in flight 4"));
    ck_assert_ptr_nonnull(strstr(line, "not paused"));
    free(line);
    line = line_with(text, "  sim-b ");
    ck_assert_ptr_nonnull(line);
    ck_assert_ptr_nonnull(strstr(line, "in flight 2"));
    ck_assert_ptr_nonnull(strstr(line, "paused for 2.5s"));
    free(line);
    /* The busiest tenant comes first; globex's pause and its override show in its row. */
    char *acme = strstr(text, "\nacme ");
    char *globex = strstr(text, "\nglobex ");
    ck_assert_ptr_nonnull(acme);
    ck_assert_ptr_nonnull(globex);
    ck_assert(acme < globex);
    line = line_with(text, "\nacme ");
    ck_assert_str_eq(line, "acme                      1  0.20 no           0       3       0    "
                           " 120       0       0       2");
    free(line);
    line = line_with(text, "\nglobex ");
    ck_assert_str_eq(line, "globex                    2  0.00 yes          0       0       0    "
                           "   0       3       2       4");
    free(line);
    ck_assert_uint_le(longest_line(text), 100);
    ck_assert_ptr_null(strchr(text, '\033')); /* plain text: no escape codes */
    free(text);
}
END_TEST

/* A shard's status says which partitions it schedules and its share. */
START_TEST(status_of_a_shard_names_its_partitions)
{
    json_t *status = load(status_admin_json);
    json_object_set_new(status, "shard",
                        json_pack("{s:i, s:[i,i,i], s:f}", "partitions", 8, "owned", 0, 3, 5,
                                  "share", 0.375));
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    ck_assert_int_eq(sl_cli_render_status(status, mem, NOW_MS), 0);
    fclose(mem);
    ck_assert_ptr_nonnull(
        strstr(text, "\nshard: 3 of 8 partitions (0, 3, 5), share of the shared limits 0.375\n"));
    free(text);
    json_decref(status);
}
END_TEST

/* With capacity leases: the coordinator, the lease left and what is granted. */
START_TEST(status_of_a_leased_shard_names_its_grants)
{
    json_t *status = load(status_admin_json);
    json_object_set_new(
        status, "shard",
        json_pack("{s:i, s:[i], s:{s:b, s:i, s:i, s:i, s:i, s:{s:f}}}", "partitions", 8, "owned",
                  0, "leases", "coordinator", 1, "epoch", 3, "shards_live", 3, "lease_left_ms",
                  9500, "expiries", 1, "granted", "deployment:sim-a:tpm", 0.245));
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    ck_assert_int_eq(sl_cli_render_status(status, mem, NOW_MS), 0);
    fclose(mem);
    ck_assert_msg(strstr(text, "\nshard: 1 of 8 partitions (0); capacity leases: coordinator of "
                               "epoch 3, 3 shards live, lease 9.5 s left (ran out 1 times)\n"
                               "  granted 0.245 of deployment:sim-a:tpm\n") != NULL,
                  "%s", text);
    free(text);
    json_decref(status);
}
END_TEST

START_TEST(partner_status_has_no_pools)
{
    char *text = render_status(status_partner_json);
    ck_assert_ptr_nonnull(strstr(text, "role partner  queued 3"));
    ck_assert_ptr_null(strstr(text, "pool "));
    ck_assert_ptr_null(strstr(text, "in flight 4"));
    ck_assert_ptr_nonnull(strstr(text, "\nTENANT "));
    char *line = line_with(text, "\nacme ");
    ck_assert_ptr_nonnull(line);
    ck_assert_ptr_nonnull(strstr(line, "      1       2       0       0"));
    free(line);
    free(text);
}
END_TEST

/* 25 tenants t00..t24 with t<i> holding i batch jobs: the 20 busiest are listed, busiest
 * first, and the 5 others are counted. */
START_TEST(tenant_table_shows_the_20_busiest_and_counts_the_rest)
{
    json_t *status = load(status_partner_json);
    json_t *tenants = json_array();
    for (int i = 0; i < 25; i++) {
        char name[16];
        snprintf(name, sizeof name, "t%02d", i);
        json_array_append_new(
            tenants, json_pack("{s:s, s:i, s:f, s:b, s:{s:i, s:i, s:i, s:i}, s:i, s:i, s:i}",
                               "tenant", name, "weight", 1, "guarantee", 0.0, "paused", 0, "queued",
                               "interactive", 0, "standard", 0, "partner", 0, "batch", i, "held", 0,
                               "delayed", 0, "in_flight", 0));
    }
    json_object_set_new(status, "tenants", tenants);
    capture_t c;
    ck_assert_int_eq(sl_cli_render_status(status, cap_begin(&c), NOW_MS), 0);
    char *text = cap_end(&c);
    json_decref(status);
    ck_assert_int_eq(count_of(text, "\nt"), 20);
    ck_assert_ptr_nonnull(strstr(text, "\nt24 "));
    ck_assert_ptr_nonnull(strstr(text, "\nt05 "));
    ck_assert_ptr_null(strstr(text, "\nt04 "));
    ck_assert_ptr_null(strstr(text, "\nt00 "));
    ck_assert(strstr(text, "\nt24 ") < strstr(text, "\nt23 "));
    ck_assert_ptr_nonnull(strstr(text, "\n... and 5 more\n"));
    free(text);

    /* Exactly 20: no "more" line. */
    status = load(status_partner_json);
    tenants = json_array();
    for (int i = 0; i < 20; i++) {
        char name[16];
        snprintf(name, sizeof name, "u%02d", i);
        json_array_append_new(tenants, json_pack("{s:s}", "tenant", name));
    }
    json_object_set_new(status, "tenants", tenants);
    ck_assert_int_eq(sl_cli_render_status(status, cap_begin(&c), NOW_MS), 0);
    text = cap_end(&c);
    json_decref(status);
    ck_assert_int_eq(count_of(text, "\nu"), 20);
    ck_assert_ptr_null(strstr(text, "more"));
    free(text);
}
END_TEST

/* A paused tenant's jobs are held, not queued: it still ranks by its whole backlog. */
START_TEST(tenant_table_ranks_held_and_delayed_jobs_as_backlog)
{
    json_t *status = load(status_partner_json);
    json_t *tenants = json_array();
    json_array_append_new(tenants, json_pack("{s:s, s:{s:i}, s:i}", "tenant", "busy", "queued",
                                             "batch", 30, "held", 0));
    json_array_append_new(tenants,
                          json_pack("{s:s, s:b, s:{s:i}, s:i, s:i}", "tenant", "paused", "paused",
                                    1, "queued", "batch", 0, "held", 100, "delayed", 5));
    json_array_append_new(tenants, json_pack("{s:s, s:{s:i}, s:i}", "tenant", "retrying", "queued",
                                             "batch", 10, "delayed", 25));
    json_object_set_new(status, "tenants", tenants);
    capture_t c;
    ck_assert_int_eq(sl_cli_render_status(status, cap_begin(&c), NOW_MS), 0);
    char *text = cap_end(&c);
    json_decref(status);
    char *paused = strstr(text, "\npaused ");
    char *retrying = strstr(text, "\nretrying ");
    char *busy = strstr(text, "\nbusy ");
    ck_assert_ptr_nonnull(paused);
    ck_assert_ptr_nonnull(retrying);
    ck_assert_ptr_nonnull(busy);
    ck_assert(paused < retrying);
    ck_assert(retrying < busy);
    free(text);
}
END_TEST

START_TEST(long_names_are_clipped_to_keep_lines_within_100_columns)
{
    json_t *status = load(status_admin_json);
    json_t *pool = json_array_get(json_object_get(status, "pools"), 0);
    json_object_set_new(pool, "route", json_string("a-route-name-that-goes-on-and-on-forever"));
    json_t *tenant = json_array_get(json_object_get(status, "tenants"), 0);
    json_object_set_new(tenant, "tenant", json_string("a-tenant-name-far-longer-than-the-column"));
    json_object_set_new(json_object_get(tenant, "queued"), "batch", json_integer(123456789));
    json_object_set_new(json_object_get(status, "totals"), "queued", json_integer(1234567));
    capture_t c;
    ck_assert_int_eq(sl_cli_render_status(status, cap_begin(&c), NOW_MS), 0);
    char *text = cap_end(&c);
    json_decref(status);
    ck_assert_uint_le(longest_line(text), 100);
    ck_assert_ptr_nonnull(strstr(text, "\na-tenant-name-far-l~ "));
    ck_assert_ptr_nonnull(strstr(text, "pool a-route-name-that-goes-~ "));
    free(text);
}
END_TEST

START_TEST(bucket_table_lists_limit_level_used_reset_and_override)
{
    json_t *buckets = json_array();
    json_array_append_new(buckets, load(bucket_json));
    json_array_append_new(buckets, load(override_bucket_json));
    char *text = render_buckets(buckets);
    json_decref(buckets);
    /* The id column fits the longest id, which is never clipped. */
    ck_assert_str_eq(text,
                     "BUCKET                          LIMIT             LEVEL/CAPACITY         "
                     "USED  RESET IN   OVERRIDE\n"
                     "deployment:sim-a:tpm            100000/min        12000.5/16666.7         "
                     "28%  4.0s       no\n"
                     "app:acme/prod/web:daily_tokens  2000000/day       500000/2000000          "
                     "75%  3h00m      yes (config 1000000)\n");
    free(text);
}
END_TEST

START_TEST(bars_round_and_clamp_used)
{
    static const struct {
        double used;
        const char *bar;
    } cases[] = {{0.0, "[..........]   0%"},   {0.04, "[..........]   4%"},
                 {0.52, "[#####.....]  52%"},  {0.96, "[#########.]  96%"},
                 {0.999, "[##########] 100%"}, {1.3, "[##########] 100%"},
                 {-0.2, "[..........]   0%"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *status = load(status_admin_json);
        json_t *dep = json_array_get(
            json_object_get(json_array_get(json_object_get(status, "pools"), 0), "deployments"), 0);
        json_t *bucket = json_array_get(json_object_get(dep, "buckets"), 0);
        json_object_set_new(bucket, "used", json_real(cases[i].used));
        capture_t c;
        ck_assert_int_eq(sl_cli_render_status(status, cap_begin(&c), NOW_MS), 0);
        char *text = cap_end(&c);
        json_decref(status);
        char *line = line_with(text, "    rpm");
        ck_assert_ptr_nonnull(line);
        ck_assert_msg(strstr(line, cases[i].bar) != NULL, "used %g: %s", cases[i].used, line);
        free(line);
        free(text);
    }
}
END_TEST

START_TEST(reset_times_are_formatted_by_size)
{
    static const struct {
        long long ms;
        const char *text;
    } cases[] = {{0, "0.0s"},          {49, "0.0s"},       {12300, "12.3s"},
                 {12349, "12.3s"},     {59940, "59.9s"},   {59960, "1m00s"},
                 {245000, "4m05s"},    {3599600, "1h00m"}, {11520000, "3h12m"},
                 {187200000, "2d04h"}, {-1500, "1.5s"},    {INT64_MIN, "53375995583d15h"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[64];
        sl_cli_fmt_duration(cases[i].ms, out, sizeof out);
        ck_assert_msg(strcmp(out, cases[i].text) == 0, "%lld ms: got %s, want %s", cases[i].ms, out,
                      cases[i].text);
    }
    /* A window due already says so rather than counting down below zero. */
    json_t *bucket = load(bucket_json);
    json_object_set_new(bucket, "reset_ms", json_integer(NOW_MS - 5000));
    json_t *buckets = json_pack("[o]", bucket);
    char *text = render_buckets(buckets);
    json_decref(buckets);
    ck_assert_ptr_nonnull(strstr(text, " 28%  now "));
    free(text);
}
END_TEST

START_TEST(tenant_view_shows_settings_against_the_config_and_its_buckets)
{
    json_t *tenant = load(tenant_json);
    capture_t c;
    ck_assert_int_eq(sl_cli_render_tenant(tenant, cap_begin(&c), NOW_MS), 0);
    char *text = cap_end(&c);
    json_decref(tenant);
    ck_assert_ptr_nonnull(
        strstr(text, "tenant acme: weight 3 (config 1), guarantee 0.20, PAUSED\n"));
    ck_assert_ptr_nonnull(strstr(text, "  held 123  delayed 0  in flight 2\n"));
    ck_assert_ptr_nonnull(strstr(text, "  keys: acme-prod, acme-dev (paused)\n"));
    char *line = line_with(text, "tenant:acme:daily_requests");
    ck_assert_ptr_nonnull(line);
    ck_assert_ptr_nonnull(strstr(line, "10000/day"));
    ck_assert_ptr_nonnull(strstr(line, "9000/10000"));
    ck_assert_ptr_nonnull(strstr(line, " 10%  11h46m "));
    free(line);
    free(text);
}
END_TEST

START_TEST(pause_answers_become_one_line)
{
    json_t *tenant = load(tenant_json);
    capture_t c;
    ck_assert_int_eq(sl_cli_render_pause(tenant, cap_begin(&c)), 0);
    char *text = cap_end(&c);
    ck_assert_str_eq(text, "tenant acme is paused: 123 queued jobs held, 2 calls in flight "
                           "finish\n");
    free(text);
    json_object_set_new(tenant, "paused", json_false());
    json_object_set_new(tenant, "held", json_integer(0));
    ck_assert_int_eq(sl_cli_render_pause(tenant, cap_begin(&c)), 0);
    text = cap_end(&c);
    ck_assert_str_eq(text, "tenant acme is not paused: 123 jobs queued, 0 still held by a key\n");
    free(text);
    json_decref(tenant);

    json_t *key = load("{\"key\": \"acme-prod\", \"tenant\": \"acme\", \"paused\": true}");
    ck_assert_int_eq(sl_cli_render_pause(key, cap_begin(&c)), 0);
    text = cap_end(&c);
    ck_assert_ptr_nonnull(strstr(text, "key acme-prod (tenant acme) is paused"));
    ck_assert_int_eq(count_of(text, "\n"), 1);
    free(text);
    json_decref(key);

    json_t *odd = load("{\"something\": 1}");
    ck_assert_int_eq(sl_cli_render_pause(odd, cap_begin(&c)), -1);
    free(cap_end(&c));
    json_decref(odd);
}
END_TEST

START_TEST(job_view_explains_why)
{
    json_t *job = load("{\"job_id\": \"j-1\", \"tenant\": \"acme\", \"route\": \"default\","
                       " \"class\": \"batch\", \"state\": \"queued\", \"attempts\": 0,"
                       " \"submitted_ms\": 1796299877000, \"deadline_ms\": 1796303477000,"
                       " \"waiting_for\": {\"limiter\": \"deployment:sim-a:tpm\","
                       " \"wait_ms\": 120}}");
    capture_t c;
    ck_assert_int_eq(sl_cli_render_job(job, cap_begin(&c), NOW_MS), 0);
    char *text = cap_end(&c);
    json_decref(job);
    ck_assert_ptr_nonnull(strstr(text, "job j-1\n"));
    ck_assert_ptr_nonnull(strstr(text, "  state      queued\n"));
    ck_assert_ptr_nonnull(strstr(text, "  tenant     acme  route default  class batch\n"));
    ck_assert_ptr_nonnull(strstr(text, "  submitted  2m03s ago (2026-12-03 12:11:17)\n"));
    ck_assert_ptr_nonnull(strstr(text, "  deadline   in 57m57s (2026-12-03 13:11:17)\n"));
    ck_assert_ptr_nonnull(strstr(
        text, "  why        waiting for limiter deployment:sim-a:tpm: room in about 0.1s\n"));
    free(text);

    job = load("{\"job_id\": \"j-2\", \"tenant\": \"acme\", \"route\": \"default\","
               " \"class\": \"standard\", \"state\": \"leased\", \"attempts\": 2,"
               " \"submitted_ms\": 1796299990000, \"deadline_ms\": 1796299997000,"
               " \"deployment\": \"sim-b\", \"lease_expires_ms\": 1796300025000}");
    ck_assert_int_eq(sl_cli_render_job(job, cap_begin(&c), NOW_MS), 0);
    text = cap_end(&c);
    json_decref(job);
    ck_assert_ptr_nonnull(strstr(text, "  attempts   2\n"));
    ck_assert_ptr_nonnull(strstr(text, "  deadline   passed 3.0s ago"));
    ck_assert_ptr_nonnull(
        strstr(text, "  why        leased to deployment sim-b; the lease expires in 25.0s"));
    free(text);

    job = load("{\"job_id\": \"j-3\", \"tenant\": \"acme\", \"route\": \"default\","
               " \"class\": \"batch\", \"state\": \"expired\", \"attempts\": 0,"
               " \"submitted_ms\": 1796299000000, \"deadline_ms\": 1796299900000,"
               " \"result\": {\"v\": 1, \"job_id\": \"j-3\", \"status\": \"expired\","
               " \"finished_ms\": 1796299900000, \"error\": {\"type\": \"deadline\","
               " \"reason\": \"deadline_exceeded\", \"message\": \"the deadline passed in the"
               " queue\", \"limiter\": \"deployment:sim-a:paused\", \"gateway_decision\":"
               " \"expired_in_queue\", \"retryable\": false}}}");
    ck_assert_int_eq(sl_cli_render_job(job, cap_begin(&c), NOW_MS), 0);
    text = cap_end(&c);
    json_decref(job);
    ck_assert_ptr_nonnull(strstr(
        text, "  why        expired: deadline_exceeded: the deadline passed in the queue\n"));
    ck_assert_ptr_nonnull(strstr(text, "             held back by deployment:sim-a:paused\n"));
    free(text);

    /* A held job waits for a pause to be lifted, not for room: no "room in about 0.0s". */
    job = load("{\"job_id\": \"j-5\", \"tenant\": \"acme\", \"route\": \"default\","
               " \"class\": \"batch\", \"state\": \"held\", \"attempts\": 0,"
               " \"submitted_ms\": 1796299877000, \"deadline_ms\": 1796303477000,"
               " \"waiting_for\": {\"limiter\": \"tenant:acme:paused\", \"wait_ms\": 0}}");
    ck_assert_int_eq(sl_cli_render_job(job, cap_begin(&c), NOW_MS), 0);
    text = cap_end(&c);
    json_decref(job);
    ck_assert_ptr_nonnull(strstr(text, "  why        waiting for limiter tenant:acme:paused\n"));
    ck_assert_ptr_nonnull(strstr(text, "             held: its tenant or its key is paused"));
    ck_assert_ptr_null(strstr(text, "room in"));
    free(text);

    job = load("{\"job_id\": \"j-4\", \"state\": \"succeeded\", \"attempts\": 1,"
               " \"result\": {\"v\": 1, \"job_id\": \"j-4\", \"status\": \"succeeded\","
               " \"finished_ms\": 1796299900000, \"deployment\": \"sim-a\","
               " \"usage\": {\"input\": 11, \"output\": 64}}}");
    ck_assert_int_eq(sl_cli_render_job(job, cap_begin(&c), NOW_MS), 0);
    text = cap_end(&c);
    json_decref(job);
    ck_assert_ptr_nonnull(strstr(text, "  why        succeeded on sim-a: tokens in 11 out 64\n"));
    ck_assert_ptr_nonnull(strstr(text, "  deadline   none\n"));
    free(text);
}
END_TEST

static char *body_text(int tenant, int argc, char **argv)
{
    char err[256] = "";
    json_t *body = sl_cli_quota_body(tenant, argc, argv, err, sizeof err);
    if (body == NULL)
        return NULL;
    char *text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(body);
    return text;
}

START_TEST(quota_body_turns_default_into_null)
{
    char *text;
    char *limit_default[] = {"default"};
    text = body_text(0, 1, limit_default);
    ck_assert_str_eq(text, "{\"limit\":null}");
    free(text);
    char *limit_n[] = {"250000"};
    text = body_text(0, 1, limit_n);
    ck_assert_str_eq(text, "{\"limit\":250000}");
    free(text);
    char *limit_real[] = {"1.5"};
    text = body_text(0, 1, limit_real);
    ck_assert_str_eq(text, "{\"limit\":1.5}");
    free(text);
    char *settings[] = {"weight=3", "guarantee=default", "daily_tokens=default",
                        "daily_requests=5000"};
    text = body_text(1, 4, settings);
    ck_assert_str_eq(text, "{\"daily_requests\":5000,\"daily_tokens\":null,\"guarantee\":null,"
                           "\"weight\":3}");
    free(text);
    char *guarantee[] = {"guarantee=0.25"};
    text = body_text(1, 1, guarantee);
    ck_assert_str_eq(text, "{\"guarantee\":0.25}");
    free(text);
}
END_TEST

START_TEST(quota_body_refuses_bad_values)
{
    char err[256];
    char *bad_limits[] = {"-3", "abc", "", "12x", "inf", "nan"};
    for (size_t i = 0; i < sizeof bad_limits / sizeof bad_limits[0]; i++) {
        err[0] = '\0';
        ck_assert_msg(sl_cli_quota_body(0, 1, &bad_limits[i], err, sizeof err) == NULL,
                      "LIMIT %s was taken", bad_limits[i]);
        ck_assert_str_ne(err, "");
    }
    char *two_limits[] = {"1", "2"};
    ck_assert_ptr_null(sl_cli_quota_body(0, 2, two_limits, err, sizeof err));
    char *bad_settings[][2] = {{"weight=1.5", NULL},      {"color=red", NULL},
                               {"weight", NULL},          {"weight=2", "weight=3"},
                               {"daily_tokens=-1", NULL}, {"weightx=1", NULL}};
    for (size_t i = 0; i < sizeof bad_settings / sizeof bad_settings[0]; i++) {
        int n = bad_settings[i][1] != NULL ? 2 : 1;
        err[0] = '\0';
        ck_assert_msg(sl_cli_quota_body(1, n, bad_settings[i], err, sizeof err) == NULL,
                      "%s was taken", bad_settings[i][0]);
        ck_assert_str_ne(err, "");
    }
    ck_assert_ptr_null(sl_cli_quota_body(1, 0, NULL, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "weight="));
}
END_TEST

START_TEST(path_segments_are_percent_encoded)
{
    char *esc = sl_cli_url_escape("deployment:sim-a:tpm");
    ck_assert_str_eq(esc, "deployment:sim-a:tpm");
    free(esc);
    esc = sl_cli_url_escape("app:acme/prod/web:rpm");
    ck_assert_str_eq(esc, "app:acme%2Fprod%2Fweb:rpm");
    free(esc);
    esc = sl_cli_url_escape("a b?#%&=+\xc3\xa9");
    ck_assert_str_eq(esc, "a%20b%3F%23%25%26%3D%2B%C3%A9");
    free(esc);
    esc = sl_cli_url_escape("");
    ck_assert_str_eq(esc, "");
    free(esc);
}
END_TEST

START_TEST(renderers_refuse_the_wrong_shape)
{
    json_t *arr = json_array();
    json_t *obj = json_object();
    capture_t c;
    ck_assert_int_eq(sl_cli_render_status(arr, cap_begin(&c), NOW_MS), -1);
    ck_assert_int_eq(sl_cli_render_buckets(obj, c.f, NOW_MS), -1);
    ck_assert_int_eq(sl_cli_render_tenant(arr, c.f, NOW_MS), -1);
    ck_assert_int_eq(sl_cli_render_job(NULL, c.f, NOW_MS), -1);
    char *text = cap_end(&c);
    ck_assert_str_eq(text, "");
    free(text);
    /* An empty table says so rather than printing a bare header. */
    text = render_buckets(arr);
    ck_assert_str_eq(text, "no buckets\n");
    free(text);
    json_decref(arr);
    json_decref(obj);
}
END_TEST

/* ---- The command line ------------------------------------------------------------------- */

/* What a command printed and returned. */
typedef struct {
    int rc;
    char *out; /* stdout; caller frees */
    char *err; /* stderr; caller frees */
} ran_t;

/* Reads back what went to the file behind fd since it was redirected there. */
static char *read_back(FILE *f)
{
    fflush(f);
    long len = ftell(f);
    ck_assert_int_ge(len, 0);
    char *text = calloc((size_t)len + 1, 1);
    ck_assert_ptr_nonnull(text);
    rewind(f);
    ck_assert_uint_eq(fread(text, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    return text;
}

/* Runs cmd(opts, argv) with stdout and stderr caught. argv is copied: commands reorder it. */
static ran_t run(int (*cmd)(sl_proc_opts_t *, int, char **), sl_proc_opts_t *opts,
                 const char *const *argv)
{
    char *args[32];
    int argc = 0;
    for (; argv[argc] != NULL; argc++) {
        ck_assert_int_lt(argc, 31);
        args[argc] = (char *)argv[argc];
    }
    args[argc] = NULL;
    FILE *out = tmpfile(), *err = tmpfile();
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(err);
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(STDOUT_FILENO), saved_err = dup(STDERR_FILENO);
    dup2(fileno(out), STDOUT_FILENO);
    dup2(fileno(err), STDERR_FILENO);
    ran_t r = {cmd(opts, argc, args), NULL, NULL};
    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, STDOUT_FILENO);
    dup2(saved_err, STDERR_FILENO);
    close(saved_out);
    close(saved_err);
    r.out = read_back(out);
    r.err = read_back(err);
    return r;
}

static ran_t run_fresh(int (*cmd)(sl_proc_opts_t *, int, char **), const char *const *argv)
{
    sl_proc_opts_t opts;
    sl_proc_init(&opts);
    return run(cmd, &opts, argv);
}

static void ran_free(ran_t *r)
{
    free(r->out);
    free(r->err);
}

static const struct {
    const char *name;
    int (*run)(sl_proc_opts_t *, int, char **);
    const char *usage; /* how its usage starts */
} commands[] = {
    {"submit", sl_cli_submit, "usage: sluice submit"},
    {"results", sl_cli_results, "usage: sluice results"},
    {"cancel", sl_cli_cancel, "usage: sluice cancel"},
    {"hash-key", sl_cli_hash_key, "usage: sluice hash-key"},
    {"keygen", sl_cli_keygen, "usage: sluice keygen"},
    {"status", sl_cli_status, "usage: sluice status"},
    {"pause", sl_cli_pause, "usage: sluice pause"},
    {"resume", sl_cli_resume, "usage: sluice pause"},
    {"quota", sl_cli_quota, "usage: sluice quota"},
    {"jobs", sl_cli_jobs, "usage: sluice jobs"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

/* A sluice main's first parse: the common options up to the command's name. */
static int parse_head(int argc, char **argv, sl_proc_opts_t *opts, int *npos)
{
    static const sl_proc_cmdline_t head = {"sluice", "usage: sluice COMMAND\n", NULL,
                                           SL_PROC_COMMAND};
    sl_proc_init(opts);
    return sl_proc_args(&head, argc, argv, opts, npos);
}

START_TEST(every_command_answers_help_on_stdout)
{
    for (size_t i = 0; i < NCOMMANDS; i++) {
        const char *flags[] = {"--help", "-h"};
        for (size_t f = 0; f < 2; f++) {
            const char *argv[] = {commands[i].name, flags[f], NULL};
            ran_t r = run_fresh(commands[i].run, argv);
            ck_assert_msg(r.rc == 0, "%s %s exits %d", commands[i].name, flags[f], r.rc);
            ck_assert_msg(strncmp(r.out, commands[i].usage, strlen(commands[i].usage)) == 0,
                          "%s %s printed: %s", commands[i].name, flags[f], r.out);
            ck_assert_str_eq(r.err, "");
            ran_free(&r);
        }
    }
}
END_TEST

START_TEST(unknown_option_prints_usage_on_stderr)
{
    for (size_t i = 0; i < NCOMMANDS; i++) {
        const char *argv[] = {commands[i].name, "--bogus", NULL};
        ran_t r = run_fresh(commands[i].run, argv);
        ck_assert_msg(r.rc == 2, "%s --bogus exits %d", commands[i].name, r.rc);
        ck_assert_str_eq(r.out, "");
        ck_assert_msg(strstr(r.err, ": unknown argument --bogus\n") != NULL, "%s", r.err);
        ck_assert_ptr_nonnull(strstr(r.err, commands[i].usage));
        ran_free(&r);
    }
}
END_TEST

START_TEST(help_wins_over_a_usage_error)
{
    const char *argv[] = {"status", "--bogus", "--interval", "--help", NULL};
    ran_t r = run_fresh(sl_cli_status, argv);
    /* --interval takes "--help" as its value, so only --bogus is wrong... */
    ck_assert_int_eq(r.rc, 2);
    ran_free(&r);
    const char *argv2[] = {"status", "--bogus", "--help", "--interval", NULL};
    r = run_fresh(sl_cli_status, argv2);
    /* ...and here --help is asked for, which beats both --bogus and the missing value. */
    ck_assert_int_eq(r.rc, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "usage: sluice status"));
    ck_assert_str_eq(r.err, "");
    ran_free(&r);
}
END_TEST

START_TEST(missing_value_is_an_error)
{
    static const struct {
        const char *argv[5];
        const char *says;
    } cases[] = {
        {{"status", "--interval", NULL}, "sluice status: --interval needs a value\n"},
        {{"status", "--once", "--admin", NULL}, "sluice status: --admin needs a value\n"},
        {{"submit", "--file", NULL}, "sluice submit: --file needs a value\n"},
        {{"results", "demo-1", "--timeout", NULL}, "sluice results: --timeout needs a value\n"},
        {{"cancel", "--api-key", NULL}, "sluice cancel: --api-key needs a value\n"},
        {{"quota", "get", "--tenant", NULL}, "sluice quota: --tenant needs a value\n"},
        {{"jobs", "J1", "--config", NULL}, "sluice jobs: --config needs a value\n"},
        {{"pause", "tenant", "acme", "--admin-key-file", NULL},
         "sluice pause: --admin-key-file needs a value\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int (*cmd)(sl_proc_opts_t *, int, char **) = NULL;
        for (size_t c = 0; c < NCOMMANDS; c++) {
            if (strcmp(commands[c].name, cases[i].argv[0]) == 0)
                cmd = commands[c].run;
        }
        ran_t r = run_fresh(cmd, cases[i].argv);
        ck_assert_msg(r.rc == 2, "%s exits %d", cases[i].says, r.rc);
        ck_assert_msg(strncmp(r.err, cases[i].says, strlen(cases[i].says)) == 0, "%s", r.err);
        ck_assert_str_eq(r.out, "");
        ran_free(&r);
    }
    /* Before the command's name too. */
    char *argv[] = {"sluice", "--log-level", NULL};
    sl_proc_opts_t opts;
    int npos = -1;
    fflush(stderr);
    int saved_err = dup(STDERR_FILENO);
    FILE *err = tmpfile();
    ck_assert_ptr_nonnull(err);
    dup2(fileno(err), STDERR_FILENO);
    int rc = parse_head(2, argv, &opts, &npos);
    fflush(stderr);
    dup2(saved_err, STDERR_FILENO);
    close(saved_err);
    char *said = read_back(err);
    ck_assert_int_eq(rc, 2);
    ck_assert_ptr_nonnull(strstr(said, "sluice: --log-level needs a value\n"));
    free(said);
}
END_TEST

START_TEST(equals_form_accepted)
{
    /* Each value reaches the command's own check, which then refuses it. */
    const char *status[] = {"status", "--interval=0.01", NULL};
    ran_t r = run_fresh(sl_cli_status, status);
    ck_assert_int_eq(r.rc, 2);
    ck_assert_str_eq(r.err, "sluice status: --interval takes seconds, 0.1 to 3600\n");
    ran_free(&r);
    const char *submit[] = {"submit", "--file=examples/jobs.jsonl", "--class=urgent", NULL};
    r = run_fresh(sl_cli_submit, submit);
    ck_assert_int_eq(r.rc, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--class must be interactive"));
    ran_free(&r);
    const char *quota[] = {"quota", "set", "--tenant=acme", "weight=x", NULL};
    r = run_fresh(sl_cli_quota, quota);
    ck_assert_int_eq(r.rc, 2);
    ck_assert_str_eq(r.err, "sluice quota: weight must be a non-negative integer or \"default\"\n");
    ran_free(&r);
    /* The common options too. */
    const char *jobs[] = {"jobs",
                          "--config=a.json",
                          "--log-level=debug",
                          "--metrics-listen=127.0.0.1:9",
                          "J1",
                          "--help",
                          NULL};
    sl_proc_opts_t opts;
    sl_proc_init(&opts);
    r = run(sl_cli_jobs, &opts, jobs);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_str_eq(opts.config_path, "a.json");
    ck_assert_str_eq(opts.log_level, "debug");
    ck_assert_str_eq(opts.metrics_listen, "127.0.0.1:9");
    ran_free(&r);
    /* A flag takes no value. */
    const char *once[] = {"status", "--once=yes", NULL};
    r = run_fresh(sl_cli_status, once);
    ck_assert_int_eq(r.rc, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "sluice status: --once takes no value\n"));
    ran_free(&r);
}
END_TEST

START_TEST(common_options_after_command)
{
    char *argv[] = {"sluice",   "--config", "a.json",      "quota", "get",    "--tenant", "acme",
                    "--config", "b.json",   "--log-level", "debug", "--help", NULL};
    sl_proc_opts_t opts;
    int npos = 0;
    ck_assert_int_eq(parse_head(12, argv, &opts, &npos), SL_PROC_GO_ON);
    /* The head stops at the command: what follows is the command's, unparsed. */
    ck_assert_int_eq(npos, 9);
    ck_assert_str_eq(argv[1], "quota");
    ck_assert_str_eq(opts.config_path, "a.json");
    ck_assert_int_eq(opts.help, 0);
    const char *cmd[10];
    for (int i = 0; i < npos; i++)
        cmd[i] = argv[1 + i];
    cmd[npos] = NULL;
    ran_t r = run(sl_cli_quota, &opts, cmd);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "usage: sluice quota"));
    ck_assert_str_eq(opts.config_path, "b.json");
    ck_assert_str_eq(opts.log_level, "debug");
    ran_free(&r);
}
END_TEST

START_TEST(help_before_the_command_is_the_commands)
{
    char *argv[] = {"sluice", "--help", "jobs", NULL};
    sl_proc_opts_t opts;
    int npos = 0;
    ck_assert_int_eq(parse_head(3, argv, &opts, &npos), SL_PROC_GO_ON);
    ck_assert_int_eq(npos, 1);
    ck_assert_int_eq(opts.help, 1);
    const char *cmd[] = {argv[1], NULL};
    ran_t r = run(sl_cli_jobs, &opts, cmd);
    ck_assert_int_eq(r.rc, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "usage: sluice jobs"));
    ran_free(&r);
}
END_TEST

START_TEST(positional_arguments_keep_their_order_among_options)
{
    char *argv[] = {"results", "demo-1", "--timeout", "5",  "demo-2",
                    "--all",   "--",     "--all",     "-h", NULL};
    const char *timeout = NULL;
    int all = 0;
    const sl_proc_opt_t own[] = {
        {"timeout", &timeout, NULL}, {"all", NULL, &all}, {NULL, NULL, NULL}};
    const sl_proc_cmdline_t cl = {"sluice results", "usage\n", own, SL_PROC_ARGS};
    sl_proc_opts_t opts;
    sl_proc_init(&opts);
    int npos = 0;
    ck_assert_int_eq(sl_proc_args(&cl, 9, argv, &opts, &npos), SL_PROC_GO_ON);
    ck_assert_str_eq(timeout, "5");
    ck_assert_int_eq(all, 1);
    ck_assert_int_eq(opts.help, 0); /* after "--", -h is an argument */
    ck_assert_int_eq(npos, 4);
    ck_assert_str_eq(argv[1], "demo-1");
    ck_assert_str_eq(argv[2], "demo-2");
    ck_assert_str_eq(argv[3], "--all");
    ck_assert_str_eq(argv[4], "-h");
}
END_TEST

START_TEST(parsing_twice_starts_afresh)
{
    /* The head leaves getopt_long stopped at "results" in "+" mode; the command's parse must
     * begin again at its own argv[1] and hand back arguments in order ("-" mode), or --all,
     * which follows a positional argument, would be lost. */
    char *argv[] = {"sluice", "--config", "a.json", "results", "demo-1", "--all", NULL};
    sl_proc_opts_t opts;
    int npos = 0;
    ck_assert_int_eq(parse_head(6, argv, &opts, &npos), SL_PROC_GO_ON);
    ck_assert_int_eq(npos, 3);
    int all = 0;
    const sl_proc_opt_t own[] = {{"all", NULL, &all}, {NULL, NULL, NULL}};
    const sl_proc_cmdline_t cl = {"sluice results", "usage\n", own, SL_PROC_ARGS};
    int nargs = 0;
    ck_assert_int_eq(sl_proc_args(&cl, npos, argv + 1, &opts, &nargs), SL_PROC_GO_ON);
    ck_assert_int_eq(all, 1);
    ck_assert_int_eq(nargs, 1);
    ck_assert_str_eq(argv[2], "demo-1");
    ck_assert_str_eq(opts.config_path, "a.json");
}
END_TEST

START_TEST(proc_parse_leaves_the_rest_in_order)
{
    /* The entry point for a program that parses its own options after the common ones. */
    char *argv[] = {"prog", "--config=a.json", "--file", "f", "--bogus", "pos", "-h",
                    "--",   "--log-level",     NULL};
    sl_proc_opts_t opts;
    sl_proc_parse(9, argv, &opts);
    ck_assert_str_eq(opts.config_path, "a.json");
    ck_assert_str_eq(opts.log_level, "info");
    ck_assert_int_eq(opts.help, 1);
    const char *rest[] = {"--file", "f", "--bogus", "pos", "--", "--log-level"};
    ck_assert_int_eq(opts.nrest, 6);
    for (int i = 0; i < 6; i++)
        ck_assert_str_eq(opts.rest[i], rest[i]);
    free(opts.rest);
}
END_TEST

static Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("admin");
    tcase_add_test(tc, status_shows_bars_levels_limits_and_reset_times);
    tcase_add_test(tc, status_shows_header_pools_and_deployments);
    tcase_add_test(tc, partner_status_has_no_pools);
    tcase_add_test(tc, status_of_a_shard_names_its_partitions);
    tcase_add_test(tc, status_of_a_leased_shard_names_its_grants);
    tcase_add_test(tc, tenant_table_shows_the_20_busiest_and_counts_the_rest);
    tcase_add_test(tc, tenant_table_ranks_held_and_delayed_jobs_as_backlog);
    tcase_add_test(tc, long_names_are_clipped_to_keep_lines_within_100_columns);
    tcase_add_test(tc, bucket_table_lists_limit_level_used_reset_and_override);
    tcase_add_test(tc, bars_round_and_clamp_used);
    tcase_add_test(tc, reset_times_are_formatted_by_size);
    tcase_add_test(tc, tenant_view_shows_settings_against_the_config_and_its_buckets);
    tcase_add_test(tc, pause_answers_become_one_line);
    tcase_add_test(tc, job_view_explains_why);
    tcase_add_test(tc, quota_body_turns_default_into_null);
    tcase_add_test(tc, quota_body_refuses_bad_values);
    tcase_add_test(tc, path_segments_are_percent_encoded);
    tcase_add_test(tc, renderers_refuse_the_wrong_shape);
    suite_add_tcase(s, tc);
    TCase *args = tcase_create("command line");
    tcase_add_test(args, every_command_answers_help_on_stdout);
    tcase_add_test(args, unknown_option_prints_usage_on_stderr);
    tcase_add_test(args, help_wins_over_a_usage_error);
    tcase_add_test(args, missing_value_is_an_error);
    tcase_add_test(args, equals_form_accepted);
    tcase_add_test(args, common_options_after_command);
    tcase_add_test(args, help_before_the_command_is_the_commands);
    tcase_add_test(args, positional_arguments_keep_their_order_among_options);
    tcase_add_test(args, parsing_twice_starts_afresh);
    tcase_add_test(args, proc_parse_leaves_the_rest_in_order);
    suite_add_tcase(s, args);
    return s;
}

int main(void)
{
    /* The views show local time; the expected text is in UTC. */
    setenv("TZ", "UTC", 1);
    tzset();
    SRunner *sr = srunner_create(cli_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
