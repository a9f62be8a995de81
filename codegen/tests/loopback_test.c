/* loopback_test.c - runs generated client stubs against generated server
 * handlers in one process (loopback_runtime.c), with fake driver functions
 * that record what reached them. Also checks the trampolines and the
 * cuGetProcAddress table against the real driver's answers
 * (testdata/procaddr-driver580.txt, path in argv[1]).
 * Prints "ok N" or the first failures; exit status 0 when all pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/memo.h"
#include "client/procaddr.gen.h"
#include "common/ops.gen.h"
#include "loopback.h"

static int failures, checks;
#define CHECK(cond)                                                            \
    do {                                                                       \
        checks++;                                                              \
        if (!(cond)) {                                                         \
            failures++;                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                      \
    } while (0)

/* ---- fake driver ---------------------------------------------------------- */

static unsigned calls_alloc, calls_kattr, calls_clusters;
static void *seen_ptr, *seen_ptr2;
static size_t seen_n;
static CUmemAccessDesc seen_desc[4];
static CUlaunchConfig seen_cfg;
static CUlaunchAttribute seen_attr;

static CUresult f_alloc(CUdeviceptr *p, size_t n)
{
    calls_alloc++;
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    *p = 0xdead0000ull + n;
    return CUDA_SUCCESS;
}
static CUresult f_stream_create(CUstream *p, unsigned flags)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    *p = (CUstream)(uintptr_t)(0x5000 + flags);
    return CUDA_SUCCESS;
}
static CUresult f_stream_query(CUstream s)
{
    seen_ptr = s;
    return CUDA_ERROR_NOT_READY;
}
static CUresult f_event_sync(CUevent e)
{
    (void)e;
    return CUDA_SUCCESS;
}

static CUresult f_stream_destroy(CUstream s)
{
    seen_ptr = s;
    return CUDA_SUCCESS;
}
static CUresult f_occupancy(int *n, CUfunction f, int block, size_t dyn)
{
    calls_kattr++;
    seen_ptr = f;
    *n = block + (int)dyn + (int)calls_kattr;
    return CUDA_SUCCESS;
}
static CUresult f_fset(CUfunction f, CUfunction_attribute a, int v)
{
    (void)f, (void)a, (void)v;
    return CUDA_SUCCESS;
}
static CUresult f_setaccess(CUdeviceptr p, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    (void)p, (void)size;
    seen_n = count;
    memcpy(seen_desc, desc, count * sizeof *desc);
    return CUDA_SUCCESS;
}
static CUresult f_add_empty(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t n)
{
    seen_ptr = g;
    seen_n = n;
    seen_ptr2 = n > 1 ? (void *)deps[1] : NULL;
    *ph = (CUgraphNode)(uintptr_t)0x7700;
    return CUDA_SUCCESS;
}
static CUresult f_clusters(int *num, CUfunction f, const CUlaunchConfig *cfg)
{
    calls_clusters++;
    seen_ptr = f;
    seen_cfg = *cfg;
    if (cfg->numAttrs) seen_attr = cfg->attrs[0];
    *num = 42;
    return CUDA_SUCCESS;
}
static CUresult f_getctx(CUstream s, CUcontext *pctx)
{
    (void)s;
    *pctx = (CUcontext)seen_ptr2;
    return CUDA_SUCCESS;
}
static CUresult f_luid(char *luid, unsigned *mask, CUdevice dev)
{
    for (int i = 0; i < 8; i++) luid[i] = (char)('a' + i + dev);
    *mask = 3;
    return CUDA_SUCCESS;
}
static CUresult f_xchg(CUstreamCaptureMode *mode)
{
    CUstreamCaptureMode old = *mode;
    *mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    return old == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
static CUresult f_tiled(CUtensorMap *map, CUtensorMapDataType t, cuuint32_t rank, void *addr, const cuuint64_t *dim,
                        const cuuint64_t *strides, const cuuint32_t *box, const cuuint32_t *estr,
                        CUtensorMapInterleave il, CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                        CUtensorMapFloatOOBfill oob)
{
    (void)t, (void)il, (void)sw, (void)l2, (void)oob;
    memset(map, 0, sizeof *map);
    map->opaque[0] = (cuuint64_t)(uintptr_t)addr;
    map->opaque[1] = rank;
    for (cuuint32_t i = 0; i < rank; i++) map->opaque[2 + i] = dim[i] + box[i] + estr[i];
    for (cuuint32_t i = 0; i + 1 < rank; i++) map->opaque[8 + i] = strides[i];
    return CUDA_SUCCESS;
}
static size_t b2d(int block_size) { return (size_t)block_size * 4; }

/* a graph of three nodes; the array holds *n entries (more: NULL) */
static CUresult f_get_nodes(CUgraph g, CUgraphNode *nodes, size_t *n)
{
    if (g != (CUgraph)(uintptr_t)0x9000 || n == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (nodes == NULL) {
        *n = 3;
        return CUDA_SUCCESS;
    }
    for (size_t i = 0; i < *n; i++) nodes[i] = i < 3 ? (CUgraphNode)(uintptr_t)(0x7100 + 0x10 * i) : NULL;
    if (*n > 3) *n = 3;
    return CUDA_SUCCESS;
}
static CUresult f_default_pool(CUmemoryPool *pool, CUdevice dev)
{
    *pool = (CUmemoryPool)(uintptr_t)(0x8800 + dev);
    return CUDA_SUCCESS;
}
static CUmemPoolProps seen_pool_props;
static CUresult f_pool_create(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    seen_pool_props = *props;
    *pool = (CUmemoryPool)(uintptr_t)0x8900;
    return CUDA_SUCCESS;
}
static unsigned calls_pool_attr;
static CUresult f_pool_get_attr(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    (void)pool;
    calls_pool_attr++;
    if (attr == CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC) *(int *)value = -7;
    else *(cuuint64_t *)value = 0x1122334455667788ull;
    return CUDA_SUCCESS;
}
static cuuint64_t seen_attr_value;
static CUresult f_pool_set_attr(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    (void)pool;
    seen_attr_value = 0;
    memcpy(&seen_attr_value, value, attr <= CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES ? sizeof(int) : 8);
    return CUDA_SUCCESS;
}
static CUresult f_mem_create(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                             unsigned long long flags)
{
    (void)flags;
    if (prop->win32HandleMetaData != NULL) return CUDA_ERROR_INVALID_VALUE;
    *h = 0xfeed0000ull + size; /* a driver value, not a pointer */
    return CUDA_SUCCESS;
}
static CUmemGenericAllocationHandle seen_mem_handle;
static CUresult f_mem_map(CUdeviceptr p, size_t size, size_t off, CUmemGenericAllocationHandle h,
                          unsigned long long flags)
{
    (void)p, (void)size, (void)off, (void)flags;
    seen_mem_handle = h;
    return CUDA_SUCCESS;
}
static CUresult f_mem_retain(CUmemGenericAllocationHandle *h, void *addr)
{
    *h = 0xfeed0000ull + (uintptr_t)addr;
    return CUDA_SUCCESS;
}
static CUresult f_mem_props(CUmemAllocationProp *prop, CUmemGenericAllocationHandle h)
{
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.id = (int)(h & 0xff);
    prop->win32HandleMetaData = (void *)0x1234; /* must not reach the client */
    return CUDA_SUCCESS;
}
static CUresult f_begin_capture(CUstream s, CUstreamCaptureMode mode)
{
    (void)mode;
    return s == NULL ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}
static CUresult f_end_capture(CUstream s, CUgraph *g)
{
    (void)s;
    *g = (CUgraph)(uintptr_t)0x9300;
    return CUDA_SUCCESS;
}
static CUresult f_memset(CUdeviceptr p, unsigned char v, size_t n, CUstream s)
{
    seen_ptr = s;
    seen_n = n + v + (size_t)p;
    return CUDA_SUCCESS;
}

static unsigned long long tramp_args[8];
static double tramp_d;
static CUresult f_tramp(unsigned long long a, unsigned long long b, unsigned long long c, unsigned long long d,
                        unsigned long long e, unsigned long long f, double x, unsigned long long g)
{
    tramp_args[0] = a, tramp_args[1] = b, tramp_args[2] = c, tramp_args[3] = d;
    tramp_args[4] = e, tramp_args[5] = f, tramp_args[6] = g;
    tramp_d = x;
    return (CUresult)4242;
}

/* ---- tests ------------------------------------------------------------------ */

static void put_real(uint64_t id, enum handle_kind k, uintptr_t v) { handle_put(NULL, id, k, (void *)v); }

static void test_forwarding(void)
{
    real.cuMemAlloc_v2 = f_alloc;
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc_v2(&p, 64) == CUDA_SUCCESS && p == 0xdead0040ull);
    CHECK(lb.last_op == OP_cuMemAlloc_v2 && !lb.last_blocking);
    CHECK(cuMemAlloc_v2(NULL, 64) == CUDA_ERROR_INVALID_VALUE); /* NULL reaches the driver */
    real.cuMemAlloc_v2 = NULL;
    CHECK(cuMemAlloc_v2(&p, 64) == CUDA_ERROR_NOT_SUPPORTED);

    /* async creation with a client-chosen id, then use and destroy */
    real.cuStreamCreate = f_stream_create;
    real.cuStreamQuery = f_stream_query;
    real.cuStreamDestroy_v2 = f_stream_destroy;
    CUstream s = NULL;
    unsigned before = lb.async_calls;
    CHECK(cuStreamCreate(&s, 3) == CUDA_SUCCESS && s != NULL && lb.async_calls == before + 1);
    CHECK(cuStreamQuery(s) == CUDA_ERROR_NOT_READY && seen_ptr == (void *)0x5003);
    CHECK(cuStreamQuery_ptsz(NULL) == CUDA_ERROR_NOT_READY && seen_ptr == (void *)CU_STREAM_PER_THREAD);
    CHECK(cuStreamQuery(NULL) == CUDA_ERROR_NOT_READY && seen_ptr == NULL);
    CHECK(cuStreamDestroy_v2(s) == CUDA_SUCCESS && seen_ptr == (void *)0x5003);
    CHECK(cuStreamQuery(s) == CUDA_ERROR_INVALID_HANDLE); /* the id was dropped */
    CHECK(cuStreamCreate(NULL, 0) != CUDA_SUCCESS);        /* NULL goes sync and fails now */

    /* async memset on a per-thread stream */
    real.cuMemsetD8Async = f_memset;
    CHECK(cuMemsetD8Async_ptsz(0x100, 2, 5, NULL) == CUDA_SUCCESS && seen_ptr == (void *)CU_STREAM_PER_THREAD &&
          seen_n == 0x107);

    /* arrays of structs */
    real.cuMemSetAccess = f_setaccess;
    CUmemAccessDesc d[3];
    memset(d, 0, sizeof d);
    for (int i = 0; i < 3; i++) d[i].location.id = 10 + i, d[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK(cuMemSetAccess(0x1000, 4096, d, 3) == CUDA_SUCCESS && seen_n == 3 && memcmp(seen_desc, d, sizeof d) == 0);

    /* arrays of handles and a new handle */
    real.cuGraphAddEmptyNode = f_add_empty;
    put_real(0x900, HK_GRAPH, 0x9000);
    put_real(0x910, HK_GRAPH_NODE, 0x9100);
    put_real(0x920, HK_GRAPH_NODE, 0x9200);
    CUgraphNode deps[2] = {(CUgraphNode)(uintptr_t)0x910, (CUgraphNode)(uintptr_t)0x920}, node = NULL;
    CHECK(cuGraphAddEmptyNode(&node, (CUgraph)(uintptr_t)0x900, deps, 2) == CUDA_SUCCESS);
    CHECK(seen_ptr == (void *)0x9000 && seen_n == 2 && seen_ptr2 == (void *)0x9200 && node != NULL);
    void *h;
    CHECK(handle_get(NULL, (uint64_t)(uintptr_t)node, HK_GRAPH_NODE, &h) == CUDA_SUCCESS && h == (void *)0x7700);
    deps[1] = (CUgraphNode)(uintptr_t)0x999; /* unknown id */
    CHECK(cuGraphAddEmptyNode(&node, (CUgraph)(uintptr_t)0x900, deps, 2) == CUDA_ERROR_INVALID_HANDLE);

    /* an existing handle comes back as the client's id */
    real.cuStreamGetCtx = f_getctx;
    put_real(0xc00, HK_CONTEXT, 0xc000);
    CUcontext ctx = NULL;
    seen_ptr2 = (void *)0xc000;
    CHECK(cuStreamGetCtx(NULL, &ctx) == CUDA_SUCCESS && ctx == (CUcontext)(uintptr_t)0xc00);
    seen_ptr2 = (void *)0xbad;
    CHECK(cuStreamGetCtx(NULL, &ctx) == CUDA_ERROR_NOT_SUPPORTED);

    /* fixed-size out buffer and a scalar out */
    real.cuDeviceGetLuid = f_luid;
    char luid[9] = {0};
    unsigned mask = 0;
    CHECK(cuDeviceGetLuid(luid, &mask, 1) == CUDA_SUCCESS && strcmp(luid, "bcdefghi") == 0 && mask == 3);

    /* in-out */
    real.cuThreadExchangeStreamCaptureMode = f_xchg;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    CHECK(cuThreadExchangeStreamCaptureMode(&mode) == CUDA_SUCCESS && mode == CU_STREAM_CAPTURE_MODE_RELAXED);

    /* arrays sized by an expression, a device address in a void *, a struct out */
    real.cuTensorMapEncodeTiled = f_tiled;
    CUtensorMap map;
    cuuint64_t dim[3] = {10, 20, 30}, strides[2] = {128, 4096};
    cuuint32_t box[3] = {1, 2, 3}, estr[3] = {1, 1, 1};
    CHECK(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, (void *)0xabc000, dim, strides, box, estr,
                                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                 CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS);
    CHECK(map.opaque[0] == 0xabc000 && map.opaque[1] == 3 && map.opaque[4] == 34 && map.opaque[9] == 4096);

    /* parameters that must be NULL */
    int mingrid = 0, bs = 0;
    CHECK(cuOccupancyMaxPotentialBlockSize(&mingrid, &bs, (CUfunction)(uintptr_t)0x900, b2d, 0, 0) ==
          CUDA_ERROR_NOT_SUPPORTED);

    /* a NOT_SUPPORTED stub */
    CHECK(cuImportExternalMemory(NULL, NULL) == CUDA_ERROR_NOT_SUPPORTED);

    /* blocking flag reaches op_table */
    real.cuEventSynchronize = f_event_sync;
    CHECK(cuEventSynchronize(NULL) == CUDA_SUCCESS && lb.last_op == OP_cuEventSynchronize && lb.last_blocking);
}

/* Handles the driver returns that the client never created get ids from
 * the server range; arrays of them come back with the count semantics of
 * the driver; integer handles, NULLed pointer fields, attribute sizes. */
static void test_exported_handles(void)
{
    /* a count query, then the array: ids from the server range, stable */
    real.cuGraphGetNodes = f_get_nodes;
    CUgraph g = (CUgraph)(uintptr_t)0x900; /* real 0x9000, test_forwarding */
    size_t n = 0;
    CHECK(cuGraphGetNodes(g, NULL, &n) == CUDA_SUCCESS && n == 3);
    CUgraphNode nodes[4] = {0}, again[4] = {0};
    n = 4;
    CHECK(cuGraphGetNodes(g, nodes, &n) == CUDA_SUCCESS && n == 3 && nodes[3] == NULL);
    for (int i = 0; i < 3; i++) {
        void *h = NULL;
        CHECK(handle_is_server_id((uint64_t)(uintptr_t)nodes[i]));
        CHECK(handle_get(NULL, (uint64_t)(uintptr_t)nodes[i], HK_GRAPH_NODE, &h) == CUDA_SUCCESS &&
              h == (void *)(uintptr_t)(0x7100 + 0x10 * i));
    }
    n = 2;
    CHECK(cuGraphGetNodes(g, again, &n) == CUDA_SUCCESS && n == 2 && again[0] == nodes[0] && again[1] == nodes[1] &&
          again[2] == NULL);
    CHECK(cuGraphGetNodes(g, nodes, NULL) == CUDA_ERROR_INVALID_VALUE); /* the count reads through NULL */

    /* a single returned handle, the same id every time */
    real.cuDeviceGetDefaultMemPool = f_default_pool;
    CUmemoryPool p1 = NULL, p2 = NULL;
    CHECK(cuDeviceGetDefaultMemPool(&p1, 0) == CUDA_SUCCESS && handle_is_server_id((uint64_t)(uintptr_t)p1));
    CHECK(cuDeviceGetDefaultMemPool(&p2, 0) == CUDA_SUCCESS && p2 == p1);
    CHECK(cuDeviceGetDefaultMemPool(&p2, 1) == CUDA_SUCCESS && p2 != p1);

    /* a struct whose pointer field travels as NULL, both ways */
    real.cuMemPoolCreate = f_pool_create;
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.win32SecurityAttributes = &props;
    props.maxSize = 12345;
    CUmemoryPool mine = NULL;
    CHECK(cuMemPoolCreate(&mine, &props) == CUDA_SUCCESS && mine != NULL);
    CHECK(seen_pool_props.win32SecurityAttributes == NULL && seen_pool_props.maxSize == 12345);
    CHECK(props.win32SecurityAttributes == &props); /* the caller's struct is untouched */

    /* attribute values of the size the attribute has, exactly */
    real.cuMemPoolGetAttribute = f_pool_get_attr;
    real.cuMemPoolSetAttribute = f_pool_set_attr;
    unsigned char buf[16];
    memset(buf, 0xee, sizeof buf);
    CHECK(cuMemPoolGetAttribute(mine, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, buf) == CUDA_SUCCESS);
    int iv;
    memcpy(&iv, buf, 4);
    CHECK(iv == -7 && buf[4] == 0xee);
    memset(buf, 0xee, sizeof buf);
    CHECK(cuMemPoolGetAttribute(mine, CU_MEMPOOL_ATTR_USED_MEM_HIGH, buf) == CUDA_SUCCESS);
    cuuint64_t uv;
    memcpy(&uv, buf, 8);
    CHECK(uv == 0x1122334455667788ull && buf[8] == 0xee);
    unsigned before = calls_pool_attr;
    CHECK(cuMemPoolGetAttribute(mine, (CUmemPool_attribute)999, buf) == CUDA_ERROR_INVALID_VALUE &&
          calls_pool_attr == before); /* an unknown attribute never reaches the driver */
    int flag = 1;
    CHECK(cuMemPoolSetAttribute(mine, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, &flag) == CUDA_SUCCESS &&
          seen_attr_value == 1);
    cuuint64_t thr = 1ull << 40;
    CHECK(cuMemPoolSetAttribute(mine, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr) == CUDA_SUCCESS &&
          seen_attr_value == thr);

    /* VMM handles are integers: mapped through ids like any handle */
    real.cuMemCreate = f_mem_create;
    real.cuMemMap = f_mem_map;
    real.cuMemRetainAllocationHandle = f_mem_retain;
    real.cuMemGetAllocationPropertiesFromHandle = f_mem_props;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.win32HandleMetaData = &prop;
    CUmemGenericAllocationHandle mh = 0, back = 0;
    CHECK(cuMemCreate(&mh, 0x40, &prop, 0) == CUDA_SUCCESS && mh != 0 && mh != 0xfeed0040ull);
    CHECK(cuMemMap(0x1000, 0x40, 0, mh, 0) == CUDA_SUCCESS && seen_mem_handle == 0xfeed0040ull);
    CHECK(cuMemMap(0x1000, 0x40, 0, 0xfeed0040ull, 0) == CUDA_ERROR_INVALID_HANDLE); /* a raw value is refused */
    CHECK(cuMemRetainAllocationHandle(&back, (void *)0x40) == CUDA_SUCCESS && back == mh);
    CUmemAllocationProp got;
    CHECK(cuMemGetAllocationPropertiesFromHandle(&got, back) == CUDA_SUCCESS && got.win32HandleMetaData == NULL &&
          got.location.id == 0x40);

    /* the capture count the client keeps for copies */
    real.cuStreamBeginCapture_v2 = f_begin_capture;
    real.cuStreamEndCapture = f_end_capture;
    put_real(0xd00, HK_STREAM, 0xd000);
    CUstream cs = (CUstream)(uintptr_t)0xd00;
    CHECK(cuStreamBeginCapture_v2(cs, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS && lb_captures == 1);
    CHECK(cuStreamBeginCapture_v2(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL) != CUDA_SUCCESS && lb_captures == 1);
    CUgraph cg = NULL;
    CHECK(cuStreamEndCapture(cs, &cg) == CUDA_SUCCESS && cg != NULL && lb_captures == 0);
}

static void test_memo(void)
{
    /* (function attributes are hand-written now: src/client/func_attrs.c) */
    real.cuOccupancyMaxActiveBlocksPerMultiprocessor = f_occupancy;
    real.cuFuncSetAttribute = f_fset;
    put_real(0xa00, HK_FUNCTION, 0xa000);
    CUfunction k = (CUfunction)(uintptr_t)0xa00;
    int v1 = 0, v2 = 0;
    unsigned sync0 = lb.sync_calls;
    CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&v1, k, 128, 0) == CUDA_SUCCESS && calls_kattr == 1);
    CHECK(seen_ptr == (void *)0xa000);
    CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&v2, k, 128, 0) == CUDA_SUCCESS && v2 == v1 && calls_kattr == 1);
    CHECK(lb.sync_calls == sync0 + 1);
    CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&v2, k, 64, 0) == CUDA_SUCCESS && calls_kattr == 2);
    lb_ctx_id = 2; /* another current context is another key */
    CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&v2, k, 128, 0) == CUDA_SUCCESS && calls_kattr == 3);
    lb_ctx_id = 1;
    CHECK(cuFuncSetAttribute(k, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024) == CUDA_SUCCESS);
    CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&v2, k, 128, 0) == CUDA_SUCCESS && calls_kattr == 4 &&
          v2 != v1);
    CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&v2, (CUfunction)(uintptr_t)0xbad, 128, 0) ==
          CUDA_ERROR_INVALID_HANDLE);

    /* launch configuration: stream and attributes travel, result is cached */
    real.cuOccupancyMaxActiveClusters = f_clusters;
    put_real(0xb00, HK_FUNCTION, 0xb000);
    put_real(0xb10, HK_STREAM, 0xb100);
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = 2, attr.value.clusterDim.y = 1, attr.value.clusterDim.z = 1;
    CUlaunchConfig cfg = {.gridDimX = 8, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 128, .blockDimY = 1,
                          .blockDimZ = 1, .sharedMemBytes = 512, .hStream = (CUstream)(uintptr_t)0xb10,
                          .attrs = &attr, .numAttrs = 1};
    int n = 0;
    CHECK(cuOccupancyMaxActiveClusters(&n, (CUfunction)(uintptr_t)0xb00, &cfg) == CUDA_SUCCESS && n == 42);
    CHECK(seen_ptr == (void *)0xb000 && seen_cfg.hStream == (CUstream)0xb100 && seen_cfg.blockDimX == 128 &&
          seen_cfg.sharedMemBytes == 512 && seen_cfg.numAttrs == 1 &&
          seen_attr.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION && seen_attr.value.clusterDim.x == 2);
    n = 0;
    CHECK(cuOccupancyMaxActiveClusters(&n, (CUfunction)(uintptr_t)0xb00, &cfg) == CUDA_SUCCESS && n == 42 &&
          calls_clusters == 1);
    struct memo_stats ms;
    memo_get_stats(&ms);
    CHECK(ms.hits >= 2 && ms.invalidations >= 1);
}

static void test_malformed(void)
{
    /* a request one byte short is refused before the driver runs */
    real.cuMemAlloc_v2 = f_alloc;
    unsigned before = calls_alloc;
    srv_call call;
    memset(&call, 0, sizeof call);
    uint8_t req[8] = {1, 0, 0, 0, 0, 0, 0};
    wr_init(&call.in, req, 8); /* present flag + 7 of the 8 size bytes */
    wb_init(&call.out);
    CHECK(op_table[OP_cuMemAlloc_v2].handler(&call) == CUDA_ERROR_INVALID_VALUE && calls_alloc == before);
    wb_free(&call.out);
    /* an array count that disagrees with its parameter */
    wire_buf b;
    wb_init(&b);
    wb_put_u64(&b, 0x1000), wb_put_u64(&b, 4096);
    wb_put_u8(&b, 1), wb_put_u64(&b, 1);
    CUmemAccessDesc one;
    memset(&one, 0, sizeof one);
    wb_put_raw(&b, &one, sizeof one);
    wb_put_u64(&b, 5); /* count = 5, but one element was sent */
    memset(&call, 0, sizeof call);
    wr_init(&call.in, b.data, b.len);
    wb_init(&call.out);
    real.cuMemSetAccess = f_setaccess;
    seen_n = 0;
    CHECK(op_table[OP_cuMemSetAccess].handler(&call) == CUDA_ERROR_INVALID_VALUE && seen_n == 0);
    wb_free(&call.out);
    wb_free(&b);
    /* every op has a name; retired or unwritten ones may have no handler */
    for (unsigned op = 1; op < OP_COUNT; op++) CHECK(scuda_op_name(op) != NULL && op_table[op].name != NULL);
    CHECK(op_table_len == OP_COUNT && scuda_op_name(0) == NULL && scuda_op_name(OP_COUNT) == NULL);
}

CUresult cuGLInit(void);
CUresult cuGraphicsGLRegisterBuffer(void);

static void test_passthrough(void)
{
    shim_mode = SHIM_PASSTHROUGH;
    memset(&real_driver, 0, sizeof real_driver);
    real_driver.cuMemAlloc_v2 = f_alloc;
    unsigned before = lb.sync_calls;
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc_v2(&p, 1) == CUDA_SUCCESS && p == 0xdead0001ull && lb.sync_calls == before);
    CHECK(cuMemFree_v2(p) == CUDA_ERROR_NOT_SUPPORTED); /* not in the real table */
    CHECK(cuGraphGetNodes(NULL, NULL, NULL) == CUDA_ERROR_NOT_SUPPORTED);

    /* a prototype-less export jumps to the real symbol with every register intact */
    typedef CUresult (*fn8)(unsigned long long, unsigned long long, unsigned long long, unsigned long long,
                            unsigned long long, unsigned long long, double, unsigned long long);
    void *vp = (void *)f_tramp;
    memcpy(&real_driver.cuGraphicsGLRegisterBuffer, &vp, sizeof vp);
    fn8 call;
    vp = (void *)cuGraphicsGLRegisterBuffer;
    memcpy(&call, &vp, sizeof vp);
    CHECK(call(1, 2, 3, 4, 5, 6, 2.5, 7) == (CUresult)4242);
    CHECK(tramp_args[0] == 1 && tramp_args[5] == 6 && tramp_args[6] == 7 && tramp_d == 2.5);
    CHECK(cuGLInit() == CUDA_ERROR_NOT_SUPPORTED); /* real_driver.cuGLInit is NULL */
    shim_mode = SHIM_REMOTE;
    CHECK(call(1, 2, 3, 4, 5, 6, 2.5, 7) == CUDA_ERROR_NOT_SUPPORTED);
    shim_mode = SHIM_UNINITIALIZED;
    CHECK(cuGLInit() == CUDA_ERROR_NOT_INITIALIZED && cuMemAlloc_v2(&p, 1) == CUDA_ERROR_NOT_INITIALIZED);
    shim_mode = SHIM_FAILED;
    shim_init_error = CUDA_ERROR_NO_DEVICE;
    CHECK(cuGLInit() == CUDA_ERROR_NO_DEVICE);
    shim_mode = SHIM_REMOTE;
}

static const char *sym_of(const char *name, int version, int flags, CUdriverProcAddressQueryResult *st)
{
    const struct procaddr_entry *e = procaddr_find(name, version, (cuuint64_t)flags, st);
    return e ? e->symbol : "-";
}

static void test_procaddr(const char *fixture, const char *names)
{
    CUdriverProcAddressQueryResult st;
    CHECK(strcmp(sym_of("cuMemAlloc", 3020, 0, &st), "cuMemAlloc_v2") == 0 && st == CU_GET_PROC_ADDRESS_SUCCESS);
    CHECK(strcmp(sym_of("cuMemAlloc", 2000, 0, &st), "cuMemAlloc") == 0);
    CHECK(strcmp(sym_of("cuMemAlloc", 1999, 0, &st), "-") == 0 && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    CHECK(strcmp(sym_of("cuMemAlloc_v2", 13000, 0, &st), "-") == 0 && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CHECK(strcmp(sym_of("cuCtxCreate", 12050, 0, &st), "cuCtxCreate_v4") == 0);
    CHECK(strcmp(sym_of("cuCtxCreate", 12040, 0, &st), "cuCtxCreate_v3") == 0);
    CHECK(strcmp(sym_of("cuStreamQuery", 7000, 2, &st), "cuStreamQuery_ptsz") == 0);
    CHECK(strcmp(sym_of("cuStreamQuery", 13000, 0, &st), "cuStreamQuery") == 0);
    CHECK(strcmp(sym_of("cuStreamQuery", 6050, 2, &st), "-") == 0 && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    CHECK(strcmp(sym_of("cuMemcpyHtoD", 7000, 2, &st), "cuMemcpyHtoD_v2_ptds") == 0);
    CHECK(strcmp(sym_of("cuMemcpyHtoD", 3020, 2, &st), "-") == 0); /* as driver 580 does */
    CHECK(strcmp(sym_of("cuCtxCreate", 13000, 2, &st), "cuCtxCreate_v4") == 0); /* no per-thread flavour */
    CHECK(strcmp(sym_of("cuGetProcAddress", 12000, 0, &st), "cuGetProcAddress_v2") == 0);
    CHECK(strcmp(sym_of("cuGetProcAddress", 11030, 0, &st), "cuGetProcAddress") == 0);
    CHECK(strcmp(sym_of("cuStreamDestroy", 4000, 0, &st), "cuStreamDestroy_v2") == 0);
    CHECK(strcmp(sym_of("cuGraphInstantiate", 12000, 0, &st), "cuGraphInstantiate_v2") == 0);
    CHECK(strcmp(sym_of("cuLaunchKernel", 13000, 2, &st), "cuLaunchKernel_ptsz") == 0);
    CHECK(strcmp(sym_of("cuGLMapBufferObject", 7000, 2, &st), "cuGLMapBufferObject_v2_ptds") == 0);
    CHECK(procaddr_lookup("cuMemAlloc", 13000, 0) == (void *)cuMemAlloc_v2);
    CHECK(procaddr_lookup(NULL, 13000, 0) == NULL && procaddr_lookup("cuNoSuchThing", 13000, 0) == NULL);

    /* every change the real driver showed, replayed at every version */
    FILE *f = fopen(fixture, "r");
    CHECK(f != NULL);
    if (!f) return;
    char line[512], name[128], sym[128], pname[128] = "";
    int flags, version, status, pflags = -1, pstatus = 0;
    char psym[128] = "";
    int pversion = 0, compared = 0, bad = 0;
    for (;;) {
        int more = fgets(line, sizeof line, f) != NULL;
        if (more && line[0] == '#') continue;
        if (more && sscanf(line, "%127s %d %d %d %127s", name, &flags, &version, &status, sym) != 5) continue;
        /* replay the previous transition up to this one (or to 13000) */
        if (pname[0]) {
            int end = more && strcmp(name, pname) == 0 && flags == pflags ? version : 13010;
            for (int v = pversion; v < end && v <= 13000; v += 10) {
                CUdriverProcAddressQueryResult got_st;
                const char *got = sym_of(pname, v, pflags, &got_st);
                compared++;
                if ((int)got_st != pstatus || strcmp(got, psym) != 0) {
                    if (bad++ < 10)
                        fprintf(stderr, "procaddr %s v%d flags %d: driver %d %s, table %d %s\n", pname, v, pflags,
                                pstatus, psym, (int)got_st, got);
                }
            }
        }
        if (!more) break;
        strcpy(pname, name), strcpy(psym, sym);
        pflags = flags, pversion = version, pstatus = status;
    }
    fclose(f);
    CHECK(bad == 0 && compared > 2000000);

    /* every name cudart and the libraries ask for resolves at 13000 */
    f = fopen(names, "r");
    CHECK(f != NULL);
    if (!f) return;
    int missing = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%127s", name) != 1) continue;
        if (!procaddr_lookup(name, 13000, 0) || !procaddr_lookup(name, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) {
            if (missing++ < 10) fprintf(stderr, "procaddr: %s does not resolve\n", name);
        }
    }
    fclose(f);
    CHECK(missing == 0);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: loopback_test procaddr-fixture names-file\n");
        return 2;
    }
    shim_mode = SHIM_REMOTE;
    test_forwarding();
    test_exported_handles();
    test_memo();
    test_malformed();
    test_passthrough();
    test_procaddr(argv[1], argv[2]);
    if (failures) {
        fprintf(stderr, "%d of %d checks failed\n", failures, checks);
        return 1;
    }
    printf("ok %d\n", checks);
    return 0;
}
