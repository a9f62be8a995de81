/* server.c - the parent process: listen, admit, fork, reap, reload.
 *
 * The parent never touches CUDA, and never waits on a client: every
 * handshake runs in its poll loop, on non-blocking sockets (admission.c),
 * and a process is forked only for a client that proved a token. The
 * parent counts its children against the session limit, passes bulk
 * joins to their sessions (children.c), and on SIGHUP reads the token
 * file again, ending the sessions of users whose token is gone. */
#define _GNU_SOURCE
#include "../common/module_store.h"
#include "admission.h"
#include "agent.h"
#include "bound_addr.h"
#include "children.h"
#include "control.h"
#include "drain.h"
#include "gpu_pool.h"
#include "identity.h"
#include "metrics_http.h"
#include "migrate_in.h"
#include "ipc_registry.h"
#include "raw_link.h"
#include "server.h"
#include "session.h"
#include "session_stats.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/protocol.h"
#include "../common/token_file.h"
#include "../common/transport.h"

#define DEFAULT_MAX_SESSIONS 64
#define LOOP_TICK_MS 200

static volatile sig_atomic_t stopping, reload_requested;
/* A drain waits for each move this much longer than --resume-within (the
 * copy itself, then the client's resume). */
#define DRAIN_MOVE_SLACK_S 150

static void on_stop(int sig) { (void)sig; stopping = 1; }
static void on_hup(int sig) { (void)sig; reload_requested = 1; }

/* What a forked child needs of the parent. */
static const struct server_options *the_opt;
static int listen_fd = -1, log_fd = -1;

/* The users now: the options' set at start, a set of our own after a
 * reload (the one the options point at belongs to the caller). */
static const struct token_set *tokens_now;
static struct token_set *tokens_owned;

static void reap_children(void)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        struct child_info c = {.pid = pid};
        if (!children_remove(pid, &c)) snprintf(c.user, sizeof c.user, "?");
        gpu_pool_release(pid);
        session_stats_release(pid);
        /* "session PID ended" / "died from signal" begin each line: tests
         * and operators' scripts look for them. */
        if (c.ended_by_server)
            LOG_INFO("session %d ended: the token of user %s was revoked", (int)pid, c.user);
        else if (WIFSIGNALED(status))
            LOG_WARN("session %d died from signal %d (user %s)", (int)pid, WTERMSIG(status), c.user);
        else
            LOG_INFO("session %d ended (status %d, user %s)", (int)pid, WEXITSTATUS(status), c.user);
    }
}

/* ---- children ---------------------------------------------------------- */

/* In the forked child: become what the client asked for. */
static void child_main(const struct admitted *a, int ctl, int gpu, int stats_slot)
{
    session_stats_enter(stats_slot); /* its own counters page, no other session's */
    signal(SIGCHLD, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_IGN); /* SIGHUP is the parent's: reload, not hang up */
    if (control_fd() >= 0) close(control_fd()); /* the parent's alone */
    session_identity_set(a->user);
    if (hello_wants_cuda_session(a->flags) || a->flags == HELLO_MIGRATE_IN)
        gpu_pool_enter(gpu, a->visible); /* before the driver loads */
    if (a->flags == HELLO_MIGRATE_IN) migrate_in_expect(); /* a server moving a session here */
    else if (!hello_wants_cuda_session(a->flags)) {
        close(ctl);
        LOG_INFO("%s (user %s): raw link %d", a->peer, a->user, (int)getpid());
        raw_link_main(a->fd, a->flags, log_fd);
    }
    LOG_INFO("%s (user %s): session %d", a->peer, a->user, (int)getpid());
    session_main(a->fd, ctl, the_opt, log_fd);
}

/* admission.c's callback: fork the session or raw link of an
 * authenticated client. */
static void start_child(const struct admitted *a)
{
    int pair[2];
    if (children_pair(pair) != 0) {
        LOG_ERROR("%s: socketpair failed: %s; connection closed", a->peer, strerror(errno));
        io_close(a->fd);
        return;
    }
    /* Admission refused the client when every GPU was full; nothing has
     * changed since (one thread), so this finds a place. Raw links use no GPU. */
    int uses_gpu = hello_wants_cuda_session(a->flags) || a->flags == HELLO_MIGRATE_IN;
    int gpu = uses_gpu ? gpu_pool_place() : GPU_POOL_ALL;
    int stats_slot = session_stats_open();
    pid_t pid = fork();
    if (pid == 0) {
        close(listen_fd);
        close(pair[0]);
        children_forget_in_child();
        admission_forget_in_child();
        metrics_http_forget_in_child();
        agent_forget_in_child();
        child_main(a, pair[1], gpu, stats_slot);
    }
    close(pair[1]);
    if (pid < 0) {
        LOG_ERROR("%s: fork failed: %s; connection closed", a->peer, strerror(errno));
        close(pair[0]);
        session_stats_close_slot(stats_slot);
    } else {
        children_add(pid, pair[0], a->user);
        gpu_pool_bind(pid, gpu);
        session_stats_bind(stats_slot, pid, a->user, a->peer, gpu);
        if (gpu >= 0) LOG_INFO("%s: session %d runs on GPU %s (%d of %d sessions there)", a->peer, (int)pid,
                               gpu_pool_name(gpu), gpu_pool_sessions_on(gpu), gpu_pool_max_per_gpu());
        LOG_DEBUG("%s: child %d", a->peer, (int)pid);
    }
    /* The child keeps the connection, and its TLS session: the parent's
     * copy of that goes without a close_notify (tls.h, Fork). */
    io_close(a->fd);
}

/* ---- tokens ---------------------------------------------------------- */

static const char *token_count_word(const struct token_set *t) { return t->count == 1 ? "user" : "users"; }

/* End the sessions of every user of `old` whose token `now` lacks or
 * changed. */
static void end_revoked(const struct token_set *old, const struct token_set *now, const char *path)
{
    char why[PATH_MAX + 64];
    for (int i = 0; old && i < old->count; i++) {
        const struct token_entry *e = token_set_find(now, old->entries[i].name);
        if (e && strcmp(e->token, old->entries[i].token) == 0) continue;
        snprintf(why, sizeof why, "its token was %s %s", e ? "changed in" : "removed from", path);
        children_end_user(old->entries[i].name, why);
    }
}

static void reload_tokens(void)
{
    reload_requested = 0;
    const char *path = the_opt->token_file;
    if (!path) {
        LOG_WARN("SIGHUP: no token file to read again (the token comes from SCUDA_TOKEN or there is none); "
                 "start the server with --token-file FILE to change users while it runs");
        return;
    }
    struct token_set *next = calloc(1, sizeof *next);
    char err[PATH_MAX + 256];
    int shared = 0;
    if (!next || token_set_load(path, next, &shared, err, sizeof err) != 0) {
        LOG_WARN("SIGHUP: %s; keeping the %d user(s) loaded before. Fix the file and send SIGHUP again",
                 next ? err : "out of memory", tokens_now ? tokens_now->count : 0);
        free(next);
        return;
    }
    if (shared) LOG_WARN("token file %s can be read by other users; run: chmod 600 %s", path, path);
    end_revoked(tokens_now, next, path);
    tokens_now = next;
    if (tokens_owned) {
        token_set_free(tokens_owned);
        free(tokens_owned);
    }
    tokens_owned = next;
    LOG_WARN("SIGHUP: token file %s read again: %d %s", path, next->count, token_count_word(next));
}

/* ---- start-up ---------------------------------------------------------- */

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

/* Listen, and refuse to go on when the address bound is reachable from
 * elsewhere and no token, or no TLS, guards it. Returns the fd, or -1. */
static int open_listener(const struct server_options *opt, const char *addr, int *port)
{
    char err[256];
    int lfd = tcp_listen(addr, port, err, sizeof err);
    if (lfd < 0) {
        LOG_ERROR("%s", err);
        return -1;
    }
    if ((!opt->tokens || opt->tokens->count == 0) && !bound_is_loopback(lfd)) {
        LOG_ERROR("refusing to serve on %s without a token: the address it bound is not loopback, so anyone "
                  "who can reach it could use this machine's GPUs. Give users tokens with --token-file FILE "
                  "(lines of `NAME TOKEN`) or SCUDA_TOKEN, or listen on loopback only (--listen 127.0.0.1:%d)",
                  addr, *port);
        close(lfd);
        return -1;
    }
    if (!opt->tls && !opt->insecure && !bound_is_loopback(lfd)) {
        /* cmd_server.c turns TLS on by the name given; the address bound
         * is what counts. */
        LOG_ERROR("refusing to serve plain TCP on %s: the address it bound is not loopback, so calls and data "
                  "would cross the network in clear. Start the server with --tls (or --tls-cert FILE --tls-key "
                  "FILE), or with --insecure to accept that",
                  addr);
        close(lfd);
        return -1;
    }
    /* Warned here, by the address bound, and not by the name: `localhost`
     * can resolve beyond loopback, and then this is plain TCP in the open. */
    if (!opt->tls && opt->insecure && !bound_is_loopback(lfd))
        LOG_WARN("--insecure: plain TCP on %s, whose address is not loopback. Every call, copy and result (the "
                 "programs' data, device memory contents, the bulk join secrets) crosses the network in clear: "
                 "anyone on the path can read it, and can inject calls into sessions once a client has "
                 "authenticated. Drop --insecure to serve TLS",
                 addr);
    fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);
    return lfd;
}

static int start_admission(const struct server_options *opt)
{
    struct admission_config ac = {
        .max_pending = opt->max_handshakes > 0 ? opt->max_handshakes : ADMISSION_DEFAULT_MAX,
        .per_source = opt->max_handshakes_per_source > 0 ? opt->max_handshakes_per_source
                                                          : ADMISSION_DEFAULT_PER_SOURCE,
        .max_sessions = opt->max_sessions > 0 ? opt->max_sessions : DEFAULT_MAX_SESSIONS,
        .tokens = &tokens_now,
        .tls = opt->tls,
        .admit = start_child,
    };
    if (admission_init(&ac) != 0) {
        LOG_ERROR("out of memory for %d pending handshakes; lower --max-handshakes", ac.max_pending);
        return -1;
    }
    LOG_INFO("admission: at most %d handshakes in progress, %d from one address, %d sessions; %d %s",
             ac.max_pending, ac.per_source, ac.max_sessions, tokens_now ? tokens_now->count : 0,
             tokens_now && tokens_now->count ? token_count_word(tokens_now) : "tokens (loopback only)");
    return 0;
}

static void install_signals(void)
{
    struct sigaction sa = {0};
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_hup;
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* ---- the loop ---------------------------------------------------------- */

/* One round: poll the listener, the children's pairs and the pending
 * handshakes, then serve what is ready. */
static void serve_round(struct pollfd **set, int *cap)
{
    int nk = children_poll_count(), na = admission_poll_count(), nc = control_fd() >= 0;
    int nm = metrics_http_poll_count(), ng = agent_poll_count();
    int n = 1 + nk + na + nm + ng + nc;
    if (n > *cap) {
        struct pollfd *p = realloc(*set, (size_t)n * sizeof *p);
        if (!p) {
            LOG_ERROR("out of memory for the poll set; retrying");
            poll(NULL, 0, LOOP_TICK_MS);
            return;
        }
        *set = p;
        *cap = n;
    }
    struct pollfd *p = *set;
    p[0] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
    children_poll_fill(p + 1);
    admission_poll_fill(p + 1 + nk);
    metrics_http_poll_fill(p + 1 + nk + na);
    agent_poll_fill(p + 1 + nk + na + nm);
    if (nc) p[n - 1] = (struct pollfd){.fd = control_fd(), .events = POLLIN};
    int rc = poll(p, (nfds_t)n, metrics_http_timeout_ms(admission_timeout_ms(LOOP_TICK_MS)));
    if (rc < 0 && errno != EINTR) LOG_WARN("poll: %s", strerror(errno));
    reap_children(); /* children that ended free their places first */
    if (rc > 0) children_poll_done(p + 1, nk);
    admission_poll_done(p + 1 + nk, na);
    metrics_http_poll_done(p + 1 + nk + na, nm); /* deadlines too: whatever rc */
    if (rc > 0) agent_poll_done(p + 1 + nk + na + nm, ng);
    if (rc > 0 && (p[0].revents & POLLIN)) admission_accept(listen_fd);
    if (rc > 0 && nc && (p[n - 1].revents & POLLIN)) control_accept();
}

int server_run(const struct server_options *options)
{
    static struct server_options copy;
    copy = *options;
    struct server_options *opt = &copy;
    the_opt = opt;
    tokens_now = opt->tokens;
    scuda_log_set_role("server");
    if (getenv("SCUDA_SOURCE_ADDR")) {
        /* a client setting (transport.c binds every dial to it): the
         * server's own dials, to peers in a move, use the routing table */
        LOG_WARN("SCUDA_SOURCE_ADDR is a client setting; this server's connections to its peers ignore it");
        unsetenv("SCUDA_SOURCE_ADDR");
    }
    prepare_module_cache(opt);
    char err[512];
    if (gpu_pool_init(opt->gpus, opt->max_sessions_per_gpu, err, sizeof err) != 0) {
        LOG_ERROR("%s", err);
        return 1;
    }
    if (opt->gpus)
        LOG_INFO("GPUs served: %s, as devices 0..%d to clients; %s", opt->gpus, gpu_pool_size() - 1,
                 opt->max_sessions_per_gpu ? "each session runs on one of them" : "each session sees them all");
    /* Before any fork: the sessions share this table (IPC between them). */
    if (ipc_registry_create() != 0)
        LOG_WARN("no shared table for IPC (%s): cuIpc* calls will be refused", strerror(errno));
    int port = 0;
    const char *listen_addr = opt->listen ? opt->listen : SCUDA_DEFAULT_ADDR;
    listen_fd = open_listener(opt, listen_addr, &port);
    if (listen_fd < 0 || start_admission(opt) != 0) return 1;
    int metrics_port = 0;
    if (opt->metrics && metrics_http_open(opt->metrics, &tokens_now, &metrics_port, err, sizeof err) != 0) {
        LOG_ERROR("%s", err);
        return 1;
    }
    int agent_port = 0;
    if (opt->agent && agent_open(opt->agent, opt->max_sessions > 0 ? opt->max_sessions : DEFAULT_MAX_SESSIONS,
                                 &agent_port, err, sizeof err) != 0) {
        LOG_ERROR("%s", err);
        return 1;
    }
    fprintf(stderr, "scuda server listening on %s (port %d)\n", listen_addr, port);
    if (opt->print_port_fd >= 0) dprintf(opt->print_port_fd, "%d\n", port);
    /* "metrics on ... port N" begins the line: tests and scripts read the port there. */
    if (opt->metrics) fprintf(stderr, "scuda server metrics on %s (port %d): GET /metrics, /sessions\n", opt->metrics,
                              metrics_port);
    if (opt->agent) fprintf(stderr, "scuda server agent on %s (port %d): HAProxy agent-check\n", opt->agent, agent_port);

    /* Sessions redirect their stdout/stderr for device printf; they log
     * through a duplicate of the server's stderr. */
    log_fd = dup(2);
    if (opt->control_path) control_open(opt->control_path);
    install_signals();
    struct pollfd *set = NULL;
    int cap = 0;
    while (!stopping) {
        if (reload_requested) reload_tokens();
        serve_round(&set, &cap);
    }
    free(set);
    close(listen_fd); /* no new clients while the sessions move */
    if (opt->peers && children_sessions() > 0)
        drain_sessions(opt->peers, opt->resume_within_s + DRAIN_MOVE_SLACK_S, reap_children);
    control_close();
    LOG_INFO("stopping: %d session(s) still running end with their clients", children_sessions());
    return 0;
}
