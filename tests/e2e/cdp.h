/* cdp.h - a headless browser for the end-to-end tests: Debian's chromium driven over the
 * Chrome DevTools Protocol on a pipe (--remote-debugging-pipe: JSON messages ended by NUL on
 * fds 3 and 4), so no WebSocket client and nothing downloaded is needed.
 *
 * One page (target) per browser; every call waits for its answer and skips the events.
 */
#ifndef E2E_CDP_H
#define E2E_CDP_H

#include <jansson.h>
#include <sys/types.h>

typedef struct {
    pid_t pid;
    int to_browser, from_browser;
    int next_id;
    char *buf; /* what was read and not yet parsed */
    size_t len, cap;
    char session[128]; /* the page's session id */
} cdp_t;

/* Starts chromium (profile and log under dir) with one blank page; 0 on success, else -1 and
 * err says why (e.g. chromium is not installed). */
int cdp_start(cdp_t *c, const char *dir, char *err, size_t errlen);
/* Stops the browser and frees c's buffers. */
void cdp_stop(cdp_t *c);

/* Calls method on the page (params taken; NULL = {}); the "result" object (caller frees), or
 * NULL on an error answer or after timeout_ms. */
json_t *cdp_call(cdp_t *c, const char *method, json_t *params, int timeout_ms);
/* Loads url in the page (returns once the navigation is committed). */
int cdp_navigate(cdp_t *c, const char *url);
/* Evaluates a JavaScript expression in the page (promises awaited); its value (caller frees;
 * JSON null for undefined), or NULL when it threw or timed out. */
json_t *cdp_eval(cdp_t *c, const char *expr, int timeout_ms);
/* The expression's value as a string ("" when not a string; caller frees), or NULL. */
char *cdp_eval_string(cdp_t *c, const char *expr);
/* Polls expr (every 50 ms) until it is true; 1, or 0 after timeout_ms. */
int cdp_wait_true(cdp_t *c, const char *expr, int timeout_ms);
/* Writes a PNG of the whole page at width x height CSS pixels; 0 on success. */
int cdp_screenshot(cdp_t *c, const char *path, int width, int height);

#endif
