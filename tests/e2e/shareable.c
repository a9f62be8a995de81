/* shareable.c - cuMemExportToShareableHandle / cuMemImportFromShareableHandle
 * between two client processes of one machine, each with its own session
 * on one server (docs/architecture.md, 9.19).
 *
 * alice's exporter makes an exportable VMM allocation, fills it, exports
 * it as a POSIX descriptor and sends that descriptor to two peers over a
 * Unix socket (SCM_RIGHTS), as an application would:
 *   - alice's importer imports it, maps it, reads the exporter's bytes and
 *     writes its own, which the exporter then reads;
 *   - bob's importer is refused (CUDA_ERROR_NOT_PERMITTED: per user, as IPC);
 *   - a descriptor that is no export (a plain file) is CUDA_ERROR_INVALID_VALUE;
 *   - the exporter imports its own descriptor, as a process may natively,
 *     and sees the same memory;
 *   - a Win32 handle type is NOT_SUPPORTED. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "copy_checks.h"
#include "harness.h"

#define ALICE "alice-share-t0ken-5c1e"
#define BOB "bob-share-t0ken-77d0"

static struct cc_users users;
static int fds[2]; /* exporter -> importers: the descriptor (SCM_RIGHTS) */
static int done[2]; /* importers -> exporter: one byte each when finished */

static void send_fd(int sock, int fd)
{
    char byte = 'f', ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {&byte, 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    CHECK(sendmsg(sock, &msg, 0) == 1, "sendmsg: %s", strerror(errno));
}

static int recv_fd(int sock)
{
    char byte, ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {&byte, 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    CHECK(recvmsg(sock, &msg, 0) == 1, "recvmsg: %s", strerror(errno));
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    CHECK(cm && cm->cmsg_type == SCM_RIGHTS, "no descriptor came");
    int fd;
    memcpy(&fd, CMSG_DATA(cm), sizeof fd);
    return fd;
}

static CUmemAllocationProp exportable(void)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return prop;
}

static size_t granularity(void)
{
    CUmemAllocationProp prop = exportable();
    size_t g = 0;
    CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    return g;
}

/* Map h at a fresh address with read/write access. */
static CUdeviceptr map(CUmemGenericAllocationHandle h, size_t size)
{
    CUdeviceptr va = 0;
    CU(cuMemAddressReserve(&va, size, 0, 0, 0));
    CU(cuMemMap(va, size, 0, h, 0));
    CUmemAccessDesc acc = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                           .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CU(cuMemSetAccess(va, size, &acc, 1));
    return va;
}

static void unmap(CUdeviceptr va, size_t size)
{
    CU(cuMemUnmap(va, size));
    CU(cuMemAddressFree(va, size));
}

static int exporter(void *arg)
{
    (void)arg;
    cc_as_user(users.alice);
    size_t size = granularity();
    CUmemAllocationProp prop = exportable();
    CUmemGenericAllocationHandle h;
    CU(cuMemCreate(&h, size, &prop, 0));
    CUdeviceptr va = map(h, size);
    uint8_t *buf = malloc(size), *want = malloc(size);
    h_pattern(buf, size, 31);
    CU(cuMemcpyHtoD_v2(va, buf, size));
    int fd = -1;
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_WIN32, 0));
    CU(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CHECK(fd >= 0 && fcntl(fd, F_GETFD) >= 0, "the exported descriptor %d is not a descriptor of this process", fd);

    /* the exporting process may import its own descriptor */
    CUmemGenericAllocationHandle self;
    CU(cuMemImportFromShareableHandle(&self, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    CUdeviceptr va2 = map(self, size);
    CU(cuMemcpyDtoH_v2(want, va2, size));
    CHECK(memcmp(want, buf, size) == 0, "the exporter's own import shows other bytes");
    unmap(va2, size);
    CU(cuMemRelease(self));

    for (int i = 0; i < 2; i++) send_fd(fds[1], fd);
    close(fd);
    char c;
    for (int i = 0; i < 2; i++) CHECK(read(done[0], &c, 1) == 1, "an importer ended early");
    h_pattern(want, size, 32);
    CU(cuMemcpyDtoH_v2(buf, va, size));
    CHECK(memcmp(buf, want, size) == 0, "the exporter does not see the importer's bytes");
    unmap(va, size);
    CU(cuMemRelease(h));
    free(buf), free(want);
    return 0;
}

static int importer(void *arg)
{
    (void)arg;
    int fd = recv_fd(fds[0]);
    cc_as_user(users.alice);
    size_t size = granularity();
    CUmemGenericAllocationHandle h = 0;
    int plain = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
              cuMemImportFromShareableHandle(&h, (void *)(intptr_t)plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    close(plain);
    CU(cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    close(fd);
    CUdeviceptr va = map(h, size);
    uint8_t *got = malloc(size), *want = malloc(size);
    h_pattern(want, size, 31);
    CU(cuMemcpyDtoH_v2(got, va, size));
    CHECK(memcmp(got, want, size) == 0, "the importer does not see the exporter's bytes");
    h_pattern(want, size, 32);
    CU(cuMemcpyHtoD_v2(va, want, size));
    CU(cuCtxSynchronize());
    unmap(va, size);
    CU(cuMemRelease(h));
    free(got), free(want);
    CHECK(write(done[1], "i", 1) == 1);
    return 0;
}

static int stranger(void *arg)
{
    (void)arg;
    int fd = recv_fd(fds[0]);
    cc_as_user(users.bob);
    CUmemGenericAllocationHandle h = 0;
    CU_EXPECT(CUDA_ERROR_NOT_PERMITTED,
              cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    CHECK(h == 0, "a refused import wrote a handle");
    close(fd);
    CHECK(write(done[1], "b", 1) == 1);
    return 0;
}

int main(void)
{
    h_begin("shareable", 60);
    struct h_server srv;
    cc_start_two_users(&srv, "shareable", ALICE, BOB, &users);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0 && pipe(done) == 0);
    cc_run_share(exporter, importer, stranger, 50);
    printf("ok an exported descriptor crosses a Unix socket and imports in another process, both ways\n");
    CHECK(h_server_log_count(&srv, "IPC is per user") >= 1, "the server log does not say why bob was refused");
    printf("ok another user's session is refused, and the log says why\n");
    h_server_stop(&srv);
    printf("PASS shareable\n");
    return 0;
}
