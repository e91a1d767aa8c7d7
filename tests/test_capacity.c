/* test_capacity.c - the counting rules of every limit (common/capacity.h): each dimension's
 * charge and settlement rule by side and counting setting, the "could ever fit" rule, and the
 * stored rule names. */
#include <check.h>
#include <string.h>

#include "../common/capacity.h"

static sl_limit_cfg_t limit(sl_dimension_t dim, double capacity)
{
    sl_limit_cfg_t l;
    memset(&l, 0, sizeof l);
    l.dimension = dim;
    l.capacity = capacity;
    l.algorithm = SL_LIMIT_TOKEN_BUCKET;
    return l;
}

static double charge(const sl_limit_cfg_t *l, int provider_side, const sl_deployment_cfg_t *dc,
                     const sl_demand_t *dm, sl_charge_rule_t *rule)
{
    double amount = -1;
    sl_capacity_charge(l, provider_side, dc, dm, &amount, rule);
    return amount;
}

START_TEST(total_tokens_count_as_the_provider_counts_at_receipt)
{
    sl_deployment_cfg_t dc;
    memset(&dc, 0, sizeof dc);
    sl_demand_t dm = {.input_raw = 120, .input = 100, .max_tokens = 300, .output = 50};
    sl_limit_cfg_t tpm = limit(SL_DIM_TOTAL_TOKENS, 1000);
    sl_charge_rule_t rule;
    dc.tpm_counting = SL_TPM_COUNT_MAX; /* OpenAI: max(max_tokens, input) */
    ck_assert(charge(&tpm, 1, &dc, &dm, &rule) == 300);
    ck_assert_int_eq(rule, SL_RULE_RECEIPT_MAX);
    dc.tpm_counting = SL_TPM_COUNT_SUM; /* Azure: input + max_tokens */
    ck_assert(charge(&tpm, 1, &dc, &dm, &rule) == 400);
    ck_assert_int_eq(rule, SL_RULE_RECEIPT_SUM);
    dc.tpm_counting = SL_TPM_COUNT_ACTUAL;
    ck_assert(charge(&tpm, 1, &dc, &dm, &rule) == 150);
    ck_assert_int_eq(rule, SL_RULE_ACTUAL_TOTAL);
    /* The callers' budgets count the estimate whatever the provider does. */
    dc.tpm_counting = SL_TPM_COUNT_MAX;
    ck_assert(charge(&tpm, 0, &dc, &dm, &rule) == 150);
    ck_assert_int_eq(rule, SL_RULE_ACTUAL_TOTAL);
}
END_TEST

START_TEST(input_and_output_follow_their_counting_settings)
{
    sl_deployment_cfg_t dc;
    memset(&dc, 0, sizeof dc);
    sl_demand_t dm = {.input_raw = 120, .input = 100, .max_tokens = 300, .output = 50};
    sl_limit_cfg_t itpm = limit(SL_DIM_INPUT_TOKENS, 1000);
    sl_limit_cfg_t otpm = limit(SL_DIM_OUTPUT_TOKENS, 1000);
    sl_charge_rule_t rule;
    /* Provider side: ingest's conservative count, for the real prompt is what it sees. */
    ck_assert(charge(&itpm, 1, &dc, &dm, &rule) == 120);
    ck_assert_int_eq(rule, SL_RULE_ACTUAL_INPUT);
    dc.input_counting = SL_INPUT_COUNT_EXCLUDE_CACHE_READS;
    ck_assert(charge(&itpm, 1, &dc, &dm, &rule) == 120);
    ck_assert_int_eq(rule, SL_RULE_ACTUAL_INPUT_UNCACHED);
    ck_assert(charge(&itpm, 0, &dc, &dm, &rule) == 100);
    ck_assert_int_eq(rule, SL_RULE_ACTUAL_INPUT);
    ck_assert(charge(&otpm, 1, &dc, &dm, &rule) == 50);
    dc.output_counting = SL_OUTPUT_COUNT_MAX_TOKENS;
    ck_assert(charge(&otpm, 1, &dc, &dm, &rule) == 300);
    ck_assert(charge(&otpm, 0, &dc, &dm, &rule) == 50);
    ck_assert_int_eq(rule, SL_RULE_ACTUAL_OUTPUT);
}
END_TEST

START_TEST(requests_gauges_spend_and_ramps)
{
    sl_deployment_cfg_t dc;
    memset(&dc, 0, sizeof dc);
    dc.price.input_per_mtok = 2;
    dc.price.output_per_mtok = 10;
    sl_demand_t dm = {.input_raw = 1000, .input = 1000, .max_tokens = 500, .output = 500};
    sl_charge_rule_t rule;
    sl_limit_cfg_t rpm = limit(SL_DIM_REQUESTS, 60);
    ck_assert(charge(&rpm, 1, &dc, &dm, &rule) == 1);
    ck_assert_int_eq(rule, SL_RULE_KEEP);
    sl_limit_cfg_t conc = limit(SL_DIM_CONCURRENCY, 4);
    ck_assert(charge(&conc, 0, &dc, &dm, &rule) == 1);
    ck_assert_int_eq(rule, SL_RULE_RELEASE);
    sl_limit_cfg_t spend = limit(SL_DIM_SPEND, 5);
    ck_assert(charge(&spend, 1, &dc, &dm, &rule) == (1000 * 2.0 + 500 * 10.0) / 1e6);
    ck_assert_int_eq(rule, SL_RULE_ACTUAL_SPEND);
    sl_limit_cfg_t ramp = limit(SL_DIM_RAMP, 10);
    ramp.ramp_unit = SL_DIM_REQUESTS;
    ramp.algorithm = SL_LIMIT_RAMP;
    ck_assert(charge(&ramp, 1, &dc, &dm, &rule) == 1);
    /* A ramp's allowance grows: it never makes a request too large. */
    ck_assert(sl_capacity_within(&ramp, 1e9));
    ck_assert(sl_capacity_within(&rpm, 60));
    ck_assert(!sl_capacity_within(&rpm, 61));
    ck_assert(sl_capacity_spend_usd(&dc.price, 100, 200, 0) == 0); /* cached capped at input */
}
END_TEST

START_TEST(cold_demand_is_what_is_known_before_learning)
{
    sl_demand_t dm = sl_demand_cold(70, 256);
    ck_assert_int_eq(dm.input_raw, 70);
    ck_assert_int_eq(dm.input, 70);
    ck_assert_int_eq(dm.max_tokens, 256);
    ck_assert_int_eq(dm.output, 256);
}
END_TEST

START_TEST(rule_names_are_stable)
{
    /* They are stored in reservation rows: a renamed rule would not settle after a restart. */
    ck_assert_str_eq(sl_charge_rule_name(SL_RULE_KEEP), "keep");
    ck_assert_str_eq(sl_charge_rule_name(SL_RULE_RECEIPT_SUM), "receipt_sum");
    ck_assert_str_eq(sl_charge_rule_name(SL_RULE_ACTUAL_INPUT_UNCACHED), "actual_input_uncached");
    for (int i = 0; i < SL_RULE_COUNT_; i++)
        ck_assert_int_eq(sl_charge_rule_parse(sl_charge_rule_name((sl_charge_rule_t)i)), i);
    ck_assert_int_eq(sl_charge_rule_parse("nope"), -1);
    ck_assert_str_eq(sl_charge_rule_name((sl_charge_rule_t)42), "unknown");
}
END_TEST

START_TEST(a_deployment_fits_when_its_limits_and_its_scopes_do)
{
    char err[512] = "";
    sl_config_t *cfg = NULL;
    ck_assert_msg(sl_config_load("tests/fixtures/config/provider_limits.json", &cfg, err,
                                 sizeof err) == SL_OK,
                  "%s", err);
    int claude = sl_config_deployment(cfg, "claude");
    ck_assert_int_ge(claude, 0);
    sl_demand_t ok = sl_demand_cold(1000, 900);
    ck_assert(sl_capacity_deployment_fits(cfg, claude, &ok));
    sl_demand_t otpm = sl_demand_cold(10, 1001); /* OTPM 1000 at max_tokens */
    ck_assert(!sl_capacity_deployment_fits(cfg, claude, &otpm));
    sl_demand_t itpm = sl_demand_cold(2001, 10); /* ITPM 2000 */
    ck_assert(!sl_capacity_deployment_fits(cfg, claude, &itpm));
    sl_demand_t scope = sl_demand_cold(1600, 10); /* the project's 1,500 a day */
    ck_assert(!sl_capacity_deployment_fits(cfg, claude, &scope));
    sl_demand_t ceiling = sl_demand_cold(10, 8193); /* max_output_tokens 8192 */
    ck_assert(!sl_capacity_deployment_fits(cfg, claude, &ceiling));
    sl_config_free(cfg);
}
END_TEST

static Suite *capacity_suite(void)
{
    Suite *s = suite_create("capacity");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, total_tokens_count_as_the_provider_counts_at_receipt);
    tcase_add_test(tc, input_and_output_follow_their_counting_settings);
    tcase_add_test(tc, requests_gauges_spend_and_ramps);
    tcase_add_test(tc, cold_demand_is_what_is_known_before_learning);
    tcase_add_test(tc, rule_names_are_stable);
    tcase_add_test(tc, a_deployment_fits_when_its_limits_and_its_scopes_do);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(capacity_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
