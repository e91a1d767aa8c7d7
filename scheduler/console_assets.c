/* console_assets.c - the console's files (scheduler/console/), built into the scheduler so that
 * it serves them with no install step and no network: the assembler's .incbin copies each file
 * into read-only data, followed by a NUL so the page can be handed out as one buffer. The
 * Makefile rebuilds this object when a file of scheduler/console/ changes.
 */
#include "console_assets.h"

#include <string.h>

#define EMBED(sym, path)                                                                           \
    __asm__(".section .rodata\n"                                                                   \
            ".global " #sym "\n" #sym ":\n"                                                        \
            ".incbin \"" path "\"\n"                                                               \
            ".global " #sym "_end\n" #sym "_end:\n"                                                \
            ".byte 0\n"                                                                            \
            ".previous\n");                                                                        \
    extern const char sym[], sym##_end[]

EMBED(sl_console_index, "scheduler/console/index.html");
EMBED(sl_console_app, "scheduler/console/app.js");
EMBED(sl_console_css, "scheduler/console/app.css");

int sl_console_asset(const char *path, const char **data, size_t *len, const char **type)
{
    static const struct {
        const char *path, *type;
        const char *start, *end;
    } assets[] = {
        {"/console/", "text/html; charset=utf-8", sl_console_index, sl_console_index_end},
        {"/console/index.html", "text/html; charset=utf-8", sl_console_index,
         sl_console_index_end},
        {"/console/app.js", "text/javascript; charset=utf-8", sl_console_app, sl_console_app_end},
        {"/console/app.css", "text/css; charset=utf-8", sl_console_css, sl_console_css_end},
    };
    for (size_t i = 0; i < sizeof assets / sizeof assets[0]; i++) {
        if (strcmp(path, assets[i].path) == 0) {
            *data = assets[i].start;
            *len = (size_t)(assets[i].end - assets[i].start);
            *type = assets[i].type;
            return 1;
        }
    }
    return 0;
}
