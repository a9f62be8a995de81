/* pools.c - the server-side half of GPU pools (docs/operate.md, "Pools").
 * The stand-in models four GPUs (STANDIN_DEVICES=4) and, like the real
 * driver, shows a process only those CUDA_VISIBLE_DEVICES names.
 *
 * gpus:      --gpus 1,<UUID of GPU 3>: a client sees two devices, 0 and
 *            1, which are the machine's GPUs 1 and 3 (UUIDs, PCI bus ids);
 *            device 2 does not exist for it.
 * per_gpu:   --gpus 0,2 --max-sessions-per-gpu 1: two sessions each see
 *            one device, one on GPU 0 and one on GPU 2; a third client is
 *            refused (server full, naming the option); once a session
 *            ends, a new client gets in.
 * wrong_gpu: --gpus 0,7 on a machine of four GPUs: a client is refused
 *            with a message that names GPU 7 and --gpus.
 * bad_options: the server does not start with --gpus 0,x, --gpus 0,0 or
 *            --max-sessions-per-gpu without --gpus, and says why. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "copy_checks.h"
#include "harness.h"

/* The stand-in's UUID of machine GPU `phys`, as nvidia-smi -L writes it. */
#define STANDIN_UUID(phys) "GPU-53435544-412d-5354-414e-44494e0000" phys

static int physical_of(CUdevice d)
{
    CUuuid u;
    CU(cuDeviceGetUuid_v2(&u, d));
    CHECK(memcmp(u.bytes, "SCUDA-STANDIN", 13) == 0, "device %d has no stand-in UUID", d);
    return (unsigned char)u.bytes[15];
}

static int two_of_four(void *arg)
{
    (void)arg;
    CU(cuInit(0));
    int n = 0;
    CU(cuDeviceGetCount(&n));
    CHECK(n == 2, "--gpus 1,GPU-..03 shows %d devices, not 2", n);
    CUdevice d0, d1, d2;
    CU(cuDeviceGet(&d0, 0));
    CU(cuDeviceGet(&d1, 1));
    CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&d2, 2));
    CHECK(physical_of(d0) == 1, "device 0 is the machine's GPU %d, not 1", physical_of(d0));
    CHECK(physical_of(d1) == 3, "device 1 is the machine's GPU %d, not 3", physical_of(d1));
    char bus[32];
    CU(cuDeviceGetPCIBusId(bus, sizeof bus, d1));
    CHECK(strcmp(bus, "0000:1B:00.0") == 0, "device 1's PCI bus id is %s, not GPU 3's", bus);
    /* Work runs there. */
    cc_work_on(d1, 7);
    return 0;
}

static void gpus(void)
{
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--gpus", "1," STANDIN_UUID("03")}};
    h_server_start(&srv, "gpus", &opt);
    h_wait_ok(h_spawn(two_of_four, NULL, 20, -1, -1), 20000, "a client of --gpus 1,GPU-..03");
    h_server_stop(&srv);
    printf("ok --gpus 1,UUID: the client sees GPUs 1 and 3 as devices 0 and 1, and no other\n");
}

static int hold[2];

/* A session on one GPU, kept until the test closes its end of `hold`;
 * exits with 100 + the machine's GPU it saw. */
static int holder(void *arg)
{
    (void)arg;
    close(hold[1]);
    h_cuda_setup();
    int n = 0;
    CU(cuDeviceGetCount(&n));
    CHECK(n == 1, "a session under --max-sessions-per-gpu sees %d devices, not 1", n);
    int phys = physical_of(0);
    char c;
    CHECK(read(hold[0], &c, 1) == 0);
    return 100 + phys;
}

static int simple(void *arg)
{
    (void)arg;
    if (cuInit(0) != CUDA_SUCCESS) return 10;
    h_cuda_setup();
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 64));
    return 0;
}

/* Run `simple` with its stderr kept: its exit status, and the stderr in *err. */
static int refused_client(const char *tag, char **err)
{
    char path[512];
    int err_fd = h_temp_file(tag, path, sizeof path);
    pid_t c = h_spawn(simple, NULL, 15, -1, err_fd);
    close(err_fd);
    int st = h_wait(c, 15000);
    *err = h_read_file(path, NULL);
    return st;
}

static void per_gpu(void)
{
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--gpus", "0,2", "--max-sessions-per-gpu", "1"}};
    h_server_start(&srv, "per-gpu", &opt);
    CHECK(pipe(hold) == 0);
    pid_t a = h_spawn(holder, NULL, 30, -1, -1), b = h_spawn(holder, NULL, 30, -1, -1);
    close(hold[0]);
    CHECK(h_wait_sessions(&srv, 2, 10000));
    /* The parent logs where a session runs after its fork: wait for it. */
    h_wait_log(&srv, "runs on GPU", 2, 10000);
    CHECK(h_server_log_count(&srv, "runs on GPU 0 (1 of 1") == 1 && h_server_log_count(&srv, "runs on GPU 2 (1 of 1") == 1,
          "the two sessions were not put one on GPU 0 and one on GPU 2");
    char *err;
    int st = refused_client("per-gpu-full", &err);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 10, "a third client was not refused (status %d)", st);
    CHECK(strstr(err, "full") && strstr(err, "--max-sessions-per-gpu"),
          "the refused client's stderr does not say each GPU is full:\n%s", err);
    free(err);
    close(hold[1]);
    int sa = h_wait(a, 10000), sb = h_wait(b, 10000);
    CHECK(WIFEXITED(sa) && WIFEXITED(sb), "a holder failed (%d, %d)", sa, sb);
    int ga = WEXITSTATUS(sa) - 100, gb = WEXITSTATUS(sb) - 100;
    CHECK((ga == 0 && gb == 2) || (ga == 2 && gb == 0), "the holders saw GPUs %d and %d, not 0 and 2", ga, gb);
    /* Their places free up once the parent reaps them. */
    int got_in = 0;
    for (uint64_t deadline = h_now_ms() + 15000; !got_in && h_now_ms() < deadline; h_sleep_ms(100)) {
        int s = h_wait(h_spawn(simple, NULL, 15, -1, -1), 15000);
        got_in = s != -1 && WIFEXITED(s) && WEXITSTATUS(s) == 0;
    }
    CHECK(got_in, "no client got in after the sessions ended");
    h_server_stop(&srv);
    printf("ok --max-sessions-per-gpu 1: one session on each GPU, the third refused, a later one gets in\n");
}

static void wrong_gpu(void)
{
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--gpus", "0,7"}};
    h_server_start(&srv, "wrong-gpu", &opt);
    char *err;
    int st = refused_client("wrong-gpu", &err);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 10, "a client of --gpus 0,7 was not refused (status %d)",
          st);
    CHECK(strstr(err, "GPU 7") && strstr(err, "--gpus"), "the refusal does not name GPU 7 and --gpus:\n%s", err);
    free(err);
    h_server_stop(&srv);
    printf("ok --gpus 0,7 on four GPUs: clients are refused, naming GPU 7 and --gpus\n");
}

/* `scuda server ARGS` must exit 1 at once, saying `why`. */
static void refuses_to_start(const char *args, const char *why)
{
    char path[512], cmd[1200];
    int fd = h_temp_file("bad-options", path, sizeof path);
    close(fd);
    snprintf(cmd, sizeof cmd, "timeout 20 %s server --listen 127.0.0.1:0 --module-cache off %s > %s 2>&1", SCUDA_BIN,
             args, path);
    int st = system(cmd);
    char *out = h_read_file(path, NULL);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 1 && strstr(out, why),
          "scuda server %s: status %d, wanted 1 and '%s':\n%s", args, st, why, out);
    free(out);
}

static void bad_options(void)
{
    refuses_to_start("--gpus 0,x", "'x' is not a GPU index or UUID");
    refuses_to_start("--gpus 0,0", "'0' is named twice");
    refuses_to_start("--max-sessions-per-gpu 2", "--max-sessions-per-gpu needs --gpus");
    printf("ok a bad --gpus, or --max-sessions-per-gpu without it, stops the server at start, saying why\n");
}

int main(void)
{
    h_begin("pools", 110);
    setenv("STANDIN_DEVICES", "4", 1); /* the servers' stand-in: a machine of four GPUs */
    gpus();
    per_gpu();
    wrong_gpu();
    bad_options();
    printf("PASS pools\n");
    return 0;
}
