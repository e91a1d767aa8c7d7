/* fuzz.c - helpers the fuzz targets share (see fuzz.h). */
#include "fuzz.h"

#include <sys/mman.h>
#include <unistd.h>

#include "util.h"

void fuzz_repo_path(const char *rel, char *out, size_t cap)
{
    sl_resolve_path(rel, out, cap);
    if (access(out, R_OK) != 0) {
        fprintf(stderr, "fuzz: cannot find %s (run from the repository)\n", rel);
        abort();
    }
}

int fuzz_file_open(const uint8_t *data, size_t size, char *path, size_t cap)
{
    int fd = memfd_create("fuzz-input", 0);
    FUZZ_CHECK(fd >= 0);
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        FUZZ_CHECK(n > 0);
        done += (size_t)n;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

void fuzz_file_close(int fd)
{
    close(fd);
}
