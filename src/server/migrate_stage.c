/* migrate_stage.c - see migrate_stage.h. */
#define _GNU_SOURCE
#include "migrate_stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_window.h"
#include "dispatch.h"

/* Room left on a device after staging: 10% of it, at most 1 GiB (the
 * application's next allocations, the driver's own). */
#define MARGIN_MAX (1ull << 30)
#define MARGIN_PART 10

/* The context that owns device address p, or the current one (globals,
 * managed and mapped memory may answer none). */
static CUcontext owner_of(uint64_t p)
{
    CUcontext ctx = NULL;
    if (REAL(cuPointerGetAttribute, &ctx, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)p) != CUDA_SUCCESS || !ctx)
        REAL(cuCtxGetCurrent, &ctx);
    return ctx;
}

/* Bytes to stage per context, checked against what each device has free. */
struct need {
    CUcontext ctx;
    uint64_t bytes;
};

static int room_for(const struct need *v, long n, char *why, size_t whylen)
{
    for (long i = 0; i < n; i++) {
        size_t free_bytes = 0, total = 0;
        CUresult r = REAL(cuCtxPushCurrent_v2, v[i].ctx);
        if (r == CUDA_SUCCESS) {
            r = window_scratch_room(&free_bytes, &total);
            REAL(cuCtxPopCurrent_v2, NULL);
        }
        uint64_t margin = total / MARGIN_PART < MARGIN_MAX ? total / MARGIN_PART : MARGIN_MAX;
        if (r != CUDA_SUCCESS) {
            snprintf(why, whylen, "the device's free memory is unknown (CUresult %d)", (int)r);
            return -1;
        }
        if ((uint64_t)free_bytes < v[i].bytes + margin) {
            snprintf(why, whylen, "%.1f MiB of device memory free, %.1f MiB needed to stage %.1f MiB", free_bytes / 1048576.0,
                     (v[i].bytes + margin) / 1048576.0, v[i].bytes / 1048576.0);
            return -1;
        }
    }
    return 0;
}

/* The contexts of ranges r[0..n) with their bytes; owners[i] is range i's. */
static long needs_of(const struct migrate_range *r, long n, CUcontext *owners, struct need *v)
{
    long k = 0;
    for (long i = 0; i < n; i++) {
        owners[i] = r[i].size ? owner_of(r[i].addr) : NULL;
        if (!r[i].size) continue;
        long j = 0;
        while (j < k && v[j].ctx != owners[i]) j++;
        if (j == k) v[k++] = (struct need){owners[i], 0};
        v[j].bytes += r[i].size;
    }
    return k;
}

/* Range r copied to fresh scratch memory in ctx: *to, or a CUresult. */
static CUresult stage_one(const struct migrate_range *r, CUcontext ctx, CUdeviceptr *to)
{
    CUresult e = REAL(cuCtxPushCurrent_v2, ctx);
    if (e != CUDA_SUCCESS) return e;
    e = window_scratch_alloc(to, (size_t)r->size);
    if (e == CUDA_SUCCESS) e = REAL(cuMemcpyDtoD_v2, *to, (CUdeviceptr)r->addr, (size_t)r->size);
    if (e == CUDA_SUCCESS) e = REAL(cuCtxSynchronize, ); /* a DtoD copy may return before it is done */
    if (e != CUDA_SUCCESS && *to) window_scratch_free(*to), *to = 0;
    REAL(cuCtxPopCurrent_v2, NULL);
    return e;
}

int migrate_stage(const struct migrate_range *r, long n, struct migrate_stage *st, char *why, size_t whylen)
{
    *st = (struct migrate_stage){0};
    CUcontext *owners = calloc(n ? (size_t)n : 1, sizeof *owners);
    struct need *need = calloc(n ? (size_t)n : 1, sizeof *need);
    st->v = calloc(n ? (size_t)n : 1, sizeof *st->v);
    int rc = owners && need && st->v ? 0 : -1;
    if (rc) snprintf(why, whylen, "out of host memory for staging");
    if (rc == 0) rc = room_for(need, needs_of(r, n, owners, need), why, whylen);
    for (long i = 0; i < n && rc == 0; i++) {
        st->n = i + 1;
        st->v[i].size = r[i].size;
        if (!r[i].size) continue;
        if (!st->ctx) st->ctx = owners[i];
        CUdeviceptr to = 0;
        CUresult e = stage_one(&r[i], owners[i], &to);
        if (e != CUDA_SUCCESS) {
            snprintf(why, whylen, "staging %.1f MiB at %#llx failed with CUresult %d", r[i].size / 1048576.0,
                     (unsigned long long)r[i].addr, (int)e);
            rc = -1;
        }
        st->v[i].addr = to;
        st->bytes += to ? r[i].size : 0;
    }
    free(owners);
    free(need);
    if (rc != 0) migrate_unstage(st);
    return rc;
}

void migrate_unstage(struct migrate_stage *st)
{
    for (long i = 0; i < st->n && st->v; i++) window_scratch_free(st->v[i].addr);
    free(st->v);
    *st = (struct migrate_stage){0};
}
