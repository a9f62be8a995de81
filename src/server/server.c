/* server.c - the parent process: listen, fork, and let the child greet,
 * authenticate and become the session.
 *
 * The parent never touches CUDA, and never waits on a client: the
 * handshake runs in the forked child, so a client that connects and says
 * nothing cannot stall the accept loop for everyone else. The parent
 * counts its children against the session limit, and passes bulk
 * connections from the children that accepted them to their sessions
 * (children.c). */
#define _GNU_SOURCE
#include "module_store.h"
#include "bulk_join.h"
#include "children.h"
#include "raw_link.h"
#include "server.h"
#include "session.h"
#include "transport_phase.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/hello.h"
#include "../common/log.h"
#include "../common/protocol.h"
#include "../common/transport.h"

#define HANDSHAKE_TIMEOUT_MS 5000
#define DEFAULT_MAX_SESSIONS 64

static volatile sig_atomic_t stopping;

static void on_stop(int sig) { (void)sig; stopping = 1; }

static void reap_children(void)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (children_remove(pid) && WIFEXITED(status))
            LOG_DEBUG("bulk join child %d done", (int)pid);
        else if (WIFSIGNALED(status))
            LOG_WARN("session %d died from signal %d", (int)pid, WTERMSIG(status));
        else
            LOG_INFO("session %d ended (status %d)", (int)pid, WEXITSTATUS(status));
    }
}

static void refuse(int fd, uint32_t status, const char *msg) { hello_send_welcome(fd, status, msg); }

static int known_flags(uint16_t f)
{
    return f == 0 || f == HELLO_RAW_ECHO || f == HELLO_RAW_SINK || f == HELLO_BULK_JOIN;
}

/* Returns 0 when the client may have what its *hello_flags ask for: a
 * session (0), a raw link child (HELLO_RAW_*), or to join a session
 * (HELLO_BULK_JOIN; nonce then holds this connection's nonce). */
static int check_client(int fd, const struct server_options *opt, const char *peer, uint16_t *hello_flags,
                        int server_full, uint8_t nonce[SCUDA_NONCE_LEN])
{
    if (hello_send_server(fd, opt->token ? HELLO_SERVER_TOKEN : 0, nonce) != 0) return -1;
    struct client_hello ch;
    if (hello_read_client(fd, HANDSHAKE_TIMEOUT_MS, &ch) != 0) {
        LOG_INFO("%s: no handshake within %d ms", peer, HANDSHAKE_TIMEOUT_MS);
        return -1;
    }
    *hello_flags = ch.flags;
    if (ch.magic != SCUDA_MAGIC) {
        LOG_INFO("%s: not a SCUDA client", peer);
        return -1;
    }
    if (ch.version != SCUDA_PROTOCOL_VERSION) {
        char msg[128];
        snprintf(msg, sizeof msg, "client speaks protocol v%u, server v%u", ch.version, (unsigned)SCUDA_PROTOCOL_VERSION);
        LOG_WARN("%s refused: %s", peer, msg);
        refuse(fd, WELCOME_BAD_VERSION, msg);
        return -1;
    }
    if (!hello_proof_ok(&ch, opt->token, nonce)) {
        LOG_WARN("%s refused: bad token", peer);
        refuse(fd, WELCOME_BAD_TOKEN, "bad token");
        return -1;
    }
    if (!known_flags(ch.flags)) {
        char msg[128];
        snprintf(msg, sizeof msg, "unknown hello flags 0x%x", ch.flags);
        LOG_WARN("%s refused: %s", peer, msg);
        refuse(fd, WELCOME_BAD_VERSION, msg);
        return -1;
    }
    if (ch.flags == HELLO_BULK_JOIN) return 0; /* a join makes no session */
    if (server_full) {
        char msg[128];
        snprintf(msg, sizeof msg, "server full: %d sessions",
                 opt->max_sessions > 0 ? opt->max_sessions : DEFAULT_MAX_SESSIONS);
        LOG_WARN("%s refused: %s", peer, msg);
        refuse(fd, WELCOME_SERVER_FULL, msg);
        return -1;
    }
    LOG_INFO("%s: client build %u accepted", peer, ch.build);
    return 0;
}

/* In the forked child: the handshake, then what the client asked for. */
static void child_main(int fd, int ctl, const struct server_options *opt, int log_fd, const char *peer, int full)
{
    signal(SIGCHLD, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    uint16_t hello_flags = 0;
    uint8_t nonce[SCUDA_NONCE_LEN];
    struct transport_phase tp;
    char why[256];
    transport_phase_init(&tp, fd, opt->tls);
    if (transport_phase_run(&tp, HANDSHAKE_TIMEOUT_MS, why, sizeof why) != 0) {
        if (tp.refusal[0]) LOG_WARN("%s %s", peer, why);
        else LOG_INFO("%s: %s", peer, why);
        _exit(0);
    }
    if (check_client(fd, opt, peer, &hello_flags, full, nonce) != 0) _exit(0);
    if (hello_flags == HELLO_BULK_JOIN && tp.client_tls && tp.kind != PREFACE_JOIN) {
        LOG_WARN("%s refused: a bulk join whose preface did not say so", peer);
        refuse(fd, WELCOME_BAD_JOIN, "a bulk join must say so in its preface");
        _exit(0);
    }
    if (hello_flags == HELLO_BULK_JOIN) bulk_join_child(fd, ctl, nonce, peer);
    if (hello_flags != 0) {
        close(ctl);
        LOG_INFO("%s: raw link %d", peer, (int)getpid());
        raw_link_main(fd, hello_flags, log_fd);
    }
    LOG_INFO("%s: session %d", peer, (int)getpid());
    session_main(fd, ctl, opt, log_fd);
}

static void serve_one(int lfd, int fd, const struct server_options *opt, int log_fd, const char *peer)
{
    int max = opt->max_sessions > 0 ? opt->max_sessions : DEFAULT_MAX_SESSIONS;
    int full = children_sessions() >= max;
    int pair[2];
    if (children_pair(pair) != 0) {
        LOG_ERROR("%s: socketpair failed: %s; connection closed", peer, strerror(errno));
        close(fd);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(lfd);
        close(pair[0]);
        children_forget_in_child();
        child_main(fd, pair[1], opt, log_fd, peer, full);
    }
    close(pair[1]);
    if (pid < 0) {
        LOG_ERROR("%s: fork failed: %s; connection closed", peer, strerror(errno));
        close(pair[0]);
    } else {
        children_add(pid, pair[0]);
        LOG_DEBUG("%s: child %d", peer, (int)pid);
    }
    close(fd);
}

static void peer_name(int fd, char *out, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char host[64] = "?";
    int port = 0;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
            port = ntohs(a->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
            port = ntohs(a->sin6_port);
        }
    }
    snprintf(out, len, "%s:%d", host, port);
}

/* The module cache directory, checked once here rather than by every
 * session: one warning, and sessions that do not try again. */
static void prepare_module_cache(struct server_options *opt)
{
    char err[PATH_MAX + 128];
    if (!opt->module_cache_dir || opt->module_cache_size == 0) {
        opt->module_cache_dir = NULL;
        LOG_INFO("module cache: off; every process sends its modules in full");
        return;
    }
    if (module_store_prepare(opt->module_cache_dir, err, sizeof err) != 0) {
        LOG_WARN("module cache: %s. Going on without it: every process sends its modules in full. "
                 "Fix the directory, or choose another with --module-cache DIR (--module-cache off "
                 "silences this)", err);
        opt->module_cache_dir = NULL;
        return;
    }
    LOG_INFO("module cache: %s, at most %llu bytes", opt->module_cache_dir,
             (unsigned long long)opt->module_cache_size);
}

int server_run(const struct server_options *options)
{
    struct server_options copy = *options, *opt = &copy;
    scuda_log_set_role("server");
    prepare_module_cache(opt);
    char err[256];
    int port = 0;
    const char *listen_addr = opt->listen ? opt->listen : SCUDA_DEFAULT_ADDR;
    int lfd = tcp_listen(listen_addr, &port, err, sizeof err);
    if (lfd < 0) {
        LOG_ERROR("%s", err);
        return 1;
    }
    fprintf(stderr, "scuda server listening on %s (port %d)\n", listen_addr, port);
    if (opt->print_port_fd >= 0) dprintf(opt->print_port_fd, "%d\n", port);

    /* Sessions redirect their stdout/stderr for device printf; they log
     * through a duplicate of the server's stderr. */
    int log_fd = dup(2);
    struct sigaction sa = {0};
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    while (!stopping) {
        reap_children();
        nfds_t n;
        struct pollfd *p = children_pollset(lfd, &n);
        if (poll(p, n, 200) <= 0) continue;
        /* Joins first: a join child is not a session, whatever connects next. */
        children_service();
        if (!(p[0].revents & POLLIN)) continue;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) continue;
        reap_children(); /* children that ended during the poll free their places now */
        /* The session process must keep the socket across exec-free fork;
         * CLOEXEC only matters for children that exec, which we never do. */
        tcp_tune(fd, 10);
        char peer[96];
        peer_name(fd, peer, sizeof peer);
        serve_one(lfd, fd, opt, log_fd, peer);
    }
    LOG_INFO("stopping: %d session(s) still running end with their clients", children_sessions());
    close(lfd);
    return 0;
}
