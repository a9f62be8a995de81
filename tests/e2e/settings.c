/* settings.c - what a program asks again and again stays in the client:
 * the same function or kernel handle each time it is looked up (as the
 * driver gives), and attribute sets (spec `setting=`) of the value a
 * function already has, which also keep the cached attribute queries
 * (PyTorch sets the same attribute before launches). Any other value, and
 * anything after a module unload, goes to the session and is seen by later
 * queries. Wire bytes prove what travelled. */
#define _GNU_SOURCE
#include <stdio.h>

#include "harness.h"

int scuda_client_wire_bytes(uint64_t *sent, uint64_t *received);

static uint64_t sent(void)
{
    uint64_t s, r;
    CHECK(scuda_client_wire_bytes(&s, &r) == 0, "scuda_client_wire_bytes");
    return s;
}

static int get(CUfunction f)
{
    int v = -1;
    CU(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
    return v;
}

static int client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUmodule m;
    CUfunction f, g;
    CU(cuModuleLoad(&m, h_ptx_path()));
    CU(cuModuleGetFunction(&f, m, "fill_u32"));
    CU(cuModuleGetFunction(&g, m, "vec_add"));
    const CUfunction_attribute A = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;

    /* The same handle for the same lookup, and nothing on the wire. */
    CUfunction f2;
    uint64_t s_lookup = sent();
    CU(cuModuleGetFunction(&f2, m, "fill_u32"));
    CHECK(f2 == f && sent() == s_lookup, "a second lookup gave %p for %p", (void *)f2, (void *)f);
    CUlibrary lib;
    CUkernel k1, k2;
    CUfunction kf1, kf2;
    CU(cuLibraryLoadFromFile(&lib, h_ptx_path(), NULL, NULL, 0, NULL, NULL, 0));
    CU(cuLibraryGetKernel(&k1, lib, "vec_add"));
    CU(cuKernelGetFunction(&kf1, k1));
    s_lookup = sent();
    CU(cuLibraryGetKernel(&k2, lib, "vec_add"));
    CU(cuKernelGetFunction(&kf2, k2));
    CHECK(k1 == k2 && kf1 == kf2 && sent() == s_lookup, "kernel %p/%p function %p/%p", (void *)k1, (void *)k2,
          (void *)kf1, (void *)kf2);
    int threads = 0;
    CU(cuFuncGetAttribute(&threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, kf2));
    CHECK(threads > 0, "max threads %d", threads);
    CU(cuLibraryUnload(lib));

    CU(cuFuncSetAttribute(f, A, 65536));
    CHECK(get(f) == 65536, "after the first set: %d", get(f));
    uint64_t s0 = sent();
    for (int i = 0; i < 100; i++) {
        CU(cuFuncSetAttribute(f, A, 65536)); /* the same value again: nothing travels */
        CHECK(get(f) == 65536, "round %d", i);
    }
    CHECK(sent() == s0, "repeated identical sets and cached gets sent %llu bytes", (unsigned long long)(sent() - s0));

    CU(cuFuncSetAttribute(f, A, 32768)); /* a new value goes to the session */
    CHECK(sent() > s0, "a new value was not sent");
    CHECK(get(f) == 32768, "after a new value: %d", get(f));
    CU(cuFuncSetAttribute(g, A, 65536)); /* another function: its own setting */
    CHECK(get(g) == 65536 && get(f) == 32768, "g %d f %d", get(g), get(f));
    CU(cuFuncSetAttribute(f, A, 65536)); /* back to the old value: sent, not mistaken for the old record */
    CHECK(get(f) == 65536, "back to the old value: %d", get(f));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuFuncSetAttribute(f, A, 1 << 30)); /* the driver still judges new values */

    /* After an unload the function is gone: a set is the session's to refuse. */
    CU(cuModuleUnload(m));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuFuncSetAttribute(f, A, 65536));
    return 0;
}

int main(void)
{
    h_begin("settings", 25);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    h_wait_ok(h_spawn(client, NULL, 20, -1, -1), 20000, "client");
    h_server_stop(&srv);
    printf("PASS settings\n");
    return 0;
}
