/* msg_arena.h - memory for decoded messages (messages.gen.h).
 *
 * A decoder allocates the arrays of a message from an arena, so that one
 * msg_arena_free() releases everything a call decoded, whichever way the
 * handler returns. Small messages fit in the arena's own space and cost no
 * allocation: a launch's attributes, a copy's sides. The session keeps one
 * per call (srv_call.arena), the client one per rpc (rpc_call.arena). */
#ifndef SCUDA_MSG_ARENA_H
#define SCUDA_MSG_ARENA_H

#include <stddef.h>
#include <stdint.h>

struct msg_arena {
    /* The bulk field's bytes are not in the payload: the session received
     * a request's into staging memory, or the client a reply's into
     * rpc_call.sink. Its decoder then leaves the field's pointer NULL (a
     * reply's length is then bulk_len, what the client received). */
    int bulk_apart;
    uint64_t bulk_len;
    size_t used;
    void *chunks; /* malloc'd overflow, a list */
    _Alignas(16) uint8_t space[512];
};

void msg_arena_init(struct msg_arena *a);
/* n bytes aligned to 16, or NULL when memory runs out. */
void *msg_alloc(struct msg_arena *a, size_t n);
void msg_arena_free(struct msg_arena *a);

#endif
