/* fuzz_session.c - libFuzzer target: the session's handlers against the
 * CPU stand-in driver, in-process (docs/architecture.md, 6 Tests).
 *
 * The input is a client's byte stream after the handshake: frames, each a
 * 16-byte header and its payload, exactly as on the wire; a header's
 * length beyond what is left takes what is left. Each frame runs through
 * session_run_frame(), the dispatch loop's own path from a frame to its
 * handler, reply and deferred error; replies go to /dev/null. The seed
 * corpus holds streams recorded from the shim (make_corpus.sh), so the
 * fuzzer starts from real handles, pointers and module loads.
 *
 * The session is the one a server builds (session_main): the stand-in
 * loaded by path, with the memory quota, module cache, graph host and
 * parameter layouts installed over its driver table. State is reset after
 * every input (reset_session), so an input means the same thing alone as
 * in a run, and the fuzzer's memory stays flat. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/protocol.h"
#include "common/wire.h"
#include "server/dispatch.h"
#include "server/graph_host.h"
#include "server/module_cache.h"
#include "server/param_layout.h"
#include "server/peer_link.h"
#include "server/quota.h"
#include "server/staging.h"
#include "server/session.h"

/* Small, so that a run of allocations reaches the quota's edges. */
#define FUZZ_MEM_QUOTA (64ull << 20)

static struct server_options opt = {.mem_quota = FUZZ_MEM_QUOTA};
static struct session session;
static void (*standin_reset)(void);

/* session.c's: every thread binds its context again. */
void session_forget_bound_ctx(void);

static void die(const char *what)
{
    fprintf(stderr, "fuzz_session: %s\n", what);
    exit(1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* The stand-in's device: small, so its address reservation is too. */
    setenv("STANDIN_MEM_MB", "256", 0);
    if (!getenv("SCUDA_LOG")) setenv("SCUDA_LOG", "error", 1); /* no warning per bad frame */
    void *h = dlopen(STANDIN_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!h) die(dlerror());
    if (driver_table_load(&real, h) <= 0 || !real.cuInit) die("the stand-in is not a driver");
    standin_reset = (void (*)(void))dlsym(h, "standin_reset");
    if (!standin_reset) die("the stand-in lacks standin_reset (tests/standin/standin_api.h)");
    if (real.cuInit(0) != CUDA_SUCCESS) die("cuInit failed on the stand-in");
    quota_install(&real, opt.mem_quota);
    module_cache_init(NULL, 0);
    graph_host_install(&real);
    param_layout_install(&real);
    session.fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (session.fd < 0) die("cannot open /dev/null");
    session.ctl_fd = -1;
    session.log_fd = 2;
    session.opt = &opt;
    pthread_mutex_init(&session.write_lock, NULL);
    pthread_mutex_init(&session.error_lock, NULL);
    return 0;
}

/* Everything a client's calls leave behind goes: the driver's contexts and
 * what they own, the session's handles and quota. As if the client had
 * disconnected and a new one connected. */
static void reset_session(void)
{
    standin_reset();
    staging_forget_all(); /* the reset freed its buffers with their contexts */
    handle_forget_all();
    quota_forget_all();
    peer_link_forget_all(); /* grants would fill the link slots across inputs */
    session_forget_bound_ctx();
    session.deferred_error = CUDA_SUCCESS;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    while (size >= FRAME_HEADER_LEN) {
        struct frame_header h;
        frame_header_decode(data, &h);
        data += FRAME_HEADER_LEN;
        size -= FRAME_HEADER_LEN;
        if (h.length > size) h.length = (uint32_t)size;
        /* The payload in a buffer of exactly its size, as the session
         * reads it: ASan sees any read past it. */
        void *payload = malloc(h.length ? h.length : 1);
        if (!payload) die("out of memory");
        memcpy(payload, data, h.length);
        data += h.length;
        size -= h.length;
        session_run_frame(&session, &h, payload);
    }
    reset_session();
    return 0;
}
