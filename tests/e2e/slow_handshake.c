/* slow_handshake.c - a client that never finishes its handshake must not
 * hold up other clients.
 *
 * Three raw TCP connections read the server's greeting and then say
 * nothing (a stalled or hostile peer: no token is needed to do this). A
 * normal client started right after must still get its session at once:
 * its cuInit and first work must complete within 2 s. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/dial.h"
#include "common/hello.h"
#include "common/protocol.h"
#include "common/transport.h"
#include "harness.h"

static int client(void *arg)
{
    (void)arg;
    uint64_t t0 = h_now_ms();
    CUresult r = cuInit(0);
    uint64_t took = h_now_ms() - t0;
    CHECK(r == CUDA_SUCCESS, "cuInit returned %s after %llu ms while another client stalled its handshake",
          h_cu_name(r), (unsigned long long)took);
    h_cuda_setup();
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 64));
    took = h_now_ms() - t0;
    CHECK(took < 2000, "a normal client needed %llu ms to start while another client stalled its handshake",
          (unsigned long long)took);
    printf("the normal client started in %llu ms\n", (unsigned long long)took);
    return 0;
}

int main(void)
{
    h_begin("slow_handshake", 28);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    int mute[3];
    for (int i = 0; i < 3; i++) {
        char err[256];
        /* The first is greeted and says nothing more; the others send not
         * even their preface. */
        mute[i] = i == 0 ? dial(srv.addr, 5000, PREFACE_SESSION, err, sizeof err)
                         : tcp_connect(srv.addr, 5000, err, sizeof err);
        CHECK(mute[i] >= 0, "%s", err);
        if (i == 0) {
            uint8_t nonce[SCUDA_NONCE_LEN];
            CHECK(hello_read_server(mute[i], 5000, nonce, err, sizeof err) == 0, "no greeting: %s", err);
        }
    }
    h_wait_ok(h_spawn(client, NULL, 25, -1, -1), 25000, "a normal client next to stalled handshakes");
    for (int i = 0; i < 3; i++) io_close(mute[i]);
    h_server_stop(&srv);
    printf("PASS slow_handshake\n");
    return 0;
}
