/* scuda_bench.c - `scuda bench` runs every part of its measurement against
 * a server, plain and over TLS, and reports no failure: the raw link, the
 * calls, module loads (also in a process forked before the shim loads,
 * which must not inherit the raw links' TLS state) and the copies. Sizes
 * are kept small with --max-copy: this checks that the bench works, it
 * measures nothing. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* Runs `scuda bench --quick --max-copy 1M --server ADDR --json FILE`;
 * returns its exit status, its stderr and the JSON (malloc'd). */
static int run_bench(const char *addr, char **err, char **json)
{
    char err_path[600], json_path[600];
    int err_fd = h_temp_file("scuda_bench.err", err_path, sizeof err_path);
    int json_fd = h_temp_file("scuda_bench.json", json_path, sizeof json_path);
    close(json_fd);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(err_fd, 1);
        dup2(err_fd, 2);
        unsetenv("LD_LIBRARY_PATH");
        execl(SCUDA_BIN_PATH, SCUDA_BIN_PATH, "bench", "--quick", "--max-copy", "1M", "--server", addr, "--json",
              json_path, (char *)NULL);
        _exit(126);
    }
    close(err_fd);
    int st = h_wait(pid, 100000);
    size_t len;
    *err = h_read_file(err_path, &len);
    *json = h_read_file(json_path, &len);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void bench_against(const char *what, const struct h_server_opts *opt)
{
    struct h_server srv;
    h_server_start(&srv, what, opt);
    char *err, *json;
    int st = run_bench(srv.addr, &err, &json);
    CHECK(st == 0, "%s: scuda bench exited %d:\n%s", what, st, err);
    CHECK(strstr(json, "\"warm_new_process_ok\": true") != NULL,
          "%s: the warm module load in a new process failed:\n%s", what, err);
    CHECK(strstr(json, "\"alloc_free_256_bytes_us\": {\"ok\": true") != NULL &&
              strstr(json, "\"alloc_free_67108864_bytes_us\": {\"ok\": true") != NULL,
          "%s: no cuMemAlloc/cuMemFree latency:\n%s", what, json);
    CHECK(strstr(json, "\"ok\": false") == NULL, "%s: a part of the bench failed:\n%s\n%s", what, json, err);
    CHECK(strstr(json, "\"bytes\": 1048576") != NULL && strstr(json, "\"bytes\": 16777216") == NULL,
          "%s: --max-copy 1M did not bound the copies:\n%s", what, json);
    free(err);
    free(json);
    h_server_stop(&srv);
    printf("ok scuda bench against a %s server: every part ran\n", what);
}

int main(void)
{
    h_begin("scuda_bench", 110);
    bench_against("plain", NULL);
    struct h_server_opts tls = {.tls = 1};
    bench_against("tls", &tls);
    printf("PASS scuda_bench\n");
    return 0;
}
