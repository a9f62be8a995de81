/* handles.h - the session's limit on live virtual handles (--max-handles).
 * The handle API itself is in dispatch.h, next to the handlers that use it. */
#ifndef SCUDA_SERVER_HANDLES_H
#define SCUDA_SERVER_HANDLES_H

#include <stdint.h>

/* At most `max` ids at once (0: no limit). A new handle past it fails its
 * call with CUDA_ERROR_OUT_OF_MEMORY and a log line naming the option. */
void handles_set_limit(uint64_t max);

/* One id of the map, for a migration to walk (migrate_state.c). */
struct handle_ref {
    uint64_t id;
    uint32_t kind; /* enum handle_kind (dispatch.h) */
    void *real;
};
/* Every id in the map, sorted by id (the client's ids grow with each
 * creation, so this is creation order), in a malloc'd array. Returns the
 * count, or -1 when out of memory. */
long handle_list(struct handle_ref **out);

#endif
