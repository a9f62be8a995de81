/* graph_dot.c - cuGraphDebugDotPrint.
 *
 * The driver writes the dot text to a file, but the driver is the
 * session's and the path is the application's: the session has its
 * driver write a temporary file of its own and sends the text back
 * (bounded by GRAPH_MAX_DOT), and this file writes it at the
 * application's path, on the client machine where the application will
 * look for it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "rpc.h"
#include "servers.h"
#include "shim.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

/* 0, or -1 with errno set. */
static int write_file(const char *path, const void *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return -1;
    const char *p = data;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            close(fd);
            errno = e;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return close(fd);
}

EXPORT CUresult cuGraphDebugDotPrint(CUgraph hGraph, const char *path, unsigned int flags)
{
    SHIM_ENTER(cuGraphDebugDotPrint, (hGraph, path, flags));
    if (!path) return CUDA_ERROR_INVALID_VALUE;
    struct msg_cuGraphDebugDotPrint_req m = {handle_wire_id(hGraph), flags};
    struct msg_cuGraphDebugDotPrint_rep rep;
    rpc_call c;
    rpc_begin_on(&c, OP_cuGraphDebugDotPrint, server_of_handle(hGraph));
    msg_cuGraphDebugDotPrint_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && msg_cuGraphDebugDotPrint_rep_get(&c.out, &c.arena, &rep) != 0) {
        LOG_ERROR("cuGraphDebugDotPrint: malformed reply from the server");
        r = CUDA_ERROR_UNKNOWN;
    }
    if (r == CUDA_SUCCESS && write_file(path, rep.text, (size_t)rep.text_len) != 0) {
        LOG_ERROR("cuGraphDebugDotPrint: cannot write %s: %s; give a path this process may write", path,
                  strerror(errno));
        r = CUDA_ERROR_OPERATING_SYSTEM;
    }
    rpc_end(&c);
    return r;
}
