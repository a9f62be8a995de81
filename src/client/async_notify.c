/* async_notify.c - cuDeviceRegisterAsyncNotification: the callback is
 * client code. The client keeps it under an id; the session registers its
 * own callback with the driver and sends each notification back as host
 * work (HOST_WORK_NOTIFY, src/server/srv_async_notify.c), which the
 * connection's reader runs here, before the reply of the next call that
 * waits for the session (the driver notifies on a thread of its own, so
 * natively too the callback runs at a moment of the driver's choosing).
 * cuDeviceUnregisterAsyncNotification is generated; its hook forgets the
 * record once the session's driver has dropped the registration. */
#include "callback_table.h"
#include "capture.h"
#include "hooks.h"
#include "rpc.h"
#include "servers.h"
#include "shim.h"
#include "../common/idmap.h"
#include "../common/log.h"
#include "../common/messages.gen.h"
#include "../common/ops.gen.h"
#include "../common/transport.h"
#include "../common/wire.h"

static struct idmap callbacks = IDMAP_INIT;

EXPORT CUresult cuDeviceRegisterAsyncNotification(CUdevice device, CUasyncCallback callbackFunc, void *userData,
                                                  CUasyncCallbackHandle *callback)
{
    SHIM_ENTER(cuDeviceRegisterAsyncNotification, (device, callbackFunc, userData, callback));
    if (!callbackFunc || !callback) return CUDA_ERROR_INVALID_VALUE;
    uint64_t id;
    if (callback_table_add(&callbacks, (callback_fn)callbackFunc, userData, &id) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_async_register, server_of_device(device));
    msg_scuda_async_register_req_put(&c.req,
                                     &(struct msg_scuda_async_register_req){.dev = device_local(device), .callback = id});
    CUresult r = callback_table_register(&callbacks, id, &c);
    if (r == CUDA_SUCCESS) *callback = (CUasyncCallbackHandle)handle_from_id(id);
    return r;
}

CUresult hook_cuDeviceUnregisterAsyncNotification(CUresult r, CUdevice device, CUasyncCallbackHandle callback)
{
    (void)device;
    if (r == CUDA_SUCCESS) callback_table_remove(&callbacks, (uint64_t)(uintptr_t)callback);
    return r;
}

int async_notify_deliver(int fd, uint64_t id, size_t len)
{
    uint8_t body[12];
    if (len != sizeof body) { /* not what this build's session sends: skip it */
        LOG_WARN("async notification for callback %llu of %zu bytes dropped", (unsigned long long)id, len);
        while (len > 0) {
            size_t n = len < sizeof body ? len : sizeof body;
            if (io_read_full(fd, body, n) != 0) return -1;
            len -= n;
        }
        return 0;
    }
    if (io_read_full(fd, body, sizeof body) != 0) return -1;
    struct callback_entry cb;
    if (!callback_table_find(&callbacks, id, &cb)) {
        LOG_WARN("async notification for unknown callback %llu dropped", (unsigned long long)id);
        return 0;
    }
    wire_reader in;
    wr_init(&in, body, sizeof body);
    CUasyncNotificationInfo info = {.type = (CUasyncNotificationType)wr_u32(&in)};
    info.info.overBudget.bytesOverBudget = wr_u64(&in);
    ((CUasyncCallback)cb.fn)(&info, cb.user, (CUasyncCallbackHandle)handle_from_id(id));
    return 0;
}
