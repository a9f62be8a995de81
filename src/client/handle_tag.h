/* handle_tag.h - which server a handle id belongs to.
 *
 * With several servers, every handle the application holds must say which
 * server made it, so that a call naming it goes there without a lookup.
 * The server's index is kept in bits 56..61 of the id:
 *
 *   - client ids (handles.c: a counter from 0x10000 in steps of 16) would
 *     need 2^52 handles to reach bit 56;
 *   - session ids (bit 62, HANDLE_SERVER_ID_BASE in the server) count up
 *     the same way below it;
 *   - bit 63 is in no id (stream_key uses it for its own keys).
 *
 * Server 0's tag is 0, so with one server every id is what it always was
 * and nothing changes on the wire or in the sessions. Tag 63 means "on
 * every server": objects such as libraries that are made on each server
 * under one id. The ids 0, CU_STREAM_LEGACY (1) and CU_STREAM_PER_THREAD
 * (2) name no object of one server and are never tagged.
 *
 * Tags are not for servers: the wire id is the untagged one.
 * handle_wire_id() strips the tag from a handle the application passes,
 * generated stubs send the new ids they make untagged, and the encoders of
 * hand-written messages (messages.gen.c, put_handle) strip the same bits
 * from every `handle` field. */
#ifndef SCUDA_CLIENT_HANDLE_TAG_H
#define SCUDA_CLIENT_HANDLE_TAG_H

#include <stdint.h>

#define HANDLE_TAG_SHIFT 56
#define HANDLE_TAG_BITS 6
#define HANDLE_TAG_MASK (((1ull << HANDLE_TAG_BITS) - 1) << HANDLE_TAG_SHIFT)
_Static_assert(HANDLE_TAG_MASK == 0x3full << 56, "messages.gen.c's put_handle strips these bits");
/* The tag of a handle made on every server under one id. */
#define HANDLE_TAG_ALL 63u
/* The highest untagged special id (CU_STREAM_PER_THREAD). */
#define HANDLE_TAG_SPECIAL_MAX 2u

/* `id` as a handle of server `server` (0..62, or HANDLE_TAG_ALL). An id
 * that already carries a tag gets the new one; the special ids stay as
 * they are. */
static inline uint64_t handle_tag(uint64_t id, unsigned server)
{
    if (id <= HANDLE_TAG_SPECIAL_MAX) return id;
    return (id & ~HANDLE_TAG_MASK) | (uint64_t)(server & HANDLE_TAG_ALL) << HANDLE_TAG_SHIFT;
}

/* The id without its tag: what the server knows it by. */
static inline uint64_t handle_untag(uint64_t id) { return id & ~HANDLE_TAG_MASK; }

/* The server index in `id`'s tag: 0 for untagged and special ids,
 * HANDLE_TAG_ALL for a handle on every server. */
static inline unsigned handle_tag_of(uint64_t id) { return (unsigned)((id & HANDLE_TAG_MASK) >> HANDLE_TAG_SHIFT); }

#endif
