/* resume.c - a broken connection resumes (protocol.h, "Resume";
 * docs/architecture.md, 3.11).
 *
 * A relay between the client and the server (a small TCP proxy in this
 * test) cuts the client's main connection while the client runs a mix of
 * allocations, one-way memsets, kernel launches and copies of several
 * sizes (one striped, one streamed), and accepts the client's reconnect:
 * - every result is byte-exact and no call ran twice (a kernel adds 1 to a
 *   counter; the counter equals the launches), there is still one session,
 *   and stderr says "resumed session on" once per cut;
 * - a cut during which the relay refuses connections for a while (a relay
 *   restart) resumes too, after the client's retries;
 * - a cut longer than the grace period fails the calls with
 *   CUDA_ERROR_DEVICE_UNAVAILABLE and a message naming the server and
 *   SCUDA_RESUME_WITHIN, and the session ends after --resume-within;
 * - a forged resume (a wrong proof, a wrong pid) gets the one refusal of
 *   every bad resume, after the same delay, and the session goes on.
 * - a relay that cuts every connection, bulk ones included, in the middle
 *   of a striped copy (either way; and a copy to the host whose reply
 *   came through before the cut): the copy goes again over the main
 *   connection and its bytes come out exact; no error is left deferred.
 * Otherwise the relay cuts only the main connection: bulk connections are
 * connections of their own (docs/architecture.md, 3.11 says what happens
 * to them). E2E_TLS=1 runs it all over TLS (ctest e2e/resume_tls). */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/dial.h"
#include "common/hello.h"
#include "common/preface.h"
#include "common/protocol.h"
#include "server/bulk_join.h"

/* ---- the relay ------------------------------------------------------------ */

/* SIGUSR1: cut the main connection (the first one accepted; after a cut,
 * the next one accepted). SIGUSR2: cut it and stop listening (a relay
 * that restarts). SIGHUP: listen again on the same port. SIGALRM: cut
 * every connection once the others (bulk connections) have carried
 * CUT_ALL_AFTER more bytes: in the middle of a striped copy, whatever the
 * timing, since the relay counts the copy's own bytes. SIGWINCH: the
 * same, but once the CUT_ALL_AFTER bytes went through, the relay drops
 * what the session sends on the other connections and cuts everything
 * right after the main connection carried the session's next bytes (a
 * copy to the host: its reply): the client then holds the reply of a copy
 * whose chunks it never got, and sees the main connection's cut only when
 * it reads it again (on a loaded machine the session may well finish its
 * sending before the client reads much). */
static volatile sig_atomic_t cut_asked, down_asked, up_asked;
/* The forwarding threads read these: atomics, not sig_atomic_t. */
static atomic_int cut_all_armed, cut_after_reply_armed, holding_for_reply;
static void on_usr1(int sig) { (void)sig, cut_asked = 1; }
static void on_usr2(int sig) { (void)sig, down_asked = 1; }
static void on_hup(int sig) { (void)sig, up_asked = 1; }
static void on_alrm(int sig) { (void)sig, atomic_store(&cut_all_armed, 1); }
static void on_winch(int sig) { (void)sig, atomic_store(&cut_after_reply_armed, 1); }

#define CUT_ALL_AFTER (8u << 20)
#define MAX_RELAYED 512
/* The relay's connections (its threads share them). Sockets are shut
 * down, never closed, so a number is never reused under a thread. */
static pthread_mutex_t relay_lock = PTHREAD_MUTEX_INITIALIZER;
static int main_fds[2] = {-1, -1}, next_is_main = 1;
static int relayed[MAX_RELAYED], n_relayed;
static uint64_t bytes_since_armed;

struct pipe_pair {
    int from, to, is_main, to_client;
};

static void cut_everything(void)
{
    pthread_mutex_lock(&relay_lock);
    for (int i = 0; i < n_relayed; i++) shutdown(relayed[i], SHUT_RDWR);
    n_relayed = 0;
    main_fds[0] = main_fds[1] = -1;
    next_is_main = 1;
    pthread_mutex_unlock(&relay_lock);
}

/* n bytes went through a connection: the armed cut of everything falls due? */
static void count_relayed(const struct pipe_pair *pp, size_t n)
{
    if (pp->is_main) {
        /* The session's first bytes on the main connection while held: its
         * reply went through; now cut. */
        if (pp->to_client && atomic_exchange(&holding_for_reply, 0)) cut_everything();
        return;
    }
    if (!atomic_load(&cut_all_armed) && !atomic_load(&cut_after_reply_armed)) return;
    pthread_mutex_lock(&relay_lock);
    bytes_since_armed += n;
    int due = bytes_since_armed >= CUT_ALL_AFTER;
    int cut = due && atomic_exchange(&cut_all_armed, 0);
    if (due && atomic_exchange(&cut_after_reply_armed, 0)) atomic_store(&holding_for_reply, 1);
    if (due) bytes_since_armed = 0;
    pthread_mutex_unlock(&relay_lock);
    if (cut) cut_everything();
}

/* While the relay waits for the reply, the other connections' bytes to the
 * client are read (so the session can finish its sending) and dropped. */
static int dropped(const struct pipe_pair *pp)
{
    return !pp->is_main && pp->to_client && atomic_load(&holding_for_reply);
}

/* The main connection ended without a cut of ours: a resume attempt the
 * client gave up (a handshake that timed out on a loaded machine) and
 * dialled again. The next connection is the main one then, or a later
 * SIGUSR1 would cut a connection already gone and the client would see no
 * cut at all. (The relay only shuts sockets down, never closes them, so
 * an fd number here is never another connection's.) */
static void main_ended(const struct pipe_pair *pp)
{
    pthread_mutex_lock(&relay_lock);
    if (main_fds[0] == pp->from || main_fds[0] == pp->to) {
        main_fds[0] = main_fds[1] = -1;
        next_is_main = 1;
    }
    pthread_mutex_unlock(&relay_lock);
}

static void *forward(void *arg)
{
    struct pipe_pair pp = *(struct pipe_pair *)arg;
    free(arg);
    char buf[65536];
    for (;;) {
        ssize_t n = read(pp.from, buf, sizeof buf);
        if (n <= 0) break;
        if (dropped(&pp)) continue;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(pp.to, buf + off, (size_t)(n - off));
            if (w <= 0) goto out;
            off += w;
        }
        count_relayed(&pp, (size_t)n);
    }
out:
    shutdown(pp.from, SHUT_RDWR);
    shutdown(pp.to, SHUT_RDWR);
    if (pp.is_main) main_ended(&pp);
    return NULL;
}

static void start_forward(int from, int to, int is_main, int to_client)
{
    struct pipe_pair *pp = malloc(sizeof *pp);
    *pp = (struct pipe_pair){from, to, is_main, to_client};
    pthread_t t;
    if (pthread_create(&t, NULL, forward, pp) == 0) pthread_detach(t);
}

static int listen_on(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 64) != 0) return -1;
    return fd;
}

static int port_of(int fd)
{
    struct sockaddr_in a;
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    return ntohs(a.sin_port);
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void cut_main(void)
{
    pthread_mutex_lock(&relay_lock);
    for (int i = 0; i < 2; i++)
        if (main_fds[i] >= 0) shutdown(main_fds[i], SHUT_RDWR);
    main_fds[0] = main_fds[1] = -1;
    next_is_main = 1;
    pthread_mutex_unlock(&relay_lock);
}

/* A new pair: the main connection when the last one was cut. */
static int note_relayed(int c, int s)
{
    pthread_mutex_lock(&relay_lock);
    int is_main = next_is_main;
    if (is_main) {
        main_fds[0] = c;
        main_fds[1] = s;
        next_is_main = 0;
    }
    if (n_relayed + 2 <= MAX_RELAYED) {
        relayed[n_relayed++] = c;
        relayed[n_relayed++] = s;
    }
    pthread_mutex_unlock(&relay_lock);
    return is_main;
}

static void relay_main(int lfd, int server_port)
{
    signal(SIGUSR1, on_usr1);
    signal(SIGUSR2, on_usr2);
    signal(SIGHUP, on_hup);
    signal(SIGALRM, on_alrm);
    signal(SIGWINCH, on_winch);
    int port = port_of(lfd);
    for (;;) {
        if (cut_asked) {
            cut_asked = 0;
            cut_main();
        }
        if (down_asked) {
            down_asked = 0;
            cut_main();
            if (lfd >= 0) close(lfd);
            lfd = -1;
        }
        if (up_asked) {
            up_asked = 0;
            if (lfd < 0) lfd = listen_on(port);
        }
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0 || lfd < 0) continue;
        int c = accept(lfd, NULL, NULL);
        if (c < 0) continue;
        int s = connect_to(server_port);
        if (s < 0) {
            close(c);
            continue;
        }
        int is_main = note_relayed(c, s);
        start_forward(c, s, is_main, 0);
        start_forward(s, c, is_main, 1);
    }
}

static pid_t relay_pid;
static char relay_addr[64];

static void relay_start(const struct h_server *srv)
{
    int lfd = listen_on(0);
    CHECK(lfd >= 0, "relay: %s", strerror(errno));
    snprintf(relay_addr, sizeof relay_addr, "127.0.0.1:%d", port_of(lfd));
    relay_pid = fork();
    CHECK(relay_pid >= 0);
    if (relay_pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        relay_main(lfd, srv->port);
        _exit(0);
    }
    close(lfd);
    setenv("SCUDA_SERVER", relay_addr, 1);
}

static void relay_stop(void)
{
    kill(relay_pid, SIGKILL);
    waitpid(relay_pid, NULL, 0);
}

/* ---- a client that is cut in the middle of its work --------------------------- */

#define ROUNDS 6
#define LAUNCHES_PER_ROUND 40
static const size_t sizes[] = {100, (64u << 10) + 3, (1u << 20) + 5, 3u << 20, (16u << 20) + 8};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define STRIPED (NSIZES - 1)

static void *relay_up_later(void *arg)
{
    (void)arg;
    h_sleep_ms(800);
    kill(relay_pid, SIGHUP);
    return NULL;
}

/* Round r cuts at a point that depends on r: before the launches, before
 * a large host-to-device copy, before the streamed device-to-host copy,
 * before the allocations. Round 3 takes the relay down for 0.8 s. */
static void maybe_cut(int round, int phase)
{
    if (round == 0 || round == ROUNDS - 1 || round % 4 != phase) return;
    if (round == 3) {
        pthread_t t;
        kill(relay_pid, SIGUSR2);
        CHECK(pthread_create(&t, NULL, relay_up_later, NULL) == 0);
        pthread_detach(t);
    } else {
        kill(relay_pid, SIGUSR1);
    }
}

static int cuts_made(void)
{
    int n = 0;
    for (int r = 1; r < ROUNDS - 1; r++) n++;
    return n;
}

static void copy_round_trip(CUdeviceptr d, uint8_t *src, uint8_t *back, size_t n, uint32_t seed)
{
    h_pattern(src, n, seed);
    memset(back, 0, n);
    CU(cuMemcpyHtoD_v2(d, src, n));
    CU(cuMemcpyDtoH_v2(back, d, n));
    long at = h_diff(src, back, n);
    CHECK(at < 0, "a %zu-byte copy came back different at byte %ld", n, at);
}

static int cut_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUfunction add = h_func("vec_add");
    CUdeviceptr counter, one, d[NSIZES];
    CU(cuMemAlloc_v2(&counter, sizeof(float)));
    CU(cuMemAlloc_v2(&one, sizeof(float)));
    float zero = 0, unit = 1;
    CU(cuMemcpyHtoD_v2(counter, &zero, sizeof zero));
    CU(cuMemcpyHtoD_v2(one, &unit, sizeof unit));
    uint8_t *src = malloc(sizes[STRIPED]), *back = malloc(sizes[STRIPED]);
    for (size_t i = 0; i < NSIZES; i++) CU(cuMemAlloc_v2(&d[i], sizes[i]));
    /* A striped copy first: the bulk connections open before any cut. */
    copy_round_trip(d[STRIPED], src, back, sizes[STRIPED], 1);
    int launches = 0;
    for (int r = 0; r < ROUNDS; r++) {
        maybe_cut(r, 0);
        int n = 1;
        void *args[] = {&counter, &one, &counter, &n};
        for (int i = 0; i < LAUNCHES_PER_ROUND; i++, launches++)
            CU(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        /* One-way memsets, checked by the copy back. */
        uint32_t fill = 0x5a5a0000u + (uint32_t)r;
        CU(cuMemsetD32_v2(d[1], fill, sizes[1] / 4));
        CU(cuMemcpyDtoH_v2(back, d[1], sizes[1] / 4 * 4));
        for (size_t i = 0; i < sizes[1] / 4; i++) {
            uint32_t v;
            memcpy(&v, back + 4 * i, 4);
            CHECK(v == fill, "round %d: memset word %zu is %#x, not %#x", r, i, v, fill);
        }
        for (size_t i = 0; i < NSIZES; i++) {
            if (i == 2) maybe_cut(r, 1);
            if (i == 3) maybe_cut(r, 2);
            copy_round_trip(d[i], src, back, sizes[i], (uint32_t)(r * 16 + i));
        }
        maybe_cut(r, 3);
        CUdeviceptr extra[3];
        for (int i = 0; i < 3; i++) CU(cuMemAlloc_v2(&extra[i], 4096u << i));
        for (int i = 0; i < 3; i++) CU(cuMemFree_v2(extra[i]));
    }
    CU(cuCtxSynchronize());
    float got = -1;
    CU(cuMemcpyDtoH_v2(&got, counter, sizeof got));
    CHECK(got == (float)launches, "the counter is %.0f after %d launches: a launch was lost or ran twice", got,
          launches);
    free(src);
    free(back);
    return 0;
}

static void cut_mid_run(void)
{
    struct h_server srv;
    h_server_start(&srv, "cut", NULL);
    relay_start(&srv);
    char err_path[512];
    int err_fd = h_temp_file("cut.stderr", err_path, sizeof err_path);
    pid_t pid = h_spawn(cut_client, NULL, 100, -1, err_fd);
    close(err_fd);
    int st = h_wait(pid, 100000);
    char *err = h_read_file(err_path, NULL);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the client failed (status %d); its stderr:\n%s", st,
          err);
    int resumed = 0;
    for (const char *p = err; (p = strstr(p, "resumed session on")) != NULL; p++) resumed++;
    CHECK(resumed == cuts_made(), "%d cuts but %d resumes; stderr:\n%s", cuts_made(), resumed, err);
    CHECK(strstr(err, relay_addr) && strstr(err, "retrying"), "stderr does not name the server and say it retries:\n%s",
          err);
    free(err);
    pid_t sessions[8];
    CHECK(h_server_sessions(&srv, sessions, 8) == 1, "a resume made a new session");
    CHECK(h_server_log_count(&srv, "client resumed the session") == cuts_made(), "the session log lacks resumes");
    relay_stop();
    h_server_stop(&srv);
    printf("ok %d cuts mid-run (one a relay down for 0.8 s): byte-exact, no call lost or run twice, one session\n",
           cuts_made());
}

/* ---- every connection cut in the middle of a striped copy ------------------------ */

int scuda_client_bulk_streams(void); /* bulk connections in use (bulk.c) */

#define STRIPED_CUT_BYTES (64u << 20)

enum cut_all_case { CUT_TO_DEVICE, CUT_TO_HOST, CUT_TO_HOST_AFTER_REPLY, CUT_ALL_CASES };
static const char *const cut_all_names[] = {"to the device", "to the host", "to the host, after its reply"};

/* arg: the enum cut_all_case. */
static int cut_all_client(void *arg)
{
    enum cut_all_case what = (enum cut_all_case)(intptr_t)arg;
    int to_host = what != CUT_TO_DEVICE;
    h_cuda_setup();
    size_t n = STRIPED_CUT_BYTES;
    uint8_t *src = malloc(n), *back = malloc(n);
    CHECK(src && back);
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, n));
    copy_round_trip(d, src, back, n, 21); /* the bulk connections open before the cut */
    CHECK(scuda_client_bulk_streams() >= 2, "the copies were not striped");
    h_pattern(src, n, 22);
    memset(back, 0, n);
    if (to_host) {
        CU(cuMemcpyHtoD_v2(d, src, n));
        kill(relay_pid, what == CUT_TO_HOST_AFTER_REPLY ? SIGWINCH : SIGALRM);
        CU(cuMemcpyDtoH_v2(back, d, n));
    } else {
        kill(relay_pid, SIGALRM);
        CU(cuMemcpyHtoD_v2(d, src, n));
        CU(cuMemcpyDtoH_v2(back, d, n));
    }
    long at = h_diff(src, back, n);
    CHECK(at < 0, "the copy cut %s came back different at byte %ld", cut_all_names[what], at);
    CU(cuCtxSynchronize()); /* no error left deferred by the cut copy */
    copy_round_trip(d, src, back, n, 23); /* later large copies work */
    free(src);
    free(back);
    return 0;
}

static void cut_all_mid_copy(void)
{
    struct h_server srv;
    h_server_start(&srv, "cutall", NULL);
    static const char *const stderr_names[] = {"cutall_h2d.stderr", "cutall_d2h.stderr", "cutall_d2h_reply.stderr"};
    for (int what = 0; what < CUT_ALL_CASES; what++) {
        /* A relay per client: its first connection is the main one. */
        relay_start(&srv);
        char err_path[512];
        int err_fd = h_temp_file(stderr_names[what], err_path, sizeof err_path);
        pid_t pid = h_spawn(cut_all_client, (void *)(intptr_t)what, 60, -1, err_fd);
        close(err_fd);
        int st = h_wait(pid, 70000);
        char *err = h_read_file(err_path, NULL);
        CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the client failed (status %d); its stderr:\n%s", st,
              err);
        CHECK(strstr(err, "resumed session on") && strstr(err, "goes again over the main connection"),
              "%s: the copy was not cut, or not sent again; stderr:\n%s", cut_all_names[what], err);
        free(err);
        relay_stop();
    }
    h_server_stop(&srv);
    printf("ok every connection cut in the middle of a striped copy, either way, and after a copy's reply came: "
           "the copy goes again, byte-exact\n");
}

/* ---- a cut longer than the grace period; forged resumes ------------------------ */

static int to_test[2], to_client[2];

static int patient_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 4096));
    uint8_t host[4096];
    CHECK(write(to_test[1], "r", 1) == 1);
    char c;
    CHECK(read(to_client[0], &c, 1) == 1); /* the forged resumes are done */
    CU(cuMemcpyDtoH_v2(host, d, sizeof host)); /* the session is unharmed */
    CHECK(write(to_test[1], "f", 1) == 1);
    CHECK(read(to_client[0], &c, 1) == 1); /* the relay is down now */
    uint64_t t0 = h_now_ms();
    CU_EXPECT(CUDA_ERROR_DEVICE_UNAVAILABLE, cuMemcpyDtoH_v2(host, d, sizeof host));
    uint64_t took = h_now_ms() - t0;
    CHECK(took >= 1500 && took <= 6000, "the call failed after %llu ms, not after SCUDA_RESUME_WITHIN=2",
          (unsigned long long)took);
    t0 = h_now_ms();
    CU_EXPECT(CUDA_ERROR_DEVICE_UNAVAILABLE, cuMemAlloc_v2(&d, 64));
    CHECK(h_now_ms() - t0 < 500, "a call after the failed resume waited");
    return 0;
}

/* A resume request with `secret` for `pid`, straight to the server.
 * Returns the welcome's status and message, and how long it took. */
static void forge(const struct h_server *srv, uint32_t pid, const uint8_t secret[RESUME_SECRET_LEN], uint32_t *status,
                  char *msg, size_t msglen, uint64_t *took)
{
    char err[256];
    int fd = dial(srv->addr, 5000, PREFACE_JOIN, err, sizeof err);
    CHECK(fd >= 0, "connect: %s", err);
    uint8_t nonce[SCUDA_NONCE_LEN], req[RESUME_REQ_LEN];
    CHECK(hello_read_server(fd, 5000, nonce, err, sizeof err) == 0, "%s", err);
    hello_resume_request(req, pid, secret, nonce, 1);
    uint64_t t0 = h_now_ms();
    CHECK(hello_send_client(fd, HELLO_RESUME, 0, NULL, nonce, req, sizeof req) == 0);
    *status = 0;
    msg[0] = 0;
    int rc = hello_read_welcome(fd, 10000, status, msg, msglen);
    *took = h_now_ms() - t0;
    CHECK(rc == 0, "no welcome for a forged resume: %s", msg);
    io_close(fd);
}

static void forged_resumes(const struct h_server *srv, pid_t session)
{
    uint8_t secret[RESUME_SECRET_LEN];
    memset(secret, 0x42, sizeof secret);
    struct {
        uint32_t pid;
        const char *what;
    } cases[] = {{(uint32_t)session, "a wrong proof"}, {(uint32_t)srv->pid, "the pid of no session"},
                 {(uint32_t)session + 100000u, "a pid that is no process"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t status;
        char msg[256];
        uint64_t took;
        forge(srv, cases[i].pid, secret, &status, msg, sizeof msg, &took);
        CHECK(status == WELCOME_BAD_JOIN && strcmp(msg, RESUME_REFUSAL) == 0,
              "%s: status %u \"%s\"; expected %d \"%s\"", cases[i].what, status, msg, WELCOME_BAD_JOIN, RESUME_REFUSAL);
        CHECK(took >= JOIN_REFUSAL_DELAY_MS - 5, "%s: refused after %llu ms, before the one delay", cases[i].what,
              (unsigned long long)took);
    }
    CHECK(h_wait_log(srv, "resume of session", 1, 10000) >= 1, "the log does not say why the proof was refused");
    printf("ok forged resumes (a wrong proof, wrong pids) get the one refusal, after the one delay\n");
}

static void longer_than_grace(void)
{
    struct h_server srv;
    h_server_start(&srv, "grace", &(struct h_server_opts){.extra_args = {"--resume-within", "2"}});
    relay_start(&srv);
    setenv("SCUDA_RESUME_WITHIN", "2", 1);
    CHECK(pipe(to_test) == 0 && pipe(to_client) == 0);
    char err_path[512];
    int err_fd = h_temp_file("grace.stderr", err_path, sizeof err_path);
    pid_t pid = h_spawn(patient_client, NULL, 40, -1, err_fd);
    close(err_fd);
    char c;
    CHECK(read(to_test[0], &c, 1) == 1, "the client did not start");
    pid_t sessions[8];
    CHECK(h_wait_sessions(&srv, 1, 5000));
    CHECK(h_server_sessions(&srv, sessions, 8) == 1);
    forged_resumes(&srv, sessions[0]);
    CHECK(write(to_client[1], "g", 1) == 1);
    CHECK(read(to_test[0], &c, 1) == 1, "the client's call after the forged resumes failed");
    kill(relay_pid, SIGUSR2); /* cut, and refuse every reconnect */
    h_sleep_ms(100);
    CHECK(write(to_client[1], "g", 1) == 1);
    h_wait_ok(pid, 30000, "a client cut for longer than SCUDA_RESUME_WITHIN");
    unsetenv("SCUDA_RESUME_WITHIN");
    char *err = h_read_file(err_path, NULL);
    CHECK(strstr(err, relay_addr) && strstr(err, "no resume within 2 s") && strstr(err, "SCUDA_RESUME_WITHIN"),
          "stderr does not name the server and the cause:\n%s", err);
    free(err);
    uint64_t t0 = h_now_ms();
    while (h_pid_alive(sessions[0]) && h_now_ms() - t0 < 8000) h_sleep_ms(50);
    CHECK(!h_pid_alive(sessions[0]), "the session still runs 8 s after its client's connection broke (--resume-within 2)");
    CHECK(h_server_log_count(&srv, "did not resume within 2 s") == 1, "the server log does not say why the session ended");
    relay_stop();
    h_server_stop(&srv);
    printf("ok a cut longer than the grace period fails every call, naming the server; the session ends\n");
}

int main(void)
{
    /* Its own log names over TLS: ctest runs both at once. */
    const char *tls = getenv("E2E_TLS");
    h_begin(tls && strcmp(tls, "1") == 0 ? "resume_tls" : "resume", 290);
    cut_mid_run();
    cut_all_mid_copy();
    longer_than_grace();
    printf("PASS resume\n");
    return 0;
}
