/* stream_sync.c - cuStreamSynchronize, answered locally when the stream is
 * provably idle.
 *
 * PyTorch's .item() is a device-to-host copy followed by a synchronize of
 * the same stream. The copy's reply already proves the stream idle (the
 * session synchronized it before sending the bytes), so the synchronize
 * needs no second round trip, provided no one-way call (which might have
 * queued work on the stream or left an error to report) was sent since.
 * Any doubt, and the call goes to the server. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>

#include "failover.h"
#include "rpc.h"
#include "servers.h"
#include "shim.h"
#include "../common/ops.gen.h"

/* The proof names the stream the session ran (stream_key), not the
 * handle: CU_STREAM_PER_THREAD and NULL mean another stream in another
 * thread or context. */
static struct {
    pthread_mutex_t lock;
    uint64_t stream;
    uint64_t async_count; /* one-way calls sent when it was seen idle */
    int valid;
} idle = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Mirrored memory learns of completed work through this (coherence.c
 * registers at cuInit), so that this file calls nothing above it. */
static void (*synced_hook)(CUstream stream, int whole_context);

void stream_set_synced_hook(void (*hook)(CUstream stream, int whole_context)) { synced_hook = hook; }

void stream_synced(CUstream stream, int whole_context)
{
    if (synced_hook) synced_hook(stream, whole_context);
    failover_at_sync(); /* a snapshot for the standby, when one is due */
}

void stream_note_idle(const void *stream, uint64_t async_before)
{
    uint64_t key = stream_key(stream);
    pthread_mutex_lock(&idle.lock);
    idle.valid = rpc_async_count() == async_before;
    idle.stream = key;
    idle.async_count = async_before;
    pthread_mutex_unlock(&idle.lock);
}

static int known_idle(const void *stream)
{
    uint64_t key = stream_key(stream);
    pthread_mutex_lock(&idle.lock);
    int yes = idle.valid && idle.stream == key && idle.async_count == rpc_async_count();
    pthread_mutex_unlock(&idle.lock);
    return yes;
}

CUresult stream_wait(CUstream hStream)
{
    if (known_idle(hStream)) {
        stream_synced(hStream, 0);
        return CUDA_SUCCESS;
    }
    rpc_call c;
    struct msg_cuStreamSynchronize_req m = {handle_wire_id(hStream)};
    rpc_begin_on(&c, OP_cuStreamSynchronize, server_of_handle(hStream));
    msg_cuStreamSynchronize_req_put(&c.req, &m);
    uint64_t async_before = rpc_async_count();
    CUresult r = rpc_sync(&c);
    rpc_end(&c);
    if (r == CUDA_SUCCESS) {
        stream_note_idle(hStream, async_before);
        stream_synced(hStream, 0);
    }
    return r;
}

EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
    SHIM_ENTER(cuStreamSynchronize, (hStream));
    return rpc_report_deferred(stream_wait(hStream));
}
