/* cli.c - what the commands share once their arguments are good: the config (see cli.h). */
#include "cli.h"

sl_config_t *sl_cli_config(sl_proc_opts_t *opts)
{
    opts->log_level = "warn";
    return sl_proc_start("cli", opts);
}
