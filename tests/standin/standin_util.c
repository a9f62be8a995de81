/* SCUDA CPU stand-in driver: small utilities, the global lock. */
#include "standin_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

si_global si_g;

pthread_mutex_t si_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t si_done_cv;
pthread_cond_t si_exec_cv;
__thread int si_in_callback;

static pthread_once_t si_once = PTHREAD_ONCE_INIT;

static void si_init_once(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&si_done_cv, &attr);
    pthread_cond_init(&si_exec_cv, &attr);
    pthread_condattr_destroy(&attr);
}

void si_enter(void)
{
    pthread_once(&si_once, si_init_once);
    pthread_mutex_lock(&si_lock);
}

void si_leave(void)
{
    pthread_mutex_unlock(&si_lock);
}

void si_wait_done(void)
{
    pthread_cond_wait(&si_done_cv, &si_lock);
}

uint64_t si_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void si_abs_timespec(uint64_t ns, struct timespec *ts)
{
    ts->tv_sec = (time_t)(ns / 1000000000ull);
    ts->tv_nsec = (long)(ns % 1000000000ull);
}

uint64_t si_next_id(void)
{
    static _Atomic uint64_t counter = 0;
    return atomic_fetch_add(&counter, 1) + 1;
}

void *si_xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p) {
        fputs("standin: out of host memory\n", stderr);
        abort();
    }
    return p;
}

char *si_xstrdup(const char *s)
{
    size_t n = strlen(s);
    char *p = si_xcalloc(n + 1, 1);
    memcpy(p, s, n);
    return p;
}

void si_strbuf_append(si_strbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) {
            fputs("standin: out of host memory\n", stderr);
            abort();
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void si_strbuf_free(si_strbuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ---- pointer set ---- */

#define SI_TOMB ((void *)(uintptr_t)1)

static size_t si_hash(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

static void si_hset_grow(si_hset *s)
{
    size_t ncap = s->cap ? s->cap : 64;
    while (s->count * 2 + 2 > ncap)
        ncap *= 2;
    if (ncap == s->cap && s->used * 4 < s->cap * 3)
        return;
    void **old = s->slots;
    size_t ocap = s->cap;
    s->slots = si_xcalloc(ncap, sizeof(void *));
    s->cap = ncap;
    s->used = s->count;
    for (size_t i = 0; i < ocap; i++) {
        void *p = old[i];
        if (!p || p == SI_TOMB)
            continue;
        size_t j = si_hash(p) & (ncap - 1);
        while (s->slots[j])
            j = (j + 1) & (ncap - 1);
        s->slots[j] = p;
    }
    free(old);
}

bool si_hset_add(si_hset *s, const void *p)
{
    if (!p || p == SI_TOMB)
        return false;
    if (si_hset_has(s, p))
        return true;
    if ((s->used + 1) * 4 >= s->cap * 3)
        si_hset_grow(s);
    size_t j = si_hash(p) & (s->cap - 1);
    while (s->slots[j] && s->slots[j] != SI_TOMB)
        j = (j + 1) & (s->cap - 1);
    if (!s->slots[j])
        s->used++;
    s->slots[j] = (void *)p;
    s->count++;
    return true;
}

bool si_hset_has(const si_hset *s, const void *p)
{
    if (!s->cap || !p || p == SI_TOMB)
        return false;
    size_t j = si_hash(p) & (s->cap - 1);
    for (size_t n = 0; n < s->cap && s->slots[j]; n++) {
        if (s->slots[j] == p)
            return true;
        j = (j + 1) & (s->cap - 1);
    }
    return false;
}

void si_hset_del(si_hset *s, const void *p)
{
    if (!s->cap || !p || p == SI_TOMB)
        return;
    size_t j = si_hash(p) & (s->cap - 1);
    for (size_t n = 0; n < s->cap && s->slots[j]; n++) {
        if (s->slots[j] == p) {
            s->slots[j] = SI_TOMB;
            s->count--;
            return;
        }
        j = (j + 1) & (s->cap - 1);
    }
}
