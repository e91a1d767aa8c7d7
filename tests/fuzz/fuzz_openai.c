/* fuzz_openai.c - the openai adapter's parsers (and azure, on the same input): see fuzz_adapter.h.
 */
#include "fuzz_adapter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_adapter(SL_PROVIDER_OPENAI, data, size);
    return fuzz_adapter(SL_PROVIDER_AZURE, data, size);
}
