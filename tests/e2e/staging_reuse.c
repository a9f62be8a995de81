/* staging_reuse.c - a copy to the host gives its staging buffers back
 * before its reply is complete (docs/architecture.md, 9.9).
 *
 * A synchronous copy to the host runs on a worker thread, and the next
 * call of the same client thread, sent as soon as the reply has arrived,
 * runs on another thread. Were the buffers given back only after the last
 * byte went out, that call could find them still held: under a tight
 * --host-mem-quota it could then not be given the memory the idle buffers
 * would make room for.
 *
 * A raw client, under --host-mem-quota 24M: an 8 MiB copy to the host
 * (streamed through the two staging buffers it fits, 16 MiB), then at once
 * a 17 MiB host mirror, which fits only when the quota takes both buffers
 * back, i.e. when neither is still held. Many rounds, every one must fit.
 * The test and its server share one CPU: the thread that writes a reply
 * then loses it to the reader it wakes, the worst case for the order. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/ops.gen.h"
#include "common/protocol.h"
#include "common/wire.h"
#include "harness.h"

#define MIB (1ull << 20)
#define COPY_BYTES (8 * MIB)
#define MIRROR_BYTES (17 * MIB) /* with one 8 MiB buffer held: past 24M */
#define ROUNDS 60

static uint64_t device_alloc(int fd, uint64_t size)
{
    wire_buf b;
    wb_init(&b);
    wb_put_u8(&b, 1);
    wb_put_u64(&b, size);
    uint8_t *out = NULL;
    size_t len = 0;
    CHECK(h_raw_call(fd, OP_cuMemAlloc_v2, H_RAW_CTX, b.data, b.len, &out, &len) == CUDA_SUCCESS && len == 8);
    uint64_t dev;
    memcpy(&dev, out, 8);
    free(out);
    wb_free(&b);
    return dev;
}

/* A synchronous copy of n bytes to the host, as the shim's cuMemcpyDtoH
 * sends it: it waits for the whole reply. */
static void copy_to_host(int fd, uint64_t src, uint64_t n)
{
    wire_buf b;
    wb_init(&b);
    msg_scuda_memcpy_dtoh_req_put(&b, &(struct msg_scuda_memcpy_dtoh_req){.src = src, .n = n, .mode = COPY_SYNC});
    uint8_t *out = NULL;
    size_t len = 0;
    long r = h_raw_call(fd, OP_scuda_memcpy_dtoh, H_RAW_CTX, b.data, b.len, &out, &len);
    CHECK(r == CUDA_SUCCESS && len >= n, "a %llu-byte copy to the host: %ld, %zu bytes", (unsigned long long)n, r,
          len);
    free(out);
    wb_free(&b);
}

/* An address the way a client's would be (under ThreadSanitizer, the
 * only area it lets a process map at). */
static uint64_t client_address(uint64_t size)
{
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    munmap(p, size);
    return (uint64_t)(uintptr_t)p;
}

/* A host mirror of MIRROR_BYTES, freed at once: the CUresult of its creation. */
static long mirror_round(int fd, uint64_t addr)
{
    wire_buf b;
    wb_init(&b);
    msg_scuda_host_mirror_create_req_put(&b, &(struct msg_scuda_host_mirror_create_req){addr, MIRROR_BYTES});
    uint8_t *out = NULL;
    size_t len = 0;
    long r = h_raw_call(fd, OP_scuda_host_mirror_create, H_RAW_CTX, b.data, b.len, &out, &len);
    if (r == CUDA_SUCCESS) {
        CHECK(len >= 8);
        uint64_t dev;
        memcpy(&dev, out, 8);
        wb_reset(&b);
        msg_scuda_host_mirror_free_req_put(&b, &(struct msg_scuda_host_mirror_free_req){dev});
        CHECK(h_raw_call(fd, OP_scuda_host_mirror_free, H_RAW_CTX, b.data, b.len, NULL, NULL) == CUDA_SUCCESS);
    }
    free(out);
    wb_free(&b);
    return r;
}

int main(void)
{
    h_begin("staging_reuse", 110);
    /* Before the server starts: it and its sessions inherit the CPU. */
    int cpu = sched_getcpu();
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu >= 0 ? cpu : 0, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "cannot keep the test on one CPU");
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--host-mem-quota", "24M"}};
    h_server_start(&srv, "staging-reuse", &opt);
    int fd = h_raw_session(srv.addr);
    uint64_t dev = device_alloc(fd, COPY_BYTES);
    uint64_t addr = client_address(MIRROR_BYTES);
    /* The mirror fits the quota on its own: a refusal below is the buffers'. */
    CHECK(mirror_round(fd, addr) == CUDA_SUCCESS, "a lone %llu MiB mirror under --host-mem-quota 24M",
          (unsigned long long)(MIRROR_BYTES / MIB));
    int refused = 0;
    for (int i = 0; i < ROUNDS; i++) {
        copy_to_host(fd, dev, COPY_BYTES);
        long r = mirror_round(fd, addr);
        CHECK(r == CUDA_SUCCESS || r == CUDA_ERROR_OUT_OF_MEMORY, "round %d: the mirror failed with %ld", i, r);
        refused += r != CUDA_SUCCESS;
    }
    CHECK(refused == 0,
          "%d of %d mirrors right after a copy to the host were refused: its staging buffers were still held",
          refused, ROUNDS);
    close(fd);
    h_server_stop(&srv);
    printf("PASS staging_reuse: %d copies to the host, each buffer free when its reply arrived\n", ROUNDS);
    return 0;
}
