/* migrate_landing.c - see migrate_landing.h. */
#include "migrate_landing.h"

#include "dispatch.h"
#include "../common/messages.gen.h"

/* A MIG_BYTES frame: the item's fixed fields, an empty name, the chunk. */
#define LANDING_CAP (MIGRATE_CHUNK + 4096)

uint8_t *migrate_landing_buffer(struct migrate_landing *l, size_t *cap)
{
    if (!l->tried) {
        void *p = NULL;
        l->tried = 1;
        if (REAL(cuMemHostAlloc, &p, LANDING_CAP, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS) l->buf = p;
    }
    *cap = l->buf ? LANDING_CAP : 0;
    return l->buf;
}

void migrate_landing_free(struct migrate_landing *l)
{
    if (l->buf) REAL(cuMemFreeHost, l->buf);
    l->buf = NULL;
    l->tried = 0;
}
