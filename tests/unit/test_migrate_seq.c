/* test_migrate_seq.c - streams and events in a migration's placing
 * sequence (src/server/migrate_seq.c): each creation is a note in its
 * place among the module loads, the client's under its id and the
 * session's own without one; a destruction is a note after its creation;
 * a run at the end made and destroyed again goes (an event per step does
 * not grow the sequence); a destroyed context takes its streams and events
 * out. A fake driver table stands in for the driver. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "server/dispatch.h"
#include "server/handles.h"
#include "server/migrate_seq.h"

#define R(x) ((void *)(uintptr_t)(x))

/* What migrate_seq.c and handles.c take from the rest of the server. */
struct driver_table real;
CUresult driver_lacks(const char *name)
{
    (void)name;
    return CUDA_ERROR_NOT_SUPPORTED;
}
void *host_quota_alloc(size_t n, const char *what)
{
    (void)what;
    return malloc(n);
}
void host_quota_free(void *p) { free(p); }
static uint64_t current_ctx = 0x100;
uint64_t migrate_current_ctx_id(void) { return current_ctx; }
int migrate_items_push(struct migrate_items *l, struct msg_migrate_item it)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        struct msg_migrate_item *v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = it;
    return 0;
}
int migrate_ranges_push(struct migrate_ranges *r, uint64_t addr, uint64_t size)
{
    (void)r, (void)addr, (void)size;
    return 0;
}
void migrate_digest_u64(struct migrate_digest *d, uint64_t v)
{
    (void)d, (void)v;
}

/* The fake driver: each object a fresh handle value, which a destroy
 * frees for reuse, as a driver may. */
static uintptr_t next_handle = 0x1000, freed_handle;
static void *fresh(void)
{
    uintptr_t h = freed_handle ? freed_handle : (next_handle += 16);
    freed_handle = 0;
    return R(h);
}
static CUresult fake_stream_create(CUstream *s, unsigned flags)
{
    (void)flags;
    *s = fresh();
    return CUDA_SUCCESS;
}
static CUresult fake_stream_create_prio(CUstream *s, unsigned flags, int prio)
{
    (void)prio;
    return fake_stream_create(s, flags);
}
static CUresult fake_stream_prio(CUstream s, int *prio)
{
    (void)s;
    *prio = -1;
    return CUDA_SUCCESS;
}
static CUresult fake_event_create(CUevent *e, unsigned flags)
{
    (void)flags;
    *e = fresh();
    return CUDA_SUCCESS;
}
static CUresult fake_stream_destroy(CUstream s)
{
    freed_handle = (uintptr_t)s;
    return CUDA_SUCCESS;
}
static CUresult fake_event_destroy(CUevent e)
{
    freed_handle = (uintptr_t)e;
    return CUDA_SUCCESS;
}
static CUresult fake_ctx_destroy(CUcontext c)
{
    (void)c;
    return CUDA_SUCCESS;
}

static struct migrate_items items(void)
{
    struct migrate_items l = {0};
    CHECK(migrate_seq_items(&l) == 0);
    return l;
}

static const struct msg_migrate_item *nth_of(const struct migrate_items *l, uint8_t kind, size_t nth)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].kind == kind && nth-- == 0) return &l->v[i];
    return NULL;
}

int main(void)
{
    struct driver_table t;
    memset(&t, 0, sizeof t);
    t.cuStreamCreate = fake_stream_create;
    t.cuStreamCreateWithPriority = fake_stream_create_prio;
    t.cuStreamGetPriority = fake_stream_prio;
    t.cuEventCreate = fake_event_create;
    t.cuStreamDestroy_v2 = fake_stream_destroy;
    t.cuEventDestroy_v2 = fake_event_destroy;
    t.cuCtxDestroy_v2 = fake_ctx_destroy;
    migrate_seq_install(&t);
    CHECK(handle_put(NULL, 0x100, HK_CONTEXT, R(0xc000)) == CUDA_SUCCESS);

    /* A stream and an event of the client, one stream destroyed after a
     * module load, the session's own event: in the order they happened. */
    CUstream s1, gone;
    CUevent e1, own;
    CHECK(t.cuStreamCreateWithPriority(&s1, CU_STREAM_NON_BLOCKING, -3) == CUDA_SUCCESS);
    CHECK(handle_put(NULL, 0x210, HK_STREAM, s1) == CUDA_SUCCESS);
    CHECK(t.cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
    CHECK(handle_put(NULL, 0x220, HK_EVENT, e1) == CUDA_SUCCESS);
    CHECK(t.cuStreamCreate(&gone, 0) == CUDA_SUCCESS);
    CHECK(handle_put(NULL, 0x230, HK_STREAM, gone) == CUDA_SUCCESS);
    migrate_note_module(0x240, "image", 5);
    handle_drop(NULL, 0x230);
    CHECK(t.cuStreamDestroy_v2(gone) == CUDA_SUCCESS);
    CHECK(t.cuEventCreate(&own, 0) == CUDA_SUCCESS); /* takes gone's handle value: a fresh object */

    struct migrate_items l = items();
    uint8_t want[] = {MIG_STREAM, MIG_EVENT, MIG_STREAM, MIG_MODULE, MIG_STREAM_DESTROY, MIG_EVENT};
    CHECK(l.n == sizeof want);
    for (size_t i = 0; i < l.n && i < sizeof want; i++) CHECK(l.v[i].kind == want[i]);
    if (l.n == sizeof want) {
        CHECK(l.v[0].id == 0x210 && l.v[0].parent == 0x100 && l.v[0].a == CU_STREAM_NON_BLOCKING);
        CHECK((int64_t)l.v[0].b == -1); /* the driver's priority, not the asked one */
        CHECK(l.v[1].id == 0x220 && l.v[1].a == CU_EVENT_DISABLE_TIMING);
        CHECK(l.v[2].id == 0 && l.v[2].c != 0);       /* destroyed: no id, a serial */
        CHECK(l.v[4].c == l.v[2].c);                   /* the destroy names it */
        CHECK(l.v[5].id == 0 && l.v[5].c > l.v[2].c); /* the session's own; serials rise */
    }
    size_t before = l.n;
    free(l.v);

    /* An event per step, made and destroyed: nothing stays. So do two
     * made before either goes. */
    for (int i = 0; i < 5000; i++) {
        CUevent a, b;
        CHECK(t.cuEventCreate(&a, 0) == CUDA_SUCCESS);
        CHECK(t.cuEventCreate(&b, 0) == CUDA_SUCCESS);
        CHECK(t.cuEventDestroy_v2(a) == CUDA_SUCCESS);
        CHECK(t.cuEventDestroy_v2(b) == CUDA_SUCCESS);
    }
    l = items();
    CHECK(l.n == before);
    free(l.v);

    /* A live one among them keeps what came before it. */
    CUevent keep, tmp;
    CHECK(t.cuEventCreate(&tmp, 0) == CUDA_SUCCESS);
    CHECK(t.cuEventCreate(&keep, 0) == CUDA_SUCCESS);
    CHECK(t.cuEventDestroy_v2(tmp) == CUDA_SUCCESS);
    l = items();
    CHECK(l.n == before + 3);
    CHECK(nth_of(&l, MIG_EVENT_DESTROY, 0) != NULL);
    free(l.v);

    /* A destroyed context takes its streams and events with it. */
    current_ctx = 0x300;
    CHECK(handle_put(NULL, 0x300, HK_CONTEXT, R(0xc100)) == CUDA_SUCCESS);
    CUstream s2;
    CHECK(t.cuStreamCreate(&s2, 0) == CUDA_SUCCESS);
    CHECK(t.cuCtxDestroy_v2(R(0xc100)) == CUDA_SUCCESS);
    l = items();
    CHECK(l.n == before + 3);
    for (size_t i = 0; i < l.n; i++) CHECK(l.v[i].parent != 0x300);
    free(l.v);
    CHECK(!migrate_seq_lost());

    printf("test_migrate_seq: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
