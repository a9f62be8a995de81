/* printf.c - device printf reaches the client's stdout, in order, at the
 * next synchronization.
 *
 * The client runs with stdout on a pipe (fully buffered stdio, as when a
 * program's output is piped). It prints a marker, launches say_hello,
 * synchronizes, prints another marker, and so on. The lines must arrive in
 * exactly program order: device text after the marker printed before the
 * launch and before the marker printed after the synchronize. To show the
 * text is there at the synchronize (not only at exit), the client flushes
 * after its first synchronize and waits until the test has read all of the
 * first kernel's lines from the pipe. Device printf must not leak to the
 * server's own stdout/stderr either. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static int ack_pipe[2];

static void hello(int n, CUstream st)
{
    void *args[] = {&n};
    CU(cuLaunchKernel(h_func("say_hello"), 1, 1, 1, 32, 1, 1, 0, st, args, NULL));
}

static int client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    printf("BEGIN\n");
    hello(3, NULL);
    CU(cuCtxSynchronize());
    printf("AFTER-SYNC-1\n");
    fflush(stdout);
    /* wait until the test has seen everything so far */
    char c;
    CHECK(read(ack_pipe[0], &c, 1) == 1, "no ack from the test");
    hello(2, st);
    CU(cuStreamSynchronize(st));
    printf("AFTER-SYNC-2\n");
    hello(1, NULL);
    hello(2, NULL);
    CU(cuCtxSynchronize());
    printf("END\n");
    return 0;
}

static const char *const want1 = "BEGIN\n"
                                  "hello from thread 0\nhello from thread 1\nhello from thread 2\n"
                                  "AFTER-SYNC-1\n";
static const char *const want2 = "hello from thread 0\nhello from thread 1\n"
                                 "AFTER-SYNC-2\n"
                                 "hello from thread 0\n"
                                 "hello from thread 0\nhello from thread 1\n"
                                 "END\n";

int main(void)
{
    h_begin("printf", 25);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    int out[2];
    CHECK(pipe(out) == 0 && pipe(ack_pipe) == 0);
    pid_t pid = h_spawn(client, NULL, 20, out[1], -1);
    close(out[1]);
    close(ack_pipe[0]);

    char buf[4096];
    size_t n = 0;
    uint64_t deadline = h_now_ms() + 15000;
    int acked = 0;
    for (;;) {
        if (!acked && n >= strlen(want1)) {
            buf[n] = '\0';
            CHECK(strncmp(buf, want1, strlen(want1)) == 0, "first part differs:\n--- got ---\n%s--- want ---\n%s", buf,
                  want1);
            CHECK(write(ack_pipe[1], "k", 1) == 1);
            acked = 1;
        }
        int left = (int)(deadline - h_now_ms());
        CHECK(left > 0, "timed out; got so far:\n%.*s", (int)n, buf);
        struct pollfd p = {.fd = out[0], .events = POLLIN};
        if (poll(&p, 1, left) <= 0) continue;
        ssize_t r = read(out[0], buf + n, sizeof buf - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    CHECK(acked, "the client's first output never came complete:\n%s", buf);
    h_wait_ok(pid, 10000, "printf client");
    CHECK(strcmp(buf + strlen(want1), want2) == 0, "second part differs:\n--- got ---\n%s--- want ---\n%s",
          buf + strlen(want1), want2);
    close(out[0]);
    close(ack_pipe[1]);
    CHECK(h_server_log_count(&srv, "hello from thread") == 0, "device printf leaked into the server's log");
    h_server_stop(&srv);
    printf("PASS printf\n");
    return 0;
}
