/* run_probe.c - a CUDA program that is not linked against any libcuda: it
 * finds the driver the way cudart does, dlopen("libcuda.so.1"), so it
 * reaches SCUDA only if `scuda run` put the shim first on its library path.
 * Prints what the driver says of device 0 and what a memset and a copy
 * back give, one "key value" line each. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int (*fn_i)(unsigned);
typedef int (*fn_pi)(int *);
typedef int (*fn_get)(int *, int);
typedef int (*fn_name)(char *, int, int);
typedef int (*fn_retain)(void **, int);
typedef int (*fn_set)(void *);
typedef int (*fn_alloc)(uint64_t *, size_t);
typedef int (*fn_memset)(uint64_t, unsigned, size_t);
typedef int (*fn_dtoh)(void *, uint64_t, size_t);

#define SYM(type, name) type name = (type)dlsym(lib, #name)

int main(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("dlopen failed\n");
        return 2;
    }
    SYM(fn_i, cuInit);
    SYM(fn_pi, cuDeviceGetCount);
    SYM(fn_name, cuDeviceGetName);
    SYM(fn_retain, cuDevicePrimaryCtxRetain);
    SYM(fn_set, cuCtxSetCurrent);
    SYM(fn_alloc, cuMemAlloc_v2);
    SYM(fn_memset, cuMemsetD32_v2);
    SYM(fn_dtoh, cuMemcpyDtoH_v2);
    if (!cuInit || !cuDeviceGetCount || !cuDeviceGetName || !cuDevicePrimaryCtxRetain || !cuCtxSetCurrent ||
        !cuMemAlloc_v2 || !cuMemsetD32_v2 || !cuMemcpyDtoH_v2)
        return 3;
    int n = -1;
    printf("init %d\n", cuInit(0));
    int rc = cuDeviceGetCount(&n);
    printf("count %d %d\n", rc, n);
    char name[128] = "";
    rc = cuDeviceGetName(name, sizeof name, 0);
    printf("name %d %s\n", rc, name);
    void *ctx = NULL;
    uint64_t d = 0;
    uint32_t words[4] = {0};
    int r = cuDevicePrimaryCtxRetain(&ctx, 0);
    if (!r) r = cuCtxSetCurrent(ctx);
    if (!r) r = cuMemAlloc_v2(&d, sizeof words);
    if (!r) r = cuMemsetD32_v2(d, 0x5eed, 4);
    if (!r) r = cuMemcpyDtoH_v2(words, d, sizeof words);
    printf("copy %d %#x %#x\n", r, words[0], words[3]);
    return 0;
}
