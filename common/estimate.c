/* estimate.c - input-token estimate from a request body (see estimate.h). */
#include "estimate.h"

#include <stdlib.h>
#include <string.h>

/* Bytes per token by model family. Lower = more conservative. */
static double bytes_per_token(const char *model)
{
    if (model == NULL)
        return 3.0;
    if (strncmp(model, "claude", 6) == 0)
        return 3.2;
    if (strncmp(model, "gemini", 6) == 0)
        return 3.6;
    return 3.5; /* OpenAI o200k/cl100k families */
}

enum { PER_MESSAGE_OVERHEAD = 4, PRIMING_OVERHEAD = 3, PER_TOOL_OVERHEAD = 8 };

/* Counts the text bytes of a message's content: a string, or an array of parts whose "text"
 * fields count (non-text parts such as images count their serialised size). */
static size_t content_bytes(const json_t *content)
{
    if (json_is_string(content))
        return json_string_length(content);
    if (!json_is_array(content))
        return 0;
    size_t total = 0;
    size_t i;
    const json_t *part;
    json_array_foreach(content, i, part)
    {
        const json_t *text = json_object_get(part, "text");
        if (json_is_string(text)) {
            total += json_string_length(text);
        } else {
            char *dump = json_dumps(part, JSON_COMPACT);
            total += dump != NULL ? strlen(dump) : 0;
            free(dump);
        }
    }
    return total;
}

static size_t dumped_bytes(const json_t *v)
{
    if (v == NULL)
        return 0;
    char *dump = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t n = dump != NULL ? strlen(dump) : 0;
    free(dump);
    return n;
}

int64_t sl_estimate_input_tokens(const json_t *body, const char *model)
{
    double ratio = bytes_per_token(model);
    double tokens = PRIMING_OVERHEAD;
    const json_t *messages = json_object_get(body, "messages");
    size_t i;
    const json_t *msg;
    json_array_foreach(messages, i, msg)
    {
        tokens += PER_MESSAGE_OVERHEAD;
        tokens += (double)content_bytes(json_object_get(msg, "content")) / ratio;
        const json_t *name = json_object_get(msg, "name");
        if (json_is_string(name))
            tokens += (double)json_string_length(name) / ratio + 1;
        const json_t *calls = json_object_get(msg, "tool_calls");
        if (calls != NULL)
            tokens += (double)dumped_bytes(calls) / ratio;
    }
    const json_t *tools = json_object_get(body, "tools");
    if (json_is_array(tools))
        tokens += (double)json_array_size(tools) * PER_TOOL_OVERHEAD +
                  (double)dumped_bytes(tools) / ratio;
    const json_t *fmt = json_object_get(body, "response_format");
    if (fmt != NULL)
        tokens += (double)dumped_bytes(fmt) / ratio;
    int64_t whole = (int64_t)tokens;
    return (double)whole < tokens ? whole + 1 : whole;
}
