/* scuda_run.c - `scuda run --server ADDR -- CMD` runs an unmodified program
 * (run_probe: not linked against libcuda, it dlopens libcuda.so.1 as cudart
 * does) against the server: the shim comes first on its library path, the
 * server address reaches it, and CMD's exit status is scuda run's. Also:
 * a command that cannot be run gives a clear error and exit status 127. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#ifndef RUN_PROBE_BIN
#error "RUN_PROBE_BIN (path of the run_probe program) must be defined"
#endif

/* Runs `scuda run ARGS...` with stdout and stderr to files; returns the
 * exit status and the outputs (malloc'd). */
static int scuda_run(const char *const *args, char **out, char **err)
{
    char out_path[600], err_path[600];
    int out_fd = h_temp_file("scuda_run.out", out_path, sizeof out_path);
    int err_fd = h_temp_file("scuda_run.err", err_path, sizeof err_path);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(out_fd, 1);
        dup2(err_fd, 2);
        const char *argv[16] = {SCUDA_BIN_PATH, "run"};
        int n = 2;
        for (int i = 0; args[i] && n < 15; i++) argv[n++] = args[i];
        argv[n] = NULL;
        unsetenv("SCUDA_SERVER"); /* only --server may name it */
        unsetenv("LD_LIBRARY_PATH");
        execv(SCUDA_BIN_PATH, (char **)argv);
        _exit(126);
    }
    close(out_fd);
    close(err_fd);
    int st = h_wait(pid, 30000);
    size_t len;
    *out = h_read_file(out_path, &len);
    *err = h_read_file(err_path, &len);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void)
{
    h_begin("scuda_run", 50);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    char *out, *err;

    const char *args[] = {"--server", srv.addr, "--", RUN_PROBE_BIN, NULL};
    int st = scuda_run(args, &out, &err);
    CHECK(st == 0, "scuda run exited %d\nstdout: %s\nstderr: %s", st, out, err);
    CHECK(strstr(out, "init 0\n") && strstr(out, "count 0 1\n"), "the probe did not reach the server:\n%s", out);
    CHECK(strstr(out, "copy 0 0x5eed 0x5eed\n"), "memset and copy back through the server:\n%s", out);
    CHECK(h_wait_log(&srv, "session started", 1, 10000) >= 1, "the server saw no session");
    free(out);
    free(err);
    printf("ok scuda run: an unlinked program reaches the server through the shim\n");

    const char *missing[] = {"--server", srv.addr, "--", "/nonexistent/program", NULL};
    st = scuda_run(missing, &out, &err);
    CHECK(st == 127, "a missing command: exit %d", st);
    CHECK(strstr(err, "/nonexistent/program") != NULL, "the error names the command: %s", err);
    free(out);
    free(err);
    printf("ok scuda run: a missing command is named, exit 127\n");

    h_server_stop(&srv);
    printf("PASS scuda_run\n");
    return 0;
}
