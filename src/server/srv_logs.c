/* srv_logs.c - cuLogsRegisterCallback for a remote client. The driver
 * calls back into the session, on whatever thread writes the log line
 * (often inside the failing call); the session queues the line as host
 * work (HOST_WORK_LOG) for the client's record, sent before the next
 * reply, and the client runs the application's callback there
 * (src/client/logs.c). The session never waits for the client.
 * cuLogsUnregisterCallback is generated: the registration is a session
 * handle (HK_LOGS_CALLBACK) under the client's id. */
#include <stdint.h>
#include <string.h>

#include "dispatch.h"
#include "srv_callback.h"
#include "../common/messages.gen.h"
#include "../common/protocol.h"
#include "../common/wire.h"

/* A log line longer than this is cut: the driver's own lines are short,
 * and the whole buffer is at most 25600 bytes. */
#define LOG_LINE_MAX 4096

/* May run on a driver thread: no CUDA call here. */
static void CUDA_CB log_line(void *data, CUlogLevel level, char *message, size_t length)
{
    if (!message) length = 0;
    if (length > LOG_LINE_MAX) length = LOG_LINE_MAX;
    wire_buf line;
    wb_init(&line);
    wb_put_u32(&line, (uint32_t)level);
    wb_put_raw(&line, message, length);
    srv_callback_send(HOST_WORK_LOG, data, &line);
}

CUresult srv_scuda_logs_register(srv_call *c)
{
    struct msg_scuda_logs_register_req m;
    if (msg_scuda_logs_register_req_get(&c->in, &c->arena, &m) != 0 || m.callback == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUlogsCallbackHandle h = NULL;
    CUresult r = REAL(cuLogsRegisterCallback, log_line, (void *)(uintptr_t)m.callback, &h);
    if (r != CUDA_SUCCESS) return r;
    if ((r = handle_put(c->s, m.callback, HK_LOGS_CALLBACK, h)) != CUDA_SUCCESS)
        REAL(cuLogsUnregisterCallback, h);
    return r;
}
