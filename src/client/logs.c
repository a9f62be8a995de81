/* logs.c - cuLogsDumpToFile: the driver's log buffer is the session's
 * (cuLogsDumpToMemory and cuLogsCurrent are forwarded), the file is a path
 * of the client machine: the client fetches the buffer and writes it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"
#include "../common/log.h"

/* The driver keeps at most this many bytes of log (cuda.h), and a NUL. */
#define DRIVER_LOG_MAX 25600

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

EXPORT CUresult cuLogsDumpToFile(CUlogIterator *iterator, const char *pathToFile, unsigned int flags)
{
    SHIM_ENTER(cuLogsDumpToFile, (iterator, pathToFile, flags));
    if (!pathToFile) return CUDA_ERROR_INVALID_VALUE;
    static __thread char buf[DRIVER_LOG_MAX + 1];
    size_t n = sizeof buf;
    CUresult r = cuLogsDumpToMemory(iterator, buf, &n, flags);
    if (r != CUDA_SUCCESS) return r;
    if (n > DRIVER_LOG_MAX) n = DRIVER_LOG_MAX; /* not what a driver answers */
    int fd = open(pathToFile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int ok = fd >= 0 && write_all(fd, buf, n) == 0, err = errno;
    if (fd >= 0 && close(fd) != 0 && ok) ok = 0, err = errno;
    if (!ok) {
        LOG_ERROR("cuLogsDumpToFile: cannot write the driver log to %s (%s); give a writable path", pathToFile,
                  strerror(err));
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}
