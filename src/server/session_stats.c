/* session_stats.c - a counters page per session, shared with the parent
 * (session_stats.h). */
#define _DEFAULT_SOURCE
#include "session_stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "../common/clock.h"

static struct slot {
    struct session_counters *page; /* NULL: a free slot */
    struct session_record rec;
} *slots;
static int nslots;
static struct session_counters *mine;


int session_stats_open(void)
{
    int i = 0;
    while (i < nslots && slots[i].page) i++;
    if (i == nslots) {
        struct slot *s = realloc(slots, (size_t)(nslots + 16) * sizeof *s);
        if (!s) return -1;
        memset(s + nslots, 0, 16 * sizeof *s);
        slots = s;
        nslots += 16;
    }
    void *p = mmap(NULL, sizeof(struct session_counters), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    slots[i].page = p; /* zero-filled by the kernel */
    memset(&slots[i].rec, 0, sizeof slots[i].rec);
    return i;
}

void session_stats_bind(int slot, pid_t pid, const char *user, const char *peer, int gpu)
{
    if (slot < 0 || slot >= nslots || !slots[slot].page) return;
    struct session_record *r = &slots[slot].rec;
    r->pid = pid;
    snprintf(r->user, sizeof r->user, "%s", user);
    snprintf(r->peer, sizeof r->peer, "%s", peer);
    r->gpu = gpu;
    r->start_ms = now_ms();
}

void session_stats_close_slot(int slot)
{
    if (slot < 0 || slot >= nslots || !slots[slot].page) return;
    munmap(slots[slot].page, sizeof(struct session_counters));
    slots[slot].page = NULL;
    slots[slot].rec.pid = 0;
}

void session_stats_release(pid_t pid)
{
    for (int i = 0; i < nslots; i++)
        if (slots[i].page && slots[i].rec.pid == pid) session_stats_close_slot(i);
}

/* One counter, read as a number only. */
#define SEEN(f) r->seen.f = atomic_load_explicit(&slots[i].page->f, memory_order_relaxed)

int session_stats_list(struct session_record *out, int max)
{
    int n = 0;
    for (int i = 0; i < nslots && n < max; i++) {
        if (!slots[i].page || slots[i].rec.pid <= 0) continue;
        struct session_record *r = &out[n++];
        memcpy(r->user, slots[i].rec.user, sizeof r->user);
        memcpy(r->peer, slots[i].rec.peer, sizeof r->peer);
        r->pid = slots[i].rec.pid;
        r->gpu = slots[i].rec.gpu;
        r->start_ms = slots[i].rec.start_ms;
        SEEN(calls);
        SEEN(errors);
        SEEN(bytes_in);
        SEEN(bytes_out);
        SEEN(device_mem);
        SEEN(module_hits);
        SEEN(device_total);
        SEEN(snapshot_ms);
        SEEN(snapshot_bytes);
    }
    return n;
}

uint64_t session_stats_age_ms(uint64_t start_ms)
{
    uint64_t now = now_ms();
    return now > start_ms ? now - start_ms : 0;
}

void session_stats_enter(int slot)
{
    for (int i = 0; i < nslots; i++)
        if (slots[i].page && i != slot) munmap(slots[i].page, sizeof(struct session_counters));
    mine = slot >= 0 && slot < nslots ? slots[slot].page : NULL;
    free(slots);
    slots = NULL;
    nslots = 0;
}

struct session_counters *session_stats_mine(void) { return mine; }

void session_stats_snapshot(uint64_t bytes)
{
    if (!mine) return;
    atomic_store_explicit(&mine->snapshot_bytes, bytes, memory_order_relaxed);
    atomic_store_explicit(&mine->snapshot_ms, now_ms(), memory_order_relaxed);
}
