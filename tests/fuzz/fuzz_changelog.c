/* fuzz_changelog.c - the scheduler's changelog records (scheduler/changelog.c): sl_cl_decode on
 * what a restore reads from the changelog topic, and the replay that decides which jobs a new
 * database takes back.
 *
 * The first byte of the input picks the first retained offset (0: nothing deleted, else
 * deleted); the rest is records, one per line, each line's first byte choosing its partition
 * (% 2). Contracts: a record that decodes encodes again to one that decodes the same (kind, seq,
 * epoch, job id); seqs the replay accepts grow per partition; the replay's answer is OK or
 * SL_EDB (a trimmed partition without a whole snapshot); every job it calls unfinished came in
 * a job record, so nothing is invented.
 */
#include <stdlib.h>
#include <string.h>

#include "../../scheduler/changelog.h"
#include "fuzz.h"
#include "hmap.h"

enum { PARTS = 2 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int64_t low = data[0] % 2 ? 1000 : 0;
    sl_cl_replay_t *r = sl_cl_replay_new(PARTS);
    sl_hmap_t *jobs = sl_hmap_new();
    FUZZ_CHECK(r != NULL && jobs != NULL);
    int64_t last[PARTS] = {0};
    size_t at = 1;
    int64_t offset = low;
    while (at < size) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t end = nl != NULL ? (size_t)(nl - data) : size;
        if (end > at) {
            int part = data[at] % PARTS;
            sl_cl_rec_t rec;
            if (sl_cl_decode((const char *)data + at + 1, end - at - 1, &rec) == SL_OK) {
                size_t len = 0;
                char *again =
                    rec.kind == SL_CL_LEASE
                        ? sl_cl_encode_lease(rec.seq, rec.job_id, &rec.lease, &len)
                        : sl_cl_encode(rec.kind, rec.seq, rec.epoch, rec.job_id,
                                       rec.submitted_ms, rec.job, rec.job_len, &len);
                FUZZ_CHECK(again != NULL);
                sl_cl_rec_t back;
                FUZZ_CHECK(sl_cl_decode(again, len, &back) == SL_OK);
                FUZZ_CHECK(back.kind == rec.kind && back.seq == rec.seq);
                FUZZ_CHECK(back.epoch == rec.epoch && strcmp(back.job_id, rec.job_id) == 0);
                FUZZ_CHECK(back.submitted_ms == rec.submitted_ms && back.job_len == rec.job_len);
                FUZZ_CHECK(rec.job_len == 0 || memcmp(back.job, rec.job, rec.job_len) == 0);
                FUZZ_CHECK(memcmp(&back.lease, &rec.lease, sizeof rec.lease) == 0 ||
                           (back.lease.attempt == rec.lease.attempt &&
                            back.lease.expires_ms == rec.lease.expires_ms &&
                            strcmp(back.lease.res_id, rec.lease.res_id) == 0 &&
                            strcmp(back.lease.deployment, rec.lease.deployment) == 0));
                sl_cl_rec_clear(&back);
                free(again);
                if (rec.kind == SL_CL_JOB)
                    sl_hmap_put(jobs, rec.job_id, (void *)1);
                int64_t seq = rec.seq;
                if (sl_cl_replay_add(r, part, offset++, &rec)) {
                    FUZZ_CHECK(seq > last[part]);
                    last[part] = seq;
                }
                FUZZ_CHECK(rec.job == NULL);
            }
        }
        at = end + 1;
    }
    for (int p = 0; p < PARTS; p++) {
        char err[256] = "";
        sl_err_t rc = sl_cl_replay_apply(r, p, low, err, sizeof err);
        FUZZ_CHECK(rc == SL_OK || rc == SL_EDB);
        FUZZ_CHECK(sl_cl_replay_last_seq(r, p) == last[p]);
    }
    sl_cl_live_t *v = NULL;
    size_t n = 0;
    FUZZ_CHECK(sl_cl_replay_sorted(r, &v, &n) == SL_OK);
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(sl_hmap_get(jobs, v[i].job_id) != NULL);
        FUZZ_CHECK(v[i].job != NULL && strlen(v[i].job) == v[i].len);
    }
    free(v);
    sl_cl_replay_free(r);
    sl_hmap_free(jobs);
    return 0;
}
