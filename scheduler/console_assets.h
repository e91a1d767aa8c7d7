/* console_assets.h - the operator console's static files, served by the admin listener
 * (scheduler/admin.c) at /console/ without a key: they hold no data, the page asks the admin
 * API for it with the key its user signs in with. */
#ifndef SL_CONSOLE_ASSETS_H
#define SL_CONSOLE_ASSETS_H

#include <stddef.h>

/* The file served at path ("/console/", "/console/app.js", ...): 1 and its bytes, length and
 * content type, or 0 when there is none. */
int sl_console_asset(const char *path, const char **data, size_t *len, const char **type);

#endif
