/* stream_idle.c - the client answers cuStreamSynchronize itself only when
 * a device-to-host copy on that stream has just proven it idle (PyTorch's
 * .item() pattern), and never hides work or an error queued after the
 * proof: any one-way call in between, from any thread, sends the
 * synchronize to the session again. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

#define BOGUS_PTR ((CUdeviceptr)0xdead0000ull)

static CUstream shared_stream;

static void *queue_bad_memset(void *arg)
{
    (void)arg;
    /* Another thread queues failing work on the stream after the proof. */
    cuMemsetD8Async(BOGUS_PTR, 1, 64, shared_stream);
    return NULL;
}

static void client(void)
{
    h_cuda_setup();
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 4096));
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    uint32_t out[4];

    /* The .item() pattern: copy, then synchronize, many times over. */
    for (int i = 0; i < 100; i++) {
        CU(cuMemsetD32Async(d, (unsigned)i, 4, st));
        CU(cuMemcpyDtoHAsync_v2(out, d, sizeof out, st));
        CU(cuStreamSynchronize(st));
        CHECK(out[3] == (uint32_t)i, "round %d: got %u", i, out[3]);
    }

    /* An error queued after the proving copy must still be reported. */
    CU(cuMemcpyDtoHAsync_v2(out, d, sizeof out, st));
    CU_EXPECT(CUDA_SUCCESS, cuMemsetD8Async(BOGUS_PTR, 1, 64, st));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamSynchronize(st));
    CU_EXPECT(CUDA_SUCCESS, cuStreamSynchronize(st));

    /* The same when another thread queues it. */
    shared_stream = st;
    CU(cuMemcpyDtoHAsync_v2(out, d, sizeof out, st));
    pthread_t t;
    pthread_create(&t, NULL, queue_bad_memset, NULL);
    pthread_join(t, NULL);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamSynchronize(st));

    /* A proof for one stream says nothing about another. */
    CUstream other;
    CU(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    CU(cuMemcpyDtoHAsync_v2(out, d, sizeof out, st));
    CU_EXPECT(CUDA_SUCCESS, cuStreamSynchronize(other));

    /* No capture has begun, so capture status is answered locally: NONE. */
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    CU(cuStreamIsCapturing(st, &status));
    CHECK(status == CU_STREAM_CAPTURE_STATUS_NONE, "capture status %d", (int)status);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamIsCapturing(st, NULL));
}

static int run_client(void *arg)
{
    (void)arg;
    client();
    return 0;
}

int main(void)
{
    h_begin("stream_idle", 25);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    h_wait_ok(h_spawn(run_client, NULL, 20, -1, -1), 20000, "client");
    h_server_stop(&srv);
    printf("PASS stream_idle\n");
    return 0;
}
