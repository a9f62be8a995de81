/* snapshot_keep.c - see snapshot_keep.h.
 *
 * Two copies of one session's snapshots sit on a standby while a new one
 * is made: the parked one, and the one being imported. For a range the
 * exporter knows unchanged since the parked one was taken
 * (snapshot_dirty.h), it sends MIG_BYTES_KEPT instead of the bytes: the
 * new copy reads them from the parked one over a local socket (abstract
 * name "scuda-snapshot-PID"). The parked copy answers only a peer that
 * sends its resume secret, and only ranges inside its own memory, chunk
 * by chunk. The exporter digests its own bytes as always, and the new
 * copy digests what it holds: a kept byte that differs fails the check.
 *
 * Both ends check who is at the other end (SO_PEERCRED): the same user,
 * and for the new copy, the very process it was told of, so that a local
 * process that took the name first does not get the secret. Every read
 * and write has a deadline.
 *
 * The parked copy serves between its waits for a resume, one range at a
 * time: a failover to it waits at most for the one range under way. */
#define _GNU_SOURCE
#include "snapshot_keep.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "dispatch.h"
#include "migrate_state.h"
#include "resume.h"
#include "../common/log.h"
#include "../common/messages.gen.h"
#include "../common/protocol.h"
#include "../common/transport.h"

/* The secret comes right after connecting; each request right after the
 * chunk before it; a chunk is read from the device at once. */
#define SECRET_TIMEOUT_MS 1000
#define KEEP_TIMEOUT_MS 5000

/* A request: address (u64) and length (u32, at most MIGRATE_CHUNK; 0
 * ends), little-endian as every SCUDA wire. */
#define REQ_LEN 12

static int listen_fd = -1;

static socklen_t name_of(uint32_t pid, struct sockaddr_un *a)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "scuda-snapshot-%u", pid);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* fd's peer is our user and, unless pid is 0, process pid; writes to it
 * get a deadline. */
static int peer_is(int fd, pid_t pid)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    struct timeval tv = {.tv_sec = KEEP_TIMEOUT_MS / 1000};
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != getuid() ||
        (pid && cred.pid != pid))
        return 0;
    return setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0;
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* ---- the parked copy ---------------------------------------------------------- */

void snapshot_keep_listen(void)
{
    struct sockaddr_un a;
    socklen_t len = name_of((uint32_t)getpid(), &a);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, len) != 0 || listen(fd, 2) != 0) {
        LOG_WARN("session %d: the parked snapshot cannot lend its bytes to the next one (%m): it takes them all "
                 "from the exporter", (int)getpid());
        if (fd >= 0) close(fd);
        return;
    }
    listen_fd = fd;
}

void snapshot_keep_close(void)
{
    if (listen_fd >= 0) close(listen_fd);
    listen_fd = -1;
}

/* 1 when [addr, addr+len) lies inside one range of ours. */
static int inside(const struct migrate_range *v, long n, uint64_t addr, uint64_t len)
{
    for (long i = 0; i < n; i++)
        if (addr >= v[i].addr && addr - v[i].addr <= v[i].size && len <= v[i].size - (addr - v[i].addr)) return 1;
    return 0;
}

/* 1 when the peer sent our secret (compared in constant time). */
static int proves_itself(int fd)
{
    uint8_t got[RESUME_SECRET_LEN];
    if (!peer_is(fd, 0) || io_read_full_timeout(fd, got, sizeof got, SECRET_TIMEOUT_MS) != 0) return 0;
    const uint8_t *want = resume_secret();
    uint8_t diff = 0;
    for (size_t i = 0; i < sizeof got; i++) diff |= (uint8_t)(got[i] ^ want[i]);
    return diff == 0;
}

/* Answer requests until the peer ends, errs, or asks for what we do not
 * hold. Returns the bytes lent. */
static uint64_t lend(int fd)
{
    struct migrate_range *v = NULL;
    long n = migrate_memory(&v);
    uint8_t *buf = n >= 0 ? malloc(MIGRATE_CHUNK) : NULL;
    uint64_t lent = 0;
    uint8_t req[REQ_LEN];
    while (buf && io_read_full_timeout(fd, req, sizeof req, KEEP_TIMEOUT_MS) == 0) {
        uint64_t addr = get_u64(req);
        uint32_t len = (uint32_t)req[8] | (uint32_t)req[9] << 8 | (uint32_t)req[10] << 16 | (uint32_t)req[11] << 24;
        if (len == 0 || len > MIGRATE_CHUNK || !inside(v, n, addr, len)) break;
        if (REAL(cuMemcpyDtoH_v2, buf, (CUdeviceptr)addr, len) != CUDA_SUCCESS || io_write_full(fd, buf, len) != 0)
            break;
        lent += len;
    }
    free(buf);
    free(v);
    return lent;
}

void snapshot_keep_serve(void)
{
    if (listen_fd < 0) return;
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) return;
    if (proves_itself(fd)) {
        uint64_t lent = lend(fd);
        LOG_DEBUG("session %d: lent %.1f MiB of unchanged memory to the next snapshot of this session",
                  (int)getpid(), lent / 1048576.0); /* the new copy's log sums them up */
    } else {
        LOG_WARN("session %d: a local peer asked for this parked snapshot's memory without its secret (or as "
                 "another user): refused",
                 (int)getpid());
    }
    close(fd);
}

/* ---- the importing copy --------------------------------------------------------- */

static int connect_to(uint32_t pid)
{
    struct sockaddr_un a;
    socklen_t len = name_of(pid, &a);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, len) == 0 && peer_is(fd, (pid_t)pid)) return fd;
    if (fd >= 0) close(fd);
    return -1;
}

/* One chunk: ask, read, write it to our device memory. */
static CUresult fetch_chunk(int fd, uint8_t *buf, uint64_t addr, uint32_t len)
{
    uint8_t req[REQ_LEN];
    put_u64(req, addr);
    for (int i = 0; i < 4; i++) req[8 + i] = (uint8_t)(len >> (8 * i));
    if (io_write_full(fd, req, sizeof req) != 0 || io_read_full_timeout(fd, buf, len, KEEP_TIMEOUT_MS) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return REAL(cuMemcpyHtoD_v2, (CUdeviceptr)addr, buf, len);
}

/* A chunk's buffer, from the first kept range to the end of the import. */
static uint8_t *fetch_buf;

/* One connection per range, not per import: between two ranges the
 * parked copy goes back to waiting for a resume, so a failover to it
 * (the exporter died mid-snapshot) waits at most for one range. */
CUresult snapshot_keep_fetch(uint32_t pid, const uint8_t *secret, uint64_t secret_len, uint64_t addr, uint64_t size,
                             uint64_t *bytes, char *why, size_t wl)
{
    if (!secret || secret_len != RESUME_SECRET_LEN || pid == 0 || pid == (uint32_t)getpid() || size == 0) {
        snprintf(why, wl, "a malformed request to keep the parked copy's memory");
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!fetch_buf && !(fetch_buf = malloc(MIGRATE_CHUNK))) return CUDA_ERROR_OUT_OF_MEMORY;
    int fd = connect_to(pid);
    if (fd < 0 || io_write_full(fd, secret, RESUME_SECRET_LEN) != 0) {
        if (fd >= 0) close(fd);
        snprintf(why, wl, "the parked copy (session %u here) to keep memory from is gone, or another process "
                          "holds its name", pid);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult r = CUDA_SUCCESS;
    for (uint64_t off = 0; off < size && r == CUDA_SUCCESS; off += MIGRATE_CHUNK) {
        uint32_t len = size - off < MIGRATE_CHUNK ? (uint32_t)(size - off) : MIGRATE_CHUNK;
        if ((r = fetch_chunk(fd, fetch_buf, addr + off, len)) == CUDA_SUCCESS) *bytes += len;
    }
    close(fd);
    if (r != CUDA_SUCCESS)
        snprintf(why, wl, "the parked copy (session %u here) did not lend %#llx (CUresult %d)", pid,
                 (unsigned long long)addr, (int)r);
    return r;
}

void snapshot_keep_fetch_end(void)
{
    free(fetch_buf);
    fetch_buf = NULL;
}
