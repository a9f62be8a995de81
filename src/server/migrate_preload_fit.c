/* migrate_preload_fit.c - whether what B loaded ahead still fits the
 * session at the hold, and what is left to send (migrate_preload.h).
 * Pure: no driver, no connection, so the rule is unit tested
 * (tests/unit/test_migrate_preload.c). */
#include "migrate_preload.h"

#include <stdlib.h>

#include "migrate_state.h"

static int same(const struct msg_migrate_item *x, const struct msg_migrate_item *y)
{
    return x->kind == y->kind && x->id == y->id && x->parent == y->parent && x->a == y->a && x->b == y->b &&
           x->c == y->c;
}

/* The context B replayed under this item's id, or NULL. */
static const struct msg_migrate_item *sent_context(const struct migrate_preloaded *p, uint64_t id)
{
    for (long i = 0; i < p->nsent && p->sent[i].kind == MIG_CONTEXT; i++)
        if (p->sent[i].id == id) return &p->sent[i];
    return NULL;
}

long migrate_preload_filter(const struct migrate_preloaded *p, struct msg_migrate_item *items, long n)
{
    long ctxs = 0, head = 0, out = 0;
    while (ctxs < p->nsent && p->sent[ctxs].kind == MIG_CONTEXT) ctxs++;
    long matched_ctxs = 0, i = 0;
    for (; i < n && items[i].kind == MIG_CONTEXT; i++) {
        const struct msg_migrate_item *was = sent_context(p, items[i].id);
        if (was && !same(was, &items[i])) return -1; /* its flags changed: B's differs */
        if (was) matched_ctxs++;
        else items[out++] = items[i]; /* created since: B makes it now */
    }
    if (matched_ctxs != ctxs) return -1; /* one was destroyed: B holds it still */
    /* The sequence only grows at its end, so B's head is the start of it
     * unless something in it was unloaded since. */
    for (; i < n && ctxs + head < p->nsent; i++, head++)
        if (!same(&p->sent[ctxs + head], &items[i])) return -1;
    if (ctxs + head != p->nsent) return -1;
    for (; i < n; i++) items[out++] = items[i];
    return out;
}

void migrate_preloaded_free(struct migrate_preloaded *p)
{
    free(p->sent);
    p->sent = NULL, p->nsent = 0;
    p->fd = -1;
}
