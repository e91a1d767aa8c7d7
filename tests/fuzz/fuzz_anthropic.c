/* fuzz_anthropic.c - the anthropic adapter's parsers: see fuzz_adapter.h. */
#include "fuzz_adapter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_adapter(SL_PROVIDER_ANTHROPIC, data, size);
}
