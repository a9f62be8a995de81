/* visible_devices.c - the client's CUDA_VISIBLE_DEVICES filters and
 * reorders the server's GPUs as the real driver would (docs/operate.md,
 * "Pools"). The stand-in models four GPUs (STANDIN_DEVICES=4) and, like
 * the real driver, shows a process only what CUDA_VISIBLE_DEVICES names,
 * failing cuInit with CUDA_ERROR_NO_DEVICE when that is nothing.
 *
 * whole_machine: a server of all four GPUs.
 *            1        -> one device, the machine's GPU 1 (UUID, PCI bus id)
 *            2,0      -> two devices, GPUs 2 and 0 in that order
 *            (empty)  -> cuInit and cuDeviceGetCount: CUDA_ERROR_NO_DEVICE
 *            UUID of GPU 3 -> one device, GPU 3
 *            3,9,1    -> one device: 9 names no GPU and ends the list
 *            unset    -> all four
 * pool:      --gpus 1,3: client index 1 is GPU 3; 0,1 and 1,0 are GPUs 1
 *            and 3 in that order; 2 (beyond the two served) leaves no
 *            device; GPU 3's UUID does too, as --gpus names GPU 3 by index
 *            only (the parent cannot tell without loading CUDA).
 * pool_uuid: --gpus 0,<UUID of GPU 2>: the UUID picks GPU 2; GPU 1's
 *            UUID, not served, leaves no device.
 * per_gpu:   --gpus 0,2 --max-sessions-per-gpu 1: the session's one GPU
 *            is the list the client's entries index: 0 is it, 1 is none.
 * hostile:   a visible request that is not printable ASCII is refused at
 *            the handshake, naming CUDA_VISIBLE_DEVICES. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "copy_checks.h"
#include "harness.h"
#include "../../src/common/dial.h"
#include "../../src/common/hello.h"
#include "../../src/common/preface.h"
#include "../../src/common/transport.h"

/* The stand-in's UUID of machine GPU `phys`, as nvidia-smi -L writes it. */
#define STANDIN_UUID(phys) "GPU-53435544-412d-5354-414e-44494e0000" phys

/* What a client is to see: the machine GPUs of its devices, in order
 * (count 0: cuInit fails with CUDA_ERROR_NO_DEVICE). */
struct expect {
    const char *visible; /* NULL: unset */
    int count;
    int phys[4];
};

static int physical_of(CUdevice d)
{
    CUuuid u;
    CU(cuDeviceGetUuid_v2(&u, d));
    CHECK(memcmp(u.bytes, "SCUDA-STANDIN", 13) == 0, "device %d has no stand-in UUID", d);
    return (unsigned char)u.bytes[15];
}

/* The stand-in's PCI bus id of machine GPU p (standin_device.c). */
static void bus_of_physical(int p, char *out, size_t len) { snprintf(out, len, "0000:%02X:00.0", 0x18 + p); }

static int sees(void *arg)
{
    const struct expect *e = arg;
    if (e->visible) setenv("CUDA_VISIBLE_DEVICES", e->visible, 1);
    else unsetenv("CUDA_VISIBLE_DEVICES");
    int n = -1;
    if (e->count == 0) {
        /* What the real driver answers when no device is visible. */
        CU_EXPECT(CUDA_ERROR_NO_DEVICE, cuInit(0));
        CU_EXPECT(CUDA_ERROR_NO_DEVICE, cuDeviceGetCount(&n));
        return 0;
    }
    CU(cuInit(0));
    CU(cuDeviceGetCount(&n));
    CHECK(n == e->count, "CUDA_VISIBLE_DEVICES='%s' shows %d devices, not %d", e->visible ? e->visible : "(unset)",
          n, e->count);
    for (int i = 0; i < n; i++) {
        CUdevice d;
        CU(cuDeviceGet(&d, i));
        int p = physical_of(d);
        CHECK(p == e->phys[i], "CUDA_VISIBLE_DEVICES='%s': device %d is the machine's GPU %d, not %d", e->visible, i,
              p, e->phys[i]);
        char bus[32], want[32];
        CU(cuDeviceGetPCIBusId(bus, sizeof bus, d));
        bus_of_physical(e->phys[i], want, sizeof want);
        CHECK(strcmp(bus, want) == 0, "device %d's PCI bus id is %s, not GPU %d's %s", i, bus, e->phys[i], want);
    }
    CUdevice beyond;
    CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&beyond, n));
    /* Work runs on the last one. */
    cc_work_on(n - 1, 9);
    return 0;
}

static void check_all(const char *tag, const struct expect *cases, int ncases)
{
    for (int i = 0; i < ncases; i++) {
        char what[160];
        snprintf(what, sizeof what, "%s: a client of CUDA_VISIBLE_DEVICES='%s'", tag,
                 cases[i].visible ? cases[i].visible : "(unset)");
        h_wait_ok(h_spawn(sees, (void *)&cases[i], 20, -1, -1), 20000, what);
    }
}

static void whole_machine(void)
{
    static const struct expect cases[] = {
        {"1", 1, {1}},
        {"2,0", 2, {2, 0}},
        {"", 0, {0}},
        {STANDIN_UUID("03"), 1, {3}},
        {"3,9,1", 1, {3}},
        {"1,x,2", 1, {1}},
        {NULL, 4, {0, 1, 2, 3}},
    };
    struct h_server srv;
    h_server_start(&srv, "visible", NULL);
    check_all("every GPU", cases, (int)(sizeof cases / sizeof cases[0]));
    CHECK(h_wait_log(&srv, "names none of the GPUs", 1, 5000) >= 1,
          "the server's log does not say why the empty list's session had no GPU");
    h_server_stop(&srv);
    printf("ok every GPU served: 1, 2,0, empty, a UUID, 3,9,1 and 1,x,2 give the driver's devices\n");
}

static void pool(void)
{
    static const struct expect cases[] = {
        {"1", 1, {3}},
        {"0,1", 2, {1, 3}},
        {"1,0", 2, {3, 1}},
        {"2", 0, {0}},
        {"1,2,0", 1, {3}},
        {STANDIN_UUID("03"), 0, {0}}, /* --gpus names GPU 3 by index only */
    };
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--gpus", "1,3"}};
    h_server_start(&srv, "visible-pool", &opt);
    check_all("--gpus 1,3", cases, (int)(sizeof cases / sizeof cases[0]));
    h_server_stop(&srv);
    printf("ok --gpus 1,3: client indices count the served GPUs (1 is GPU 3), one beyond them ends the list\n");
}

static void pool_uuid(void)
{
    static const struct expect cases[] = {
        {STANDIN_UUID("02"), 1, {2}},
        {STANDIN_UUID("02") ",0", 2, {2, 0}},
        {STANDIN_UUID("01"), 0, {0}},
    };
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--gpus", "0," STANDIN_UUID("02")}};
    h_server_start(&srv, "visible-pool-uuid", &opt);
    check_all("--gpus 0,UUID", cases, (int)(sizeof cases / sizeof cases[0]));
    h_server_stop(&srv);
    printf("ok --gpus 0,UUID of GPU 2: the client's UUID picks GPU 2; GPU 1's, not served, none\n");
}

static void per_gpu(void)
{
    /* The first session goes on GPU 0 (fewest sessions, first on ties);
     * the next on GPU 0 or 2, whichever is free: index 1 is none either way. */
    static const struct expect cases[] = {{"0", 1, {0}}, {"1", 0, {0}}};
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--gpus", "0,2", "--max-sessions-per-gpu", "1"}};
    h_server_start(&srv, "visible-per-gpu", &opt);
    check_all("--max-sessions-per-gpu 1", cases, 2);
    h_server_stop(&srv);
    printf("ok --max-sessions-per-gpu: the session's one GPU is the list the client's entries index\n");
}

/* A server whose stand-in has STANDIN_UUID_TAG: its GPUs' UUIDs differ
 * from another stand-in's in byte 14, as two machines' GPUs differ, and a
 * client names them by the tagged UUID only. This is what lets a client
 * of several stand-in servers tell their devices apart. */
static void uuid_tag(void)
{
    static const struct expect cases[] = {
        {"GPU-53435544-412d-5354-414e-44494e000503", 1, {3}},
        {STANDIN_UUID("03"), 0, {0}}, /* the untagged UUID is another machine's GPU */
    };
    struct h_server srv;
    setenv("STANDIN_UUID_TAG", "5", 1); /* the server, and so its sessions, inherit it */
    h_server_start(&srv, "visible-uuid-tag", NULL);
    unsetenv("STANDIN_UUID_TAG");
    check_all("STANDIN_UUID_TAG=5", cases, (int)(sizeof cases / sizeof cases[0]));
    h_server_stop(&srv);
    printf("ok STANDIN_UUID_TAG=5: the tagged UUID picks its GPU, the untagged one none\n");
}

/* A visible request with a control byte in it: refused at the handshake. */
static void hostile(void)
{
    struct h_server srv;
    h_server_start(&srv, "visible-hostile", NULL);
    char err[256];
    int fd = dial(srv.addr, 5000, PREFACE_SESSION, err, sizeof err);
    CHECK(fd >= 0, "cannot reach the server: %s", err);
    uint8_t nonce[SCUDA_NONCE_LEN];
    uint16_t flags = 0;
    CHECK(hello_read_server_judged(fd, 5000, nonce, &flags, err, sizeof err) == 0, "%s", err);
    CHECK(flags & HELLO_SERVER_VISIBLE, "the server does not say it takes CUDA_VISIBLE_DEVICES");
    uint8_t req[VISIBLE_REQ_LEN] = {3, 0, '0', '\n', '1'};
    CHECK(hello_send_client(fd, HELLO_VISIBLE_DEVICES, ~0ull, NULL, nonce, req, sizeof req) == 0);
    uint32_t status;
    char msg[256];
    CHECK(hello_read_welcome(fd, 10000, &status, msg, sizeof msg) == 0, "no refusal: %s", msg);
    CHECK(status == WELCOME_BAD_VERSION && strstr(msg, "CUDA_VISIBLE_DEVICES"),
          "a control byte in CUDA_VISIBLE_DEVICES got status %u, '%s'", status, msg);
    io_close(fd);
    CHECK(h_wait_log(&srv, "malformed CUDA_VISIBLE_DEVICES", 1, 5000) >= 1);
    h_server_stop(&srv);
    printf("ok a visible request with a control byte is refused at the handshake\n");
}

int main(void)
{
    h_begin("visible_devices", 170);
    setenv("STANDIN_DEVICES", "4", 1); /* the servers' stand-in: a machine of four GPUs */
    unsetenv("CUDA_VISIBLE_DEVICES");  /* the servers' own: every GPU */
    whole_machine();
    pool();
    pool_uuid();
    per_gpu();
    uuid_tag();
    hostile();
    printf("PASS visible_devices\n");
    return 0;
}
