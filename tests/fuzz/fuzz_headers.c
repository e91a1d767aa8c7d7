/* fuzz_headers.c - the providers' rate-limit headers (dispatcher/ratelimit.c) and the time
 * formats they carry (dispatcher/timefmt.c).
 *
 * Input: header lines as libcurl hands them over (a raw HTTP head, e.g. a fixture's). Each line
 * goes to sl_ratelimit_header; each value also goes to every timefmt parser alone. Contract: a
 * field is -1 (not reported) or a non-negative number, durations at most SL_TIMEFMT_MAX_MS, and
 * the JSON form holds only non-negative integers.
 */
#include <jansson.h>
#include <string.h>

#include "../../dispatcher/ratelimit.h"
#include "../../dispatcher/timefmt.h"
#include "fuzz.h"

static void check_duration(int64_t ms)
{
    FUZZ_CHECK(ms == -1 || (ms >= 0 && ms <= SL_TIMEFMT_MAX_MS));
}

static void check_value(const char *v, size_t len)
{
    check_duration(sl_timefmt_go_duration_ms(v, len));
    check_duration(sl_timefmt_seconds_ms(v, len));
    check_duration(sl_timefmt_ms(v, len));
    int64_t at = sl_timefmt_rfc3339_ms(v, len);
    FUZZ_CHECK(at >= -1);
    /* The protobuf reader takes a NUL-terminated string. */
    char buf[128];
    if (len < sizeof buf) {
        memcpy(buf, v, len);
        buf[len] = '\0';
        check_duration(sl_timefmt_proto_duration_ms(buf));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    sl_ratelimit_t rl;
    sl_ratelimit_init(&rl);
    rl.now_ms = 1760433310000LL; /* a fixed clock: the same input, the same answer */
    size_t at = 0;
    while (at < size) {
        const char *nl = memchr(text + at, '\n', size - at);
        size_t len = nl != NULL ? (size_t)(nl - (text + at)) + 1 : size - at;
        sl_ratelimit_header(&rl, text + at, len);
        const char *colon = memchr(text + at, ':', len);
        if (colon != NULL) {
            const char *v = colon + 1;
            size_t vlen = len - (size_t)(v - (text + at));
            while (vlen > 0 && *v == ' ') {
                v++;
                vlen--;
            }
            while (vlen > 0 && (v[vlen - 1] == '\n' || v[vlen - 1] == '\r'))
                vlen--;
            check_value(v, vlen);
        }
        at += len;
    }
    const int64_t durations[] = {rl.reset_requests_ms, rl.reset_tokens_ms, rl.reset_input_tokens_ms,
                                 rl.reset_output_tokens_ms, rl.retry_after_ms};
    for (size_t i = 0; i < sizeof durations / sizeof durations[0]; i++)
        FUZZ_CHECK(durations[i] >= -1);
    FUZZ_CHECK(rl.retry_after_ms <= SL_TIMEFMT_MAX_MS);
    FUZZ_CHECK(rl.should_retry >= -1 && rl.should_retry <= 1);
    json_t *obj = json_object();
    FUZZ_CHECK(obj != NULL);
    sl_ratelimit_to_json(&rl, obj);
    const char *key;
    json_t *value;
    json_object_foreach(obj, key, value)
    {
        FUZZ_CHECK(json_is_integer(value) && json_integer_value(value) >= 0);
    }
    json_decref(obj);
    return 0;
}
