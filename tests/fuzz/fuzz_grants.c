/* fuzz_grants.c - the capacity topic's messages (scheduler/grants.c): demand reports and grant
 * tables as another scheduler, or a forger holding a scheduler's key, could write them.
 *
 * The input is messages, one a line, folded in order into one view of two shared buckets at a
 * clock that moves 100 ms a message. Contracts: a fold answers 0, 1 (report) or 2 (table); a
 * message taken once is refused the second time (no replay changes anything); after every
 * message, a round's grant table reads back into a fresh view, names shares in [0, 1] and gives
 * the live shards at most the whole of each bucket.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../scheduler/grants.h"
#include "fuzz.h"

static const int64_t T0 = 1700000000000LL;

static void check_table(const char *table)
{
    json_t *root = json_loads(table, 0, NULL);
    FUZZ_CHECK(root != NULL);
    json_t *shards = json_object_get(root, "shards");
    FUZZ_CHECK(json_is_object(shards));
    double sum[2] = {0, 0};
    const char *id;
    json_t *e;
    json_object_foreach(shards, id, e)
    {
        json_t *b = json_object_get(e, "b");
        static const char *const ids[2] = {"deployment:a:tpm", "org:o:tpm"};
        for (int i = 0; i < 2; i++) {
            json_t *v = json_object_get(b, ids[i]);
            FUZZ_CHECK(json_is_number(v));
            double x = json_number_value(v);
            FUZZ_CHECK(isfinite(x) && x >= 0 && x <= 1);
            sum[i] += x;
        }
    }
    FUZZ_CHECK(sum[0] <= 1 + 1e-9 && sum[1] <= 1 + 1e-9);
    json_decref(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *ids[2] = {"deployment:a:tpm", "org:o:tpm"};
    int64_t release[2] = {60000, 86400000};
    sl_grants_t *g = sl_grants_new(ids, release, 2, 10000);
    FUZZ_CHECK(g != NULL);
    int64_t now = T0;
    size_t at = 0;
    int64_t epoch = 1;
    while (at < size) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t end = nl != NULL ? (size_t)(nl - data) : size;
        const char *msg = (const char *)data + at;
        size_t len = end - at;
        double share[2] = {-1, -1};
        sl_grant_t mine = {.share = share};
        int is_mine = 0;
        int kind = sl_grants_fold(g, msg, len, now, "self", &mine, &is_mine);
        FUZZ_CHECK(kind >= 0 && kind <= 2);
        FUZZ_CHECK(!is_mine || kind == 2);
        for (int i = 0; is_mine && i < 2; i++)
            FUZZ_CHECK(share[i] == -1 || (share[i] >= 0 && share[i] <= 1));
        if (kind > 0)
            FUZZ_CHECK(sl_grants_fold(g, msg, len, now, "self", NULL, NULL) == 0);
        for (int b = 0; b < 2; b++) {
            double h = sl_grants_held(g, b, now);
            FUZZ_CHECK(isfinite(h) && h >= 0);
        }
        if (sl_grants_epoch(g) >= epoch)
            epoch = sl_grants_epoch(g) + 1;
        char *table = sl_grants_round(g, "coordinator", epoch, now, NULL, NULL);
        if (table != NULL) {
            check_table(table);
            sl_grants_t *fresh = sl_grants_new(ids, release, 2, 10000);
            FUZZ_CHECK(fresh != NULL);
            FUZZ_CHECK(sl_grants_fold(fresh, table, strlen(table), now, NULL, NULL, NULL) == 2);
            sl_grants_free(fresh);
            free(table);
        }
        now += 100;
        at = end + 1;
    }
    sl_grants_free(g);
    return 0;
}
