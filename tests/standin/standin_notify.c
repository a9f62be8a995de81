/* standin_notify.c - async notifications: with STANDIN_BUDGET_MB set, a
 * device whose allocated bytes go over that budget notifies every
 * registered callback (CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET, the bytes
 * over), at each allocation that leaves it over, as a driver with a
 * memory budget does. Callbacks run on the allocating thread, lock held. */
#include <stdlib.h>

#include "standin_internal.h"

#define SI_NOTIFY_MAX 8

static struct si_notify {
    CUasyncCallback fn;
    void *user;
    CUdevice dev;
} si_notify[SI_NOTIFY_MAX];

void si_budget_check(int dev)
{
    const char *env = getenv("STANDIN_BUDGET_MB");
    long mb = env ? strtol(env, NULL, 10) : 0;
    size_t budget = mb > 0 && mb < (1L << 20) ? (size_t)mb << 20 : 0;
    size_t used = si_g.dev[dev].used;
    if (!budget || used <= budget)
        return;
    for (int i = 0; i < SI_NOTIFY_MAX; i++) {
        if (si_notify[i].fn && si_notify[i].dev == dev) {
            CUasyncNotificationInfo info = {.type = CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET};
            info.info.overBudget.bytesOverBudget = used - budget;
            si_notify[i].fn(&info, si_notify[i].user, (CUasyncCallbackHandle)&si_notify[i]);
        }
    }
}

CUresult CUDAAPI cuDeviceRegisterAsyncNotification(CUdevice device, CUasyncCallback callbackFunc, void *userData,
                                                   CUasyncCallbackHandle *callback)
{
    si_enter();
    CUresult rc = si_device_check(device);
    if (!rc && (!callbackFunc || !callback))
        rc = CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; !rc && i <= SI_NOTIFY_MAX; i++) {
        if (i == SI_NOTIFY_MAX) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else if (!si_notify[i].fn) {
            si_notify[i] = (struct si_notify){callbackFunc, userData, device};
            *callback = (CUasyncCallbackHandle)&si_notify[i];
            break;
        }
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuDeviceUnregisterAsyncNotification(CUdevice device, CUasyncCallbackHandle callback)
{
    si_enter();
    CUresult rc = si_device_check(device);
    struct si_notify *n = (struct si_notify *)callback;
    if (!rc) {
        rc = CUDA_ERROR_INVALID_VALUE;
        for (int i = 0; i < SI_NOTIFY_MAX; i++)
            if (n == &si_notify[i] && n->fn && n->dev == device)
                n->fn = NULL, rc = CUDA_SUCCESS;
    }
    si_leave();
    return rc;
}
