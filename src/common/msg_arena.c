/* msg_arena.c - see msg_arena.h. */
#include "msg_arena.h"

#include <stdlib.h>

struct chunk {
    struct chunk *next;
    _Alignas(16) uint8_t data[];
};

void msg_arena_init(struct msg_arena *a)
{
    a->bulk_apart = 0;
    a->bulk_len = 0;
    a->used = 0;
    a->chunks = NULL;
}

void *msg_alloc(struct msg_arena *a, size_t n)
{
    size_t rounded = (n + 15) & ~(size_t)15;
    if (rounded < n) return NULL;
    if (rounded <= sizeof a->space - a->used) {
        void *p = a->space + a->used;
        a->used += rounded;
        return p;
    }
    if (rounded > SIZE_MAX - sizeof(struct chunk)) return NULL;
    struct chunk *c = malloc(sizeof *c + rounded);
    if (!c) return NULL;
    c->next = a->chunks;
    a->chunks = c;
    return c->data;
}

void msg_arena_free(struct msg_arena *a)
{
    struct chunk *c = a->chunks;
    while (c) {
        struct chunk *next = c->next;
        free(c);
        c = next;
    }
    msg_arena_init(a);
}
