/* ipc_broker.c - see ipc_broker.h. */
#define _GNU_SOURCE
#include "ipc_broker.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "../common/log.h"
#include "fd_pass.h"

struct request {
    uint32_t slot;
    uint8_t nonce[IPC_NONCE_BYTES];
};

enum { BROKER_OK = 0, BROKER_REFUSED = 1 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int offered[IPC_EXPORTS_MAX]; /* fd + 1, 0 when none */
static uint8_t offered_nonce[IPC_EXPORTS_MAX][IPC_NONCE_BYTES];
static int listen_fd = -1;

/* "\0scuda-ipc.<server pid>.<session pid>": abstract, so nothing is left
 * on disk, and per server, so two servers on one host never meet. */
static socklen_t broker_address(pid_t pid, struct sockaddr_un *a)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "scuda-ipc.%d.%d", (int)getppid(), (int)pid);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static void set_timeouts(int fd)
{
    struct timeval tv = {.tv_sec = IPC_BROKER_WAIT_MS / 1000, .tv_usec = (IPC_BROKER_WAIT_MS % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* May the process behind `c` have export `slot`? Only a session of the
 * export's user, running as this server. */
static int offered_fd_for(int c, const struct request *q)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    char user[SCUDA_IDENTITY_MAX];
    struct ipc_export e;
    if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != geteuid()) return -1;
    if (q->slot >= IPC_EXPORTS_MAX || !ipc_registry_find(q->slot, q->nonce, &e) || e.pid != getpid()) return -1;
    if (!ipc_registry_user_of(cred.pid, user) || strcmp(user, e.user) != 0) {
        LOG_WARN("IPC: session %d asked for an export of user %s; refused", (int)cred.pid, e.user);
        return -1;
    }
    pthread_mutex_lock(&lock);
    int fd = offered[q->slot] - 1;
    pthread_mutex_unlock(&lock);
    return fd;
}

static void serve_one(int c)
{
    set_timeouts(c);
    struct request q;
    int fd = -1;
    ssize_t n = recv(c, &q, sizeof q, 0);
    if (n == (ssize_t)sizeof q) fd = offered_fd_for(c, &q);
    uint32_t status = fd >= 0 ? BROKER_OK : BROKER_REFUSED;
    if (fd >= 0) fd_send(c, &status, sizeof status, fd, 0);
    else send(c, &status, sizeof status, MSG_NOSIGNAL);
}

static void *broker_main(void *arg)
{
    (void)arg;
    for (;;) {
        int c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            LOG_WARN("IPC: the broker stopped accepting (%s); exports of this session cannot be opened",
                     strerror(errno));
            return NULL;
        }
        serve_one(c);
        close(c);
    }
}

static int broker_listen(void)
{
    if (listen_fd >= 0) return 0;
    struct sockaddr_un a;
    socklen_t alen = broker_address(getpid(), &a);
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0 || bind(s, (struct sockaddr *)&a, alen) != 0 || listen(s, 16) != 0) {
        LOG_WARN("IPC: cannot listen for importers (%s)", strerror(errno));
        if (s >= 0) close(s);
        return -1;
    }
    listen_fd = s;
    pthread_t t;
    if (pthread_create(&t, NULL, broker_main, NULL) != 0) {
        LOG_WARN("IPC: cannot start the broker thread");
        close(s);
        listen_fd = -1;
        return -1;
    }
    pthread_detach(t);
    return 0;
}

int ipc_broker_offer(uint32_t slot, const uint8_t nonce[IPC_NONCE_BYTES], int fd)
{
    if (slot >= IPC_EXPORTS_MAX) return -1;
    pthread_mutex_lock(&lock);
    int rc = broker_listen();
    if (rc == 0) {
        if (offered[slot]) close(offered[slot] - 1);
        offered[slot] = fd + 1;
        memcpy(offered_nonce[slot], nonce, IPC_NONCE_BYTES);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

int ipc_broker_fetch(pid_t pid, uint32_t slot, const uint8_t nonce[IPC_NONCE_BYTES], const char **why)
{
    struct sockaddr_un a;
    socklen_t alen = broker_address(pid, &a);
    struct request q = {.slot = slot};
    memcpy(q.nonce, nonce, IPC_NONCE_BYTES);
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0) {
        *why = "no socket";
        return -1;
    }
    set_timeouts(s);
    int fd = -1;
    uint32_t status = BROKER_REFUSED;
    if (connect(s, (struct sockaddr *)&a, alen) != 0) *why = "the exporting session does not answer";
    else if (send(s, &q, sizeof q, MSG_NOSIGNAL) != (ssize_t)sizeof q) *why = "the exporting session hung up";
    else if (fd_recv(s, &status, sizeof status, &fd, 0) != (long)sizeof status) *why = "no answer in time";
    else if (status != BROKER_OK || fd < 0) *why = "the exporting session refused";
    close(s);
    if (status != BROKER_OK && fd >= 0) close(fd), fd = -1;
    return status == BROKER_OK ? fd : -1;
}
