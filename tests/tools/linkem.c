/* linkem.c - a TCP relay on loopback that emulates a network link.
 *
 *   linkem --listen 127.0.0.1:PORT --connect 127.0.0.1:PORT
 *          [--delay-ms D] [--rate-mbit R] [--max-conns N]
 *
 * Every connection accepted on --listen is relayed to a new connection to
 * --connect. Each direction adds a one-way delay (a timed queue: bytes read
 * at t leave at t + D) and is capped at R Mbit/s by a token bucket that all
 * connections of that direction share, as they would share a real link.
 * Both directions are emulated independently, so a round trip costs 2 D.
 *
 * Used to measure SCUDA over an emulated LAN or WAN where the kernel has no
 * netem (bench/README.md): `scuda server` behind it, `scuda bench` or
 * `scuda run --server` in front of it.
 *
 * Bounds: loopback addresses only; at most --max-conns connections (default
 * 32); at most QUEUE_MAX bytes queued per direction, beyond which linkem
 * stops reading and TCP pushes back on the sender. A direction busy-waits
 * only in the last SPIN_NS before queued bytes are due, so an idle link
 * costs no CPU. Self-contained (libc and
 * pthreads), so it builds anywhere:  cc -O2 -pthread linkem.c -o linkem */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define QUEUE_MAX (64u << 20) /* bytes queued per direction of a connection */
#define READ_MAX (256u << 10) /* one read from the source */
#define MIN_GRANT (16u << 10) /* the bucket lets out at least this much at once */
#define SPIN_NS 200000        /* busy-wait, rather than sleep, this close to a send */

/* ---- options ---- */

static struct {
    const char *listen, *connect;
    uint64_t delay_ns;
    double rate_bps; /* bytes per second; 0 = unlimited */
    int max_conns;
} opt = {.max_conns = 32};

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* ---- token bucket, one per direction, shared by all connections ---- */

struct bucket {
    pthread_mutex_t mu;
    double rate;   /* bytes per ns */
    double burst;  /* bytes */
    double tokens; /* bytes */
    uint64_t last; /* ns */
};

static struct bucket up = {.mu = PTHREAD_MUTEX_INITIALIZER}, down = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void bucket_init(struct bucket *b, double bytes_per_s)
{
    b->rate = bytes_per_s / 1e9;
    b->burst = bytes_per_s / 1000.0; /* 1 ms worth */
    if (b->burst < 2.0 * MIN_GRANT) b->burst = 2.0 * MIN_GRANT;
    b->tokens = b->burst;
    b->last = now_ns();
}

/* How many of `want` bytes may go now: > 0, or 0 with *wait_ns set. */
static size_t bucket_take(struct bucket *b, size_t want, uint64_t *wait_ns)
{
    pthread_mutex_lock(&b->mu);
    uint64_t now = now_ns();
    if (now > b->last) {
        b->tokens += (double)(now - b->last) * b->rate;
        if (b->tokens > b->burst) b->tokens = b->burst;
        b->last = now;
    }
    double need = want < MIN_GRANT ? (double)want : (double)MIN_GRANT;
    size_t n = 0;
    if (b->tokens >= need) {
        n = b->tokens < (double)want ? (size_t)b->tokens : want;
        b->tokens -= (double)n;
    } else {
        *wait_ns = (uint64_t)((need - b->tokens) / b->rate) + 1;
    }
    pthread_mutex_unlock(&b->mu);
    return n;
}

/* ---- one connection: two directions, each a thread ---- */

struct chunk {
    struct chunk *next;
    uint64_t due; /* ns: when its bytes may leave */
    size_t len, off;
    unsigned char data[];
};

struct conn {
    int id;
    int a, b;         /* accepted (client side), connected (server side) */
    atomic_int refs;  /* directions still running */
    uint64_t bytes[2];
};

struct dir {
    struct conn *c;
    int src, dst, which; /* which: 0 = client -> server, 1 = server -> client */
    struct bucket *bucket;
};

static atomic_int live_conns;

static int write_full(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void conn_release(struct conn *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1) return;
    fprintf(stderr, "linkem: connection %d closed (%llu bytes to the server, %llu back)\n", c->id,
            (unsigned long long)c->bytes[0], (unsigned long long)c->bytes[1]);
    close(c->a);
    close(c->b);
    free(c);
    atomic_fetch_sub(&live_conns, 1);
}

static void *pump(void *arg)
{
    struct dir d = *(struct dir *)arg;
    free(arg);
    /* Timers a microsecond late at most, not the default 50 us of slack. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);

    unsigned char *buf = malloc(READ_MAX);
    struct chunk *head = NULL, *tail = NULL;
    size_t queued = 0;
    int eof = 0, failed = buf == NULL;

    while (!failed) {
        /* 1. Send what is due, as fast as the bucket allows. */
        int64_t wait_ns = -1;
        uint64_t now = now_ns();
        while (head != NULL && head->due <= now) {
            size_t n = head->len - head->off;
            uint64_t w = 0;
            if (d.bucket != NULL && (n = bucket_take(d.bucket, n, &w)) == 0) {
                wait_ns = (int64_t)w;
                break;
            }
            if (write_full(d.dst, head->data + head->off, n) != 0) {
                failed = 1;
                goto out;
            }
            d.c->bytes[d.which] += n;
            head->off += n;
            queued -= n;
            if (head->off == head->len) {
                struct chunk *done = head;
                head = head->next;
                if (head == NULL) tail = NULL;
                free(done);
            }
            now = now_ns();
        }
        if (head == NULL && eof) break;
        if (head != NULL && wait_ns < 0) wait_ns = (int64_t)(head->due - now);

        /* 2. Read more, unless the queue is full or the source ended.
         * Sleep until SPIN_NS before the next chunk is due, then spin:
         * a timer wake-up can be tens of microseconds late, as much as
         * the delay of a LAN. */
        int64_t sleep_ns = wait_ns < 0 ? -1 : wait_ns > SPIN_NS ? wait_ns - SPIN_NS : 0;
        struct timespec ts = {.tv_sec = sleep_ns / 1000000000, .tv_nsec = sleep_ns % 1000000000};
        if (eof || queued >= QUEUE_MAX) { /* then head != NULL, so sleep_ns >= 0 */
            if (sleep_ns > 0) nanosleep(&ts, NULL);
            continue;
        }
        struct pollfd p = {.fd = d.src, .events = POLLIN};
        int r = ppoll(&p, 1, sleep_ns >= 0 ? &ts : NULL, NULL);
        if (r < 0 && errno != EINTR) {
            failed = 1;
            break;
        }
        if (r <= 0) continue;
        ssize_t n = recv(d.src, buf, READ_MAX, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n < 0) {
            failed = 1;
            break;
        }
        if (n == 0) {
            eof = 1;
            continue;
        }
        struct chunk *c = malloc(sizeof *c + (size_t)n);
        if (c == NULL) {
            failed = 1;
            break;
        }
        memcpy(c->data, buf, (size_t)n);
        c->len = (size_t)n;
        c->off = 0;
        c->next = NULL;
        c->due = now_ns() + opt.delay_ns;
        if (tail) tail->next = c;
        else head = c;
        tail = c;
        queued += (size_t)n;
    }
out:
    if (failed) {
        /* A reset on one side resets the other: both directions end. */
        shutdown(d.src, SHUT_RDWR);
        shutdown(d.dst, SHUT_RDWR);
    } else {
        shutdown(d.dst, SHUT_WR); /* pass the EOF on, after the queued bytes */
    }
    free(buf);
    while (head) {
        struct chunk *next = head->next;
        free(head);
        head = next;
    }
    conn_release(d.c);
    return NULL;
}

/* ---- sockets ---- */

static int is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return 0;
}

/* "HOST:PORT" or "[V6]:PORT", loopback only. Returns 0 or -1 after a message. */
static int resolve(const char *hostport, int passive, struct addrinfo **res)
{
    char host[256];
    const char *colon = strrchr(hostport, ':');
    size_t hl = colon ? (size_t)(colon - hostport) : 0;
    if (colon == NULL || hl == 0 || hl >= sizeof host || colon[1] == '\0') {
        fprintf(stderr, "linkem: '%s' is not HOST:PORT\n", hostport);
        return -1;
    }
    memcpy(host, hostport, hl);
    host[hl] = '\0';
    if (host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = passive ? AI_PASSIVE : 0};
    int rc = getaddrinfo(host, colon + 1, &hints, res);
    if (rc != 0) {
        fprintf(stderr, "linkem: cannot resolve '%s': %s\n", hostport, gai_strerror(rc));
        return -1;
    }
    for (struct addrinfo *ai = *res; ai; ai = ai->ai_next) {
        if (!is_loopback(ai->ai_addr)) {
            fprintf(stderr, "linkem: %s is not a loopback address: linkem is a test tool for loopback only\n",
                    hostport);
            freeaddrinfo(*res);
            return -1;
        }
    }
    return 0;
}

static void tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int connect_to(const char *hostport)
{
    struct addrinfo *res;
    if (resolve(hostport, 0, &res) != 0) return -1;
    int fd = -1, err = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) fprintf(stderr, "linkem: cannot connect to %s: %s\n", hostport, strerror(err));
    return fd;
}

static int listen_on(const char *hostport)
{
    struct addrinfo *res;
    if (resolve(hostport, 1, &res) != 0) return -1;
    int fd = -1;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
            fprintf(stderr, "linkem: cannot listen on %s: %s\n", hostport, strerror(errno));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

static int start_dir(struct conn *c, int src, int dst, int which, struct bucket *b)
{
    struct dir *d = malloc(sizeof *d);
    if (d == NULL) return -1;
    *d = (struct dir){.c = c, .src = src, .dst = dst, .which = which, .bucket = opt.rate_bps > 0 ? b : NULL};
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, pump, d);
    pthread_attr_destroy(&attr);
    if (rc != 0) free(d);
    return rc == 0 ? 0 : -1;
}

/* ---- main ---- */

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: linkem --listen HOST:PORT --connect HOST:PORT [--delay-ms D] [--rate-mbit R]\n"
            "              [--max-conns N]\n"
            "\n"
            "Relay TCP connections from --listen to --connect, emulating a link: each\n"
            "direction adds a one-way delay of D milliseconds (fractions allowed) and is\n"
            "capped at R Mbit/s (token bucket shared by all connections; 0 = no cap).\n"
            "Loopback addresses only. Port 0 in --listen picks a free port, printed on stdout.\n"
            "\n"
            "Example, a LAN at 0.1 ms and 10 Gbit/s in front of a SCUDA server on port 14833:\n"
            "  linkem --listen 127.0.0.1:14834 --connect 127.0.0.1:14833 --delay-ms 0.1 --rate-mbit 10000\n"
            "  scuda bench --server 127.0.0.1:14834\n");
}

static int parse_double(const char *s, double max, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= 0) || v > max) return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    double delay_ms = 0, rate_mbit = 0, conns = 32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "linkem: %s needs a value (see --help)\n", a);
            return 2;
        }
        const char *v = argv[++i];
        int bad = 0;
        if (!strcmp(a, "--listen")) opt.listen = v;
        else if (!strcmp(a, "--connect")) opt.connect = v;
        else if (!strcmp(a, "--delay-ms")) bad = parse_double(v, 60000, &delay_ms);
        else if (!strcmp(a, "--rate-mbit")) bad = parse_double(v, 1e6, &rate_mbit);
        else if (!strcmp(a, "--max-conns")) bad = parse_double(v, 1024, &conns) || conns < 1;
        else {
            fprintf(stderr, "linkem: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "linkem: bad value '%s' for %s\n", v, a);
            return 2;
        }
    }
    if (!opt.listen || !opt.connect) {
        usage(stderr);
        return 2;
    }
    opt.delay_ns = (uint64_t)(delay_ms * 1e6);
    opt.rate_bps = rate_mbit * 1e6 / 8;
    opt.max_conns = (int)conns;
    if (opt.rate_bps > 0) {
        bucket_init(&up, opt.rate_bps);
        bucket_init(&down, opt.rate_bps);
    }
    signal(SIGPIPE, SIG_IGN);

    int lfd = listen_on(opt.listen);
    if (lfd < 0) return 1;
    /* The target must be valid now, not at the first connection. */
    struct addrinfo *res;
    if (resolve(opt.connect, 0, &res) != 0) return 1;
    freeaddrinfo(res);

    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(lfd, (struct sockaddr *)&ss, &sl);
    int port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                              : ((struct sockaddr_in *)&ss)->sin_port);
    printf("%d\n", port);
    fflush(stdout);
    fprintf(stderr, "linkem: port %d -> %s, %.3f ms each way, %s\n", port, opt.connect, delay_ms,
            rate_mbit > 0 ? "rate capped" : "no rate cap");
    if (rate_mbit > 0) fprintf(stderr, "linkem: %.1f Mbit/s each way\n", rate_mbit);

    for (int id = 1;; id++) {
        int a = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (a < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            fprintf(stderr, "linkem: accept: %s\n", strerror(errno));
            if (errno == EMFILE || errno == ENFILE) {
                sleep(1);
                continue;
            }
            return 1;
        }
        if (atomic_load(&live_conns) >= opt.max_conns) {
            fprintf(stderr, "linkem: connection %d refused: %d open (--max-conns)\n", id, opt.max_conns);
            close(a);
            continue;
        }
        int b = connect_to(opt.connect);
        if (b < 0) {
            close(a);
            continue;
        }
        tune(a);
        tune(b);
        struct conn *c = calloc(1, sizeof *c);
        if (c == NULL) {
            close(a);
            close(b);
            continue;
        }
        c->id = id;
        c->a = a;
        c->b = b;
        atomic_init(&c->refs, 2);
        atomic_fetch_add(&live_conns, 1);
        fprintf(stderr, "linkem: connection %d opened\n", id);
        if (start_dir(c, a, b, 0, &up) != 0) {
            /* Neither direction runs: undo by hand. */
            fprintf(stderr, "linkem: cannot start a thread; connection %d dropped\n", id);
            atomic_store(&c->refs, 1);
            conn_release(c);
            continue;
        }
        if (start_dir(c, b, a, 1, &down) != 0) {
            fprintf(stderr, "linkem: cannot start a thread; connection %d dropped\n", id);
            shutdown(a, SHUT_RDWR);
            shutdown(b, SHUT_RDWR);
            conn_release(c); /* the running direction releases the rest */
        }
    }
}
