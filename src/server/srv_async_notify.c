/* srv_async_notify.c - cuDeviceRegisterAsyncNotification for a remote
 * client. The driver calls back into the session (on a thread of its own)
 * when the process goes over its device memory budget; the session
 * queues the notification as host work (HOST_WORK_NOTIFY) for the
 * client's record, sent before the next reply, and the client runs the
 * application's callback (src/client/async_notify.c), as log lines go
 * (srv_logs.c). The registration is a session handle (HK_ASYNC_CALLBACK)
 * under the client's id, which the generated
 * cuDeviceUnregisterAsyncNotification unregisters. */
#include <stdint.h>

#include "dispatch.h"
#include "srv_callback.h"
#include "../common/messages.gen.h"
#include "../common/protocol.h"
#include "../common/wire.h"

/* May run on a driver thread: no CUDA call here. The one kind of
 * notification there is (over budget) travels as its type and its byte
 * count; a type this build does not know travels with a count of 0. */
static void CUDA_CB notified(CUasyncNotificationInfo *info, void *data, CUasyncCallbackHandle h)
{
    (void)h;
    if (!info) return;
    wire_buf w;
    wb_init(&w);
    wb_put_u32(&w, (uint32_t)info->type);
    wb_put_u64(&w, info->type == CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET ? info->info.overBudget.bytesOverBudget : 0);
    srv_callback_send(HOST_WORK_NOTIFY, data, &w);
}

CUresult srv_scuda_async_register(srv_call *c)
{
    struct msg_scuda_async_register_req m;
    if (msg_scuda_async_register_req_get(&c->in, &c->arena, &m) != 0 || m.callback == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUasyncCallbackHandle h = NULL;
    CUresult r = REAL(cuDeviceRegisterAsyncNotification, (CUdevice)m.dev, notified, (void *)(uintptr_t)m.callback, &h);
    if (r != CUDA_SUCCESS) return r;
    if ((r = handle_put(c->s, m.callback, HK_ASYNC_CALLBACK, h)) != CUDA_SUCCESS)
        REAL(cuDeviceUnregisterAsyncNotification, (CUdevice)m.dev, h);
    return r;
}
