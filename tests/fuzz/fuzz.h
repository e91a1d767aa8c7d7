/* fuzz.h - what the libFuzzer targets in tests/fuzz/ share (see tests/fuzz/README.md).
 *
 * Each target is one LLVMFuzzerTestOneInput over one parser, built with clang's libFuzzer and
 * ASan + UBSan (`make fuzz`). A target checks the parser's contract on every input (results in
 * range, output that must parse, the same answer however the bytes are cut) and aborts when it
 * is broken, so a wrong answer is a finding just like a crash.
 */
#ifndef SL_FUZZ_H
#define SL_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Aborts with a message when a contract does not hold (libFuzzer then saves the input). */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: contract broken: %s\n", __FILE__, __LINE__, #cond);            \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A repository file (schema/, examples/, tests/fixtures/) found from the working directory or
 * the folders above the binary (sl_resolve_path); aborts when it is not there. out holds cap
 * bytes. */
void fuzz_repo_path(const char *rel, char *out, size_t cap);

/* A file holding exactly data[0..size), readable by path until fuzz_file_close; path holds cap
 * bytes. A memfd, so a run writes nothing to disk. Returns the descriptor. */
int fuzz_file_open(const uint8_t *data, size_t size, char *path, size_t cap);
void fuzz_file_close(int fd);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#endif
