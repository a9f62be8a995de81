/* output.c - see output.h. */
#define _GNU_SOURCE
#include "output.h"
#include "graph_host.h"
#include "resume.h"
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/protocol.h"
#include "../common/transport.h"

/* Text a kernel printed that the client has not seen yet, per stream.
 * Bounded: a runaway printf loop cannot exhaust the session's memory. */
#define CAPTURE_LIMIT (16u << 20)

struct capture {
    int read_fd;
    char *buf;
    size_t len;
    size_t dropped;
};

static struct capture captures[2] = {{.read_fd = -1}, {.read_fd = -1}}; /* [0] stdout, [1] stderr */
static pthread_mutex_t capture_lock = PTHREAD_MUTEX_INITIALIZER;
static int capture_on;

/* Read what is available; called with capture_lock held. */
static void drain_locked(struct capture *c)
{
    char tmp[65536];
    for (;;) {
        if (c->read_fd < 0) return; /* not captured */
        ssize_t n = read(c->read_fd, tmp, sizeof tmp);
        if (n <= 0) return;
        size_t keep = (size_t)n;
        if (c->len + keep > CAPTURE_LIMIT) {
            c->dropped += c->len + keep - CAPTURE_LIMIT;
            keep = CAPTURE_LIMIT - c->len;
        }
        if (keep) {
            char *nb = realloc(c->buf, c->len + keep);
            if (!nb) return;
            memcpy(nb + c->len, tmp, keep);
            c->buf = nb;
            c->len += keep;
        }
    }
}

/* Keeps the pipes from filling up (a full pipe would block the driver's
 * printf flush inside a synchronize, and so the whole session). */
static void *capture_thread(void *arg)
{
    (void)arg;
    struct pollfd p[2] = {{.fd = captures[0].read_fd, .events = POLLIN},
                          {.fd = captures[1].read_fd, .events = POLLIN}};
    for (;;) {
        if (poll(p, 2, -1) < 0 && errno != EINTR) return NULL;
        pthread_mutex_lock(&capture_lock);
        drain_locked(&captures[0]);
        drain_locked(&captures[1]);
        pthread_mutex_unlock(&capture_lock);
    }
}

/* SCUDA_SESSION_KEEPS_STDERR (sanitizer builds, CMakeLists.txt): only
 * stdout is captured, so a sanitizer's report reaches the server's log. */
#ifdef SCUDA_SESSION_KEEPS_STDERR
#define CAPTURED_FDS 1
#else
#define CAPTURED_FDS 2
#endif

int output_capture_start(void)
{
    for (int i = 0; i < CAPTURED_FDS; i++) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) return -1;
        fcntl(fds[0], F_SETFL, O_NONBLOCK);
        if (dup2(fds[1], i + 1) < 0) return -1;
        close(fds[1]);
        captures[i].read_fd = fds[0];
    }
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    pthread_t t;
    if (pthread_create(&t, NULL, capture_thread, NULL) != 0) return -1;
    pthread_detach(t);
    capture_on = 1;
    return 0;
}

static void send_output(struct session *s, int which, const char *data, size_t len)
{
    struct frame_header h = {.length = (uint32_t)len + 1, .flags = FRAME_OUTPUT};
    uint8_t hdr[FRAME_HEADER_LEN];
    uint8_t tag = (uint8_t)which;
    frame_header_encode(&h, hdr);
    struct iovec iov[3] = {{hdr, sizeof hdr}, {&tag, 1}, {(void *)data, len}};
    resume_write_frame(s, iov, 3, NULL, 0); /* kept until the client has it (resume.h) */
}

void output_forward(struct session *s)
{
    graph_host_forward(s); /* host work of graph replays goes out with the output */
    if (!capture_on) return;
    fflush(stdout);
    fflush(stderr);
    struct capture taken[2];
    pthread_mutex_lock(&capture_lock);
    for (int i = 0; i < 2; i++) {
        drain_locked(&captures[i]);
        taken[i] = captures[i];
        captures[i].buf = NULL;
        captures[i].len = 0;
        captures[i].dropped = 0;
    }
    pthread_mutex_unlock(&capture_lock);
    for (int i = 0; i < 2; i++) {
        if (taken[i].len) send_output(s, i + 1, taken[i].buf, taken[i].len);
        if (taken[i].dropped)
            LOG_WARN("dropped %zu bytes of device output (over %u MiB between synchronizations)",
                     taken[i].dropped, CAPTURE_LIMIT >> 20);
        free(taken[i].buf);
    }
}
