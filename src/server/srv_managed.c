/* srv_managed.c - the session's side of mirrored memory
 * (docs/architecture.md, 4 Memory kinds).
 *
 * Managed memory is the driver's own: the client maps a mirror at the
 * same address and moves dirty pages with ordinary copies. The session
 * only refuses a request larger than the GPU's free memory, which the
 * driver would accept and then could hang the GPU over.
 *
 * Zero-copy host memory: the session maps pinned memory of its own, at
 * the client's address when that is free here (so the host pointer and
 * the device pointer agree, as under unified addressing natively), and
 * registers it for the GPU. An address no client mapping can have (low
 * memory, where the NULL page is, or one not page-aligned) is refused: a
 * server running as root could otherwise map the NULL page, and a NULL
 * pointer in the session would then read the client's bytes. The session
 * is a process of its own, so whatever is left at exit goes with it. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dispatch.h"
#include "migrate_state.h"
#include "handlers.gen.h"
#include "host_quota.h"
#include "session.h"
#include "../common/log.h"

/* A zero-copy buffer may not exceed this (1 TiB): a bound on the wire. */
#define MIRROR_MAX_BYTES (1ull << 40)

CUresult srv_cuMemAllocManaged(srv_call *c)
{
    struct msg_cuMemAllocManaged_req m;
    if (msg_cuMemAllocManaged_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    uint64_t n = m.bytesize;
    size_t free_bytes = 0, total = 0;
    CUresult r = REAL(cuMemGetInfo_v2, &free_bytes, &total);
    if (r != CUDA_SUCCESS) return r;
    if (n > free_bytes) {
        LOG_WARN("cuMemAllocManaged of %llu bytes refused: the GPU has %zu bytes free "
                 "(more managed memory than is free can hang the GPU)", (unsigned long long)n, free_bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUdeviceptr p = 0;
    r = REAL(cuMemAllocManaged, &p, (size_t)n, m.flags);
    if (r == CUDA_SUCCESS) {
        struct msg_cuMemAllocManaged_rep rep = {p};
        msg_cuMemAllocManaged_rep_put(&c->out, &rep);
    }
    return r;
}

struct mirror {
    void *host;
    size_t len;
    uint64_t dev;
    struct mirror *next;
};

static struct mirror *mirrors;
static pthread_mutex_t mirrors_lock = PTHREAD_MUTEX_INITIALIZER; /* creation runs on worker threads */

/* The lowest address a mirror may be asked at: the kernel's
 * mmap_min_addr, and never below 64 KiB (its usual value) whatever the
 * system says; root may map below it. */
#define MIRROR_FLOOR (64u << 10)

static uint64_t lowest;
static void find_lowest(void)
{
    unsigned long v = 0;
    FILE *f = fopen("/proc/sys/vm/mmap_min_addr", "r");
    if (f) {
        if (fscanf(f, "%lu", &v) != 1) v = 0;
        fclose(f);
    }
    lowest = v > MIRROR_FLOOR ? v : MIRROR_FLOOR;
}

static int hint_allowed(uint64_t want, size_t len, size_t page)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, find_lowest);
    if (want >= lowest && want % page == 0 && want <= UINT64_MAX - len) return 1;
    LOG_WARN("host mirror at %#llx refused: below %#llx or not page-aligned, which no client mapping is",
             (unsigned long long)want, (unsigned long long)lowest);
    return 0;
}

static void *map_near(uint64_t want, size_t len)
{
    void *p = mmap((void *)(uintptr_t)want, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != MAP_FAILED && (uintptr_t)p == want) return p;
    if (p != MAP_FAILED) munmap(p, len);
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

CUresult srv_scuda_host_mirror_create(srv_call *c)
{
    struct msg_scuda_host_mirror_create_req req;
    if (msg_scuda_host_mirror_create_req_get(&c->in, &c->arena, &req) != 0) return CUDA_ERROR_INVALID_VALUE;
    uint64_t want = req.addr, n = req.size;
    if (n == 0 || n > MIRROR_MAX_BYTES) return CUDA_ERROR_INVALID_VALUE;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len = ((size_t)n + page - 1) & ~(page - 1);
    if (!hint_allowed(want, len, page)) return CUDA_ERROR_INVALID_VALUE;
    /* Pinned under a real driver: the whole length is the session's, charged until freed. */
    if (host_quota_charge(len, "a host mirror") != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    migrate_block(MIGRATE_BLOCK_HOST_MIRROR); /* the client's mirror of it cannot follow */
    struct mirror *m = calloc(1, sizeof *m);
    void *host = m ? map_near(want, len) : NULL;
    if (!host) {
        free(m);
        host_quota_release(len);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUdeviceptr dev = 0;
    CUresult r = REAL(cuMemHostRegister_v2, host, len, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
    if (r == CUDA_SUCCESS) {
        r = REAL(cuMemHostGetDevicePointer_v2, &dev, host, 0);
        if (r != CUDA_SUCCESS) REAL(cuMemHostUnregister, host);
    }
    if (r != CUDA_SUCCESS) {
        munmap(host, len);
        free(m);
        host_quota_release(len);
        return r;
    }
    pthread_mutex_lock(&mirrors_lock);
    *m = (struct mirror){.host = host, .len = len, .dev = dev, .next = mirrors};
    mirrors = m;
    pthread_mutex_unlock(&mirrors_lock);
    struct msg_scuda_host_mirror_create_rep rep = {dev};
    msg_scuda_host_mirror_create_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}

CUresult srv_scuda_host_mirror_free(srv_call *c)
{
    struct msg_scuda_host_mirror_free_req req;
    if (msg_scuda_host_mirror_free_req_get(&c->in, &c->arena, &req) != 0) return CUDA_ERROR_INVALID_VALUE;
    struct mirror *m = NULL;
    pthread_mutex_lock(&mirrors_lock);
    for (struct mirror **pp = &mirrors; *pp; pp = &(*pp)->next) {
        if ((*pp)->dev == req.dev) {
            m = *pp;
            *pp = m->next;
            break;
        }
    }
    pthread_mutex_unlock(&mirrors_lock);
    if (!m) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = REAL(cuMemHostUnregister, m->host);
    munmap(m->host, m->len);
    host_quota_release(m->len);
    free(m);
    return r;
}
