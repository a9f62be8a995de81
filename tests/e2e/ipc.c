/* ipc.c - interprocess sharing between two client processes of one
 * machine, each with its own session on one server (docs/architecture.md,
 * 9.18 IPC; docs/operate.md, IPC between processes).
 *
 * shared:  alice's exporter allocates device memory (a small allocation,
 *          carved from a shared chunk, and a large one with a chunk of its
 *          own), fills it and sends the handles down a pipe; alice's
 *          importer opens them, reads the exporter's bytes, writes its
 *          own, closes them; the exporter then reads the importer's bytes.
 *          Exporting one pointer twice gives the same handle; opening a
 *          handle in the exporting process itself is refused.
 * per user: bob's session gets CUDA_ERROR_NOT_PERMITTED for alice's
 *          handle, and the server log says why; a forged handle (one nonce
 *          byte changed) is CUDA_ERROR_INVALID_VALUE for alice too. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "copy_checks.h"
#include "harness.h"

#define ALICE "alice-ipc-t0ken-31a7"
#define BOB "bob-ipc-t0ken-90c2"
#define SMALL (64u << 10)
#define LARGE (6u << 20)

static struct cc_users users;
static int handles[2];  /* exporter -> importers: the two handles */
static int done[2];     /* importers -> exporter: one byte each when finished */

static void read_all(int fd, void *p, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, (char *)p + got, n - got);
        CHECK(r > 0, "a pipe closed early");
        got += (size_t)r;
    }
}

static int exporter(void *arg)
{
    (void)arg;
    cc_as_user(users.alice);
    CUdeviceptr small, large;
    CU(cuMemAlloc_v2(&small, SMALL));
    CU(cuMemAlloc_v2(&large, LARGE));
    uint8_t *host = malloc(LARGE);
    h_pattern(host, LARGE, 11);
    CU(cuMemcpyHtoD_v2(small, host, SMALL));
    CU(cuMemcpyHtoD_v2(large, host, LARGE));
    CUipcMemHandle h[2], again;
    CU(cuIpcGetMemHandle(&h[0], small));
    CU(cuIpcGetMemHandle(&h[1], large));
    CU(cuIpcGetMemHandle(&again, small));
    CHECK(memcmp(&again, &h[0], sizeof again) == 0, "a second export of one pointer gives another handle");
    CUdeviceptr self = 0;
    CUresult r = cuIpcOpenMemHandle_v2(&self, h[0], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    CHECK(r != CUDA_SUCCESS, "the exporting process opened its own handle");
    /* Twice: one for the importer of alice, one for bob's. */
    for (int i = 0; i < 2; i++) CHECK(write(handles[1], h, sizeof h) == (ssize_t)sizeof h);
    char c;
    for (int i = 0; i < 2; i++) read_all(done[0], &c, 1);
    uint8_t *back = malloc(LARGE), *want = malloc(LARGE);
    h_pattern(want, LARGE, 22);
    CU(cuMemcpyDtoH_v2(back, small, SMALL));
    CHECK(memcmp(back, want, SMALL) == 0, "the exporter does not see the importer's bytes (small allocation)");
    CU(cuMemcpyDtoH_v2(back, large, LARGE));
    CHECK(memcmp(back, want, LARGE) == 0, "the exporter does not see the importer's bytes (large allocation)");
    free(host), free(back), free(want);
    return 0;
}

static int importer(void *arg)
{
    (void)arg;
    CUipcMemHandle h[2];
    read_all(handles[0], h, sizeof h);
    cc_as_user(users.alice);
    CUipcMemHandle forged = h[0];
    forged.reserved[20] ^= 1; /* inside the nonce */
    CUdeviceptr p;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuIpcOpenMemHandle_v2(&p, forged, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    size_t sizes[2] = {SMALL, LARGE};
    uint8_t *got = malloc(LARGE), *want = malloc(LARGE), *mine = malloc(LARGE);
    h_pattern(want, LARGE, 11);
    h_pattern(mine, LARGE, 22);
    for (int i = 0; i < 2; i++) {
        CU(cuIpcOpenMemHandle_v2(&p, h[i], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
        CU(cuMemcpyDtoH_v2(got, p, sizes[i]));
        CHECK(memcmp(got, want, sizes[i]) == 0, "handle %d: the importer does not see the exporter's bytes", i);
        CU(cuMemcpyHtoD_v2(p, mine, sizes[i]));
        CU(cuCtxSynchronize());
        CU(cuIpcCloseMemHandle(p));
    }
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuIpcCloseMemHandle(p));
    free(got), free(want), free(mine);
    CHECK(write(done[1], "i", 1) == 1);
    return 0;
}

static int stranger(void *arg)
{
    (void)arg;
    CUipcMemHandle h[2];
    read_all(handles[0], h, sizeof h);
    cc_as_user(users.bob);
    CUdeviceptr p = 0;
    CU_EXPECT(CUDA_ERROR_NOT_PERMITTED, cuIpcOpenMemHandle_v2(&p, h[0], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CU_EXPECT(CUDA_ERROR_NOT_PERMITTED, cuIpcOpenMemHandle_v2(&p, h[1], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CHECK(p == 0, "a refused open wrote a pointer");
    CHECK(write(done[1], "b", 1) == 1);
    return 0;
}

int main(void)
{
    h_begin("ipc", 90);
    struct h_server srv;
    cc_start_two_users(&srv, "ipc", ALICE, BOB, &users);
    CHECK(pipe(handles) == 0 && pipe(done) == 0);
    cc_run_share(exporter, importer, stranger, 60);
    printf("ok memory written by one process is read by another, both ways, through two sessions\n");
    CHECK(h_server_log_count(&srv, "IPC is per user") >= 2, "the server log does not say why bob was refused");
    printf("ok another user's session is refused, and the log says why\n");
    h_server_stop(&srv);
    printf("PASS ipc\n");
    return 0;
}
