/* auth.c - the shared-token handshake.
 *
 * A server with a token (SCUDA_TOKEN in its environment, or --token-file)
 * refuses clients with a wrong or missing token: their cuInit fails and
 * their stderr says to set SCUDA_TOKEN. A client with the right token
 * works. A raw client with a zero proof gets WELCOME_BAD_TOKEN. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/protocol.h"
#include "harness.h"

static int client(void *p)
{
    const char *token = p;
    if (token) setenv("SCUDA_TOKEN", token, 1);
    else unsetenv("SCUDA_TOKEN");
    CUresult r = cuInit(0);
    if (r != CUDA_SUCCESS) {
        printf("cuInit: %s\n", h_cu_name(r));
        return 10; /* refused */
    }
    h_cuda_setup();
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 1024));
    CU(cuMemsetD32_v2(d, 0x600df00d, 256));
    uint32_t v[256];
    CU(cuMemcpyDtoH_v2(v, d, sizeof v));
    for (int i = 0; i < 256; i++) CHECK(v[i] == 0x600df00d);
    return 0;
}

/* Run a client with `token`; expect it refused (mentioning SCUDA_TOKEN) or
 * working. */
static void expect(const char *token, int refused, const char *tag)
{
    char err_path[512];
    int err_fd = h_temp_file(tag, err_path, sizeof err_path);
    pid_t pid = h_spawn(client, (void *)token, 15, -1, err_fd);
    close(err_fd);
    int st = h_wait(pid, 15000);
    char *err = h_read_file(err_path, NULL);
    CHECK(st != -1 && WIFEXITED(st), "%s: client hung or crashed; stderr:\n%s", tag, err);
    if (refused) {
        CHECK(WEXITSTATUS(st) == 10, "%s: a client with token %s%s%s was not refused (status %d)", tag,
              token ? "\"" : "", token ? token : "(none)", token ? "\"" : "", WEXITSTATUS(st));
        CHECK(strstr(err, "SCUDA_TOKEN") != NULL, "%s: stderr does not mention SCUDA_TOKEN:\n%s", tag, err);
    } else {
        CHECK(WEXITSTATUS(st) == 0, "%s: a client with the right token failed (status %d); stderr:\n%s", tag,
              WEXITSTATUS(st), err);
    }
    printf("ok %s\n", tag);
    free(err);
}

int main(void)
{
    h_begin("auth", 28);

    struct h_server srv;
    struct h_server_opts opt = {.token = "abc"};
    h_server_start(&srv, "env", &opt);
    expect("wrong", 1, "env-token: wrong token refused");
    expect(NULL, 1, "env-token: missing token refused");
    expect("abcd", 1, "env-token: longer token refused");
    expect("abc", 0, "env-token: right token works");
    uint32_t status = 0;
    int fd = h_raw_connect(srv.addr, NULL, &status);
    CHECK(fd < 0 && status == WELCOME_BAD_TOKEN, "raw client with zero proof: fd %d, status %u", fd, status);
    fd = h_raw_connect(srv.addr, "abc", &status);
    CHECK(fd >= 0 && status == WELCOME_OK, "raw client with the token: status %u", status);
    io_close(fd);
    CHECK(h_server_log_count(&srv, "bad token") >= 4, "the server did not log the refusals");
    h_server_stop(&srv);

    /* --token-file: the secret is the file's one line. */
    char path[512];
    int tfd = h_temp_file("token", path, sizeof path);
    CHECK(write(tfd, "s3cret-from-file\n", 17) == 17);
    close(tfd);
    chmod(path, 0600);
    struct h_server_opts fopt = {.token_file = path};
    struct h_server fsrv;
    h_server_start(&fsrv, "file", &fopt);
    expect("abc", 1, "token-file: wrong token refused");
    expect("s3cret-from-file", 0, "token-file: right token works");
    h_server_stop(&fsrv);
    unlink(path);

    printf("PASS auth\n");
    return 0;
}
