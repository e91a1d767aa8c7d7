/* quota.h - what `sluice quota set` sends; the command itself is in cli.h. */
#ifndef SL_CLI_QUOTA_H
#define SL_CLI_QUOTA_H

#include <jansson.h>
#include <stddef.h>

/* The body of `sluice quota set`. For a bucket (tenant == 0), argv holds the one LIMIT, a
 * non-negative number or "default": {"limit": N} or {"limit": null}. For a tenant, each
 * argument is KEY=VALUE, KEY one of weight, guarantee, daily_requests, daily_tokens, VALUE a
 * non-negative number (an integer but for guarantee) or "default" (null: back to the config).
 * Returns a new object (caller decrefs), or NULL with the reason in err. Ranges are the
 * scheduler's to check: it answers bad_request. */
json_t *sl_cli_quota_body(int tenant, int argc, char **argv, char *err, size_t errlen);

#endif
