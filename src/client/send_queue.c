/* send_queue.c - see send_queue.h. */
#define _GNU_SOURCE
#include "send_queue.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/log.h"
#include "../common/protocol.h"
#include "../common/transport.h"
#include "../common/clock.h"

#define QUEUE_MAX (4u << 20)
/* How long the writer keeps looking for more work after a batch. A launch
 * loop issues a call every few microseconds; an idle application costs the
 * writer this much spinning, then nothing. */
#define SPIN_NS 50000

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}


/* ---- keeping frames for a resume ------------------------------------------- */

static struct sendq_kept *kept_at(struct sendq *q, size_t i) { return &q->kept[(q->kept_head + i) % q->kept_cap]; }

/* Room for one more kept frame (lock held). */
static int kept_reserve_locked(struct sendq *q)
{
    if (q->kept_count < q->kept_cap) return 0;
    size_t cap = q->kept_cap ? q->kept_cap * 2 : 256;
    struct sendq_kept *k = malloc(cap * sizeof *k);
    if (!k) return -1;
    for (size_t i = 0; i < q->kept_count; i++) k[i] = *kept_at(q, i);
    free(q->kept);
    q->kept = k;
    q->kept_head = 0;
    q->kept_cap = cap;
    return 0;
}

/* Room for n more bytes at the log's end (lock held): what is forgotten
 * at its start is reclaimed first. */
static int log_reserve_locked(struct sendq *q, size_t n)
{
    if (q->log_end + n <= q->log_cap) return 0;
    if (q->log_start > 0) {
        memmove(q->log, q->log + q->log_start, q->log_end - q->log_start);
        for (size_t i = 0; i < q->kept_count; i++)
            if (kept_at(q, i)->copied) kept_at(q, i)->off -= q->log_start;
        q->log_end -= q->log_start;
        q->log_start = 0;
        if (q->log_end + n <= q->log_cap) return 0;
    }
    size_t cap = q->log_cap ? q->log_cap : 1u << 20;
    while (cap < q->log_end + n) cap *= 2;
    uint8_t *l = realloc(q->log, cap);
    if (!l) return -1;
    q->log = l;
    q->log_cap = cap;
    return 0;
}

/* Number the frame in iov and keep it (lock held). Small frames are
 * copied; a large one keeps pointers to the caller's bytes (borrow).
 * Returns its number. Out of memory it is numbered but not kept: a
 * resume that would need it fails, and says why. */
static uint64_t keep_locked(struct sendq *q, const struct iovec *iov, int iovcnt, int borrow)
{
    uint64_t no = q->next_no++;
    if (kept_reserve_locked(q) != 0) {
        LOG_WARN("out of memory: frame %llu cannot be sent again after a resume", (unsigned long long)no);
        return no;
    }
    struct sendq_kept k = {.no = no};
    for (int i = 0; i < iovcnt; i++) k.len += iov[i].iov_len;
    if (borrow && !q->journaling && iovcnt - 1 <= KEPT_PARTS && iov[0].iov_len == FRAME_HEADER_LEN) {
        memcpy(k.hdr, iov[0].iov_base, FRAME_HEADER_LEN);
        for (int i = 1; i < iovcnt; i++) k.rest[k.nrest++] = iov[i];
    } else {
        if (log_reserve_locked(q, k.len) != 0) {
            LOG_WARN("out of memory: frame %llu cannot be sent again after a resume", (unsigned long long)no);
            return no;
        }
        k.copied = 1;
        k.off = q->log_end;
        for (int i = 0; i < iovcnt; i++) {
            memcpy(q->log + q->log_end, iov[i].iov_base, iov[i].iov_len);
            q->log_end += iov[i].iov_len;
        }
    }
    *kept_at(q, q->kept_count++) = k;
    atomic_fetch_add_explicit(&q->kept_bytes, k.len, memory_order_relaxed);
    return no;
}

static void forget_first_locked(struct sendq *q)
{
    struct sendq_kept *k = kept_at(q, 0);
    atomic_fetch_sub_explicit(&q->kept_bytes, k->len, memory_order_relaxed);
    if (k->copied) q->log_start = k->off + k->len; /* copies are in the log in order */
    q->kept_head = (q->kept_head + 1) % q->kept_cap;
    if (--q->kept_count == 0) q->log_start = q->log_end = 0;
}

void sendq_acked(struct sendq *q, uint64_t ack)
{
    pthread_mutex_lock(&q->lock);
    if (q->journaling && ack > q->floor) ack = q->floor; /* the journal outlives acknowledgements */
    while (q->kept_count > 0 && kept_at(q, 0)->no <= ack) forget_first_locked(q);
    pthread_mutex_unlock(&q->lock);
}

void sendq_journal_begin(struct sendq *q)
{
    pthread_mutex_lock(&q->lock);
    if (!q->journaling) {
        __atomic_store_n(&q->journaling, 1, __ATOMIC_RELAXED);
        q->floor = q->next_no - 1;
    }
    pthread_mutex_unlock(&q->lock);
}

void sendq_journal_floor(struct sendq *q, uint64_t floor)
{
    pthread_mutex_lock(&q->lock);
    if (q->journaling && floor > q->floor) q->floor = floor;
    while (q->kept_count > 0 && kept_at(q, 0)->no <= q->floor) forget_first_locked(q);
    pthread_mutex_unlock(&q->lock);
}

void sendq_journal_end(struct sendq *q, uint64_t acked)
{
    pthread_mutex_lock(&q->lock);
    __atomic_store_n(&q->journaling, 0, __ATOMIC_RELAXED);
    while (q->kept_count > 0 && kept_at(q, 0)->no <= acked) forget_first_locked(q);
    pthread_mutex_unlock(&q->lock);
}

int sendq_journaling(struct sendq *q) { return __atomic_load_n(&q->journaling, __ATOMIC_RELAXED); }

size_t sendq_kept_bytes(struct sendq *q) { return atomic_load_explicit(&q->kept_bytes, memory_order_relaxed); }

void sendq_forget_kept(struct sendq *q)
{
    pthread_mutex_lock(&q->lock);
    while (q->kept_count > 0) forget_first_locked(q);
    pthread_mutex_unlock(&q->lock);
}

void sendq_set_first_no(struct sendq *q, uint64_t first_no)
{
    pthread_mutex_lock(&q->lock);
    q->next_no = first_no;
    pthread_mutex_unlock(&q->lock);
}

/* A kept frame's header with FRAME_REPLAYED added, in hdr. */
static void mark_replayed(const uint8_t *kept_hdr, uint8_t hdr[FRAME_HEADER_LEN])
{
    struct frame_header h;
    frame_header_decode(kept_hdr, &h);
    h.flags |= FRAME_REPLAYED;
    frame_header_encode(&h, hdr);
}

static int write_kept(struct sendq *q, int fd, const struct sendq_kept *k, int replayed)
{
    uint8_t hdr[FRAME_HEADER_LEN];
    const uint8_t *kept_hdr = k->copied ? q->log + k->off : k->hdr;
    if (replayed) mark_replayed(kept_hdr, hdr);
    if (k->copied) {
        if (!replayed) return io_write_full(fd, q->log + k->off, k->len);
        struct iovec iov[2] = {{hdr, FRAME_HEADER_LEN},
                               {q->log + k->off + FRAME_HEADER_LEN, k->len - FRAME_HEADER_LEN}};
        return io_writev_full(fd, iov, 2);
    }
    struct iovec iov[KEPT_PARTS + 1] = {{replayed ? hdr : (void *)k->hdr, FRAME_HEADER_LEN}};
    for (int i = 0; i < k->nrest; i++) iov[i + 1] = k->rest[i];
    return io_writev_full(fd, iov, k->nrest + 1);
}

long sendq_resume(struct sendq *q, int fd, uint64_t server_has, int replayed)
{
    pthread_mutex_lock(&q->write_lock);
    pthread_mutex_lock(&q->lock);
    uint64_t forget = q->journaling && server_has > q->floor ? q->floor : server_has;
    while (q->kept_count > 0 && kept_at(q, 0)->no <= forget) forget_first_locked(q);
    size_t first = 0; /* journaled frames the session has stay kept, unsent */
    while (first < q->kept_count && kept_at(q, first)->no <= server_has) first++;
    /* What is queued is kept too: it goes out below, in order, once. */
    q->pending.len = 0;
    atomic_store(&q->pending_len, 0);
    q->fd = fd;
    long n = 0;
    if (first < q->kept_count && kept_at(q, first)->no != server_has + 1) {
        LOG_WARN("resume: the session has %llu of our frames, but we keep from frame %llu on",
                 (unsigned long long)server_has, (unsigned long long)kept_at(q, first)->no);
        errno = EPROTO;
        n = -1;
    }
    for (size_t i = first; i < q->kept_count && n >= 0; i++, n++)
        if (write_kept(q, fd, kept_at(q, i), replayed) != 0) n = -1;
    pthread_mutex_unlock(&q->lock);
    pthread_mutex_unlock(&q->write_lock);
    return n;
}

/* ---- the queue ------------------------------------------------------------------ */

/* The queued bytes are taken out of the queue while they are written
 * (write_lock held), then the buffer is handed back for reuse, or freed
 * when the queue grew a new one meanwhile: no thread keeps a buffer of its
 * own. */
static struct sendq_buffer take_pending(struct sendq *q)
{
    pthread_mutex_lock(&q->lock);
    struct sendq_buffer out = q->pending;
    q->pending = (struct sendq_buffer){0};
    atomic_store(&q->pending_len, 0);
    pthread_mutex_unlock(&q->lock);
    return out;
}

static void give_back(struct sendq *q, struct sendq_buffer out)
{
    out.len = 0;
    pthread_mutex_lock(&q->lock);
    if (q->pending.data == NULL) q->pending = out;
    else free(out.data);
    pthread_mutex_unlock(&q->lock);
}

/* Write what was queued (called with write_lock held). */
static int flush_locked(struct sendq *q)
{
    struct sendq_buffer out = take_pending(q);
    q->in_flight = out.data;
    int rc = out.len ? io_write_full(q->fd, out.data, out.len) : 0;
    q->in_flight = NULL;
    give_back(q, out);
    return rc;
}

static void *writer_main(void *queue)
{
    struct sendq *q = queue;
    for (;;) {
        pthread_mutex_lock(&q->write_lock);
        int rc = flush_locked(q);
        pthread_mutex_unlock(&q->write_lock);
        if (rc != 0) q->on_error(q->on_error_arg, errno);

        uint64_t until = now_ns() + SPIN_NS;
        while (atomic_load(&q->pending_len) == 0 && now_ns() < until) cpu_relax();
        pthread_mutex_lock(&q->lock);
        while (q->pending.len == 0 && q->running) {
            q->sleeping = 1;
            pthread_cond_wait(&q->wake, &q->lock);
            q->sleeping = 0;
        }
        int stop = !q->running;
        pthread_mutex_unlock(&q->lock);
        if (stop) return NULL;
    }
}

int sendq_start(struct sendq *q, int fd, void (*on_error)(void *arg, int err), void *arg)
{
    q->fd = fd;
    q->on_error = on_error;
    q->on_error_arg = arg;
    q->running = 1;
    pthread_t t;
    if (pthread_create(&t, NULL, writer_main, q) != 0) {
        q->running = 0;
        return -1;
    }
    pthread_detach(t);
    return 0;
}

static int reserve_locked(struct sendq *q, size_t n)
{
    if (q->pending.len + n <= q->pending.cap) return 0;
    size_t cap = q->pending.cap ? q->pending.cap : 65536;
    while (cap < q->pending.len + n) cap *= 2;
    uint8_t *d = realloc(q->pending.data, cap);
    if (!d) return -1;
    q->pending.data = d;
    q->pending.cap = cap;
    return 0;
}

int sendq_enqueue(struct sendq *q, const struct iovec *iov, int iovcnt)
{
    size_t n = 0;
    for (int i = 0; i < iovcnt; i++) n += iov[i].iov_len;
    pthread_mutex_lock(&q->lock);
    if (!q->running || q->pending.len + n > QUEUE_MAX || reserve_locked(q, n) != 0) {
        pthread_mutex_unlock(&q->lock);
        return -1;
    }
    keep_locked(q, iov, iovcnt, 0);
    for (int i = 0; i < iovcnt; i++) {
        memcpy(q->pending.data + q->pending.len, iov[i].iov_base, iov[i].iov_len);
        q->pending.len += iov[i].iov_len;
    }
    atomic_store(&q->pending_len, q->pending.len);
    int wake = q->sleeping;
    pthread_mutex_unlock(&q->lock);
    if (wake) pthread_cond_signal(&q->wake);
    return 0;
}

/* What is queued and the caller's frame go out in one write: the session
 * then reads a launch and the copy that waits for it together (PyTorch's
 * .item()), with one wake-up. */
int sendq_write_direct(struct sendq *q, struct iovec *iov, int iovcnt, _Atomic uint64_t *no)
{
    size_t len = 0;
    for (int i = 0; i < iovcnt; i++) len += iov[i].iov_len;
    pthread_mutex_lock(&q->write_lock);
    /* Taking what is queued and numbering this frame at once: it goes out
     * right after those, whatever is queued meanwhile. */
    pthread_mutex_lock(&q->lock);
    uint64_t mine = keep_locked(q, iov, iovcnt, len > SENDQ_KEEP_COPY_MAX);
    if (no) atomic_store(no, mine);
    struct sendq_buffer out = q->pending;
    q->pending = (struct sendq_buffer){0};
    atomic_store(&q->pending_len, 0);
    pthread_mutex_unlock(&q->lock);
    q->in_flight = out.data;
    struct iovec all[8];
    int n = 0, rc;
    if (out.len) all[n++] = (struct iovec){.iov_base = out.data, .iov_len = out.len};
    if (iovcnt + n <= 8) {
        for (int i = 0; i < iovcnt; i++) all[n++] = iov[i];
        rc = io_writev_full(q->fd, all, n);
    } else {
        rc = out.len ? io_write_full(q->fd, out.data, out.len) : 0;
        if (rc == 0) rc = io_writev_full(q->fd, iov, iovcnt);
    }
    q->in_flight = NULL;
    give_back(q, out);
    pthread_mutex_unlock(&q->write_lock);
    return rc;
}

void sendq_forget_after_fork(struct sendq *q)
{
    q->running = 0;
    q->pending.len = 0;
    atomic_store(&q->pending_len, 0);
    pthread_mutex_init(&q->write_lock, NULL);
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->wake, NULL);
}
