/* migrate_ahead.c - a move asked from outside (scuda migrate) loads the
 * session's modules and libraries on B while the session still runs on
 * A, so the hold replays no image load (src/server/migrate_preload.c;
 * docs/architecture.md 9.17, "Loading ahead").
 *
 * The client loads modules and a library, binds functions, a kernel and a
 * global, then keeps launching and checking until told to stop. B's log
 * must count every image load ahead of the hold and none during it, and
 * the client's results must be right on B. Then the same with a client
 * that loads a module each round while the move goes on: what B loaded
 * ahead still fits, the rest loads at the hold, and the move is exact.
 * (When the head no longer fits: tests/unit/test_migrate_preload.c.) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "copy_checks.h"
#include "harness.h"

#define WORDS 4096
#define MODULES 3

static int ready_pipe[2], done_pipe[2];
static int grows; /* the client loads a module every round */
#define GROWN_MAX 200

static void fill(CUfunction f, CUdeviceptr d, uint32_t v)
{
    uint64_t words = WORDS;
    void *args[] = {&d, &v, &words};
    CU(cuLaunchKernel(f, 16, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
}

/* One round: both functions fill, the bytes come back right. */
static void round_trip(CUfunction by_module, CUfunction by_kernel, CUdeviceptr d, uint32_t round)
{
    uint32_t back[WORDS];
    fill(round % 2 ? by_module : by_kernel, d, round);
    CU(cuCtxSynchronize());
    CU(cuMemcpyDtoH_v2(back, d, sizeof back));
    for (int i = 0; i < WORDS; i++) CHECK(back[i] == round, "round %u: word %d is %u", round, i, back[i]);
}

/* A module loaded and used: the sequence grows while B loads ahead. */
static void grow_module(CUmodule *mods, int *n)
{
    CUmodule m = h_load_module();
    CUfunction f;
    CU(cuModuleGetFunction(&f, m, "noop"));
    CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    if (*n < GROWN_MAX) mods[(*n)++] = m;
    else CU(cuModuleUnload(m)); /* the last notes: nothing placed after it */
}

static int client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUmodule m[MODULES];
    for (int i = 0; i < MODULES; i++) m[i] = h_load_module();
    CUfunction by_module, by_kernel;
    CU(cuModuleGetFunction(&by_module, m[1], "fill_u32"));
    CUdeviceptr g;
    size_t gsize;
    uint32_t counter = 777, back = 0;
    CU(cuModuleGetGlobal_v2(&g, &gsize, m[2], "g_counter"));
    CU(cuMemcpyHtoD_v2(g, &counter, sizeof counter));
    size_t len;
    char *ptx = h_read_file(h_ptx_path(), &len);
    CUlibrary lib;
    CUkernel k;
    CU(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
    free(ptx);
    CU(cuLibraryGetKernel(&k, lib, "fill_u32"));
    CU(cuKernelGetFunction(&by_kernel, k));
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, WORDS * sizeof(uint32_t)));
    round_trip(by_module, by_kernel, d, 1);
    CHECK(write(ready_pipe[1], "r", 1) == 1);
    CUmodule grown[GROWN_MAX];
    int ngrown = 0;
    char c;
    uint32_t round = 2;
    for (uint64_t until = h_now_ms() + 60000; read(done_pipe[0], &c, 1) != 1 && h_now_ms() < until; round++) {
        if (grows && ngrown < GROWN_MAX) grow_module(grown, &ngrown);
        round_trip(by_module, by_kernel, d, round);
        h_sleep_ms(2);
    }
    round_trip(by_module, by_kernel, d, round); /* surely on B */
    CU(cuMemcpyDtoH_v2(&back, g, sizeof back));
    CHECK(back == counter, "the module's global came over: %u", back);
    for (int i = 0; i < ngrown; i++) CU(cuModuleUnload(grown[i]));
    return 0;
}

static int log_reaches(const struct h_server *s, const char *needle)
{
    uint64_t until = h_now_ms() + 20000;
    while (h_server_log_count(s, needle) < 1 && h_now_ms() < until) h_sleep_ms(20);
    return h_server_log_count(s, needle);
}

/* The numbers B's import line gives: image loads ahead, and during the hold. */
static void loads_of(const struct h_server *B, unsigned *ahead, unsigned *held)
{
    char *log = h_server_log(B);
    const char *p = strstr(log, "imported a session");
    p = p ? strstr(p, "images from the module cache; ") : NULL;
    *ahead = *held = ~0u;
    CHECK(p && sscanf(p, "images from the module cache; %u image loads ahead of the hold (%*[^)]), %u during", ahead,
                      held) == 2, "B's log counts the image loads ahead of and during the hold");
    free(log);
}

/* Move a running client from A to B with scuda migrate. */
static void move_running_client(const char *tag, unsigned *ahead, unsigned *held)
{
    struct h_server A, B;
    char control[600], atag[64], btag[64];
    snprintf(control, sizeof control, "%s/%s-%d.sock", E2E_LOG_DIR, tag, (int)getpid());
    snprintf(atag, sizeof atag, "%s-a", tag);
    snprintf(btag, sizeof btag, "%s-b", tag);
    struct h_server_opts ao = {.extra_args = {"--control", control, NULL}};
    h_server_start(&B, btag, NULL);
    h_server_start(&A, atag, &ao);
    CHECK(pipe(ready_pipe) == 0 && pipe(done_pipe) == 0);
    CHECK(fcntl(done_pipe[0], F_SETFL, O_NONBLOCK) == 0);
    pid_t child = h_spawn(client, NULL, 90, -1, -1);
    char c, out[2048];
    CHECK(read(ready_pipe[0], &c, 1) == 1, "the client got mid-run");
    pid_t pids[16];
    int n = h_server_sessions(&A, pids, 16);
    CHECK(n > 0, "A names its session");
    int st = cc_scuda_migrate(SCUDA_BIN_PATH, pids[n - 1], B.addr, control, out, sizeof out);
    CHECK(st == 0 && strstr(out, "moved to"), "scuda migrate exited %d, printing: %s", st, out);
    CHECK(log_reaches(&B, "client resumed the session") == 1, "the client went on on B");
    h_sleep_ms(100); /* rounds on B */
    CHECK(write(done_pipe[1], "d", 1) == 1);
    h_wait_ok(child, 95000, tag);
    for (int i = 0; i < 2; i++) close(ready_pipe[i]), close(done_pipe[i]);
    CHECK(h_server_log_count(&A, "preparing to move") == 1, "A began by loading ahead");
    loads_of(&B, ahead, held);
    h_server_stop(&A);
    h_server_stop(&B);
}

static void test_loads_before_the_hold(void)
{
    unsigned ahead, held;
    grows = 0;
    move_running_client("migrate-ahead", &ahead, &held);
    /* The modules, the library and the harness's own module. */
    CHECK(ahead >= MODULES + 1, "B loaded %u images ahead of the hold", ahead);
    CHECK(held == 0, "B loaded %u images during the hold", held);
}

static void test_loads_while_loading_ahead(void)
{
    unsigned ahead, held;
    grows = 1;
    move_running_client("migrate-ahead-grows", &ahead, &held);
    /* Each round loads one more module: the sequence grew at its end
     * while B loaded ahead, so what B holds still fits; what came after
     * is loaded at the hold, and the session on B is exact (the client
     * checked it). */
    CHECK(ahead >= MODULES + 1, "B loaded %u images ahead of the hold (and %u during it)", ahead, held);
}

int main(void)
{
    h_begin("migrate_ahead", 170);
    test_loads_before_the_hold();
    test_loads_while_loading_ahead();
    printf("PASS migrate_ahead\n");
    return 0;
}
