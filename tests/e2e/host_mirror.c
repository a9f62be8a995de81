/* host_mirror.c - the session maps zero-copy mirrors only where a
 * client's own memory could be, and unmaps them when they go.
 *
 * scuda_host_mirror_create asks the session for pinned memory at the
 * client's address. A raw client asks for address 0 (a server running as
 * root mapped the NULL page there, and leaked it), for low addresses
 * below mmap_min_addr and 64 KiB, and for an address not page-aligned:
 * each is refused with CUDA_ERROR_INVALID_VALUE and a log line, and the
 * session's address space (/proc/PID/maps) has nothing there. A mirror at
 * a proper address is mapped there and unmapped by
 * scuda_host_mirror_free; many created and freed leave nothing mapped at
 * their addresses. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/ops.gen.h"
#include "harness.h"

/* Where mirrors go: an address range this process's kernel hands out for
 * a fresh mapping, as a client's would be. The session, another process of
 * the same layout, almost surely has it free too; and it is memory a
 * sanitizer's runtime lets programs map (a fixed constant may not be). */
static uint64_t HINT;

static void pick_hint(void)
{
    void *p = mmap(NULL, 1u << 30, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(p != MAP_FAILED, "reserving 1 GiB of address space");
    HINT = ((uint64_t)(uintptr_t)p + (1u << 24) - 1) & ~(uint64_t)((1u << 24) - 1);
    munmap(p, 1u << 30);
}

static struct h_server srv;
static pid_t session;

static long create(int fd, uint64_t want, uint64_t n, uint64_t *dev)
{
    struct msg_scuda_host_mirror_create_req m = {want, n};
    struct msg_scuda_host_mirror_create_rep rep;
    struct msg_arena a;
    wire_buf b;
    wire_reader rd;
    uint8_t *out = NULL;
    size_t len = 0;
    wb_init(&b);
    msg_scuda_host_mirror_create_req_put(&b, &m);
    long r = h_raw_call(fd, OP_scuda_host_mirror_create, H_RAW_CTX, b.data, b.len, &out, &len);
    if (r == CUDA_SUCCESS) {
        msg_arena_init(&a);
        wr_init(&rd, out, len);
        CHECK(msg_scuda_host_mirror_create_rep_get(&rd, &a, &rep) == 0, "a malformed reply (%zu bytes)", len);
        *dev = rep.dev;
        msg_arena_free(&a);
    }
    wb_free(&b);
    free(out);
    return r;
}

static long destroy(int fd, uint64_t dev)
{
    struct msg_scuda_host_mirror_free_req m = {dev};
    wire_buf b;
    wb_init(&b);
    msg_scuda_host_mirror_free_req_put(&b, &m);
    long r = h_raw_call(fd, OP_scuda_host_mirror_free, H_RAW_CTX, b.data, b.len, NULL, NULL);
    wb_free(&b);
    return r;
}

/* Whether one of the session's mappings starts at `at` (*starts_at); returns
 * how many it has. */
static int mappings(uint64_t at, int *starts_at)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)session);
    size_t len;
    char *maps = h_read_file(path, &len);
    int lines = 0;
    *starts_at = 0;
    for (char *line = maps; line && *line; lines++) {
        if (strtoull(line, NULL, 16) == at) *starts_at = 1;
        char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : NULL;
    }
    free(maps);
    return lines;
}

static void low_addresses(int fd)
{
    const uint64_t bad[] = {0, 4096, 0xf000, HINT + 8};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int logged = h_server_log_count(&srv, "host mirror at"), there;
        uint64_t dev = 0;
        long r = create(fd, bad[i], 4096, &dev);
        EXPECT(r == CUDA_ERROR_INVALID_VALUE, "a mirror at %#llx: returned %ld (%s)", (unsigned long long)bad[i], r,
               r >= 0 ? h_cu_name((CUresult)r) : "no reply");
        if (r == CUDA_SUCCESS) destroy(fd, dev);
        mappings(bad[i], &there);
        EXPECT(!there, "the session has a mapping at %#llx", (unsigned long long)bad[i]);
        EXPECT(h_server_log_count(&srv, "host mirror at") == logged + 1, "no log line for %#llx",
               (unsigned long long)bad[i]);
    }
    printf("%s mirrors at 0, below 64 KiB and off a page boundary are refused\n",
           h_soft_failures() ? "FAILED" : "ok");
}

static void mapped_and_unmapped(int fd)
{
    int there, before = h_soft_failures();
    uint64_t dev = 0;
    CHECK(create(fd, HINT, 1 << 20, &dev) == CUDA_SUCCESS, "a mirror at a proper address");
    mappings(HINT, &there);
    CHECK(there, "the mirror is not mapped at the client's address");
    CHECK(destroy(fd, dev) == CUDA_SUCCESS);
    mappings(HINT, &there);
    EXPECT(!there, "the freed mirror is still mapped");
    /* Each freed mirror leaves nothing at its address. (A count of all the
     * session's mappings would also see its threads' stacks come and go.) */
    int left = 0;
    for (int i = 0; i < 32; i++) {
        uint64_t at = HINT + ((uint64_t)i << 24);
        CHECK(create(fd, at, 4 << 20, &dev) == CUDA_SUCCESS);
        CHECK(destroy(fd, dev) == CUDA_SUCCESS);
        mappings(at, &there);
        left += there;
    }
    EXPECT(left == 0, "%d of 32 mirrors created and freed are still mapped", left);
    EXPECT(destroy(fd, HINT) == CUDA_ERROR_INVALID_VALUE, "freeing a mirror twice");
    printf("%s a mirror is mapped at the client's address and unmapped when freed\n",
           h_soft_failures() == before ? "ok" : "FAILED");
}

int main(void)
{
    h_begin("host_mirror", 30);
    pick_hint();
    h_server_start(&srv, "main", NULL);
    int fd = h_raw_session(srv.addr);
    CHECK(h_wait_sessions(&srv, 1, 5000) && h_server_sessions(&srv, &session, 1) == 1);
    low_addresses(fd);
    mapped_and_unmapped(fd);
    io_close(fd);
    h_server_stop(&srv);
    CHECK(h_soft_failures() == 0, "%d checks failed", h_soft_failures());
    printf("PASS host_mirror\n");
    return 0;
}
