/* migrate_landing.h - where the importer's device bytes land: each
 * MIG_BYTES frame is read straight into pinned host memory and copied to
 * the device from there, so that a chunk costs its time on the link and
 * a fast DMA, not also a pageable copy's staging through the driver
 * (docs/architecture.md, 9.17 "Device bytes"). Synchronous: an async copy
 * would need an event, and events a session creates are part of the
 * state it imports (migrate_seq.c notes them). Without pinned memory (the
 * driver refused it) frames are read into plain memory, as before. */
#ifndef SCUDA_SERVER_MIGRATE_LANDING_H
#define SCUDA_SERVER_MIGRATE_LANDING_H

#include <stddef.h>
#include <stdint.h>

struct migrate_landing {
    uint8_t *buf; /* pinned, or NULL */
    int tried;    /* asked for once */
};

/* The buffer for the next frame and its capacity; NULL when there is no
 * pinned memory. Call with a context current. */
uint8_t *migrate_landing_buffer(struct migrate_landing *l, size_t *cap);
void migrate_landing_free(struct migrate_landing *l);

#endif
