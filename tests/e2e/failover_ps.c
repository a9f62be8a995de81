/* failover_ps.c - `scuda ps` shows each session's last snapshot on a
 * standby (src/cli/cmd_ps.c, src/server/snapshot.c; docs/operate.md,
 * "Failover to a standby").
 *
 * A primary with --metrics runs two sessions: one whose client names a
 * standby (SCUDA_STANDBY, a snapshot at its synchronize) and holds 3 MiB,
 * one without a standby holding 1 MiB. `scuda ps --server` lists the first
 * with a snapshot a few seconds old of about its 3 MiB, the second with
 * "-" in both snapshot columns; /metrics has the snapshot's size. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define MIB (1u << 20)

static int go_pipe[2] = {-1, -1};    /* the test to the clients: ps is done */
static int ready_pipe[2] = {-1, -1}; /* a client to the test: it allocated and synchronized */

/* Allocate `arg` MiB, synchronize (with a standby: the snapshot), wait
 * until the test has looked. */
static int client(void *arg)
{
    size_t mib = (size_t)(uintptr_t)arg;
    h_cuda_setup();
    CUdeviceptr p;
    CU(cuMemAlloc_v2(&p, mib * MIB));
    CU(cuMemsetD8_v2(p, 0x5a, mib * MIB));
    CU(cuCtxSynchronize());
    CHECK(write(ready_pipe[1], "r", 1) == 1);
    char ch;
    CHECK(read(go_pipe[0], &ch, 1) == 1);
    CU(cuMemFree_v2(p));
    return 0;
}

static pid_t start_client(size_t mib, const char *standby)
{
    if (standby) setenv("SCUDA_STANDBY", standby, 1);
    else unsetenv("SCUDA_STANDBY");
    pid_t pid = h_spawn(client, (void *)(uintptr_t)mib, 60, -1, -1);
    char ch;
    CHECK(read(ready_pipe[0], &ch, 1) == 1, "the %zu MiB client did not get to its synchronize", mib);
    return pid;
}

static int metrics_port_of(const struct h_server *srv)
{
    int port = 0;
    for (uint64_t end = h_now_ms() + 10000; !port && h_now_ms() < end; h_sleep_ms(20)) {
        char *log = h_server_log(srv);
        const char *at = strstr(log, "metrics on 127.0.0.1:0 (port ");
        if (at) port = atoi(at + strlen("metrics on 127.0.0.1:0 (port "));
        free(log);
    }
    CHECK(port > 0, "the server did not say its metrics port");
    return port;
}

/* `scuda ps --server 127.0.0.1:port`: its output (malloc'd). */
static char *run_ps(int port)
{
    char path[512], cmd[1400];
    int fd = h_temp_file("failover-ps", path, sizeof path);
    close(fd);
    snprintf(cmd, sizeof cmd, "env -u SCUDA_TOKEN -u SCUDA_TOKEN_FILE -u SCUDA_ADMIN_TOKEN %s ps --server 127.0.0.1:%d "
                              "> %s 2>&1", SCUDA_BIN, port, path);
    int st = system(cmd);
    char *out = h_read_file(path, NULL);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "scuda ps failed (%d):\n%s", st, out ? out : "");
    return out;
}

/* The row whose DEVICE-MEM is `mem`: its snapshot columns. */
static void snapshot_cells(const char *out, const char *mem, char *when, char *size)
{
    char line[512];
    for (const char *l = strchr(out, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
        snprintf(line, sizeof line, "%.*s", (int)strcspn(l + 1, "\n"), l + 1);
        char f[10][128];
        if (sscanf(line, "%127s %127s %127s %127s %127s %127s %127s %127s %127s %127s", f[0], f[1], f[2], f[3], f[4],
                   f[5], f[6], f[7], f[8], f[9]) == 10 && strcmp(f[4], mem) == 0) {
            strcpy(when, f[8]);
            strcpy(size, f[9]);
            return;
        }
    }
    CHECK(0, "scuda ps has no session holding %s:\n%s", mem, out);
}

int main(void)
{
    h_begin("failover_ps", 90);
    struct h_server S, P;
    h_server_start(&S, "failover-ps-standby", NULL);
    struct h_server_opts popt = {.extra_args = {"--metrics", "127.0.0.1:0", NULL}};
    h_server_start(&P, "failover-ps-primary", &popt);
    int port = metrics_port_of(&P);
    setenv("SCUDA_SNAPSHOT_EVERY", "0", 1);
    CHECK(pipe(go_pipe) == 0 && pipe(ready_pipe) == 0);
    pid_t with = start_client(3, S.addr), without = start_client(1, NULL);
    CHECK(h_wait_log(&P, "snapshot parked on", 1, 10000) >= 1, "the client with a standby took no snapshot");

    char *out = run_ps(port);
    printf("%s", out);
    CHECK(strstr(out, "SNAP-AGE") && strstr(out, "SNAP-SIZE"), "scuda ps has no snapshot columns:\n%s", out);
    char when[128], size[128];
    snapshot_cells(out, "3.0M", when, size);
    double mib = atof(size);
    CHECK(strchr(when, 's') && atoi(when) < 60, "the snapshot's age is %s:\n%s", when, out);
    CHECK(size[strlen(size) - 1] == 'M' && mib >= 3.0 && mib < 4.0, "the snapshot of 3 MiB is %s:\n%s", size, out);
    snapshot_cells(out, "1.0M", when, size);
    CHECK(strcmp(when, "-") == 0 && strcmp(size, "-") == 0,
          "a session without a standby shows a snapshot: %s %s:\n%s", when, size, out);
    free(out);

    CHECK(write(go_pipe[1], "gg", 2) == 2);
    h_wait_ok(with, 20000, "the client with a standby");
    h_wait_ok(without, 20000, "the client without a standby");
    h_server_stop(&P);
    h_server_stop(&S);
    printf("PASS failover_ps\n");
    return 0;
}
