/* driver_coverage.c - exports built after the rest of the driver API
 * (codegen/coverage.gen.txt), each against the stand-in:
 *   - cuParamSetTexRef is the session driver's: its checks come back (a
 *     unit other than the default, a handle that is no texture reference)
 *     and an old-API launch of a kernel that reads a texture reference
 *     reads what the reference is bound to;
 *   - cuMemBatchDecompressAsync goes to the session's driver with its
 *     operations' device addresses as they are: a refused batch names the
 *     operation in *errorIndex (the output comes back with the failure),
 *     an accepted one decompresses in stream order;
 *   - cuLogsRegisterCallback: the session driver's log line runs the
 *     client's callback (its data, level and text) before the failing
 *     call returns; after cuLogsUnregisterCallback it runs no more;
 *   - cuDeviceRegisterAsyncNotification: going over the stand-in's memory
 *     budget runs the client's callback (type, bytes over, its data, its
 *     handle); after unregistering, no more;
 *   - cuProfilerInitialize is answered as every driver since CUDA 12.0
 *     answers it, CUDA_ERROR_NOT_SUPPORTED, and nothing is logged as
 *     unsupported on the client's stderr. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cudaProfiler.h>

#include "harness.h"

static void param_set_texref(void)
{
    h_cuda_setup();
    CUfunction f = h_func("texref_sample");
    CUtexref tr;
    CU(cuModuleGetTexRef(&tr, h_module(), "tex_ref"));
    float img[16];
    for (int i = 0; i < 16; i++) img[i] = (float)(10 * (i / 4) + i % 4);
    CUDA_ARRAY3D_DESCRIPTOR ad = {4, 4, 0, CU_AD_FORMAT_FLOAT, 1, 0};
    CUarray a;
    CU(cuArray3DCreate_v2(&a, &ad));
    CU(cuMemcpyHtoA_v2(a, 0, img, sizeof img));
    CU(cuTexRefSetArray(tr, a, CU_TRSA_OVERRIDE_FORMAT));
    CU(cuParamSetTexRef(f, CU_PARAM_TR_DEFAULT, tr));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuParamSetTexRef(f, 0, tr));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuParamSetTexRef(f, CU_PARAM_TR_DEFAULT, NULL));

    /* texel (1.5, 2.5) unfiltered is row 2, column 1: 21 */
    float c[4] = {1.5f, 2.5f, 0, 0};
    CUdeviceptr d_out, d_c;
    CU(cuMemAlloc_v2(&d_out, 16));
    CU(cuMemAlloc_v2(&d_c, 16));
    CU(cuMemcpyHtoD_v2(d_c, c, 16));
    unsigned n = 1;
    CU(cuFuncSetBlockShape(f, 1, 1, 1));
    CU(cuParamSetSize(f, 20));
    CU(cuParamSetv(f, 0, &d_out, 8));
    CU(cuParamSetv(f, 8, &d_c, 8));
    CU(cuParamSeti(f, 16, n));
    CU(cuLaunchGrid(f, 1, 1));
    float out[4];
    CU(cuMemcpyDtoH_v2(out, d_out, 16));
    CHECK(out[0] == 21, "the old launch read %g through the reference", out[0]);
    CU(cuMemFree_v2(d_out));
    CU(cuMemFree_v2(d_c));
    CU(cuArrayDestroy(a));
}

/* Snappy for "abcabcabcabcX": length 13, literal "abc", a copy of 9 bytes
 * from 3 back, literal "X". */
static const unsigned char snappy_abc[] = {0x0d, 0x08, 'a', 'b', 'c', 0x15, 0x03, 0x00, 'X'};

static int batch_decompress(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUdeviceptr src, dst, act;
    CU(cuMemAlloc_v2(&src, 64));
    CU(cuMemAlloc_v2(&dst, 64));
    CU(cuMemAlloc_v2(&act, 8));
    CU(cuMemcpyHtoD_v2(src, snappy_abc, sizeof snappy_abc));
    CUmemDecompressParams p[2];
    memset(p, 0, sizeof p);
    p[0].srcNumBytes = sizeof snappy_abc, p[0].dstNumBytes = 13;
    p[0].src = (const void *)(uintptr_t)src, p[0].dst = (void *)(uintptr_t)dst;
    p[0].dstActBytes = (cuuint32_t *)(uintptr_t)act;
    p[0].algo = CU_MEM_DECOMPRESS_ALGORITHM_SNAPPY;
    p[1] = p[0];
    p[1].padding[3] = 1;
    /* the driver's checks come back with the index of the operation */
    size_t idx = 7;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemBatchDecompressAsync(p, 2, 0, &idx, NULL));
    CHECK(idx == 1, "errorIndex %zu, expected 1", idx);
    idx = 7;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemBatchDecompressAsync(p, 1, 1, &idx, NULL));
    CHECK(idx == SIZE_MAX, "errorIndex %zu for bad flags", idx);
    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU(cuMemBatchDecompressAsync(p, 1, 0, &idx, s));
    CU(cuStreamSynchronize(s));
    char out[14] = {0};
    cuuint32_t n = 0;
    CU(cuMemcpyDtoH_v2(out, dst, 13));
    CU(cuMemcpyDtoH_v2(&n, act, 4));
    CHECK(n == 13 && memcmp(out, "abcabcabcabcX", 13) == 0, "decompressed %u bytes: %.13s", n, out);
    CU(cuStreamDestroy_v2(s));
    CU(cuMemFree_v2(src));
    CU(cuMemFree_v2(dst));
    CU(cuMemFree_v2(act));
    return 0;
}

/* What the log callback saw: it runs on the connection's reader thread. */
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static int seen_calls, seen_level = -1;
static char seen_text[256];
static void *seen_user;

static void on_log(void *data, CUlogLevel level, char *message, size_t length)
{
    pthread_mutex_lock(&seen_lock);
    seen_calls++;
    seen_level = (int)level;
    seen_user = data;
    snprintf(seen_text, sizeof seen_text, "%.*s", (int)length, message);
    pthread_mutex_unlock(&seen_lock);
}

static int seen(char *text, size_t cap)
{
    pthread_mutex_lock(&seen_lock);
    int n = seen_calls;
    snprintf(text, cap, "%s", seen_text);
    pthread_mutex_unlock(&seen_lock);
    return n;
}

static int logs_callback(void *arg)
{
    (void)arg;
    h_cuda_setup();
    static int user_data;
    CUlogsCallbackHandle h;
    CU(cuLogsRegisterCallback(on_log, &user_data, &h));
    CUdeviceptr p;
    CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc_v2(&p, (size_t)1 << 52));
    /* the line travels before the failing call's reply */
    char text[256];
    CHECK(seen(text, sizeof text) == 1, "the callback ran %d times", seen(text, sizeof text));
    CHECK(strstr(text, "cuMemAlloc: out of memory") != NULL && text[strlen(text) - 1] != '\n', "line: %s", text);
    pthread_mutex_lock(&seen_lock);
    CHECK(seen_level == CU_LOG_LEVEL_ERROR && seen_user == &user_data, "level %d, data %p", seen_level, seen_user);
    pthread_mutex_unlock(&seen_lock);
    CU(cuLogsUnregisterCallback(h));
    CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc_v2(&p, (size_t)1 << 52));
    CU(cuCtxSynchronize());
    CHECK(seen(text, sizeof text) == 1, "a dropped callback ran");
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuLogsRegisterCallback(NULL, NULL, &h));
    return 0;
}

/* What the async notification callback saw (the connection's reader thread). */
static int notes;
static unsigned long long note_bytes;
static int note_type = -1;
static void *note_user;
static CUasyncCallbackHandle note_handle;

static void on_notify(CUasyncNotificationInfo *info, void *data, CUasyncCallbackHandle h)
{
    pthread_mutex_lock(&seen_lock);
    notes++;
    note_type = (int)info->type;
    note_bytes = info->info.overBudget.bytesOverBudget;
    note_user = data, note_handle = h;
    pthread_mutex_unlock(&seen_lock);
}

static int async_notification(void *arg)
{
    (void)arg;
    h_cuda_setup();
    static int user_data;
    CUasyncCallbackHandle h;
    CU(cuDeviceRegisterAsyncNotification(0, on_notify, &user_data, &h));
    CUdeviceptr p;
    CU(cuMemAlloc_v2(&p, 16u << 20)); /* the session's budget is 8 MiB (main) */
    CU(cuCtxSynchronize());
    pthread_mutex_lock(&seen_lock);
    int n = notes;
    CHECK(n >= 1 && note_type == CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET && note_bytes >= (8u << 20) &&
              note_user == &user_data && note_handle == h,
          "%d notifications, type %d, %llu bytes over", n, note_type, note_bytes);
    pthread_mutex_unlock(&seen_lock);
    CU(cuDeviceUnregisterAsyncNotification(0, h));
    CUdeviceptr q;
    CU(cuMemAlloc_v2(&q, 4u << 20));
    CU(cuCtxSynchronize());
    pthread_mutex_lock(&seen_lock);
    CHECK(notes == n, "notified after unregistering");
    pthread_mutex_unlock(&seen_lock);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuDeviceRegisterAsyncNotification(0, NULL, NULL, &h));
    CU(cuMemFree_v2(p));
    CU(cuMemFree_v2(q));
    return 0;
}

static int profiler_initialize(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuProfilerInitialize("/nonexistent/config", "/tmp/out.csv", CU_OUT_CSV));
    return 0;
}

static int param_set_texref_client(void *arg)
{
    (void)arg;
    param_set_texref();
    return 0;
}

int main(void)
{
    h_begin("driver_coverage", 60);
    setenv("STANDIN_BUDGET_MB", "8", 1); /* the server's stand-in: a device memory budget */
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    h_wait_ok(h_spawn(param_set_texref_client, NULL, 20, -1, -1), 25000, "cuParamSetTexRef");
    h_wait_ok(h_spawn(batch_decompress, NULL, 20, -1, -1), 25000, "cuMemBatchDecompressAsync");
    h_wait_ok(h_spawn(logs_callback, NULL, 20, -1, -1), 25000, "cuLogsRegisterCallback");
    h_wait_ok(h_spawn(async_notification, NULL, 20, -1, -1), 25000, "cuDeviceRegisterAsyncNotification");
    char err_path[512];
    int err = h_temp_file("profiler_stderr", err_path, sizeof err_path);
    h_wait_ok(h_spawn(profiler_initialize, NULL, 20, -1, err), 25000, "cuProfilerInitialize");
    close(err);
    char *text = h_read_file(err_path, NULL);
    CHECK(strstr(text, "cuProfilerInitialize") == NULL, "the client's stderr: %s", text);
    free(text);
    h_server_stop(&srv);
    printf("PASS driver_coverage\n");
    return 0;
}
