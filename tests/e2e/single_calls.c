/* single_calls.c - cuPointerSetAttribute (SYNC_MEMOPS) and cuMemRangeGetAttributes
 * (several attributes of a managed range in one call). The log callback,
 * now built, is driver_coverage.c's. */
#include <string.h>

#include "harness.h"

static void sync_memops(void)
{
    CUdeviceptr dev;
    CU(cuMemAlloc_v2(&dev, 4096));
    unsigned int v = 7;
    CU(cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, dev));
    CHECK((v & 0xff) == 0, "SYNC_MEMOPS before: %u", v);
    unsigned int one = 1;
    CU(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, dev + 100)); /* inside the allocation */
    v = 0;
    CU(cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, dev));
    CHECK((v & 0xff) == 1, "SYNC_MEMOPS after: %u", v);
    unsigned int zero = 0;
    CU(cuPointerSetAttribute(&zero, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, dev));
    v = 7;
    CU(cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, dev));
    CHECK((v & 0xff) == 0, "SYNC_MEMOPS cleared: %u", v);
    /* not settable, and not memory: the driver's INVALID_VALUE */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_CONTEXT, dev));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, 0x1000));
    CU(cuMemFree_v2(dev));
}

static void range_attributes(void)
{
    CUdeviceptr m;
    size_t n = 256 << 10;
    CU(cuMemAllocManaged(&m, n, CU_MEM_ATTACH_GLOBAL));
    CUmemLocation dev0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
    CU(cuMemAdvise_v2(m, n, CU_MEM_ADVISE_SET_READ_MOSTLY, dev0));
    CU(cuMemAdvise_v2(m, n, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host));
    CU(cuMemPrefetchAsync_v2(m, n, dev0, 0, NULL));
    CU(cuCtxSynchronize());

    int read_mostly = 9, preferred = 9, last = 9, accessed[4] = {9, 9, 9, 9};
    void *data[] = {&read_mostly, &preferred, &last, accessed};
    size_t sizes[] = {4, 4, 4, sizeof accessed};
    CUmem_range_attribute attrs[] = {CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
                                     CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION,
                                     CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY};
    CU(cuMemRangeGetAttributes(data, sizes, attrs, 4, m, n));
    CHECK(read_mostly == 1, "read mostly %d", read_mostly);
    CHECK(preferred == CU_DEVICE_CPU, "preferred location %d", preferred);
    CHECK(last == 0, "last prefetch location %d", last);
    for (int i = 0; i < 4; i++) CHECK(accessed[i] == CU_DEVICE_INVALID, "accessed by [%d] = %d", i, accessed[i]);

    /* each attribute is its own: unset read-mostly, ask for it alone */
    CU(cuMemAdvise_v2(m, n, CU_MEM_ADVISE_UNSET_READ_MOSTLY, dev0));
    CU(cuMemRangeGetAttributes(data, sizes, attrs, 1, m, n));
    CHECK(read_mostly == 0, "read mostly after unset %d", read_mostly);

    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemRangeGetAttributes(data, sizes, attrs, 0, m, n));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemRangeGetAttributes(NULL, sizes, attrs, 2, m, n));
    size_t bad_sizes[] = {4, 3};
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemRangeGetAttributes(data, bad_sizes, attrs, 2, m, n));
    CU(cuMemFree_v2(m));
}

static void client(void)
{
    h_cuda_setup();
    sync_memops();
    range_attributes();
}

int main(void)
{
    h_run_client_test("single_calls", 30, NULL, client);
    return 0;
}
