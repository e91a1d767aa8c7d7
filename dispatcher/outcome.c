/* outcome.c - the wire names of provider call outcomes (see outcome.h). */
#include "outcome.h"

static const char *const names[] = {
#define SL_OUTCOME_NAME(name, text) text,
    SL_OUTCOME_MAP(SL_OUTCOME_NAME)
#undef SL_OUTCOME_NAME
};

const char *sl_outcome_name(sl_outcome_t outcome)
{
    if ((unsigned)outcome >= (unsigned)SL_OUTCOME_COUNT_)
        return "unknown";
    return names[outcome];
}
