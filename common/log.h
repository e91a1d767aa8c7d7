/* log.h - structured logs: one JSON object a line on stderr.
 *
 * Every line has ts, level, component and msg; callers add job/trace ids as extra fields.
 * Never pass secrets or prompt content here.
 */
#ifndef SL_LOG_H
#define SL_LOG_H

#include <stdint.h>

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

/* Rate limit for one call site's repeated event (a forged dispatch, an invalid message): the
 * first occurrence is printed, then at most one line per interval, carrying the count of those
 * held back: "<this one> (and 29,999 more like it in the last 10 s)" when the line is itself an
 * occurrence, "<the last printed> (29,999 more like it in the last 10 s)" when it is a summary
 * written by sl_log_flush_limited. Memory is fixed per call site:
 * the struct is static at the site (see sl_log_every) and holds a short copy of the last printed
 * message so a held-back count can be reported by sl_log_flush_limited when the flood stops. */
#define SL_LOG_LIMIT_MSG 160
typedef struct sl_log_limit {
    int64_t lim_next_ms;     /* before this, occurrences are only counted */
    int64_t lim_since_ms;    /* when the last line went out */
    int64_t lim_interval_ms; /* the interval of the last printed line */
    uint64_t lim_held;       /* occurrences counted since then */
    int lim_registered;      /* listed for sl_log_flush_limited */
    sl_log_level_t lim_level;
    char lim_key[24]; /* extra field of the last printed line ("job"), or "" */
    char lim_val[64];
    char lim_msg[SL_LOG_LIMIT_MSG];
} sl_log_limit_t;

/* Logs like sl_logf (key/val may be NULL) unless lim printed a line less than interval_ms ago;
 * then only counts the occurrence. Thread-safe. lim must outlive the process (static). */
void sl_log_limited(sl_log_limit_t *lim, int64_t interval_ms, sl_log_level_t level, const char *key,
                    const char *val, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Prints one summary line for every limited call site whose interval has passed with
 * occurrences still held back, so a count is not lost when a flood stops. Call it from a
 * daemon's loop (cheap: a scan of at most SL_LOG_LIMIT_SITES sites). */
void sl_log_flush_limited(void);

/* Forgets what every call site counted and printed, as at process start (tests that run in one
 * process). */
void sl_log_reset_limited(void);

/* The clock the limiter reads (monotonic ms); tests replace it. NULL restores the default. */
void sl_log_set_clock(int64_t (*now_ms)(void));

/* At most one line per interval_ms from this call site; see sl_log_limited. */
#define sl_log_every(interval_ms, level, ...)                                                      \
    do {                                                                                           \
        static sl_log_limit_t sl_lim_;                                                             \
        sl_log_limited(&sl_lim_, (interval_ms), (level), NULL, NULL, __VA_ARGS__);                 \
    } while (0)
#define sl_logf_every(interval_ms, level, key, val, ...)                                           \
    do {                                                                                           \
        static sl_log_limit_t sl_lim_;                                                             \
        sl_log_limited(&sl_lim_, (interval_ms), (level), (key), (val), __VA_ARGS__);               \
    } while (0)

/* The interval the daemons use for repeated events. */
#define SL_LOG_REPEAT_MS 10000

#define sl_debug(...) sl_log(SL_LOG_DEBUG, __VA_ARGS__)
#define sl_info(...) sl_log(SL_LOG_INFO, __VA_ARGS__)
#define sl_warn(...) sl_log(SL_LOG_WARN, __VA_ARGS__)
#define sl_error(...) sl_log(SL_LOG_ERROR, __VA_ARGS__)

#endif
