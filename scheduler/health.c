/* health.c - a deployment's pause, probe, failure streak and time to first token (see
 * health.h).
 */
#include "health.h"

#include <string.h>

#include "job.h"
#include "retry.h"

enum { PROBE_WAIT_MS = 2000, PROBE_POLL_MS = 20 };

int sl_health_holds(const sl_sched_t *s, int d, int64_t now_ms, int64_t *wait_ms)
{
    const dep_t *dp = &s->deps[d];
    if (dp->paused_until_ms > now_ms) {
        *wait_ms = dp->paused_until_ms - now_ms;
        return 1;
    }
    if (dp->probing && dp->probe_sent_ms > 0 && now_ms - dp->probe_sent_ms < PROBE_WAIT_MS) {
        /* Its probe is out: wait for the answer (usage events unblock the route). */
        *wait_ms = PROBE_POLL_MS;
        return 1;
    }
    return 0;
}

void sl_health_probe_sent(sl_sched_t *s, int d, int64_t now_ms)
{
    if (s->deps[d].probing)
        s->deps[d].probe_sent_ms = now_ms;
}

void sl_health_answered(sl_sched_t *s, const job_t *j, sl_outcome_t outcome, double ttft)
{
    int dep = j->deployment;
    int ok = outcome == SL_OUTCOME_OK;
    if (ok) {
        /* Time to first token, smoothed over the last ~10 answers (latency strategy). */
        if (ttft > 0)
            s->deps[dep].ttft_ms =
                s->deps[dep].ttft_ms > 0 ? 0.9 * s->deps[dep].ttft_ms + 0.1 * ttft : ttft;
        s->deps[dep].fail_streak = 0;
    }
    if (s->deps[dep].probing && s->deps[dep].probe_sent_ms > 0 &&
        sl_job_dispatched_ms(j) >= s->deps[dep].probe_sent_ms &&
        (ok || outcome == SL_OUTCOME_CLIENT_ERROR)) {
        /* The probe (or a call sent after it) was answered: open again. Answers to calls sent
         * before the pause say nothing about now. */
        s->deps[dep].probing = 0;
        s->deps[dep].probe_sent_ms = 0;
    } else if (s->deps[dep].probing && s->deps[dep].probe_sent_ms > 0 &&
               sl_job_dispatched_ms(j) >= s->deps[dep].probe_sent_ms && !ok) {
        /* The probe failed: the next call goes as a new probe (after the pause this answer
         * may set), instead of waiting PROBE_WAIT_MS for an answer that already came.
         * A failure that does not pause (a 503 after a success reset the streak) stalled the
         * deployment for 2 s (bench/compare storm503). */
        s->deps[dep].probe_sent_ms = 0;
    }
}

void sl_health_pause(sl_sched_t *s, int d, int64_t pause_ms, int64_t now_ms)
{
    dep_t *dp = &s->deps[d];
    if (pause_ms <= 0)
        return;
    if (dp->paused_until_ms < now_ms + pause_ms)
        dp->paused_until_ms = now_ms + pause_ms;
    dp->probing = 1;
    dp->probe_sent_ms = 0;
}

void sl_health_server_failed(sl_sched_t *s, int d, int64_t retry_after_ms, int64_t now_ms)
{
    dep_t *dp = &s->deps[d];
    dp->fail_streak++;
    sl_health_pause(s, d, sl_retry_overload_pause_ms(s, retry_after_ms, dp->fail_streak), now_ms);
}

void sl_health_quota_exhausted(sl_sched_t *s, int d, int64_t now_ms)
{
    s->deps[d].paused_until_ms = now_ms + s->cfg->minute_ms;
}
