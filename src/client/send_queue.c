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

#include "../common/transport.h"

#define QUEUE_MAX (4u << 20)
/* How long the writer keeps looking for more work after a batch. A launch
 * loop issues a call every few microseconds; an idle application costs the
 * writer this much spinning, then nothing. */
#define SPIN_NS 50000

struct buffer {
    uint8_t *data;
    size_t len, cap;
};

static struct {
    int fd;
    int running;
    void (*on_error)(int);
    pthread_mutex_t write_lock; /* held while writing to the socket */
    pthread_mutex_t lock;       /* guards pending and sleeping */
    pthread_cond_t wake;
    struct buffer pending;
    _Atomic size_t pending_len; /* read without the lock while spinning */
    int sleeping;
    /* The buffer being written (under write_lock), kept reachable here: a
     * child forked meanwhile inherits it without the thread that holds it,
     * and LeakSanitizer would call it a leak. */
    void *in_flight;
} q = {.fd = -1,
       .write_lock = PTHREAD_MUTEX_INITIALIZER,
       .lock = PTHREAD_MUTEX_INITIALIZER,
       .wake = PTHREAD_COND_INITIALIZER};

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The queued bytes are taken out of the queue while they are written
 * (write_lock held), then the buffer is handed back for reuse, or freed
 * when the queue grew a new one meanwhile: no thread keeps a buffer of its
 * own. */
static struct buffer take_pending(void)
{
    pthread_mutex_lock(&q.lock);
    struct buffer out = q.pending;
    q.pending = (struct buffer){0};
    atomic_store(&q.pending_len, 0);
    pthread_mutex_unlock(&q.lock);
    return out;
}

static void give_back(struct buffer out)
{
    out.len = 0;
    pthread_mutex_lock(&q.lock);
    if (q.pending.data == NULL) q.pending = out;
    else free(out.data);
    pthread_mutex_unlock(&q.lock);
}

/* Write what was queued (called with write_lock held). */
static int flush_locked(void)
{
    struct buffer out = take_pending();
    q.in_flight = out.data;
    int rc = out.len ? io_write_full(q.fd, out.data, out.len) : 0;
    q.in_flight = NULL;
    give_back(out);
    return rc;
}

static void *writer_main(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&q.write_lock);
        int rc = flush_locked();
        pthread_mutex_unlock(&q.write_lock);
        if (rc != 0) q.on_error(errno);

        uint64_t until = now_ns() + SPIN_NS;
        while (atomic_load(&q.pending_len) == 0 && now_ns() < until) cpu_relax();
        pthread_mutex_lock(&q.lock);
        while (q.pending.len == 0 && q.running) {
            q.sleeping = 1;
            pthread_cond_wait(&q.wake, &q.lock);
            q.sleeping = 0;
        }
        int stop = !q.running;
        pthread_mutex_unlock(&q.lock);
        if (stop) return NULL;
    }
}

int sendq_start(int fd, void (*on_error)(int err))
{
    q.fd = fd;
    q.on_error = on_error;
    q.running = 1;
    pthread_t t;
    if (pthread_create(&t, NULL, writer_main, NULL) != 0) {
        q.running = 0;
        return -1;
    }
    pthread_detach(t);
    return 0;
}

static int reserve_locked(size_t n)
{
    if (q.pending.len + n <= q.pending.cap) return 0;
    size_t cap = q.pending.cap ? q.pending.cap : 65536;
    while (cap < q.pending.len + n) cap *= 2;
    uint8_t *d = realloc(q.pending.data, cap);
    if (!d) return -1;
    q.pending.data = d;
    q.pending.cap = cap;
    return 0;
}

int sendq_enqueue(const struct iovec *iov, int iovcnt)
{
    size_t n = 0;
    for (int i = 0; i < iovcnt; i++) n += iov[i].iov_len;
    pthread_mutex_lock(&q.lock);
    if (!q.running || q.pending.len + n > QUEUE_MAX || reserve_locked(n) != 0) {
        pthread_mutex_unlock(&q.lock);
        return -1;
    }
    for (int i = 0; i < iovcnt; i++) {
        memcpy(q.pending.data + q.pending.len, iov[i].iov_base, iov[i].iov_len);
        q.pending.len += iov[i].iov_len;
    }
    atomic_store(&q.pending_len, q.pending.len);
    int wake = q.sleeping;
    pthread_mutex_unlock(&q.lock);
    if (wake) pthread_cond_signal(&q.wake);
    return 0;
}

/* What is queued and the caller's frame go out in one write: the session
 * then reads a launch and the copy that waits for it together (PyTorch's
 * .item()), with one wake-up. */
int sendq_write_direct(struct iovec *iov, int iovcnt)
{
    pthread_mutex_lock(&q.write_lock);
    struct buffer out = take_pending();
    q.in_flight = out.data;
    struct iovec all[8];
    int n = 0, rc;
    if (out.len) all[n++] = (struct iovec){.iov_base = out.data, .iov_len = out.len};
    if (iovcnt + n <= 8) {
        for (int i = 0; i < iovcnt; i++) all[n++] = iov[i];
        rc = io_writev_full(q.fd, all, n);
    } else {
        rc = out.len ? io_write_full(q.fd, out.data, out.len) : 0;
        if (rc == 0) rc = io_writev_full(q.fd, iov, iovcnt);
    }
    q.in_flight = NULL;
    give_back(out);
    pthread_mutex_unlock(&q.write_lock);
    return rc;
}

void sendq_forget_after_fork(void)
{
    q.running = 0;
    q.pending.len = 0;
    atomic_store(&q.pending_len, 0);
    pthread_mutex_init(&q.write_lock, NULL);
    pthread_mutex_init(&q.lock, NULL);
    pthread_cond_init(&q.wake, NULL);
}
