/* stream_attrs.c - cuStreamSetAttribute / cuStreamGetAttribute round trips
 * through the shim: every attribute with a meaning for a stream keeps its
 * value, a getter writes only the member its id names, the access policy
 * window's device address comes back as it went, the per-thread form
 * reaches the per-thread stream, and ids without a meaning (or unknown to
 * SCUDA) get the driver's CUDA_ERROR_INVALID_VALUE. */
#include <string.h>

#include "harness.h"

/* A union after a get: the member's bytes, then the untouched fill. */
static void check_fill_after(const CUstreamAttrValue *v, size_t member, const char *what)
{
    const unsigned char *b = (const unsigned char *)v;
    for (size_t i = member; i < sizeof *v; i++) CHECK(b[i] == 0xab, "%s: byte %zu past its member written", what, i);
}

static void round_trips(CUstream st)
{
    CUdeviceptr dev;
    CU(cuMemAlloc_v2(&dev, 4096));
    CUstreamAttrValue v, got;

    memset(&v, 0, sizeof v);
    v.accessPolicyWindow.base_ptr = (void *)(uintptr_t)(dev + 256);
    v.accessPolicyWindow.num_bytes = 1024;
    v.accessPolicyWindow.hitRatio = 0.625f;
    v.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
    v.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
    CU(cuStreamSetAttribute(st, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
    memset(&got, 0xab, sizeof got);
    CU(cuStreamGetAttribute(st, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &got));
    CHECK(got.accessPolicyWindow.base_ptr == (void *)(uintptr_t)(dev + 256), "base_ptr %p",
          got.accessPolicyWindow.base_ptr);
    CHECK(got.accessPolicyWindow.num_bytes == 1024 && got.accessPolicyWindow.hitRatio == 0.625f &&
          got.accessPolicyWindow.hitProp == CU_ACCESS_PROPERTY_PERSISTING &&
          got.accessPolicyWindow.missProp == CU_ACCESS_PROPERTY_STREAMING, "access policy window fields");
    check_fill_after(&got, sizeof(CUaccessPolicyWindow), "access policy window");

    memset(&v, 0, sizeof v);
    v.syncPolicy = CU_SYNC_POLICY_YIELD;
    CU(cuStreamSetAttribute(st, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, &v));
    memset(&got, 0xab, sizeof got);
    CU(cuStreamGetAttribute(st, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, &got));
    CHECK(got.syncPolicy == CU_SYNC_POLICY_YIELD, "sync policy %d", (int)got.syncPolicy);
    check_fill_after(&got, sizeof(CUsynchronizationPolicy), "sync policy");

    memset(&v, 0, sizeof v);
    v.priority = -1;
    CU(cuStreamSetAttribute(st, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v));
    memset(&got, 0xab, sizeof got);
    CU(cuStreamGetAttribute(st, CU_LAUNCH_ATTRIBUTE_PRIORITY, &got));
    CHECK(got.priority == -1, "priority %d", got.priority);
    check_fill_after(&got, sizeof(int), "priority");

    memset(&v, 0, sizeof v);
    v.memSyncDomainMap.default_ = 1;
    v.memSyncDomainMap.remote = 0;
    CU(cuStreamSetAttribute(st, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, &v));
    memset(&got, 0xab, sizeof got);
    CU(cuStreamGetAttribute(st, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, &got));
    CHECK(got.memSyncDomainMap.default_ == 1 && got.memSyncDomainMap.remote == 0, "domain map %d %d",
          got.memSyncDomainMap.default_, got.memSyncDomainMap.remote);
    check_fill_after(&got, sizeof(CUlaunchMemSyncDomainMap), "domain map");

    memset(&v, 0, sizeof v);
    v.memSyncDomain = CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE;
    CU(cuStreamSetAttribute(st, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, &v));
    memset(&got, 0xab, sizeof got);
    CU(cuStreamGetAttribute(st, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, &got));
    CHECK(got.memSyncDomain == CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE, "domain %d", (int)got.memSyncDomain);
    CU(cuMemFree_v2(dev));
}

static void client(void)
{
    h_cuda_setup();
    CUstream a, b;
    CU(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CU(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    round_trips(a);
    round_trips(NULL);

    /* values are per stream: b still has its defaults */
    CUstreamAttrValue got;
    CU(cuStreamGetAttribute(b, CU_LAUNCH_ATTRIBUTE_PRIORITY, &got));
    CHECK(got.priority == 0, "stream b's priority %d", got.priority);

    /* the per-thread form reaches this thread's stream, not the legacy one */
    CUstreamAttrValue v = {.priority = -1};
    CU(cuStreamSetAttribute_ptsz(NULL, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v));
    CU(cuStreamGetAttribute(CU_STREAM_PER_THREAD, CU_LAUNCH_ATTRIBUTE_PRIORITY, &got));
    CHECK(got.priority == -1, "per-thread stream's priority %d", got.priority);

    /* ids without a meaning for a stream, and one nobody knows */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamGetAttribute(a, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &got));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamSetAttribute(a, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamGetAttribute(a, (CUstreamAttrID)999, &got));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamSetAttribute(a, (CUstreamAttrID)999, &v));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamGetAttribute(a, CU_LAUNCH_ATTRIBUTE_PRIORITY, NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamSetAttribute(a, CU_LAUNCH_ATTRIBUTE_PRIORITY, NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
              cuStreamSetAttribute(a, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY,
                                   &(CUstreamAttrValue){.syncPolicy = (CUsynchronizationPolicy)77}));
    CU(cuStreamDestroy_v2(a));
    CU(cuStreamDestroy_v2(b));
}

int main(void)
{
    h_run_client_test("stream_attrs", 30, NULL, client);
    return 0;
}
