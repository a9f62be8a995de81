/* attr_set.c - function attribute sets that need no reply (spec flag
 * one_way_when; docs/architecture.md, 3.8.4).
 *
 * cuFuncSetAttribute and cuKernelSetAttribute return only a result, and a
 * library sets the attribute just before the kernel's first launch
 * (PyTorch's attention kernels raise their dynamic shared memory this
 * way): a round trip each, on a slow link 20 ms of a first step. When the
 * client can tell the driver will accept the value, the set goes one-way:
 *   - the preferred shared memory carveout, -1 (default) to 100 percent;
 *   - the maximum dynamic shared memory, when the kernel's image was read
 *     (its static shared memory is known, image_kernels.h) and the value
 *     plus that static size fits every device's opt-in limit, which is
 *     the driver's rule.
 * Everything else waits as before, so a refusal still comes from the call.
 * A set that goes one-way and fails all the same (the estimate was wrong)
 * is reported at the next synchronizing call, as any one-way call's error.
 *
 * A sure set of the dynamic shared memory also tells the launch check the
 * kernel's new limit (func_desc.dyn_smem_set), so its launches ask nothing
 * either. */
#include <cuda.h>
#include <stdatomic.h>
#include <stdint.h>

#include "hooks.h"
#include "module.h"

/* The least opt-in shared memory per block of the devices the client
 * sees (kept once read: it never changes); 0 when it cannot be read
 * (then asked again next time). */
static int least_optin_smem(void)
{
    static _Atomic int cached = -1;
    int v = atomic_load(&cached);
    if (v >= 0) return v;
    int n = 0, least = 0;
    if (cuDeviceGetCount(&n) == CUDA_SUCCESS)
        for (int dev = 0; dev < n; dev++) {
            int o = 0;
            if (cuDeviceGetAttribute(&o, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev) != CUDA_SUCCESS ||
                o <= 0) {
                least = 0;
                break;
            }
            if (dev == 0 || o < least) least = o;
        }
    if (least > 0) atomic_store(&cached, least);
    return least;
}

static int device_count(void)
{
    int n = 0;
    return cuDeviceGetCount(&n) == CUDA_SUCCESS ? n : 0;
}

/* Whether the driver surely accepts attribute a = v for the function or
 * kernel described by d (NULL: not one of this process's). Notes a sure
 * dynamic shared memory limit for the launch check when it holds wherever
 * the kernel launches (`everywhere`), and forgets it on any other set. */
static int surely_accepted(struct func_desc *d, CUfunction_attribute a, int v, int everywhere)
{
    if (!d) return 0; /* not a function of this process: the driver says what is wrong */
    int sure = 0;
    if (a == CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT) {
        sure = v >= -1 && v <= 100;
    } else if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES && d->limits.known && v >= 0) {
        int optin = least_optin_smem();
        sure = optin > 0 && (uint64_t)v + d->limits.shared_bytes <= (uint64_t)optin;
    }
    int known = sure && everywhere && a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
    if (known || a != CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT) /* a carveout leaves the limit */
        __atomic_store_n(&d->dyn_smem_set, known ? (int64_t)v + 1 : 0, __ATOMIC_RELEASE);
    return sure;
}

int hook_one_way_cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    /* A function is one context's, so one device's; a kernel passed as a
     * function is set for the current device only. */
    int is_kernel = 0;
    struct func_desc *d = func_lookup_kind(hfunc, &is_kernel);
    return surely_accepted(d, attrib, value, !is_kernel || device_count() == 1);
}

int hook_one_way_cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev)
{
    /* A kernel's set is for one device: the launch check may take its
     * limit only where there is no other. */
    int n = device_count();
    return dev >= 0 && dev < n && surely_accepted(func_lookup(kernel), attrib, val, n == 1);
}
