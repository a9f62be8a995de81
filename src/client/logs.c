/* logs.c - the driver's log, which is the session's driver's
 * (cuLogsDumpToMemory and cuLogsCurrent are forwarded):
 *   - cuLogsDumpToFile: the file is a path of the client machine, so the
 *     client fetches the buffer and writes it;
 *   - cuLogsRegisterCallback: the callback is client code. The client
 *     keeps it under an id; the session registers its own callback with
 *     the driver and sends each line back as host work (HOST_WORK_LOG,
 *     src/server/srv_logs.c), which the connection's reader runs here
 *     before the reply of the call that the line came with (or of the next
 *     call that waits for the session, when it came with a one-way call).
 *     cuLogsUnregisterCallback is generated; its hook forgets the record
 *     once the session's driver has dropped the registration, after which
 *     no line for it can arrive (they travel before that reply). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "callback_table.h"
#include "capture.h"
#include "hooks.h"
#include "rpc.h"
#include "shim.h"
#include "../common/idmap.h"
#include "../common/log.h"
#include "../common/messages.gen.h"
#include "../common/ops.gen.h"
#include "../common/transport.h"
#include "../common/wire.h"

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

/* ---- callbacks ----------------------------------------------------------- */

static struct idmap callbacks = IDMAP_INIT;

EXPORT CUresult cuLogsRegisterCallback(CUlogsCallback callbackFunc, void *userData, CUlogsCallbackHandle *callback_out)
{
    SHIM_ENTER(cuLogsRegisterCallback, (callbackFunc, userData, callback_out));
    if (!callbackFunc || !callback_out) return CUDA_ERROR_INVALID_VALUE;
    uint64_t id;
    if (callback_table_add(&callbacks, (callback_fn)callbackFunc, userData, &id) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    rpc_call c;
    rpc_begin(&c, OP_scuda_logs_register);
    msg_scuda_logs_register_req_put(&c.req, &(struct msg_scuda_logs_register_req){.callback = id});
    CUresult r = callback_table_register(&callbacks, id, &c);
    if (r == CUDA_SUCCESS) *callback_out = (CUlogsCallbackHandle)handle_from_id(id);
    return r;
}

CUresult hook_cuLogsUnregisterCallback(CUresult r, CUlogsCallbackHandle callback)
{
    if (r == CUDA_SUCCESS) callback_table_remove(&callbacks, (uint64_t)(uintptr_t)callback);
    return r;
}

int logs_deliver(int fd, uint64_t id, size_t len)
{
    /* The frame's length is already bounded by the connection; the text
     * gets a NUL after it, as the driver's does. */
    char *line = malloc(len + 1);
    if (!line) return -1;
    if (io_read_full(fd, line, len) != 0) {
        free(line);
        return -1;
    }
    struct callback_entry cb;
    if (len < 4 || !callback_table_find(&callbacks, id, &cb)) {
        LOG_WARN("driver log line for unknown callback %llu dropped", (unsigned long long)id);
    } else {
        wire_reader in;
        wr_init(&in, line, 4);
        uint32_t level = wr_u32(&in);
        line[len] = '\0';
        ((CUlogsCallback)cb.fn)(cb.user, (CUlogLevel)level, line + 4, len - 4);
    }
    free(line);
    return 0;
}
