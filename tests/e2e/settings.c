/* settings.c - attribute sets (spec `setting=`): setting the value a
 * function already has is answered in the client and keeps the cached
 * attribute queries (PyTorch sets the same attribute before launches);
 * any other value, and anything after a module unload, goes to the
 * session and is seen by later queries. Wire bytes prove what travelled. */
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
