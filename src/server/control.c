/* control.c - see control.h. */
#define _GNU_SOURCE
#include "control.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "bulk_join.h"
#include "children.h"
#include "fd_pass.h"
#include "../common/log.h"

/* The asker is local and the owner: a request line comes at once. */
#define REQUEST_TIMEOUT_MS 2000

static int listen_fd = -1;
static char sock_path[sizeof ((struct sockaddr_un *)0)->sun_path];

int control_fd(void) { return listen_fd; }

/* 1 when a server listens at addr already. */
static int someone_listens(const struct sockaddr_un *addr)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    int live = connect(fd, (const struct sockaddr *)addr, sizeof *addr) == 0;
    close(fd);
    return live;
}

int control_open(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path) {
        LOG_WARN("control socket %s: the path is too long for a unix socket; no `scuda migrate` for this server "
                 "(choose a shorter --control PATH)", path);
        return -1;
    }
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
    if (someone_listens(&addr)) {
        LOG_WARN("control socket %s: another server listens there; no `scuda migrate` for this server (give "
                 "each server its own --control PATH)", path);
        return -1;
    }
    unlink(path); /* a stale one, from a server that did not end cleanly */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    /* Created 0600 (the umask) and set so again: only the owner connects. */
    mode_t old = umask(077);
    int rc = fd < 0 ? -1 : bind(fd, (const struct sockaddr *)&addr, sizeof addr);
    umask(old);
    if (rc == 0) rc = chmod(path, 0600);
    if (rc == 0) rc = listen(fd, 8);
    if (rc != 0) {
        LOG_WARN("control socket %s: %s; no `scuda migrate` for this server (fix the directory, or choose "
                 "another with --control PATH)", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    listen_fd = fd;
    snprintf(sock_path, sizeof sock_path, "%s", path);
    LOG_INFO("control socket %s (mode 0600): `scuda migrate --control %s` moves sessions", path, path);
    return 0;
}

void control_close(void)
{
    if (listen_fd < 0) return;
    close(listen_fd);
    unlink(sock_path);
    listen_fd = -1;
}

int control_send_move(pid_t pid, const char *to, int reply_fd)
{
    int ctl = children_ctl_any(pid);
    if (ctl < 0) return -1;
    struct migrate_note note = {.magic = MIGRATE_NOTE_MAGIC};
    size_t n = strlen(to);
    if (n >= sizeof note.to) return -1; /* no HOST:PORT is that long */
    memcpy(note.to, to, n + 1);
    return fd_send(ctl, &note, sizeof note, reply_fd, MSG_DONTWAIT);
}

/* One line, at most CONTROL_LINE_MAX bytes, within REQUEST_TIMEOUT_MS. */
static int read_line(int fd, char *line, size_t cap)
{
    size_t n = 0;
    while (n + 1 < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, REQUEST_TIMEOUT_MS) <= 0) return -1;
        ssize_t k = read(fd, line + n, 1);
        if (k <= 0) return -1;
        if (line[n] == '\n') break;
        n++;
    }
    line[n] = '\0';
    return 0;
}

/* Whoever connected must be the server's owner, or root. */
static int owner_asks(int fd)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && (cred.uid == 0 || cred.uid == geteuid());
}

static void handle(int fd)
{
    char line[CONTROL_LINE_MAX], to[CONTROL_LINE_MAX];
    long pid = 0;
    if (!owner_asks(fd)) {
        LOG_WARN("control socket: a process of another user connected; refused");
        dprintf(fd, "refused: only the server's owner (or root) may use its control socket\n");
        return;
    }
    if (read_line(fd, line, sizeof line) != 0 || sscanf(line, "migrate %ld %318s", &pid, to) != 2 || pid <= 0) {
        dprintf(fd, "refused: the request is not \"migrate PID HOST:PORT\" (use `scuda migrate`)\n");
        return;
    }
    if (strlen(to) >= MIGRATE_TO_MAX) {
        dprintf(fd, "refused: the address to move to is longer than %d bytes\n", MIGRATE_TO_MAX - 1);
        return;
    }
    if (control_send_move((pid_t)pid, to, fd) != 0) {
        dprintf(fd, "refused: no session %ld on this server (its log names each session's pid)\n", pid);
        return;
    }
    LOG_INFO("control socket: session %ld is asked to move to %s", pid, to);
}

void control_accept(void)
{
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) return;
    handle(fd);
    close(fd); /* the session holds its own copy when the request went on */
}
