/* migrate_preload.c - see migrate_preload.h. The exporter's side of
 * loading ahead: one thread per move, started by the dispatch thread,
 * taken back (joined) by it at the hold. */
#define _GNU_SOURCE
#include "migrate_preload.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "migrate_images.h"
#include "migrate_seq.h"
#include "migrate_state.h"
#include "migrate_switch.h"
#include "../common/clock.h"
#include "../common/log.h"
#include "../common/transport.h"

/* B loads every image it is sent before it answers: PyTorch's thousands
 * take seconds on a GPU, more on a loaded machine. */
#define ECHO_TIMEOUT_MS 120000
/* Rounds of loading ahead at most: each sends what the session loaded
 * during the one before, so that the hold finds little left. Each may ask
 * the other server which images it has, and the hold asks once more. */
#define PRELOAD_ROUNDS (MIGRATE_IMAGE_QUERIES_MAX - 1)

static pthread_t thread;
static _Atomic int busy; /* started, not yet taken */
static _Atomic int done; /* the thread left its result */
static enum migrate_preload_for purpose;
static int started;      /* the thread exists and must be joined (dispatch thread only) */
static char target[256];
static struct migrate_preloaded result = {.fd = -1}; /* the thread's, until the join */

/* What B will hold, kept to compare at the hold: the items' identity and
 * places, without the names and images that point into the notes. */
static struct msg_migrate_item *remember(const struct msg_migrate_item *items, long n)
{
    struct msg_migrate_item *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (long i = 0; v && i < n; i++)
        v[i] = (struct msg_migrate_item){.kind = items[i].kind, .id = items[i].id, .parent = items[i].parent,
                                         .a = items[i].a, .b = items[i].b, .c = items[i].c};
    return v;
}

/* B's echo of MIG_PRELOADED: it replayed all n items. */
static int read_echo(int fd, long n, char *why, size_t whylen)
{
    void *payload = NULL;
    struct msg_arena a;
    msg_arena_init(&a);
    struct msg_migrate_item it;
    char err[256] = "";
    int rc = migrate_read_item(fd, ECHO_TIMEOUT_MS, &payload, &a, &it, err, sizeof err);
    if (rc == 0 && (it.kind != MIG_PRELOADED || it.a != (uint64_t)n)) rc = -1;
    if (rc != 0)
        snprintf(why, whylen, "the other server did not finish loading ahead (%s)",
                 err[0] ? err : "it gave up; its log says why");
    free(payload);
    msg_arena_free(&a);
    return rc;
}

/* Send items[0..k) (their images offered first), then MIG_PRELOADED with
 * the count B has replayed in all, and wait for B's echo. */
static int send_items(struct migrate_preloaded *p, struct msg_migrate_item *items, long k, long total, char *why,
                      size_t whylen)
{
    uint8_t *keys = NULL;
    unsigned by_hash = 0, images = 0;
    int rc = migrate_images_offer(p->fd, items, k, &p->seq, &keys, &by_hash, &images, why, whylen);
    p->by_hash += by_hash, p->images += images;
    for (long i = 0; i < k && rc == 0; i++)
        if (migrate_send_item(p->fd, &items[i], p->seq++) != 0) rc = -1;
    free(keys);
    struct msg_migrate_item done = {.kind = MIG_PRELOADED, .a = (uint64_t)total};
    if (rc == 0 && migrate_send_item(p->fd, &done, p->seq++) != 0) rc = -1;
    if (rc != 0 && !why[0]) snprintf(why, whylen, "the connection to the other server failed");
    return rc == 0 ? read_echo(p->fd, total, why, whylen) : -1;
}

/* Send the contexts and the sequence's head; B replays them as they come. */
static int send_head(struct migrate_preloaded *p, char *why, size_t whylen)
{
    struct msg_migrate_item *items = NULL;
    long n = migrate_items_placing(&items, why, whylen);
    if (n < 0) return -1;
    p->sent = remember(items, n), p->nsent = n;
    int rc = p->sent ? send_items(p, items, n, n, why, whylen) : -1;
    free(items);
    return rc;
}

/* One more round: what the session placed while B loaded the last one (a
 * framework loads libraries by the thousand in its first steps), sent
 * ahead in turn. The sequence only grows at its end; a new context or a
 * changed head ends the rounds (the hold sends what is left). Returns 1
 * when it sent some, 0 when there was nothing to send, -1 with why. */
static int send_more(struct migrate_preloaded *p, char *why, size_t whylen)
{
    struct msg_migrate_item *items = NULL;
    long n = migrate_items_placing(&items, why, whylen);
    if (n < 0) return -1;
    struct msg_migrate_item *all = remember(items, n);
    long left = all ? migrate_preload_filter(p, items, n) : -1;
    int rc = 0;
    if (left > 0 && items[0].kind != MIG_CONTEXT && send_items(p, items, left, n, why, whylen) == 0) {
        free(p->sent);
        p->sent = all, p->nsent = n, all = NULL;
        rc = 1;
    } else if (left > 0 && why[0]) {
        rc = -1;
    }
    free(all);
    free(items);
    return rc;
}

static void *preload_main(void *arg)
{
    (void)arg;
    uint64_t t0 = now_ns();
    char why[MIGRATE_WHY_MAX] = "";
    struct migrate_preloaded p = {.fd = -1};
    migrate_seq_pin_images(1);
    int rc = (p.fd = migrate_connect_peer(target, &p.pid, why, sizeof why)) >= 0 ? send_head(&p, why, sizeof why) : -1;
    int more = 1, rounds = 1;
    for (; rc == 0 && more == 1 && rounds < PRELOAD_ROUNDS; rounds += more == 1)
        if ((more = send_more(&p, why, sizeof why)) < 0) rc = -1;
    migrate_seq_pin_images(0);
    p.ns = now_ns() - t0;
    if (rc == 0) {
        LOG_INFO("session %d: %s loaded %u images ahead (%u by digest alone) in %d round%s, %.0f ms, while the "
                 "session ran on", (int)getpid(), target, p.images, p.by_hash, rounds, rounds > 1 ? "s" : "",
                 p.ns / 1e6);
    } else {
        LOG_WARN("session %d: loading ahead on %s failed: %s; the %s loads everything during the hold",
                 (int)getpid(), target, why, purpose == PRELOAD_FOR_MOVE ? "move" : "snapshot");
        if (p.fd >= 0) io_close(p.fd);
        migrate_preloaded_free(&p);
    }
    result = p; /* read by the dispatch thread after the join */
    atomic_store(&done, 1);
    if (purpose == PRELOAD_FOR_MOVE) migrate_request_repost();
    return NULL;
}

int migrate_preload_start(const char *to, enum migrate_preload_for why)
{
    if (started || atomic_load(&busy)) return -1;
    snprintf(target, sizeof target, "%s", to);
    result = (struct migrate_preloaded){.fd = -1};
    purpose = why;
    atomic_store(&done, 0);
    atomic_store(&busy, 1);
    if (pthread_create(&thread, NULL, preload_main, NULL) != 0) {
        atomic_store(&busy, 0);
        LOG_WARN("session %d: no thread to load ahead on %s; the %s loads everything during the hold",
                 (int)getpid(), to, why == PRELOAD_FOR_MOVE ? "move" : "snapshot");
        return -1;
    }
    started = 1;
    return 0;
}

void migrate_preload_abandon(void)
{
    if (!started) return;
    if (!atomic_load(&done)) {
        pthread_detach(thread);
        started = 0;
        return;
    }
    struct migrate_preloaded p;
    migrate_preload_take(target, &p);
    if (p.fd >= 0) io_close(p.fd);
    migrate_preloaded_free(&p);
}

int migrate_preload_worthwhile(void) { return migrate_seq_has_images(); }
int migrate_preload_busy(void) { return atomic_load(&busy); }
int migrate_preload_done(void) { return atomic_load(&done); }
enum migrate_preload_for migrate_preload_purpose(void) { return purpose; }

void migrate_preload_take(const char *to, struct migrate_preloaded *p)
{
    *p = (struct migrate_preloaded){.fd = -1};
    if (!started) return;
    pthread_join(thread, NULL);
    started = 0;
    atomic_store(&busy, 0);
    *p = result;
    result = (struct migrate_preloaded){.fd = -1};
    if (p->fd >= 0 && strcmp(to, target) != 0) {
        io_close(p->fd);
        migrate_preloaded_free(p);
    }
}
