/* handles.c - see handles.h. */
#define _GNU_SOURCE
#include "handles.h"

#include <stdatomic.h>

#include "conn.h"
#include "servers.h"

static _Atomic uint64_t next_handle_id = 0x10000;

uint64_t handle_new_id(void)
{
    /* Ids are multiples of 16 so they look like aligned pointers to code
     * that inspects handles, and never collide with the special stream
     * values 0, 1 and 2. */
    uint64_t id = atomic_fetch_add_explicit(&next_handle_id, 16, memory_order_relaxed);
    /* One counter for every server, so ids never collide across them; the
     * tag says which server the new handle is made on (the one the calling
     * thread's calls go to). Server 0's tag is 0. */
    return handle_tag(id, (unsigned)server_current()->index);
}

/* The calling thread's default stream in each context it used, created on
 * first use. Like the driver's, it synchronizes with the legacy stream. */
#define PTDS_SLOTS 8
static __thread struct {
    uint64_t ctx, stream;
    unsigned generation;
} ptds[PTDS_SLOTS];
/* Bumped when a context goes away: every thread's cached streams of the
 * old generation are stale (their real streams died with the context). */
static _Atomic unsigned ptds_generation;

void per_thread_streams_stale(void) { atomic_fetch_add(&ptds_generation, 1); }

uint64_t per_thread_stream_id(void)
{
    uint64_t ctx = conn_thread_ctx();
    int free_slot = -1;
    unsigned gen = atomic_load(&ptds_generation);
    for (int i = 0; i < PTDS_SLOTS; i++) {
        if (ptds[i].stream && ptds[i].generation != gen) ptds[i].stream = 0;
        if (ptds[i].stream && ptds[i].ctx == ctx) return ptds[i].stream;
        if (!ptds[i].stream && free_slot < 0) free_slot = i;
    }
    CUstream s;
    if (cuStreamCreate(&s, CU_STREAM_DEFAULT) != CUDA_SUCCESS) return (uint64_t)(uintptr_t)CU_STREAM_LEGACY;
    if (free_slot < 0) free_slot = 0; /* more contexts than slots: replace one */
    ptds[free_slot].ctx = ctx;
    ptds[free_slot].stream = (uint64_t)(uintptr_t)s;
    ptds[free_slot].generation = gen;
    return ptds[free_slot].stream;
}

uint64_t stream_key(const void *h)
{
    uint64_t id = handle_wire_id(h);
    if (id > (uint64_t)(uintptr_t)CU_STREAM_LEGACY) return id;
    /* Bit 63 is in no handle id (dispatch.h), so this names no other stream. */
    return 1ull << 63 | conn_thread_ctx();
}
