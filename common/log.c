/* log.c - JSON-lines logger (see log.h). */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *log_component = "sluice";
static sl_log_level_t log_min = SL_LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void sl_log_init(const char *component, sl_log_level_t min_level)
{
    log_component = component;
    log_min = min_level;
}

int sl_log_level_parse(const char *name)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, level_names[i]) == 0)
            return i;
    }
    return -1;
}

/* Appends s to buf as JSON string content (without quotes); stops at cap. */
static size_t append_escaped(char *buf, size_t len, size_t cap, const char *s)
{
    for (; *s && len + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[len++] = '\\';
            buf[len++] = (char)c;
        } else if (c < 0x20) {
            len += (size_t)snprintf(buf + len, cap - len, "\\u%04x", c);
        } else {
            buf[len++] = (char)c;
        }
    }
    return len;
}

static void vlog(sl_log_level_t level, const char *key, const char *val, const char *fmt,
                 va_list ap)
{
    if (level < log_min)
        return;
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);

    char line[4096];
    size_t cap = sizeof line - 32; /* room for the fixed tail pieces */
    size_t len = (size_t)snprintf(line, cap,
                                  "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\","
                                  "\"level\":\"%s\",\"component\":\"%s\",",
                                  tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                                  tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, level_names[level],
                                  log_component);
    if (key != NULL && val != NULL && len < cap) {
        line[len++] = '"';
        len = append_escaped(line, len, cap, key);
        memcpy(line + len, "\":\"", 3);
        len += 3;
        len = append_escaped(line, len, cap, val);
        memcpy(line + len, "\",", 2);
        len += 2;
    }
    memcpy(line + len, "\"msg\":\"", 7);
    len += 7;
    len = append_escaped(line, len, cap, msg);
    memcpy(line + len, "\"}\n", 3);
    len += 3;
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

void sl_log(sl_log_level_t level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(level, NULL, NULL, fmt, ap);
    va_end(ap);
}

void sl_logf(sl_log_level_t level, const char *key, const char *val, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(level, key, val, fmt, ap);
    va_end(ap);
}
