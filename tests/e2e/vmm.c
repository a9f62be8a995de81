/* vmm.c - virtual memory management through SCUDA (the shape of
 * tests/gpu/programs/drv_vmm.cu).
 *
 * Allocation handles are driver values that travel as ids: the client
 * never hands the session a raw value. The test maps two physical
 * allocations side by side, copies and runs a kernel across both,
 * retains a handle from an address (the same id comes back, with a
 * reference of its own), reads the allocation's properties (the
 * win32HandleMetaData pointer travels as NULL both ways), and releases
 * everything in the driver's order. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

int main(void)
{
    h_begin("vmm", 25);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    h_cuda_setup();

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.win32HandleMetaData = &prop; /* a client address: travels as NULL (the stand-in refuses others) */
    size_t gran = 0, rec = 0;
    CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CU(cuMemGetAllocationGranularity(&rec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    CHECK(gran != 0 && rec >= gran);

    const size_t chunk = gran, total = 2 * chunk;
    CUmemGenericAllocationHandle h1 = 0, h2 = 0;
    CU(cuMemCreate(&h1, chunk, &prop, 0));
    CU(cuMemCreate(&h2, chunk, &prop, 0));
    CHECK(h1 != 0 && h2 != 0 && h1 != h2);
    CUdeviceptr va = 0;
    CU(cuMemAddressReserve(&va, total, 0, 0, 0));
    CU(cuMemMap(va, chunk, 0, h1, 0));
    CU(cuMemMap(va + chunk, chunk, 0, h2, 0));
    /* a raw value that is no id: refused by the session, never the driver's business */
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuMemMap(va, chunk, 0, h1 + 8, 0));
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(va, total, &acc, 1));
    unsigned long long flags = 0;
    CU(cuMemGetAccess(&flags, &prop.location, va + chunk));
    CHECK(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

    /* one copy and one kernel across both physical allocations */
    size_t n = total / 4;
    uint32_t *hbuf = malloc(total);
    CHECK(hbuf != NULL);
    for (size_t i = 0; i < n; i++) hbuf[i] = (uint32_t)i;
    CU(cuMemcpyHtoD_v2(va, hbuf, total));
    CU(cuMemcpyDtoH_v2(hbuf, va, total));
    for (size_t i = 0; i < n; i++) CHECK(hbuf[i] == (uint32_t)i, "[%zu] = %u", i, hbuf[i]);
    uint32_t value = 5;
    uint64_t n64 = n;
    void *args[] = {&va, &value, &n64};
    CU(cuLaunchKernel(h_func("fill_u32"), 8, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    CU(cuCtxSynchronize());
    CU(cuMemcpyDtoH_v2(hbuf, va, total));
    CHECK(hbuf[0] == 5 && hbuf[n / 2] == 5 && hbuf[n - 1] == 5);
    printf("ok mapped range of 2 allocations (%zu bytes): copies and a kernel\n", total);

    /* the handle behind an address: the same id, one more reference */
    CUmemGenericAllocationHandle back = 0;
    CU(cuMemRetainAllocationHandle(&back, (void *)(uintptr_t)(va + chunk)));
    CHECK(back == h2, "retained handle %llx, created %llx", (unsigned long long)back, (unsigned long long)h2);
    CUmemAllocationProp got;
    memset(&got, 0xcc, sizeof got);
    CU(cuMemGetAllocationPropertiesFromHandle(&got, back));
    CHECK(got.type == CU_MEM_ALLOCATION_TYPE_PINNED && got.location.id == 0 && got.win32HandleMetaData == NULL);
    CU(cuMemRelease(back));
    /* h2 still holds its own reference */
    CU(cuMemGetAllocationPropertiesFromHandle(&got, h2));

    CU(cuMemUnmap(va, total));
    CU(cuMemRelease(h1));
    CU(cuMemRelease(h2));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuMemRelease(h2)); /* its last reference went */
    CU(cuMemAddressFree(va, total));
    printf("ok retain/release counted; unmapped, released, freed\n");
    free(hbuf);
    h_server_stop(&srv);
    printf("PASS vmm\n");
    return 0;
}
