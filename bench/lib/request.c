/* request.c - see request.h. */
#include "request.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

/* The filler every prompt is cut from: words, so that the text looks like a prompt. */
static const char *filler(void)
{
    static char text[B_PROMPT_CHARS_CAP + 1];
    if (text[0] == '\0') {
        const char *words = "the quick brown fox jumps over the lazy dog while counting tokens ";
        size_t wl = strlen(words);
        for (size_t k = 0; k < sizeof text - 1; k++)
            text[k] = words[k % wl];
    }
    return text;
}

void b_request_api_key(const char *bench, const char *tenant, char *out, size_t cap)
{
    snprintf(out, cap, "sk-%s-%s", bench, tenant);
}

int b_request_body(char *buf, size_t cap, const char *idem, int prompt_chars, int max_tokens,
                   int stream)
{
    if (prompt_chars > B_PROMPT_CHARS_CAP)
        prompt_chars = B_PROMPT_CHARS_CAP;
    int n = snprintf(buf, cap,
                     "{\"messages\": [{\"role\": \"user\", \"content\": \"Job %s: %.*s\"}],"
                     " \"max_tokens\": %d%s}",
                     idem, prompt_chars, filler(), max_tokens, stream ? ", \"stream\": true" : "");
    /* The callers' buffers are sized for the longest request: a cut one is a programming
     * error, not an input to report. */
    assert(n > 0 && (size_t)n < cap);
    return n;
}

int b_request_job(char *buf, size_t cap, const char *idem, const char *api_key, const char *cls,
                  int prompt_chars, int max_tokens, int stream)
{
    int n = snprintf(buf, cap,
                     "{\"idempotency_key\": \"%s\", \"api_key\": \"%s\", \"route\": \"chat\","
                     " \"class\": \"%s\", \"request\": ",
                     idem, api_key, cls);
    assert(n > 0 && (size_t)n < cap);
    n += b_request_body(buf + n, cap - (size_t)n, idem, prompt_chars, max_tokens, stream);
    assert((size_t)n + 1 < cap);
    buf[n++] = '}';
    buf[n] = '\0';
    return n;
}

void b_request_produce(rd_kafka_t *prod, const char *bench, const char *tenant, const char *idem,
                       const char *cls, int prompt_chars, int max_tokens, int stream)
{
    static _Thread_local char msg[B_REQUEST_CAP]; /* scenarios produce from two threads */
    char key[64];
    b_request_api_key(bench, tenant, key, sizeof key);
    int len = b_request_job(msg, sizeof msg, idem, key, cls, prompt_chars, max_tokens, stream);
    /* As `sluice submit` does: batch requests on the batch topic, read after the other. */
    const char *topic = strcmp(cls, "batch") == 0 ? "sluice.requests.batch" : "sluice.requests";
    h_produce(prod, topic, idem, msg, (size_t)len);
}

int b_request_cancel(char *buf, size_t cap, const char *api_key, const char *idem)
{
    int n = snprintf(buf, cap, "{\"api_key\": \"%s\", \"cancel\": \"%s\"}", api_key, idem);
    assert(n > 0 && (size_t)n < cap);
    return n;
}
