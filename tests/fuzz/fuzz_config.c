/* fuzz_config.c - the config loader (common/config.c and its config_*.c readers) on a file
 * holding the input.
 *
 * Contract: SL_OK with a config, or an error with a reason and no config; never a
 * crash, whatever the file holds.
 */
#include <string.h>

#include "config.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_file_open(data, size, path, sizeof path);
    sl_config_t *cfg = NULL;
    char err[512];
    err[0] = '\0';
    sl_err_t rc = sl_config_load(path, &cfg, err, sizeof err);
    if (rc == SL_OK) {
        FUZZ_CHECK(cfg != NULL && cfg->nroutes > 0);
        for (int i = 0; i < cfg->nroutes; i++)
            FUZZ_CHECK(sl_config_route(cfg, cfg->routes[i].name) >= 0);
        for (int i = 0; i < cfg->ndeployments; i++)
            FUZZ_CHECK(sl_config_deployment(cfg, cfg->deployments[i].name) >= 0);
    } else {
        FUZZ_CHECK(cfg == NULL);
        FUZZ_CHECK(err[0] != '\0');
    }
    sl_config_free(cfg);
    fuzz_file_close(fd);
    return 0;
}
