/* forged_params.c - kernel parameters a client forges never make the
 * session's driver read past what the request carried.
 *
 * The driver reads each parameter at the kernel's own offset and size, and
 * as many parameters as the kernel has. A request carries only the packed
 * bytes, which the session places with that same layout. A raw client (no
 * shim) sends launches and kernel nodes with fewer bytes than the kernel
 * reads: a short last parameter (the driver would copy the session's
 * stack, or heap, into device memory), the bytes of 65 parameters for a
 * 100-parameter kernel, and a raw `extra` buffer shorter than the
 * kernel's parameters. Each must get
 * CUDA_ERROR_INVALID_VALUE with one line in the server log, and leave the
 * kernel's output buffer untouched; the same kernels with their true
 * layout still run. Covered: launches of a module function and of a
 * library kernel loaded before any context existed, graph kernel node
 * add, set and exec-set, and a driver that cannot report layouts (the
 * stand-in's STANDIN_NO_PARAM_INFO=1). Every case runs in a session of
 * its own, so each one's outcome shows; under the ASan build the
 * sessions' sanitizer reports fail the test too (h_server_stop). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/ops.gen.h"
#include "common/wire.h"
#include "harness.h"

#define MOD_ID 0x10000
#define LIB_ID 0x10010
#define GRAPH_ID 0x10020
#define NODE_ID 0x10030
#define EXEC_ID 0x10040
#define NODE2_ID 0x10050
#define FUNC_BASE 0x10100 /* + 16 * index in kernels[] */
#define KERNEL_ID 0x10200 /* copy_params_4k of the library */
#define OUT_BYTES 8448    /* what the largest kernel writes, and more */

static const char *const kernels[] = {"noop", "copy_params_4k", "copy_params_8k", "copy_params_100"};
enum { K_NOOP, K_4K, K_8K, K_100, NKERNELS };

static struct h_server srv;
/* copy_params_* write their whole parameter buffer to their first one. */
static char *module_ptx(void)
{
    static char ptx[8192];
    int n = snprintf(ptx, sizeof ptx,
                     ".version 8.0\n.target sm_90\n.address_size 64\n\n"
                     ".visible .entry noop()\n{\n\tret;\n}\n"
                     ".visible .entry copy_params_4k(.param .u64 out, .param .align 8 .b8 big[4096])\n{\n\tret;\n}\n"
                     ".visible .entry copy_params_8k(.param .u64 out, .param .align 8 .b8 big[8192])\n{\n\tret;\n}\n"
                     ".visible .entry copy_params_100(.param .u64 out");
    for (int i = 1; i < 100; i++) n += snprintf(ptx + n, sizeof ptx - (size_t)n, ", .param .u32 p%d", i);
    snprintf(ptx + n, sizeof ptx - (size_t)n, ")\n{\n\tret;\n}\n");
    return ptx;
}

/* ---- requests ---------------------------------------------------------- */

static long call(int fd, uint16_t op, uint32_t ctx, const wire_buf *b, uint8_t **out, size_t *out_len)
{
    return h_raw_call(fd, op, ctx, b->data, b->len, out, out_len);
}

static long load(int fd, uint32_t ctx, uint64_t id, int is_library)
{
    const char *ptx = module_ptx();
    return h_raw_load(fd, ctx, id, is_library, ptx, strlen(ptx) + 1);
}

static uint64_t alloc_zeroed(int fd)
{
    wire_buf b;
    wb_init(&b);
    wb_put_u8(&b, 1);
    wb_put_u64(&b, OUT_BYTES);
    uint8_t *out = NULL;
    size_t len = 0;
    CHECK(call(fd, OP_cuMemAlloc_v2, H_RAW_CTX, &b, &out, &len) == CUDA_SUCCESS && len == 8);
    uint64_t dev;
    memcpy(&dev, out, 8);
    free(out);
    wb_free(&b);
    return dev; /* the stand-in's fresh memory reads as zeros */
}

/* Synchronize, then read the output buffer back (malloc'd). */
static uint8_t *read_back(int fd, uint64_t dev)
{
    struct msg_scuda_ctx_synchronize_req m = {.ctx = H_RAW_CTX};
    wire_buf b;
    wb_init(&b);
    msg_scuda_ctx_synchronize_req_put(&b, &m);
    CHECK(call(fd, OP_scuda_ctx_synchronize, H_RAW_CTX, &b, NULL, NULL) == CUDA_SUCCESS);
    wb_reset(&b);
    msg_scuda_memcpy_dtoh_req_put(&b, &(struct msg_scuda_memcpy_dtoh_req){.src = dev, .n = OUT_BYTES});
    uint8_t *out = NULL;
    size_t len = 0;
    CHECK(call(fd, OP_scuda_memcpy_dtoh, H_RAW_CTX, &b, &out, &len) == CUDA_SUCCESS);
    wire_reader rd;
    wr_init(&rd, out, len);
    struct msg_arena a;
    msg_arena_init(&a);
    struct msg_scuda_memcpy_dtoh_rep rep;
    CHECK(msg_scuda_memcpy_dtoh_rep_get(&rd, &a, &rep) == 0 && rep.data_len == OUT_BYTES);
    memmove(out, rep.data, OUT_BYTES); /* the bytes are in the reply, after their length */
    msg_arena_free(&a);
    wb_free(&b);
    return out;
}

/* ---- parameters as they travel (src/server/launch_params.h) ------------- */

struct params {
    uint32_t n; /* LAUNCH_RAW_PARAMS: `bytes` is a raw buffer */
    uint32_t off[100], size[100];
    uint32_t bytes;
};

#define RAW 0xffffffffu

/* The kernels' true layouts (the PTX above, CUDA ABI offsets). */
static struct params true_params(int k)
{
    struct params p = {.n = 0};
    if (k == K_NOOP) return p;
    p.n = k == K_100 ? 100 : 2;
    p.off[0] = 0, p.size[0] = 8;
    for (uint32_t i = 1; i < p.n; i++) {
        p.off[i] = k == K_100 ? 8 + 4 * (i - 1) : 8;
        p.size[i] = k == K_100 ? 4 : k == K_4K ? 4096 : 8192;
    }
    p.bytes = p.off[p.n - 1] + p.size[p.n - 1];
    return p;
}

/* The packed bytes: parameter 0 is the output pointer; the rest a
 * pattern. Only the bytes travel: the session places them with the
 * kernel's own layout. Free ->data. */
static struct msg_launch_params packed(const struct params *p, uint64_t out)
{
    uint8_t *blob = malloc(p->bytes + 8);
    CHECK(blob != NULL);
    memset(blob, 0x11, p->bytes + 8);
    memcpy(blob, &out, 8);
    return (struct msg_launch_params){.raw = p->n == RAW, .data = blob, .data_len = p->bytes};
}

static long launch(int fd, uint64_t fid, const struct params *p, uint64_t out)
{
    struct msg_launch_params lp = packed(p, out);
    long r = h_raw_launch(fd, fid, &lp);
    free((void *)lp.data);
    return r;
}

/* ---- sessions -------------------------------------------------------------- */

static uint64_t fid_of(int k) { return FUNC_BASE + 16 * (uint64_t)k; }

/* A session with the module loaded and its functions bound. */
static int module_session(void)
{
    int fd = h_raw_session(srv.addr);
    CHECK(load(fd, H_RAW_CTX, MOD_ID, 0) == CUDA_SUCCESS, "loading the test module");
    for (int k = 0; k < NKERNELS; k++)
        CHECK(h_raw_bind(fd, H_RAW_CTX, OP_scuda_module_get_function, MOD_ID, fid_of(k), kernels[k]) == CUDA_SUCCESS);
    return fd;
}

static int nonzero_bytes(const uint8_t *p, size_t n)
{
    int count = 0;
    for (size_t i = 0; i < n; i++) count += p[i] != 0;
    return count;
}

/* Send a forged request (send(fd, out) returns its CUresult): it must be
 * refused, logged once, and write nothing. */
static void expect_refused(const char *what, long (*send)(int fd, uint64_t out), const char *log_needle)
{
    int before = h_soft_failures(), fd = module_session();
    uint64_t out = alloc_zeroed(fd);
    int logged = h_server_log_count(&srv, log_needle);
    long r = send(fd, out);
    EXPECT(r == CUDA_ERROR_INVALID_VALUE, "%s: returned %ld (%s), not CUDA_ERROR_INVALID_VALUE", what, r,
           r >= 0 ? h_cu_name((CUresult)r) : "no reply: the session died");
    if (r >= 0) {
        uint8_t *back = read_back(fd, out);
        int leaked = nonzero_bytes(back, OUT_BYTES);
        EXPECT(leaked == 0, "%s: the kernel wrote %d nonzero bytes to its output", what, leaked);
        free(back);
    }
    EXPECT(h_server_log_count(&srv, log_needle) == logged + 1, "%s: no log line with \"%s\"", what, log_needle);
    io_close(fd);
    printf("%s %s\n", h_soft_failures() == before ? "ok" : "FAILED", what);
}

/* ---- forged launches -------------------------------------------------------- */

/* copy_params_4k sent with an 8-byte second parameter: the driver read 4096. */
static long short_param_stack(int fd, uint64_t out)
{
    struct params p = true_params(K_4K);
    p.size[1] = 8;
    p.bytes = 16;
    return launch(fd, fid_of(K_4K), &p, out);
}

/* copy_params_8k sent with 4100 of its 8192 bytes (a heap buffer). */
static long short_param_heap(int fd, uint64_t out)
{
    struct params p = true_params(K_8K);
    p.size[1] = 4100;
    p.bytes = 4108;
    return launch(fd, fid_of(K_8K), &p, out);
}

static long count_65_of_100(int fd, uint64_t out)
{
    struct params p = true_params(K_100);
    p.n = 65;
    p.bytes = p.off[64] + p.size[64];
    return launch(fd, fid_of(K_100), &p, out);
}

static long short_raw_buffer(int fd, uint64_t out)
{
    struct params p = {.n = RAW, .bytes = 16};
    return launch(fd, fid_of(K_4K), &p, out);
}

/* ---- forged kernel nodes ------------------------------------------------------- */

static struct params short_8k(void)
{
    struct params p = true_params(K_8K);
    p.size[1] = 4100;
    p.bytes = 4108;
    return p;
}

/* A kernel node of copy_params_8k, in request `op` (add, set or exec-set)
 * with its ids: the new node and its graph, the node, or the executable
 * graph and the node. */
static long node_call(int fd, uint16_t op, const uint64_t *head, int nhead, const struct params *p, uint64_t out)
{
    struct msg_kernel_node k = {.func = fid_of(K_8K), .grid = {1, 1, 1}, .block = {1, 1, 1}, .params = packed(p, out)};
    wire_buf b;
    wb_init(&b);
    if (op == OP_cuGraphAddKernelNode_v2) {
        struct msg_cuGraphAddKernelNode_v2_req m = {.node = head[0], .graph = head[1], .params = k};
        msg_cuGraphAddKernelNode_v2_req_put(&b, &m);
    } else if (op == OP_cuGraphKernelNodeSetParams_v2) {
        struct msg_cuGraphKernelNodeSetParams_v2_req m = {.node = head[0], .params = k};
        msg_cuGraphKernelNodeSetParams_v2_req_put(&b, &m);
    } else {
        struct msg_cuGraphExecKernelNodeSetParams_v2_req m = {.exec = head[0], .node = head[1], .params = k};
        msg_cuGraphExecKernelNodeSetParams_v2_req_put(&b, &m);
    }
    (void)nhead;
    long r = call(fd, op, H_RAW_CTX, &b, NULL, NULL);
    wb_free(&b);
    free((void *)k.params.data);
    return r;
}

/* A graph with one true node of copy_params_8k (writing to `out`), and its
 * executable graph. */
static void make_graph(int fd, uint64_t out)
{
    wire_buf b;
    wb_init(&b);
    wb_put_u8(&b, 1);
    wb_put_u64(&b, GRAPH_ID);
    wb_put_u32(&b, 0);
    CHECK(call(fd, OP_cuGraphCreate, H_RAW_CTX, &b, NULL, NULL) == CUDA_SUCCESS);
    struct params p = true_params(K_8K);
    uint64_t head[] = {NODE_ID, GRAPH_ID, 0};
    CHECK(node_call(fd, OP_cuGraphAddKernelNode_v2, head, 3, &p, out) == CUDA_SUCCESS, "a true kernel node");
    wb_reset(&b);
    wb_put_u8(&b, 1);
    wb_put_u64(&b, EXEC_ID);
    wb_put_u64(&b, GRAPH_ID);
    wb_put_u64(&b, 0);
    CHECK(call(fd, OP_cuGraphInstantiateWithFlags, H_RAW_CTX, &b, NULL, NULL) == CUDA_SUCCESS);
    wb_free(&b);
}

static long node_add(int fd, uint64_t out)
{
    struct params p = short_8k();
    uint64_t head[] = {NODE2_ID, GRAPH_ID, 0};
    make_graph(fd, alloc_zeroed(fd));
    return node_call(fd, OP_cuGraphAddKernelNode_v2, head, 3, &p, out);
}

static long node_set(int fd, uint64_t out)
{
    struct params p = short_8k();
    uint64_t head[] = {NODE_ID};
    make_graph(fd, alloc_zeroed(fd));
    return node_call(fd, OP_cuGraphKernelNodeSetParams_v2, head, 1, &p, out);
}

static long node_exec_set(int fd, uint64_t out)
{
    struct params p = short_8k();
    uint64_t head[] = {EXEC_ID, NODE_ID};
    make_graph(fd, alloc_zeroed(fd));
    return node_call(fd, OP_cuGraphExecKernelNodeSetParams_v2, head, 2, &p, out);
}

/* ---- true layouts still run ------------------------------------------------------- */

static void true_layouts_run(void)
{
    int fd = module_session();
    for (int k = 0; k < NKERNELS; k++) {
        uint64_t out = alloc_zeroed(fd);
        struct params p = true_params(k);
        CHECK(launch(fd, fid_of(k), &p, out) == CUDA_SUCCESS, "%s with its true layout", kernels[k]);
        uint8_t *back = read_back(fd, out);
        CHECK(k == K_NOOP || memcmp(back, &out, 8) == 0, "%s did not run", kernels[k]);
        for (uint32_t i = 8; k != K_NOOP && i < p.bytes; i++) CHECK(back[i] == 0x11, "%s byte %u", kernels[k], i);
        CHECK(nonzero_bytes(back + p.bytes, OUT_BYTES - p.bytes) == 0, "%s wrote past its parameters", kernels[k]);
        free(back);
    }
    uint64_t out = alloc_zeroed(fd);
    make_graph(fd, out);
    uint64_t req[2] = {EXEC_ID, 0};
    CHECK(h_raw_call(fd, OP_cuGraphLaunch, H_RAW_CTX, req, sizeof req, NULL, NULL) == CUDA_SUCCESS);
    uint8_t *back = read_back(fd, out);
    CHECK(memcmp(back, &out, 8) == 0 && back[8] == 0x11 && back[8199] == 0x11 && back[8200] == 0,
          "the graph's true kernel node");
    free(back);
    io_close(fd);
    printf("ok every kernel runs with its true layout, launched and in a graph\n");
}

/* scuda_param_info on function or kernel `id`, outside any context: the
 * CUresult; the reply must decode. */
static long param_info(int fd, uint64_t id)
{
    struct msg_scuda_param_info_req m = {.func = id};
    wire_buf b;
    wb_init(&b);
    msg_scuda_param_info_req_put(&b, &m);
    uint8_t *out = NULL;
    size_t n = 0;
    long r = h_raw_call(fd, OP_scuda_param_info, 0, b.data, b.len, &out, &n);
    wb_free(&b);
    struct msg_scuda_param_info_rep rep;
    struct msg_arena a;
    wire_reader rd;
    msg_arena_init(&a);
    wr_init(&rd, out, n);
    CHECK(r != CUDA_SUCCESS || msg_scuda_param_info_rep_get(&rd, &a, &rep) == 0, "param_info: a malformed reply");
    msg_arena_free(&a);
    free(out);
    return r;
}

/* A library loaded, and its kernel asked about, while no context is current
 * (cudart loads its libraries that early); launched later in one. */
static void library_before_context(void)
{
    uint32_t status;
    int before = h_soft_failures(), fd = h_raw_connect(srv.addr, NULL, &status);
    CHECK(fd >= 0);
    CHECK(load(fd, 0, LIB_ID, 1) == CUDA_SUCCESS, "a library loaded without a context");
    CHECK(h_raw_bind(fd, 0, OP_scuda_library_get_kernel, LIB_ID, KERNEL_ID, "copy_params_4k") == CUDA_SUCCESS);
    CHECK(param_info(fd, KERNEL_ID) == CUDA_SUCCESS);
    h_raw_retain_ctx(fd);
    uint64_t out = alloc_zeroed(fd);
    struct params p = true_params(K_4K);
    p.size[1] = 8;
    p.bytes = 16;
    long r = launch(fd, KERNEL_ID, &p, out);
    EXPECT(r == CUDA_ERROR_INVALID_VALUE, "library kernel with a short parameter: returned %ld", r);
    p = true_params(K_4K);
    CHECK(launch(fd, KERNEL_ID, &p, out) == CUDA_SUCCESS, "the library kernel with its true layout");
    uint8_t *back = read_back(fd, out);
    CHECK(memcmp(back, &out, 8) == 0 && back[4103] == 0x11 && nonzero_bytes(back + 4104, OUT_BYTES - 4104) == 0);
    free(back);
    io_close(fd);
    printf("%s a library kernel loaded before any context is checked against its own layout\n",
           h_soft_failures() == before ? "ok" : "FAILED");
}

/* A driver that cannot report layouts: launches with parameters are
 * refused, launches without any still run. */
static void layout_unknown(void)
{
    struct h_server blind;
    int before = h_soft_failures();
    setenv("STANDIN_NO_PARAM_INFO", "1", 1);
    h_server_start(&blind, "no-param-info", NULL);
    unsetenv("STANDIN_NO_PARAM_INFO");
    int fd = h_raw_session(blind.addr);
    CHECK(load(fd, H_RAW_CTX, MOD_ID, 0) == CUDA_SUCCESS);
    for (int k = 0; k < NKERNELS; k++)
        CHECK(h_raw_bind(fd, H_RAW_CTX, OP_scuda_module_get_function, MOD_ID, fid_of(k), kernels[k]) == CUDA_SUCCESS);
    uint64_t out = alloc_zeroed(fd);
    struct params p = true_params(K_4K);
    long r = launch(fd, fid_of(K_4K), &p, out);
    EXPECT(r == CUDA_ERROR_INVALID_VALUE, "a launch with parameters and no layout: returned %ld", r);
    p = (struct params){.n = RAW, .bytes = 4104};
    r = launch(fd, fid_of(K_4K), &p, out);
    EXPECT(r == CUDA_ERROR_INVALID_VALUE, "a raw buffer and no layout: returned %ld", r);
    p = true_params(K_NOOP);
    CHECK(launch(fd, fid_of(K_NOOP), &p, out) == CUDA_SUCCESS, "a launch without parameters");
    EXPECT(h_server_log_count(&blind, "cannot report its parameter layout") == 2, "no log line for the refusals");
    io_close(fd);
    h_server_stop(&blind);
    printf("%s without cuFuncGetParamInfo, launches with parameters are refused\n",
           h_soft_failures() == before ? "ok" : "FAILED");
}

int main(void)
{
    h_begin("forged_params", 50);
    h_server_start(&srv, "main", NULL);
    true_layouts_run();
    expect_refused("a short parameter (stack buffer)", short_param_stack, "16 parameter bytes sent, where the kernel reads 4104");
    expect_refused("a short parameter (heap buffer)", short_param_heap, "4108 parameter bytes sent, where the kernel reads 8200");
    expect_refused("65 parameters for a 100-parameter kernel", count_65_of_100, "264 parameter bytes sent, where the kernel reads 404");
    expect_refused("a short raw buffer", short_raw_buffer, "a raw buffer: 16 parameter bytes sent");
    expect_refused("a kernel node added with a short parameter", node_add, "4108 parameter bytes sent, where the kernel reads 8200");
    expect_refused("a kernel node set with a short parameter", node_set, "4108 parameter bytes sent, where the kernel reads 8200");
    expect_refused("an executable node set with a short parameter", node_exec_set,
                   "4108 parameter bytes sent, where the kernel reads 8200");
    library_before_context();
    layout_unknown();
    h_server_stop(&srv);
    CHECK(h_soft_failures() == 0, "%d checks failed", h_soft_failures());
    printf("PASS forged_params\n");
    return 0;
}
