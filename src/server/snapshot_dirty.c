/* snapshot_dirty.c - see snapshot_dirty.h.
 *
 * The rule is coarse so that it is easy to trust. Any call that is not on
 * a short list may have written any byte of device memory (a launch can
 * write whatever it can reach). The list: calls that only read
 * (synchronizes, queries, copies to the host, pings), and the two copies
 * to the device whose handlers name the range they write (a copy from the
 * host, a copy device to device), unless the application maps memory
 * itself (cuMemMap: one physical allocation may then show at two
 * addresses, and a write at one changes the other). A session that ever
 * shared memory with another (IPC handles, shareable handles, pool
 * pointers, exported or imported) never keeps anything: the other may
 * write it without a call of ours.
 *
 * Whatever this misses, the digest check of every snapshot still
 * catches: a copy whose bytes differ is refused, and the snapshot is
 * taken again in full.
 *
 * Ordering: calls are read on the dispatch thread, so each call read
 * before the snapshot's own frame marked before the snapshot took the
 * marks, or marks after it (its handler, on a worker): then it is only
 * counted dirty once more. Its write lands before the copy either way
 * (the snapshot holds the workers and synchronizes). */
#include "snapshot_dirty.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "../common/ops.gen.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct snapshot_written written = {.all = 1}; /* under lock; no snapshot parked yet */
static _Atomic int shared;  /* memory shared with another session, ever */
static _Atomic int aliased; /* the application mapped memory itself (cuMemMap), ever */

static int only_reads(uint16_t op)
{
    switch (op) {
    case OP_scuda_ctx_synchronize:
    case OP_cuStreamSynchronize:
    case OP_cuEventSynchronize:
    case OP_cuStreamQuery:
    case OP_cuEventQuery:
    case OP_scuda_memcpy_dtoh:
    case OP_scuda_ping:
    case OP_scuda_live_ping:
    case OP_scuda_live_pong:
    case OP_scuda_resume_ack:
    case OP_scuda_snapshot: return 1;
    case OP_scuda_snapshot_ahead: return 1;
    default: return 0;
    }
}

/* Memory shared with another session, either way. */
static int shares(uint16_t op)
{
    switch (op) {
    case OP_cuIpcGetMemHandle:
    case OP_cuIpcOpenMemHandle:
    case OP_cuIpcOpenMemHandle_v2:
    case OP_cuMemPoolExportPointer:
    case OP_cuMemPoolImportPointer:
    case OP_scuda_shareable_export:
    case OP_scuda_shareable_import: return 1;
    default: return 0;
    }
}

/* Handlers that call snapshot_note_range (srv_memory.c). */
static int names_its_range(uint16_t op) { return op == OP_scuda_memcpy_htod || op == OP_scuda_memcpy_dtod; }

static void mark_all(void)
{
    pthread_mutex_lock(&lock);
    written.all = 1;
    pthread_mutex_unlock(&lock);
}

void snapshot_note_op(uint16_t op)
{
    if (only_reads(op)) return;
    if (shares(op)) atomic_store(&shared, 1);
    if (op == OP_cuMemMap) atomic_store(&aliased, 1);
    if (names_its_range(op) && !atomic_load(&aliased)) return;
    mark_all();
}

void snapshot_note_range(uint64_t addr, uint64_t len)
{
    pthread_mutex_lock(&lock);
    if (written.n == SNAPSHOT_WRITTEN_MAX) written.all = 1; /* too many to list: all of it */
    else if (!written.all) written.r[written.n].addr = addr, written.r[written.n++].len = len;
    pthread_mutex_unlock(&lock);
}

void snapshot_note_write(void) { mark_all(); }

void snapshot_dirty_take(struct snapshot_written *out)
{
    pthread_mutex_lock(&lock);
    *out = written;
    memset(&written, 0, sizeof written);
    pthread_mutex_unlock(&lock);
    if (atomic_load(&shared)) out->all = 1;
}

void snapshot_dirty_failed(void) { mark_all(); }

int snapshot_written_touches(const struct snapshot_written *w, uint64_t addr, uint64_t size)
{
    if (w->all) return 1;
    for (int i = 0; i < w->n; i++) {
        uint64_t a = w->r[i].addr, len = w->r[i].len;
        /* Overlap of [a, a+len) and [addr, addr+size), without overflow. */
        if (len && size && (a >= addr ? a - addr < size : addr - a < len)) return 1;
    }
    return 0;
}
