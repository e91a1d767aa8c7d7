/* fuzz_dispatch.c - what a dispatcher does with a dispatch message before any call
 * (dispatcher/engine.c, sl_engine_submit): the schema (schema/dispatch.json) and the reader
 * (common/msg_dispatch.c); and the scheduler's builder. The signature check that comes first
 * (sl_kafka_verify, in the dispatcher's loop) is fuzz_verify's.
 *
 * The first byte of the input picks what the rest is:
 *   0: a message value as the engine gets it once its signature passed: read, and when it is a
 *      dispatch, its fields are there;
 *   1: a request body: the scheduler's builder wraps it in a dispatch, and what the dispatcher
 *      reads back must be what was built.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "jsonschema.h"
#include "msg_dispatch.h"

static sl_schema_t *schema;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char path[4096], err[512];
    fuzz_repo_path("schema/dispatch.json", path, sizeof path);
    FUZZ_CHECK(sl_schema_load_file(path, &schema, err, sizeof err) == SL_OK);
    return 0;
}

/* The dispatcher's reading of a message whose signature passed; 1 when it would call. */
static int read_dispatch(const char *value, size_t len, sl_msg_dispatch_t *msg, json_t **doc)
{
    *doc = json_loadb(value, len, 0, NULL);
    if (*doc == NULL)
        return 0;
    char why[256];
    if (sl_schema_validate(schema, *doc, why, sizeof why) != SL_OK)
        return 0;
    return sl_msg_dispatch_read(*doc, msg) == SL_OK;
}

static void fuzz_wire(const char *text, size_t len)
{
    sl_msg_dispatch_t msg;
    json_t *doc = NULL;
    if (read_dispatch(text, len, &msg, &doc)) {
        FUZZ_CHECK(msg.job_id != NULL && msg.reservation_id != NULL && msg.deployment != NULL);
        FUZZ_CHECK(json_is_object(msg.request));
    }
    json_decref(doc);
}

static void fuzz_built(const char *text, size_t len)
{
    json_t *request = json_loadb(text, len, 0, NULL);
    char *request_json = json_is_object(request) ? json_dumps(request, JSON_COMPACT) : NULL;
    json_decref(request);
    if (request_json == NULL)
        return;
    sl_msg_dispatch_t d = {.job_id = "job-1",
                           .attempt = 2,
                           .reservation_id = "0123abcd",
                           .lease_expires_ms = 1760433370000LL,
                           .issued_ms = 1760433310000LL,
                           .send_at_ms = len % 2 ? 1760433311000LL : 0,
                           .deployment = "sim-a",
                           .idempotency_key = "idem-1"};
    char *value = NULL;
    FUZZ_CHECK(sl_msg_dispatch_build(&d, request_json, &value) == SL_OK);
    sl_msg_dispatch_t back;
    json_t *doc = NULL;
    if (read_dispatch(value, strlen(value), &back, &doc)) {
        FUZZ_CHECK(strcmp(back.job_id, d.job_id) == 0 && back.attempt == d.attempt);
        FUZZ_CHECK(strcmp(back.reservation_id, d.reservation_id) == 0);
        FUZZ_CHECK(strcmp(back.deployment, d.deployment) == 0);
        FUZZ_CHECK(strcmp(back.idempotency_key, d.idempotency_key) == 0);
        FUZZ_CHECK(back.lease_expires_ms == d.lease_expires_ms && back.issued_ms == d.issued_ms);
        FUZZ_CHECK(back.send_at_ms == d.send_at_ms);
        char *again = json_dumps(back.request, JSON_COMPACT);
        FUZZ_CHECK(again != NULL && strcmp(again, request_json) == 0);
        free(again);
    }
    json_decref(doc);
    free(value);
    free(request_json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] % 2 == 0)
        fuzz_wire((const char *)data + 1, size - 1);
    else
        fuzz_built((const char *)data + 1, size - 1);
    return 0;
}
