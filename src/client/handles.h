/* handles.h - virtual handles in the client: a handle the application
 * holds IS its id (docs/architecture.md, 3.5 Virtual handles).
 *
 * The client picks ids for handles it creates, so creation can be async.
 * CU_STREAM_PER_THREAD becomes the calling thread's own stream: the
 * session runs calls on several threads of its own, so the driver's
 * per-thread stream there would not be this thread's. */
#ifndef SCUDA_CLIENT_HANDLES_H
#define SCUDA_CLIENT_HANDLES_H

#include <cuda.h>
#include <stdint.h>

#include "handle_tag.h"

/* A new id, tagged with the server the calling thread's calls go to
 * (handle_tag.h). */
uint64_t handle_new_id(void);
/* The calling thread's own stream in its current context, created on
 * first use. */
uint64_t per_thread_stream_id(void);
/* Every thread's own streams are gone (their context was destroyed):
 * each thread makes a new one at its next use. */
void per_thread_streams_stale(void);

static inline uint64_t handle_wire_id(const void *h)
{
    uint64_t id = (uint64_t)(uintptr_t)h;
    if (__builtin_expect(id == (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD, 0)) id = per_thread_stream_id();
    /* Servers know their handles untagged (handle_tag.h); with one server
     * there is no tag to strip. */
    return handle_untag(id);
}
static inline void *handle_from_id(uint64_t id) { return (void *)(uintptr_t)id; }

/* Which stream the session runs for stream handle `h` sent by this thread
 * now, for telling streams apart in the client (never sent): the wire id,
 * and for the NULL and legacy stream (the same stream, one per context)
 * the current context as well. */
uint64_t stream_key(const void *h);

#endif
