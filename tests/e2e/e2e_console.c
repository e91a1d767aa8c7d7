/* e2e_console - the operator console (GET /console/ on the scheduler's admin listener) in a real
 * browser: Debian's chromium, headless, driven over the DevTools protocol (cdp.c), against a
 * live stack with 10,002 tenants and a simulated deployment of 120 requests a 6-second minute.
 *
 * Asserts:
 *   - the page loads with no key and shows nothing but the sign-in; an admin key signs in;
 *   - under load, the numbers on the page match the admin API and the simulator's own count:
 *     jobs succeeded, and the calls charged to the deployment against the calls the simulator
 *     admitted;
 *   - 10,002 tenants are paged (50 a page) and searchable, and the page loads in under 5 s;
 *   - a limit changed from the page holds (the API shows it), a tenant paused from the page
 *     has its queued jobs held (the page and the API agree, the simulator gets no call of it),
 *     and after resuming from the page every one of them succeeds;
 *   - bad input in a form shows the API's own error; an API key paused and resumed from the
 *     page is paused and running again in the API;
 *   - a partner key sees only its tenant: no pools, no queues, no other tenant's name anywhere
 *     on the page;
 *   - the key is never in the page's address, nor in the scheduler's log.
 * With CONSOLE_SCREENSHOT=path set, a PNG of the page under load is written there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdp.h"
#include "harness.h"
#include "util.h"

enum { MINUTE_MS = 6000, RPM = 120, SLICES = 60, EXTRA_TENANTS = 10000, LOAD_JOBS = 100,
       HOLD_JOBS = 30, LOWER_RPM = 12 };

static const char *const ADMIN_KEY = "console-admin-e2e-secret";
static const char *const PARTNER_KEY = "console-partner-e2e-secret";
static char base[64];

static const char *write_configs(int sim_port, int admin_port, char **sim_cfg)
{
    const char *dir = h_tmpdir();
    char h1[65], h2[65], ha[65], hp[65];
    h_key_hash_hex("sk-console-acme", h1);
    h_key_hash_hex("sk-console-globex", h2);
    h_key_hash_hex(ADMIN_KEY, ha);
    h_key_hash_hex(PARTNER_KEY, hp);
    char sim[1024];
    snprintf(sim, sizeof sim,
             "{\"minute_ms\": %d, \"deployments\": [{\"name\": \"sim\", \"rpm\": %d,"
             " \"slices_per_minute\": %d, \"ttft_ms\": 20, \"ms_per_token\": 0.5,"
             " \"api_key\": \"e2e-provider-key\"}]}",
             MINUTE_MS, RPM, SLICES);
    *sim_cfg = strdup(h_write("sim.json", sim));
    char *keyfile = strdup(h_write("provider.key", "e2e-provider-key\n"));
    size_t cap = 64 * 1024 + (size_t)EXTRA_TENANTS * 40;
    char *cfg = malloc(cap);
    size_t n = (size_t)snprintf(
        cfg, cap,
        "{\"minute_ms\": %d,"
        " \"kafka\": {\"bootstrap_file\": \"%s/bootstrap\"},"
        " \"scheduler\": {\"db\": \"%s/sluice.db\", \"lease_ms\": 20000,"
        "                 \"admin_listen\": \"127.0.0.1:%d\"},"
        " \"signing\": {\"secret_key_file\": \"%s/dispatch.key\","
        "               \"public_key_file\": \"%s/dispatch.pub\"},"
        " \"deployments\": [{\"name\": \"sim\", \"model\": \"m\", \"api_key_file\": \"%s\","
        "   \"base_url\": \"http://127.0.0.1:%d/sim/v1\", \"limits\": {\"rpm\": %d},"
        "   \"slices_per_minute\": %d}],"
        " \"routes\": [{\"name\": \"chat\", \"deployments\": [\"sim\"]}],"
        " \"keys\": [{\"id\": \"k-acme\", \"tenant\": \"acme\", \"hash\": \"%s\"},"
        "            {\"id\": \"k-globex\", \"tenant\": \"globex\", \"hash\": \"%s\"}],"
        " \"admin_keys\": [{\"id\": \"ops\", \"hash\": \"%s\", \"role\": \"admin\"},"
        "   {\"id\": \"p-acme\", \"hash\": \"%s\", \"role\": \"partner\", \"tenants\": [\"acme\"]}],"
        " \"tenants\": [{\"name\": \"acme\"}, {\"name\": \"globex\"}",
        MINUTE_MS, dir, dir, admin_port, dir, dir, keyfile, sim_port, RPM, SLICES, h1, h2, ha,
        hp);
    for (int i = 0; i < EXTRA_TENANTS; i++)
        n += (size_t)snprintf(cfg + n, cap - n, ", {\"name\": \"tenant-%05d\"}", i);
    snprintf(cfg + n, cap - n, "]}");
    free(keyfile);
    const char *path = h_write("sluice.json", cfg);
    free(cfg);
    return strdup(path);
}

static json_t *api(const char *method, const char *path, const char *body, long *status)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", base, path);
    long st = 0;
    json_t *doc = h_http_call(method, url, ADMIN_KEY, body, &st);
    if (status != NULL)
        *status = st;
    return doc;
}

/* A number from the admin API: path, then a JSON pointer-ish walk of object keys. */
static double api_number(const char *path, const char *k1, const char *k2)
{
    json_t *doc = api("GET", path, NULL, NULL);
    json_t *v = json_object_get(doc, k1);
    if (k2 != NULL)
        v = json_object_get(v, k2);
    double d = json_number_value(v);
    json_decref(doc);
    return d;
}

/* Polls acme's key `id` in the API until its pause is `want` (5 s at most). */
static int key_paused_is(const char *id, int want)
{
    double until = sl_mono_ms() + 5000;
    while (sl_mono_ms() < until) {
        json_t *t = api("GET", "/v1/tenants/acme", NULL, NULL);
        size_t i;
        json_t *k;
        int is = -1;
        json_array_foreach(json_object_get(t, "keys"), i, k) {
            const char *kid = json_string_value(json_object_get(k, "id"));
            if (kid != NULL && strcmp(kid, id) == 0)
                is = json_is_true(json_object_get(k, "paused"));
        }
        json_decref(t);
        if (is == want)
            return 1;
        usleep(100000);
    }
    return 0;
}

static void submit(rd_kafka_t *prod, const char *prefix, int n, const char *api_key)
{
    for (int i = 0; i < n; i++) {
        char idem[48], req[512];
        snprintf(idem, sizeof idem, "%s-%03d", prefix, i);
        int len = snprintf(req, sizeof req,
                           "{\"idempotency_key\": \"%s\", \"api_key\": \"%s\","
                           " \"route\": \"chat\", \"request\": {\"messages\": [{\"role\":"
                           " \"user\", \"content\": \"question %d\"}], \"max_tokens\": 20}}",
                           idem, api_key, i);
        h_produce(prod, "sluice.requests", idem, req, (size_t)len);
    }
    rd_kafka_flush(prod, 30000);
}

/* Reads results until `want` more have come (or timeout_ms); returns how many succeeded. */
static int read_results(rd_kafka_t *cons, int want, int timeout_ms, int *got)
{
    int ok = 0;
    *got = 0;
    double deadline = sl_mono_ms() + timeout_ms;
    while (*got < want && sl_mono_ms() < deadline) {
        json_t *r = NULL;
        if (!h_poll_json(cons, 200, &r))
            continue;
        const char *status = json_string_value(json_object_get(r, "status"));
        if (status != NULL) {
            (*got)++;
            ok += strcmp(status, "succeeded") == 0;
        }
        json_decref(r);
    }
    return ok;
}

/* The page's number in the element the selector names ("1,234" -> 1234; -1 when none). */
static double page_number(cdp_t *c, const char *selector)
{
    char expr[512];
    snprintf(expr, sizeof expr,
             "(() => { const e = document.querySelector(%s); if (!e) return -1;"
             " const n = Number(e.textContent.replace(/[^0-9.]/g, '')); return isNaN(n) ? -1 : n; })()",
             selector);
    json_t *v = cdp_eval(c, expr, 5000);
    double d = v != NULL ? json_number_value(v) : -1;
    json_decref(v);
    return d;
}

static char *page_text(cdp_t *c, const char *selector)
{
    char expr[512];
    snprintf(expr, sizeof expr, "document.querySelector(%s)?.textContent ?? ''", selector);
    char *s = cdp_eval_string(c, expr);
    return s != NULL ? s : strdup("");
}

/* Waits for `n` more refreshes of the page than it had. */
static int wait_refreshes(cdp_t *c, int n)
{
    json_t *v = cdp_eval(c, "Number(document.body.dataset.refreshes || 0)", 5000);
    int have = v != NULL ? (int)json_number_value(v) : 0;
    json_decref(v);
    char expr[128];
    snprintf(expr, sizeof expr, "Number(document.body.dataset.refreshes || 0) >= %d", have + n);
    return cdp_wait_true(c, expr, 20000);
}

/* Polls the bucket's limit in the API until it is want (10 s at most). */
static int wait_limit(const char *bucket_path, double want)
{
    double until = sl_mono_ms() + 10000;
    while (sl_mono_ms() < until) {
        if (api_number(bucket_path, "limit", NULL) == want)
            return 1;
        usleep(100000);
    }
    return 0;
}

static int eval_ok(cdp_t *c, const char *expr)
{
    json_t *v = cdp_eval(c, expr, 5000);
    int ok = v != NULL && json_is_true(v);
    json_decref(v);
    return ok;
}

static void sign_in(cdp_t *c, const char *key)
{
    char expr[256];
    snprintf(expr, sizeof expr,
             "document.getElementById('key').value = '%s';"
             " document.getElementById('signin').requestSubmit(); true",
             key);
    eval_ok(c, expr);
}

/* Clicks the button the selector names, then the dialog's Confirm (after typing `input` into its
 * field when not NULL). */
static int click_and_confirm(cdp_t *c, const char *selector, const char *input)
{
    char expr[512];
    snprintf(expr, sizeof expr,
             "(() => { const b = document.querySelector(%s); if (!b) return false; b.click();"
             " return true; })()",
             selector);
    if (!eval_ok(c, expr) || !cdp_wait_true(c, "document.getElementById('confirm').open", 5000))
        return 0;
    if (input != NULL) {
        snprintf(expr, sizeof expr, "document.getElementById('confirm-input').value = '%s'; true",
                 input);
        eval_ok(c, expr);
    }
    return eval_ok(c, "document.getElementById('confirm-ok').click(); true") &&
           cdp_wait_true(c, "!document.getElementById('confirm').open", 5000);
}

static void search_tenants(cdp_t *c, const char *q)
{
    char expr[256];
    snprintf(expr, sizeof expr,
             "document.getElementById('tenant-q').value = '%s';"
             " document.getElementById('tenant-search').requestSubmit(); true",
             q);
    eval_ok(c, expr);
}

int main(void)
{
    char *sim_cfg = NULL;
    int sim_port = h_free_port();
    int admin_port = h_free_port();
    snprintf(base, sizeof base, "http://127.0.0.1:%d", admin_port);
    const char *cfg = write_configs(sim_port, admin_port, &sim_cfg);
    h_stack_t st;
    h_stack_up(&st, cfg, sim_cfg, sim_port);
    /* The admin listener opens after the stack is up (later with 10,002 tenants under ASan):
     * the browser's first request must not race it. */
    char status_url[600];
    snprintf(status_url, sizeof status_url, "%s/v1/status", base);
    h_wait_http_ok(status_url, ADMIN_KEY, 20000);
    rd_kafka_t *prod = h_producer(st.bootstrap);
    rd_kafka_t *cons = h_consumer_from_start(st.bootstrap, "sluice.results");

    cdp_t c;
    char err[512];
    if (cdp_start(&c, h_tmpdir(), err, sizeof err) != 0) {
        h_check(0, "chromium started: %s", err);
        h_stack_down(&st);
        return h_summary("console");
    }
    char url[128];
    snprintf(url, sizeof url, "%s/", base);
    h_check(cdp_navigate(&c, url) == 0 &&
                cdp_wait_true(&c, "document.readyState === 'complete' && "
                                  "!!document.getElementById('signin')", 10000),
            "GET / leads to the console's page");
    h_check(eval_ok(&c, "document.getElementById('main').hidden && "
                        "!document.getElementById('signin-panel').hidden && "
                        "location.pathname === '/console/'"),
            "without a key the page shows only the sign-in");
    sign_in(&c, "not-a-key");
    h_check(cdp_wait_true(&c, "!document.getElementById('error').hidden && "
                              "document.getElementById('error').textContent.includes('unknown admin key')",
                          10000),
            "an unknown key is refused with the API's message");
    sign_in(&c, ADMIN_KEY);
    h_check(wait_refreshes(&c, 1), "the admin key signs in (the page refreshed)");
    char *role = page_text(&c, "'#role'");
    h_check(strcmp(role, "admin") == 0, "the page says admin (%s)", role);
    free(role);

    /* ---- under load: the page against the API and the simulator ---- */
    double load_start = sl_mono_ms();
    submit(prod, "acme", LOAD_JOBS, "sk-console-acme");
    submit(prod, "globex", LOAD_JOBS, "sk-console-globex");
    const char *shot = getenv("CONSOLE_SCREENSHOT");
    if (shot != NULL && shot[0] != '\0') {
        while (sl_mono_ms() - load_start < 7000)
            usleep(100000);
        wait_refreshes(&c, 1);
        h_check(cdp_screenshot(&c, shot, 1400, 1500) == 0, "a screenshot under load in %s", shot);
    }
    int got = 0;
    int ok = read_results(cons, 2 * LOAD_JOBS, 60000, &got);
    h_check(ok == 2 * LOAD_JOBS, "the load's %d jobs succeeded (%d of %d results)", 2 * LOAD_JOBS,
            ok, got);
    usleep(1500000); /* the last usage events are reconciled and sampled */
    wait_refreshes(&c, 2);
    double page_ok = page_number(&c, "'[data-field=succeeded] b'");
    double api_ok = api_number("/v1/queues", "totals", "succeeded");
    h_check(page_ok == api_ok && api_ok == 2 * LOAD_JOBS,
            "jobs succeeded: page %.0f, API %.0f, results %d", page_ok, api_ok, ok);
    json_t *stats = h_http_json(st.stats_url);
    double sim_calls = (double)h_sim_total(stats, "admitted");
    json_decref(stats);
    double page_calls = page_number(&c, "'[data-calls=sim]'");
    json_t *h = api("GET", "/v1/history", NULL, NULL);
    json_t *calls = json_object_get(json_array_get(json_object_get(h, "deployments"), 0), "calls");
    double api_calls = json_number_value(json_array_get(calls, json_array_size(calls) - 1));
    json_decref(h);
    h_check(page_calls == sim_calls && api_calls == sim_calls && sim_calls >= 2 * LOAD_JOBS,
            "calls answered by the deployment: page %.0f, API %.0f, the simulator's own count "
            "%.0f",
            page_calls, api_calls, sim_calls);
    json_t *hist = api("GET", "/v1/history", NULL, NULL);
    size_t samples = json_array_size(json_object_get(hist, "t"));
    json_decref(hist);
    h_check(samples >= 5 && eval_ok(&c, "!!document.querySelector('canvas[data-chart=sim]')"),
            "the deployment's chart is drawn from %zu samples", samples);
    h_check(page_number(&c, "'[data-queue=\"chat/standard\"] [data-field=depth]'") == 0,
            "the queue table shows the drained queue");

    /* ---- 10,002 tenants: pages, search, load time ---- */
    char *pg = page_text(&c, "'#tenant-page'");
    h_check(strcmp(pg, "1–50 of 10,002") == 0, "the first page of tenants (%s)", pg);
    free(pg);
    eval_ok(&c, "document.getElementById('tenant-next').click(); true");
    h_check(cdp_wait_true(&c, "document.getElementById('tenant-page').textContent === '51–100 of 10,002'", 5000),
            "the next page of tenants");
    search_tenants(&c, "tenant-0999");
    double api_found = api_number("/v1/tenants?q=tenant-0999", "total", NULL);
    h_check(cdp_wait_true(&c, "document.querySelectorAll('#tenants tbody tr').length === 10", 5000) &&
                api_found == 10,
            "a search finds the 10 tenants the API finds (%.0f)", api_found);
    double t0 = sl_mono_ms();
    json_decref(cdp_call(&c, "Page.reload", NULL, 10000));
    int loaded = cdp_wait_true(&c, "document.body.dataset.refreshes === '1'", 15000);
    double load_ms = sl_mono_ms() - t0;
    printf("  page load with %d tenants, signed in, to the first full refresh: %.0f ms\n",
           EXTRA_TENANTS + 2, load_ms);
    h_check(loaded && load_ms < 5000, "the page loads and fills in under 5 s (%.0f ms)", load_ms);

    /* ---- a limit, a pause and a resume from the page ---- */
    h_check(click_and_confirm(&c, "'[data-change-limit=\"deployment:sim:rpm\"]'", "12") &&
                wait_limit("/v1/buckets/deployment:sim:rpm", LOWER_RPM),
            "the deployment's limit changed from the page to %d", LOWER_RPM);
    submit(prod, "hold", HOLD_JOBS, "sk-console-globex");
    double until = sl_mono_ms() + 10000;
    while (api_number("/v1/tenants/globex", "queued", "standard") < HOLD_JOBS / 2 &&
           sl_mono_ms() < until)
        usleep(100000);
    search_tenants(&c, "globex");
    cdp_wait_true(&c, "!!document.querySelector('[data-tenant=globex] [data-action=pause]')", 5000);
    json_t *paused_ok = NULL;
    (void)paused_ok;
    h_check(click_and_confirm(&c, "'[data-tenant=globex] [data-action=pause]'", NULL),
            "the pause was confirmed in the page's dialog");
    until = sl_mono_ms() + 5000;
    int paused = 0;
    while (!paused && sl_mono_ms() < until) {
        paused_ok = api("GET", "/v1/tenants/globex", NULL, NULL);
        paused = json_is_true(json_object_get(paused_ok, "paused"));
        json_decref(paused_ok);
        usleep(100000);
    }
    h_check(paused, "the API says globex is paused");
    usleep(1500000); /* calls in flight at the pause end */
    stats = h_http_json(st.stats_url);
    int64_t calls_at_pause = h_sim_total(stats, "admitted");
    json_decref(stats);
    usleep(3000000);
    stats = h_http_json(st.stats_url);
    int64_t calls_later = h_sim_total(stats, "admitted");
    json_decref(stats);
    wait_refreshes(&c, 1);
    double api_held = api_number("/v1/tenants/globex", "held", NULL);
    double page_held = page_number(&c, "'[data-tenant=globex] [data-field=held]'");
    char *state_text = page_text(&c, "'[data-tenant=globex] [data-field=state]'");
    h_check(api_held > 0 && page_held == api_held && strcmp(state_text, "paused") == 0,
            "globex's jobs are held: page %.0f, API %.0f (%s)", page_held, api_held, state_text);
    free(state_text);
    h_check(calls_later == calls_at_pause, "no call while paused (%lld then %lld)",
            (long long)calls_at_pause, (long long)calls_later);

    /* bad input in a form: the API's own message */
    long bad_status = 0;
    json_t *bad = api("PUT", "/v1/tenants/globex", "{\"weight\": 0}", &bad_status);
    const char *bad_msg = json_string_value(json_object_get(json_object_get(bad, "error"), "message"));
    json_t *quoted = json_string(bad_msg != NULL ? bad_msg : "?");
    char *literal = json_dumps(quoted, JSON_ENCODE_ANY);
    json_decref(quoted);
    char expr[1024];
    snprintf(expr, sizeof expr,
             "!document.getElementById('error').hidden && "
             "document.getElementById('error').textContent.includes(%s)",
             literal != NULL ? literal : "'?'");
    free(literal);
    h_check(bad_status == 400 && click_and_confirm(&c, "'[data-tenant=globex] [data-action=weight]'", "0") &&
                cdp_wait_true(&c, expr, 5000),
            "a weight of 0 from the page shows the API's error (%s)", bad_msg ? bad_msg : "?");
    json_decref(bad);

    h_check(click_and_confirm(&c, "'[data-tenant=globex] [data-action=resume]'", NULL),
            "resume confirmed in the page");
    int back = click_and_confirm(&c, "'[data-change-limit=\"deployment:sim:rpm\"]'", "");
    back = back && wait_limit("/v1/buckets/deployment:sim:rpm", RPM);
    char *page_err = page_text(&c, "'#error'");
    h_check(back, "the limit goes back to the config from the page (%s)",
            page_err[0] != '\0' ? page_err : "no error shown");
    free(page_err);
    int held_ok = read_results(cons, HOLD_JOBS, 60000, &got);
    h_check(held_ok == HOLD_JOBS, "after resuming, the held jobs succeeded (%d of %d)", held_ok,
            HOLD_JOBS);
    double limit_now = api_number("/v1/buckets/deployment:sim:rpm", "limit", NULL);
    h_check(limit_now == RPM, "the limit is the config's again (%.0f)", limit_now);

    /* an API key paused and resumed from the page (acme's row: the page shows a search) */
    search_tenants(&c, "acme");
    h_check(cdp_wait_true(&c, "!!document.querySelector('[data-key=k-acme]')", 5000) &&
                click_and_confirm(&c, "'[data-key=k-acme]'", NULL) && key_paused_is("k-acme", 1),
            "the API says key k-acme is paused after Pause key in the page");
    h_check(cdp_wait_true(&c, "document.querySelector('[data-key=k-acme]')?.textContent"
                              ".startsWith('Resume')", 10000) &&
                click_and_confirm(&c, "'[data-key=k-acme]'", NULL) && key_paused_is("k-acme", 0),
            "and running again after Resume key");

    /* ---- a partner key ---- */
    eval_ok(&c, "document.getElementById('signout').click(); true");
    h_check(cdp_wait_true(&c, "!document.getElementById('signin-panel').hidden && "
                              "sessionStorage.getItem('sluice.key') === null", 5000),
            "signing out forgets the key");
    h_check(eval_ok(&c, "!document.documentElement.outerHTML.includes('globex')"),
            "signing out clears what the admin was shown");
    sign_in(&c, PARTNER_KEY);
    h_check(wait_refreshes(&c, 1), "the partner key signs in");
    role = page_text(&c, "'#role'");
    pg = page_text(&c, "'#tenant-page'");
    h_check(strcmp(role, "partner") == 0 && strcmp(pg, "1–1 of 1") == 0 &&
                eval_ok(&c, "document.getElementById('pools-section').hidden && "
                            "document.getElementById('queues-section').hidden && "
                            "!!document.querySelector('[data-tenant=acme]')"),
            "a partner sees its one tenant and no pools or queues (%s, %s)", role, pg);
    free(role);
    free(pg);
    h_check(eval_ok(&c, "!document.body.innerText.includes('globex') && "
                        "!document.body.innerText.includes('tenant-0') && "
                        "!document.documentElement.outerHTML.includes('globex')"),
            "no other tenant's name anywhere on the partner's page");
    char *href = cdp_eval_string(&c, "location.href");
    h_check(href != NULL && strstr(href, "secret") == NULL, "the key is not in the address (%s)",
            href ? href : "?");
    free(href);
    char logpath[4200];
    snprintf(logpath, sizeof logpath, "%s/scheduler.log", h_tmpdir());
    char *log = NULL;
    size_t log_len = 0;
    sl_read_file(logpath, 64 * 1024 * 1024, &log, &log_len);
    h_check(log != NULL && strstr(log, ADMIN_KEY) == NULL && strstr(log, PARTNER_KEY) == NULL,
            "the keys are not in the scheduler's log");
    free(log);

    cdp_stop(&c);
    rd_kafka_destroy(prod);
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    int bad_exits = h_stack_down(&st);
    h_check(bad_exits == 0, "every process exited cleanly (%d did not)", bad_exits);
    free(sim_cfg);
    free((char *)cfg);
    int rc = h_summary("console");
    h_cleanup(rc != 0);
    return rc;
}
