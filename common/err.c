/* err.c - text for the sluice error enum (see err.h). */
#include "err.h"

static const char *const texts[] = {
#define SL_ERR_TEXT(name, text) text,
    SL_ERR_MAP(SL_ERR_TEXT)
#undef SL_ERR_TEXT
};

static const char *const names[] = {
#define SL_ERR_NAME(name, text) #name,
    SL_ERR_MAP(SL_ERR_NAME)
#undef SL_ERR_NAME
};

const char *sl_strerror(sl_err_t rc)
{
    if ((unsigned)rc >= (unsigned)SL_E_COUNT_)
        return "unknown error";
    return texts[rc];
}

const char *sl_errname(sl_err_t rc)
{
    if ((unsigned)rc >= (unsigned)SL_E_COUNT_)
        return "UNKNOWN";
    return names[rc];
}
