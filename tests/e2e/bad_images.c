/* bad_images.c - module images whose headers reach past their bytes never
 * get to the session's driver.
 *
 * cuModuleLoadData, cuModuleLoadDataEx and cuLibraryLoadData take no
 * length: the driver finds an image's extent in its headers. A raw client
 * sends images that lie about it: one byte, PTX without its NUL, a 16-byte
 * fatbin header that claims 1 MiB, a fatbin entry past the fatbin's end,
 * an ELF whose section ends past the bytes, cudart's fatbin wrapper (it
 * holds a pointer into the client's memory). Each must get
 * CUDA_ERROR_INVALID_IMAGE with a line in the server log saying why, as a
 * module and as a library, and also when the lying image comes from the
 * module cache on disk (a file planted under its own digest). Then the
 * shim loads real images (PTX text, a fatbin, an ELF) with cuModuleLoadData,
 * which takes no length either: the length it measures must cover what the
 * headers declare, so none of them is refused for its size; and PTX the
 * driver cannot parse fails with the driver's JIT error log copied into
 * the caller's buffer (the log comes back with the failure). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../unit/sample_images.h"
#include "common/auth.h"
#include "common/ops.gen.h"
#include "harness.h"

#define REFUSED "module image of"

static struct h_server srv;
static uint64_t next_id = 0x10000;

/* One load request: scuda_module_load with the bytes, or by digest. */
static long load(int fd, int is_library, const void *img, size_t len, const uint8_t *key)
{
    if (!key) return h_raw_load(fd, H_RAW_CTX, next_id += 16, is_library, img, len);
    int found = 0;
    long r = h_raw_load_by_hash(fd, H_RAW_CTX, next_id += 16, is_library, key, len, &found);
    if (r == CUDA_SUCCESS) EXPECT(found == 1, "the planted image was not found by its digest");
    return r;
}

/* Each image goes to a session of its own, so each case's outcome shows. */
static void expect_refused(const char *what, const void *img, size_t len, const uint8_t *key)
{
    int before = h_soft_failures(), fd = h_raw_session(srv.addr);
    for (int is_library = 0; is_library < 2; is_library++) {
        int logged = h_server_log_count(&srv, REFUSED);
        long r = load(fd, is_library, img, len, key);
        EXPECT(r == CUDA_ERROR_INVALID_IMAGE, "%s as a %s: returned %ld (%s), not CUDA_ERROR_INVALID_IMAGE", what,
              is_library ? "library" : "module", r, r >= 0 ? h_cu_name((CUresult)r) : "no reply");
        EXPECT(h_server_log_count(&srv, REFUSED) == logged + 1, "%s: the session did not log the refusal", what);
    }
    io_close(fd);
    printf("%s %s%s\n", h_soft_failures() == before ? "ok" : "FAILED", what, key ? " (from the module cache)" : "");
}

/* ---- images that lie ------------------------------------------------------- */

static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static void lying_images(void)
{
    expect_refused("a 1-byte image", "A", 1, NULL);
    const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n";
    expect_refused("PTX without its NUL", ptx, sizeof ptx - 1, NULL);

    uint8_t head[16] = {0};
    uint32_t magic = SAMPLE_FATBIN_MAGIC;
    memcpy(head, &magic, 4);
    head[6] = 16;
    put_u64(head + 8, 1 << 20);
    expect_refused("a 16-byte fatbin that claims 1 MiB", head, sizeof head, NULL);

    size_t len;
    uint8_t *fat = sample_fatbin(&len);
    put_u64(fat + 16 + 8, len); /* the first entry's payload: past the end */
    expect_refused("a fatbin entry past the fatbin's end", fat, len, NULL);
    free(fat);

    uint8_t *elf = sample_elf(&len);
    Elf64_Shdr *sh = (Elf64_Shdr *)(elf + ((Elf64_Ehdr *)elf)->e_shoff) + S_TEXT;
    sh->sh_size = 1 << 20;
    expect_refused("an ELF section past the bytes", elf, len, NULL);
    free(elf);

    uint8_t wrapper[24] = {0};
    magic = 0x466243b1u;
    memcpy(wrapper, &magic, 4);
    put_u64(wrapper + 8, 0x1000); /* a client address */
    expect_refused("a fatbin wrapper", wrapper, sizeof wrapper, NULL);
}

/* A file in the module cache holding a lying image under its own digest
 * (a store shared with another server, a hand edit): loading it by digest
 * must not hand it to the driver either. */
static void planted_in_cache(void)
{
    uint8_t img[16] = {0};
    uint32_t magic = SAMPLE_FATBIN_MAGIC;
    memcpy(img, &magic, 4);
    img[6] = 16;
    put_u64(img + 8, 1 << 20);
    uint8_t key[AUTH_SHA256_LEN];
    auth_sha256_digest(img, sizeof img, key);
    char path[1024];
    int n = snprintf(path, sizeof path, "%s/", srv.cache_dir);
    for (int i = 0; i < AUTH_SHA256_LEN; i++) n += snprintf(path + n, sizeof path - (size_t)n, "%02x", key[i]);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    uint64_t len = sizeof img;
    CHECK(fwrite("SCUDAMI1", 1, 8, f) == 8 && fwrite(&len, 8, 1, f) == 1 && fwrite(img, 1, sizeof img, f) == sizeof img);
    fclose(f);
    /* ...that this server's one user, "anonymous", loaded: the cache answers
     * only a user who did (module_store.h, users' markers). */
    static const char user[] = "scuda module cache user\0anonymous";
    uint8_t tag[AUTH_SHA256_LEN];
    auth_sha256_digest(user, sizeof user - 1, tag);
    n += snprintf(path + n, sizeof path - (size_t)n, ".");
    for (int i = 0; i < 8; i++) n += snprintf(path + n, sizeof path - (size_t)n, "%02x", tag[i]);
    CHECK((f = fopen(path, "wb")) != NULL, "cannot write %s", path);
    fclose(f);
    expect_refused("a 16-byte fatbin that claims 1 MiB", img, sizeof img, key);
}

/* ---- real images through the shim ------------------------------------------- */

/* A fatbin around the stand-in's PTX, as nvcc would embed it. */
static uint8_t *fatbin_of(const char *ptx, size_t *len)
{
    size_t ptx_len = (strlen(ptx) + 1 + 7) & ~(size_t)7;
    uint64_t entries = SAMPLE_FATBIN_ENTRY + ptx_len;
    *len = 16 + entries;
    uint8_t *p = calloc(1, *len);
    CHECK(p != NULL);
    uint32_t magic = SAMPLE_FATBIN_MAGIC;
    memcpy(p, &magic, 4);
    p[4] = 1;
    p[6] = 16;
    put_u64(p + 8, entries);
    sample_entry(p + 16, 1, ptx_len);
    memcpy(p + 16 + SAMPLE_FATBIN_ENTRY, ptx, strlen(ptx));
    return p;
}

/* Broken PTX with both JIT logs asked for: the driver's error, its error
 * log in the caller's buffer, and the size options set to what was used. */
static void broken_ptx_logs(void)
{
    const char *bad = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k( { bogus; }\n";
    char info[256] = "untouched", err[256] = {0};
    CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                           CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_OPTIMIZATION_LEVEL};
    void *vals[] = {info, (void *)(uintptr_t)sizeof info, err, (void *)(uintptr_t)sizeof err,
                    (void *)(uintptr_t)4};
    CUmodule m;
    CUresult r = cuModuleLoadDataEx(&m, bad, 5, opts, vals);
    CHECK(r != CUDA_SUCCESS, "broken PTX loaded");
    CHECK(err[0] != 0, "broken PTX: no error log");
    CHECK((uintptr_t)vals[3] == strlen(err) + 1, "error log size option %zu for a log of %zu bytes",
          (size_t)(uintptr_t)vals[3], strlen(err));
    CHECK(info[0] == 0 && (uintptr_t)vals[1] == 1, "info log \"%s\", size option %zu", info,
          (size_t)(uintptr_t)vals[1]);
}

static int shim_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    size_t len;
    char *ptx = h_read_file(h_ptx_path(), &len);
    CUmodule m;
    CU(cuModuleLoadData(&m, ptx));
    CU(cuModuleUnload(m));
    uint8_t *fat = fatbin_of(ptx, &len);
    CU(cuModuleLoadData(&m, fat));
    CUfunction f;
    CU(cuModuleGetFunction(&f, m, "fill_u32"));
    CU(cuModuleUnload(m));
    /* Unloading frees what the client knew of the image: its handles are
     * invalid from then on, as in the driver (and under LeakSanitizer
     * nothing of it is left behind). */
    const char *name;
    CUmodule owner;
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuFuncGetName(&name, f));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuFuncGetModule(&owner, f));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuModuleGetFunction(&f, m, "fill_u32"));
    CUlibrary lib;
    CU(cuLibraryLoadData(&lib, fat, NULL, NULL, 0, NULL, NULL, 0));
    CU(cuLibraryUnload(lib));
    CU(cuLibraryLoadData(&lib, fat, NULL, NULL, 0, NULL, NULL, 0));
    CUkernel k;
    CU(cuLibraryGetKernel(&k, lib, "fill_u32"));
    CU(cuKernelGetFunction(&f, k));
    CUfunction mf;
    CU(cuLibraryGetModule(&owner, lib));
    CU(cuModuleGetFunction(&mf, owner, "fill_u32"));
    CU(cuLibraryUnload(lib));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuKernelGetName(&name, k));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuFuncGetName(&name, f));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuFuncGetName(&name, mf));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuModuleGetFunction(&mf, owner, "fill_u32"));
    /* The stand-in runs no cubins: the driver, not the size check, says no. */
    uint8_t *elf = sample_elf(&len);
    CU_EXPECT(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&m, elf));
    free(elf);
    broken_ptx_logs();
    free(fat);
    free(ptx);
    return 0;
}

int main(void)
{
    h_begin("bad_images", 40);
    h_server_start(&srv, "main", NULL);
    lying_images();
    planted_in_cache();
    int before = h_server_log_count(&srv, REFUSED);
    h_wait_ok(h_spawn(shim_client, NULL, 20, -1, -1), 20000, "real images through the shim");
    CHECK(h_server_log_count(&srv, REFUSED) == before, "the shim sent a real image shorter than its headers say");
    printf("ok the shim's PTX, fatbin and ELF images pass the check\n");
    h_server_stop(&srv);
    CHECK(h_soft_failures() == 0, "%d checks failed", h_soft_failures());
    printf("PASS bad_images\n");
    return 0;
}
