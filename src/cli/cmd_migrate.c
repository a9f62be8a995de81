/* cmd_migrate.c - `scuda migrate --session PID --to HOST:PORT`: ask a
 * server on this machine to move one of its sessions to another server
 * (docs/operate.md, "Moving a session"). The request goes through the
 * server's control socket (control.c), which only its owner (or root)
 * can use; the session answers with one line when its client has moved,
 * or says why it did not. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cli.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/config.h"

static const char *const CMD = "scuda migrate";

/* A move copies every byte of device memory and then waits for the client
 * (the server's --resume-within): bounded, but generously. */
#define ANSWER_TIMEOUT_MS 600000

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: scuda migrate --session PID --to HOST:PORT [--control PATH]\n"
            "\n"
            "Move a running session of a server on this machine to another server. The\n"
            "session pauses (its client's calls wait), its state is copied and checked,\n"
            "and its client resumes on the other server; if anything fails before that,\n"
            "the session goes on where it was. Prints the outcome and the pause.\n"
            "\n"
            "  --session PID    the session's process id (the server's log names it)\n"
            "  --to HOST:PORT   the server to move to; it must accept this server's token\n"
            "                   (SCUDA_TOKEN or SCUDA_TOKEN_FILE in the server's environment)\n"
            "  --control PATH   the server's control socket (default: control.sock in\n"
            "                   $XDG_STATE_HOME/scuda or ~/.local/state/scuda)\n"
            "  -h, --help       show this help\n"
            "\n"
            "Exit status: 0 moved, 1 not moved (the reason is printed), 2 usage.\n");
}

/* Connect to the control socket; -1 after saying why. */
static int connect_control(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path) {
        fprintf(stderr, "%s: control socket path too long: %s\n", CMD, path);
        return -1;
    }
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) return fd;
    fprintf(stderr, "%s: cannot reach the server's control socket %s: %s; is `scuda server` running as this "
                    "user (or are you root)? Point --control at the socket its log names.\n",
            CMD, path, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
}

/* The one answer line, within ANSWER_TIMEOUT_MS. */
static int read_answer(int fd, char *line, size_t cap)
{
    size_t n = 0;
    while (n + 1 < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, ANSWER_TIMEOUT_MS) <= 0) return -1;
        ssize_t k = read(fd, line + n, cap - 1 - n);
        if (k <= 0) break;
        n += (size_t)k;
        line[n] = '\0';
        if (strchr(line, '\n')) break;
    }
    line[n] = '\0';
    line[strcspn(line, "\n")] = '\0';
    return n > 0 ? 0 : -1;
}

int cmd_migrate(int argc, char **argv)
{
    const char *session = NULL, *to = NULL, *control = NULL;
    const struct cli_opt opts[] = {
        {"--session", NULL, &session, NULL}, {"--to", NULL, &to, NULL}, {"--control", NULL, &control, NULL}, {NULL}};
    int parsed = cli_parse_options(argc, argv, CMD, opts, usage);
    if (parsed >= 0) return parsed;
    long pid;
    if (!session || !to || cli_parse_long(session, 1, 0x7fffffff, &pid) != 0 ||
        scuda_parse_hostport(to, NULL, 0, NULL) != 0) {
        fprintf(stderr, "%s: give --session PID (a number) and --to HOST:PORT.\n", CMD);
        usage(stderr);
        return CLI_USAGE;
    }
    char path[4200];
    if (!control) {
        char dir[4096];
        if (scuda_state_dir_default(dir, sizeof dir) != 0) {
            fprintf(stderr, "%s: no state directory (set HOME) to find the control socket in; give --control "
                            "PATH.\n", CMD);
            return CLI_USAGE;
        }
        snprintf(path, sizeof path, "%s/control.sock", dir);
        control = path;
    }
    int fd = connect_control(control);
    if (fd < 0) return 1;
    char line[2048];
    dprintf(fd, "migrate %ld %s\n", pid, to);
    int rc = read_answer(fd, line, sizeof line);
    close(fd);
    if (rc != 0) {
        fprintf(stderr, "%s: no answer from the server (session %ld ended, or the server stopped)\n", CMD, pid);
        return 1;
    }
    int moved = strncmp(line, "moved", 5) == 0;
    fprintf(moved ? stdout : stderr, "session %ld: %s\n", pid, line);
    return moved ? 0 : 1;
}
