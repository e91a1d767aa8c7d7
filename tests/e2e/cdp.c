/* cdp.c - chromium over the DevTools protocol on a pipe (see cdp.h). */
#include "cdp.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

enum { CALL_TIMEOUT_MS = 15000, MESSAGE_MAX = 64 * 1024 * 1024 };

static int send_message(cdp_t *c, json_t *msg)
{
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    if (text == NULL)
        return -1;
    size_t len = strlen(text) + 1; /* the NUL ends the message */
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(c->to_browser, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            free(text);
            return -1;
        }
        off += (size_t)n;
    }
    free(text);
    return 0;
}

/* The next whole message from the browser (caller frees), or NULL after timeout_ms. */
static json_t *read_message(cdp_t *c, int timeout_ms)
{
    double deadline = sl_mono_ms() + timeout_ms;
    for (;;) {
        char *end = c->len > 0 ? memchr(c->buf, '\0', c->len) : NULL;
        if (end != NULL) {
            size_t n = (size_t)(end - c->buf);
            json_t *doc = json_loadb(c->buf, n, 0, NULL);
            memmove(c->buf, end + 1, c->len - n - 1);
            c->len -= n + 1;
            if (doc != NULL)
                return doc;
            continue;
        }
        int left = (int)(deadline - sl_mono_ms());
        if (left <= 0)
            return NULL;
        struct pollfd p = {c->from_browser, POLLIN, 0};
        if (poll(&p, 1, left) <= 0)
            continue;
        if (c->cap - c->len < 65536) {
            size_t cap = c->cap ? c->cap * 2 : 1 << 20;
            char *nb = cap <= MESSAGE_MAX ? realloc(c->buf, cap) : NULL;
            if (nb == NULL)
                return NULL;
            c->buf = nb;
            c->cap = cap;
        }
        ssize_t n = read(c->from_browser, c->buf + c->len, c->cap - c->len);
        if (n <= 0 && errno != EINTR)
            return NULL; /* the browser went away */
        if (n > 0)
            c->len += (size_t)n;
    }
}

/* Sends method (params taken) to the browser, or to the page when on_page; waits its answer. */
static json_t *call(cdp_t *c, int on_page, const char *method, json_t *params, int timeout_ms)
{
    int id = ++c->next_id;
    json_t *msg = json_pack("{s:i, s:s, s:o}", "id", id, "method", method, "params",
                            params != NULL ? params : json_object());
    if (on_page)
        json_object_set_new(msg, "sessionId", json_string(c->session));
    if (send_message(c, msg) != 0)
        return NULL;
    double deadline = sl_mono_ms() + timeout_ms;
    while (sl_mono_ms() < deadline) {
        json_t *m = read_message(c, (int)(deadline - sl_mono_ms()) + 1);
        if (m == NULL)
            return NULL;
        if (json_integer_value(json_object_get(m, "id")) != id) {
            json_decref(m); /* an event, or an older answer */
            continue;
        }
        json_t *result = json_incref(json_object_get(m, "result"));
        if (result == NULL) {
            char *text = json_dumps(json_object_get(m, "error"), JSON_COMPACT);
            fprintf(stderr, "cdp: %s failed: %s\n", method, text != NULL ? text : "?");
            free(text);
        }
        json_decref(m);
        return result;
    }
    return NULL;
}

int cdp_start(cdp_t *c, const char *dir, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->pid = -1;
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    char profile[4200], log[4200];
    snprintf(profile, sizeof profile, "--user-data-dir=%s/chromium-profile", dir);
    snprintf(log, sizeof log, "%s/chromium.log", dir);
    pid_t pid = fork();
    if (pid == 0) {
        /* fds 3 and 4 are the protocol's: move the pipe ends above them first. */
        int r = fcntl(in[0], F_DUPFD, 10), w = fcntl(out[1], F_DUPFD, 10);
        int logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (r < 0 || w < 0 || dup2(r, 3) < 0 || dup2(w, 4) < 0)
            _exit(127);
        if (logfd >= 0) {
            dup2(logfd, 1);
            dup2(logfd, 2);
        }
        for (int fd = 5; fd < 1024; fd++)
            close(fd);
        execlp("chromium", "chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
               "--no-first-run", "--no-default-browser-check", "--disable-extensions",
               "--disable-background-networking", "--disable-component-update",
               "--disable-dev-shm-usage", "--remote-debugging-pipe", profile,
               "--window-size=1400,1000", "about:blank", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(in[1]);
        close(out[0]);
        return -1;
    }
    signal(SIGPIPE, SIG_IGN);
    c->pid = pid;
    c->to_browser = in[1];
    c->from_browser = out[0];
    json_t *r = call(c, 0, "Target.createTarget", json_pack("{s:s}", "url", "about:blank"),
                     CALL_TIMEOUT_MS * 2);
    const char *target = json_string_value(json_object_get(r, "targetId"));
    json_t *a = target != NULL
                    ? call(c, 0, "Target.attachToTarget",
                           json_pack("{s:s, s:b}", "targetId", target, "flatten", 1),
                           CALL_TIMEOUT_MS)
                    : NULL;
    const char *session = json_string_value(json_object_get(a, "sessionId"));
    if (session != NULL)
        snprintf(c->session, sizeof c->session, "%s", session);
    json_decref(r);
    json_decref(a);
    if (c->session[0] == '\0') {
        snprintf(err, errlen, "chromium did not open a page (is it installed? see %s)", log);
        cdp_stop(c);
        return -1;
    }
    return 0;
}

void cdp_stop(cdp_t *c)
{
    if (c->pid > 0) {
        json_decref(call(c, 0, "Browser.close", NULL, 3000));
        int status;
        for (int i = 0; i < 100 && waitpid(c->pid, &status, WNOHANG) == 0; i++)
            usleep(50000);
        if (waitpid(c->pid, &status, WNOHANG) == 0) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &status, 0);
        }
    }
    if (c->to_browser > 0)
        close(c->to_browser);
    if (c->from_browser > 0)
        close(c->from_browser);
    free(c->buf);
    memset(c, 0, sizeof *c);
    c->pid = -1;
}

json_t *cdp_call(cdp_t *c, const char *method, json_t *params, int timeout_ms)
{
    return call(c, 1, method, params, timeout_ms);
}

int cdp_navigate(cdp_t *c, const char *url)
{
    json_t *r = call(c, 1, "Page.navigate", json_pack("{s:s}", "url", url), CALL_TIMEOUT_MS);
    int ok = r != NULL && json_object_get(r, "errorText") == NULL;
    json_decref(r);
    return ok ? 0 : -1;
}

json_t *cdp_eval(cdp_t *c, const char *expr, int timeout_ms)
{
    json_t *r = call(c, 1, "Runtime.evaluate",
                     json_pack("{s:s, s:b, s:b}", "expression", expr, "returnByValue", 1,
                               "awaitPromise", 1),
                     timeout_ms);
    if (r == NULL || json_object_get(r, "exceptionDetails") != NULL) {
        json_decref(r);
        return NULL;
    }
    json_t *v = json_object_get(json_object_get(r, "result"), "value");
    v = v != NULL ? json_incref(v) : json_null();
    json_decref(r);
    return v;
}

char *cdp_eval_string(cdp_t *c, const char *expr)
{
    json_t *v = cdp_eval(c, expr, CALL_TIMEOUT_MS);
    if (v == NULL)
        return NULL;
    char *s = strdup(json_is_string(v) ? json_string_value(v) : "");
    json_decref(v);
    return s;
}

int cdp_wait_true(cdp_t *c, const char *expr, int timeout_ms)
{
    double deadline = sl_mono_ms() + timeout_ms;
    do {
        json_t *v = cdp_eval(c, expr, CALL_TIMEOUT_MS);
        int yes = v != NULL && json_is_true(v);
        json_decref(v);
        if (yes)
            return 1;
        usleep(50000);
    } while (sl_mono_ms() < deadline);
    return 0;
}

int cdp_screenshot(cdp_t *c, const char *path, int width, int height)
{
    json_decref(call(c, 1, "Emulation.setDeviceMetricsOverride",
                     json_pack("{s:i, s:i, s:i, s:b}", "width", width, "height", height,
                               "deviceScaleFactor", 1, "mobile", 0),
                     CALL_TIMEOUT_MS));
    json_t *r = call(c, 1, "Page.captureScreenshot", json_pack("{s:s}", "format", "png"),
                     CALL_TIMEOUT_MS * 2);
    const char *b64 = json_string_value(json_object_get(r, "data"));
    int rc = -1;
    if (b64 != NULL) {
        size_t cap = strlen(b64), len = 0;
        unsigned char *png = malloc(cap + 1);
        if (png != NULL && sodium_base642bin(png, cap, b64, strlen(b64), NULL, &len, NULL,
                                             sodium_base64_VARIANT_ORIGINAL) == 0) {
            FILE *f = fopen(path, "wb");
            if (f != NULL) {
                rc = fwrite(png, 1, len, f) == len ? 0 : -1;
                rc |= fclose(f);
            }
        }
        free(png);
    }
    json_decref(r);
    return rc;
}
