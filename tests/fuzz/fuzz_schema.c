/* fuzz_schema.c - the JSON Schema compiler and validator (common/jsonschema.c,
 * jsonschema_validate.c) and its ECMA-262 pattern compiler (common/ecmare.c).
 *
 * The first byte of the input picks what the rest is:
 *   0: a schema: compiled, then asked to validate itself and a few fixed documents;
 *   1: a document: validated against every message schema in schema/;
 *   2: a pattern: compiled, then matched against itself (and against its first half).
 * Contract: no crash, no hang (the pattern limits), and a validation answers SL_OK or
 * SL_ESCHEMA with a reason.
 */
#include <jansson.h>
#include <string.h>

#include "ecmare.h"
#include "fuzz.h"
#include "jsonschema.h"

static const char *const message_schemas[] = {"schema/request.json",  "schema/job.json",
                                              "schema/dispatch.json", "schema/usage.json",
                                              "schema/result.json",   "schema/stream.json",
                                              "schema/cancel.json",   "schema/cancel-request.json",
                                              "schema/heartbeat.json"};
#define NSCHEMAS (sizeof message_schemas / sizeof message_schemas[0])
static sl_schema_t *schemas[NSCHEMAS];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    for (size_t i = 0; i < NSCHEMAS; i++) {
        char path[4096], err[512];
        fuzz_repo_path(message_schemas[i], path, sizeof path);
        if (sl_schema_load_file(path, &schemas[i], err, sizeof err) != SL_OK) {
            fprintf(stderr, "%s\n", err);
            abort();
        }
    }
    return 0;
}

static void validate(const sl_schema_t *s, const json_t *doc)
{
    char why[256];
    why[0] = 'x';
    sl_err_t rc = sl_schema_validate(s, doc, why, sizeof why);
    FUZZ_CHECK(rc == SL_OK || rc == SL_ESCHEMA);
    if (rc == SL_ESCHEMA)
        FUZZ_CHECK(why[0] != '\0' && strlen(why) < sizeof why);
}

static void fuzz_as_schema(const char *text, size_t len)
{
    json_t *schema = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
    if (schema == NULL)
        return;
    sl_schema_t *s = NULL;
    char err[256];
    if (sl_schema_compile(schema, &s, err, sizeof err) == SL_OK) {
        static const char *const docs[] = {"null", "true",
                                           "0",    "-1.5",
                                           "\"\"", "\"abc\"",
                                           "[]",   "[1,\"a\",null]",
                                           "{}",   "{\"a\":1,\"b\":[{\"c\":\"d\"}]}"};
        validate(s, schema);
        for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
            json_t *doc = json_loads(docs[i], JSON_DECODE_ANY, NULL);
            FUZZ_CHECK(doc != NULL);
            validate(s, doc);
            json_decref(doc);
        }
        sl_schema_free(s);
    } else {
        FUZZ_CHECK(s == NULL);
    }
    json_decref(schema);
}

static void fuzz_as_document(const char *text, size_t len)
{
    json_t *doc = json_loadb(text, len, JSON_DECODE_ANY, NULL);
    if (doc == NULL)
        return;
    for (size_t i = 0; i < NSCHEMAS; i++)
        validate(schemas[i], doc);
    json_decref(doc);
}

static void fuzz_as_pattern(const char *text, size_t len)
{
    /* Patterns come from JSON strings, which are valid UTF-8. */
    json_t *str = json_stringn(text, len);
    if (str == NULL)
        return;
    sl_ecmare_t *re = NULL;
    char why[256];
    sl_err_t rc = sl_ecmare_compile(text, len, &re, why, sizeof why);
    FUZZ_CHECK(rc == SL_OK || rc == SL_ESCHEMA || rc == SL_ENOMEM);
    if (rc == SL_OK) {
        int m = sl_ecmare_match(re, text, len, why, sizeof why);
        FUZZ_CHECK(m >= -1 && m <= 1);
        m = sl_ecmare_match(re, text, len / 2, why, sizeof why);
        FUZZ_CHECK(m >= -1 && m <= 1);
        sl_ecmare_free(re);
    } else {
        FUZZ_CHECK(re == NULL);
    }
    json_decref(str);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    switch (data[0] % 3) {
    case 0:
        fuzz_as_schema(text, len);
        break;
    case 1:
        fuzz_as_document(text, len);
        break;
    default:
        fuzz_as_pattern(text, len);
        break;
    }
    return 0;
}
