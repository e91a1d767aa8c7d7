/* log.h - structured logs: one JSON object a line on stderr.
 *
 * Every line has ts, level, component and msg; callers add job/trace ids as extra fields.
 * Never pass secrets or prompt content here.
 */
#ifndef SL_LOG_H
#define SL_LOG_H

typedef enum { SL_LOG_DEBUG = 0, SL_LOG_INFO, SL_LOG_WARN, SL_LOG_ERROR } sl_log_level_t;

/* Sets the component name printed on every line (a static string, not copied) and the level
 * below which lines are dropped. */
void sl_log_init(const char *component, sl_log_level_t min_level);

/* Parses "debug|info|warn|error"; returns -1 when unknown. */
int sl_log_level_parse(const char *name);

/* Logs msg (printf format). Thread-safe: each line is written with one write(2). */
void sl_log(sl_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Like sl_log, with one extra string field (e.g. "job", id) before msg. */
void sl_logf(sl_log_level_t level, const char *key, const char *val, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define sl_debug(...) sl_log(SL_LOG_DEBUG, __VA_ARGS__)
#define sl_info(...) sl_log(SL_LOG_INFO, __VA_ARGS__)
#define sl_warn(...) sl_log(SL_LOG_WARN, __VA_ARGS__)
#define sl_error(...) sl_log(SL_LOG_ERROR, __VA_ARGS__)

#endif
