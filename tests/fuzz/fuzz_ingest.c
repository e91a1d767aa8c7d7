/* fuzz_ingest.c - ingest's whole decision on one raw request message (ingest/ingest.c:
 * sl_ingest_process), on the example config.
 *
 * Contract: every message yields exactly one output, a job or cancel for the jobs topic, valid
 * against schema/job.json or schema/cancel.json, or a rejection valid against
 * schema/result.json with a reason code.
 */
#include <jansson.h>
#include <string.h>

#include "../../ingest/ingest.h"
#include "config.h"
#include "fuzz.h"
#include "jsonschema.h"
#include "sign.h"

static sl_config_t *cfg;
static sl_ingest_t *ing;
static sl_schema_t *job_schema, *cancel_schema, *result_schema;

static sl_schema_t *load_schema(const char *rel)
{
    char path[4096], err[512];
    sl_schema_t *s = NULL;
    fuzz_repo_path(rel, path, sizeof path);
    if (sl_schema_load_file(path, &s, err, sizeof err) != SL_OK) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
    return s;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char path[4096], err[512];
    FUZZ_CHECK(sl_crypto_init() == SL_OK);
    fuzz_repo_path("examples/sluice.json", path, sizeof path);
    static char key_path[] = "/tmp/sluice-fuzz-ingest-job-id.key";
    if (sl_config_load(path, &cfg, err, sizeof err) != SL_OK)
        cfg = NULL;
    if (cfg != NULL) {
        cfg->signing_job_id_key_file = key_path;
        FUZZ_CHECK(sl_job_id_keygen(key_path) == SL_OK);
    }
    if (cfg == NULL || sl_ingest_new(cfg, &ing, err, sizeof err) != SL_OK) {
        fprintf(stderr, "fuzz_ingest: %s\n", err);
        abort();
    }
    job_schema = load_schema("schema/job.json");
    cancel_schema = load_schema("schema/cancel.json");
    result_schema = load_schema("schema/result.json");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_ingest_source_t src = {"sluice.requests", 0, 42};
    sl_ingest_out_t out;
    memset(&out, 0, sizeof out);
    sl_err_t rc = sl_ingest_process(ing, data, size, 1760433310000LL, &src, &out);
    if (rc == SL_ENOMEM)
        return 0;
    FUZZ_CHECK(rc == SL_OK);
    FUZZ_CHECK(out.key != NULL && out.value != NULL && out.topic != NULL);
    json_t *doc = json_loads(out.value, 0, NULL);
    FUZZ_CHECK(doc != NULL);
    char why[512] = "";
    if (out.kind == SL_INGEST_REJECT) {
        FUZZ_CHECK(out.reason != NULL);
        FUZZ_CHECK(sl_schema_validate(result_schema, doc, why, sizeof why) == SL_OK);
    } else {
        FUZZ_CHECK(out.kind == SL_INGEST_JOB);
        sl_err_t job_rc = sl_schema_validate(job_schema, doc, why, sizeof why);
        if (job_rc != SL_OK && sl_schema_validate(cancel_schema, doc, NULL, 0) != SL_OK) {
            fprintf(stderr, "ingest wrote an invalid job: %s\n%s\n", why, out.value);
            abort();
        }
    }
    json_decref(doc);
    sl_ingest_out_clear(&out);
    return 0;
}
