/* client.h - the scheduler's admin API as the admin commands call it.
 *
 * A client knows where the API is (--admin, $SLUICE_ADMIN_URL or the config's
 * scheduler.admin_listen) and the admin key (--admin-key-file or $SLUICE_ADMIN_KEY), and makes
 * one HTTP call per answer through libcurl. Every failure comes back as one line saying why.
 */
#ifndef SL_CLI_CLIENT_H
#define SL_CLI_CLIENT_H

#include <jansson.h>
#include <stddef.h>

#include "config.h"
#include "proc.h"

/* The options every admin command takes: --json, --admin URL, --admin-key-file FILE. */
typedef struct {
    int json;
    const char *admin_url; /* NULL: $SLUICE_ADMIN_URL, else the config's */
    const char *key_file;  /* NULL: $SLUICE_ADMIN_KEY */
} sl_cli_admin_opts_t;

/* Their entries in a command's sl_proc_opt_t table, filling the sl_cli_admin_opts_t *o. (The
 * formatter would put the last entry's braces on lines of their own.) */
/* clang-format off */
#define SL_CLI_ADMIN_OPTIONS(o)                                                                    \
    {"json", NULL, &(o)->json},                                                                    \
    {"admin", &(o)->admin_url, NULL},                                                              \
    {"admin-key-file", &(o)->key_file, NULL}
/* clang-format on */

/* What every admin command's --help ends with. */
#define SL_CLI_ADMIN_HELP                                                                          \
    "\n"                                                                                           \
    "Every admin command takes:\n"                                                                 \
    "  --json                 print the API's JSON answer instead of text\n"                       \
    "  --admin URL            the scheduler's admin API (default $SLUICE_ADMIN_URL, else\n"        \
    "                         http:// + scheduler.admin_listen from the config)\n"                 \
    "  --admin-key-file FILE  the admin key, on the first line of FILE (default\n"                 \
    "                         $SLUICE_ADMIN_KEY)\n"                                                \
    "Exit status: 0 done, 1 the API refused or could not be reached, 2 bad usage.\n"

typedef struct sl_cli_admin sl_cli_admin_t;

/* A client for prog ("sluice status": the prefix of its messages) from its options and the
 * config (loaded from proc, as sl_cli_config does: it gives the default URL). Returns 0 with
 * *out set (caller closes it), or 2 with the reason printed on stderr and *out NULL: no URL, no
 * admin key, or libcurl failed. Exits 2 when the config cannot be loaded. */
int sl_cli_admin_open(sl_proc_opts_t *proc, const char *prog, const sl_cli_admin_opts_t *opts,
                      sl_cli_admin_t **out);

/* Frees the client and wipes its key; NULL is a no-op. */
void sl_cli_admin_close(sl_cli_admin_t *a);

/* The command the client serves ("sluice status"), its base URL ("http://host:port", no
 * trailing slash), and whether --json was given. */
const char *sl_cli_admin_prog(const sl_cli_admin_t *a);
const char *sl_cli_admin_url(const sl_cli_admin_t *a);
int sl_cli_admin_json(const sl_cli_admin_t *a);

/* Calls METHOD base URL + path (path already escaped) with body (NULL = none). On success
 * returns 0 and *answer is the parsed JSON (caller decrefs). Otherwise returns 1, *answer stays
 * NULL, and err holds one line saying why: the API's "code: message", or what the connection
 * did. Ctrl-C ends a call at once. */
int sl_cli_admin_call(sl_cli_admin_t *a, const char *method, const char *path, const json_t *body,
                      json_t **answer, char *err, size_t errlen);

/* sl_cli_admin_call for a call whose failure ends the command: prints "sluice: why" on stderr
 * and returns 1. */
int sl_cli_admin_request(sl_cli_admin_t *a, const char *method, const char *path,
                         const json_t *body, json_t **answer);

/* Prints doc as indented JSON on stdout (--json). Returns 0, or 1 when out of memory. */
int sl_cli_print_json(const json_t *doc);

/* Says on stderr that the answer is not the object the spec promises (the scheduler is older or
 * newer than this sluice) and returns 1. */
int sl_cli_admin_unexpected(const sl_cli_admin_t *a);

/* Percent-encodes s for one URL path segment or query value: everything but letters, digits,
 * "-._~" and ":" ("/" becomes %2F). Returns a new string (caller frees), NULL when out of
 * memory. */
char *sl_cli_url_escape(const char *s);

#endif
