/* test_image_kernels.c - the kernel reader (src/common/image_kernels.c) on
 * images nvcc made (nvcc_kernels.h): every kernel and only kernels, in the
 * driver's order for a module and the reverse for a library, with each
 * parameter's offset and size as the C layout of the kernel's signature
 * places them; the fatbin entry the device would load; PTX and damaged
 * cubins refused; the launch limits of kernels with and without
 * __launch_bounds__, static shared memory and a register cap (nvcc_limits.h). Each image sits in a heap buffer of exactly its size,
 * so the ASan build also catches a read past the end. */
#define _GNU_SOURCE
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nvcc_kernels.h"
#include "nvcc_limits.h"
#include "sample_images.h"
#include "common/image_kernels.h"

static char why[256];

struct want {
    const char *name; /* a prefix for the static kernel, whose name holds a hash of the compile */
    uint32_t nparams;
    uint32_t offset[4], size[4];
};

/* Module order: the code sections' indices, highest first. */
static const struct want module_order[] = {
    {"first", 4, {0, 8, 16, 24}, {8, 1, 8, 32}},  /* int *, char, double, struct of 32 bytes */
    {"_Z6second6float4sx", 3, {0, 16, 24}, {16, 2, 8}},
    {"_Z6noargsv", 0, {0}, {0}},
    {"_Z3tplIfEvPT_S0_", 2, {0, 8}, {8, 4}},
    {"_Z3tplIdEvPT_S0_", 2, {0, 8}, {8, 8}},
    {"_Z5callsPi", 1, {0}, {8}},
    {"_Z11hopper_only3Bigi", 2, {0, 300}, {300, 4}},
    {"__nv_static_", 1, {0}, {8}},
};
#define NWANT (sizeof module_order / sizeof module_order[0])

static int read_exact(const uint8_t *img, size_t len, unsigned arch, int is_library, struct image_kernels *out)
{
    uint8_t *copy = malloc(len);
    if (!copy) return -2;
    memcpy(copy, img, len);
    int r = image_kernels(copy, len, arch, is_library, out, why, sizeof why);
    free(copy);
    return r;
}

static int same(const struct image_kernel *k, const struct want *w)
{
    int ok = strncmp(k->name, w->name, strlen(w->name)) == 0 && k->nparams == w->nparams;
    uint32_t end = 0;
    for (uint32_t i = 0; ok && i < w->nparams; i++) {
        ok = k->offset[i] == w->offset[i] && k->size[i] == w->size[i];
        if (w->offset[i] + w->size[i] > end) end = w->offset[i] + w->size[i];
    }
    if (ok && k->param_bytes != end) ok = 0;
    if (!ok) printf("  got %s (%u parameters), want %s\n", k->name, k->nparams, w->name);
    return ok;
}

/* want[skip] is not in this code (the sm_80 cubin has no hopper_only). */
static void check_list(const struct image_kernels *k, int is_library, size_t skip)
{
    size_t n = NWANT - (skip < NWANT);
    CHECK(k->n == n);
    for (size_t i = 0, j = 0; i < NWANT && j < k->n; i++) {
        if (i == skip) continue;
        CHECK(same(&k->k[is_library ? k->n - 1 - j : j], &module_order[i]));
        j++;
    }
}

static void cubin(void)
{
    struct image_kernels k;
    int r = read_exact(kernels_cubin, sizeof kernels_cubin, 90, 0, &k);
    CHECK(r == 0);
    if (r != 0) {
        printf("  the cubin: %s\n", why);
        return;
    }
    check_list(&k, 0, NWANT);
    image_kernels_free(&k);
    CHECK(read_exact(kernels_cubin, sizeof kernels_cubin, 90, 1, &k) == 0);
    check_list(&k, 1, NWANT);
    /* The digest is of the names in order: the library's differs. */
    const char *names[16];
    for (uint32_t i = 0; i < k.n && i < 16; i++) names[i] = k.k[i].name;
    uint8_t lib[32], mod[32];
    image_kernels_digest(names, k.n, lib);
    for (uint32_t i = 0; i < k.n && i < 16; i++) names[i] = k.k[k.n - 1 - i].name;
    image_kernels_digest(names, k.n, mod);
    CHECK(memcmp(lib, mod, 32) != 0);
    image_kernels_digest(names, k.n - 1, lib);
    CHECK(memcmp(lib, mod, 32) != 0);
    image_kernels_free(&k);
}

/* The fatbin: the cubin of the device's major version and the highest
 * minor up to it, else PTX, which is refused. */
static void fatbin(void)
{
    struct image_kernels k;
    CHECK(read_exact(kernels_fatbin, sizeof kernels_fatbin, 90, 0, &k) == 0);
    check_list(&k, 0, NWANT);
    image_kernels_free(&k);
    CHECK(read_exact(kernels_fatbin, sizeof kernels_fatbin, 86, 0, &k) == 0); /* sm_80's cubin */
    check_list(&k, 0, 6);
    image_kernels_free(&k);
    CHECK(read_exact(kernels_fatbin, sizeof kernels_fatbin, 100, 0, &k) == -1); /* only the PTX fits */
    CHECK(strstr(why, "PTX") != NULL);
    CHECK(read_exact(kernels_fatbin, sizeof kernels_fatbin, 75, 0, &k) == -1); /* nothing fits */
    CHECK(strstr(why, "no code for sm_75") != NULL);
    /* sm_90 and sm_90a: which one the driver loads is not certain. */
    CHECK(read_exact(kernels_fatbin_90a, sizeof kernels_fatbin_90a, 90, 0, &k) == -1);
    CHECK(strstr(why, "2 code entries for sm_90") != NULL);
    /* A bare cubin runs within its major version, from its minor on. */
    CHECK(read_exact(kernels_cubin, sizeof kernels_cubin, 91, 0, &k) == 0);
    image_kernels_free(&k);
    CHECK(read_exact(kernels_cubin, sizeof kernels_cubin, 89, 0, &k) == -1);
    CHECK(strstr(why, "code for sm_90 (ELF ABI 8), the device is sm_89") != NULL);
    CHECK(read_exact(kernels_cubin, sizeof kernels_cubin, 100, 0, &k) == -1);
}

/* A copy of the cubin with one change at `at`: refused, with `expect` in
 * the reason. */
static void refused_with(size_t at, const void *bytes, size_t n, const char *expect)
{
    uint8_t *img = malloc(sizeof kernels_cubin);
    memcpy(img, kernels_cubin, sizeof kernels_cubin);
    memcpy(img + at, bytes, n);
    struct image_kernels k;
    int r = image_kernels(img, sizeof kernels_cubin, 90, 0, &k, why, sizeof why);
    CHECK(r == -1);
    if (r == 0) image_kernels_free(&k);
    CHECK(strstr(why, expect) != NULL);
    if (!strstr(why, expect)) printf("  want \"%s\", got \"%s\"\n", expect, why);
    free(img);
}

static Elf64_Shdr section_of(unsigned i)
{
    Elf64_Ehdr eh;
    Elf64_Shdr sh;
    memcpy(&eh, kernels_cubin, sizeof eh);
    memcpy(&sh, kernels_cubin + eh.e_shoff + i * sizeof sh, sizeof sh);
    return sh;
}

static const char *section_name_of(unsigned i)
{
    Elf64_Ehdr eh;
    memcpy(&eh, kernels_cubin, sizeof eh);
    return (const char *)kernels_cubin + section_of(eh.e_shstrndx).sh_offset + section_of(i).sh_name;
}

static unsigned section_named(const char *name)
{
    Elf64_Ehdr eh;
    memcpy(&eh, kernels_cubin, sizeof eh);
    for (unsigned i = 0; i < eh.e_shnum; i++)
        if (strcmp(section_name_of(i), name) == 0) return i;
    return 0;
}

static void damaged(void)
{
    uint16_t machine = 62; /* x86-64 */
    refused_with(offsetof(Elf64_Ehdr, e_machine), &machine, 2, "machine 62");
    /* first's parameter bank one byte short of its parameters */
    Elf64_Shdr info = section_of(section_named(".nv.info.first"));
    CHECK(info.sh_size > 0);
    const uint8_t *d = kernels_cubin + info.sh_offset;
    for (uint64_t at = 0; at + 4 <= info.sh_size; at += d[at] == 4 ? 4u + (uint16_t)(d[at + 2] | d[at + 3] << 8) : 4u) {
        if (d[at] == 4 && d[at + 1] == 0x0a) {
            uint16_t short_bank = 55;
            refused_with(info.sh_offset + at + 4 + 6, &short_bank, 2, "its parameter bank holds 55");
        }
        if (d[at] == 4 && d[at + 1] == 0x17 && d[at + 8] == 0) { /* ordinal 0 made ordinal 1 again */
            uint16_t ordinal = 1;
            refused_with(info.sh_offset + at + 4 + 4, &ordinal, 2, "described twice");
        }
    }
    /* a record's length past its section */
    uint8_t bad_len[2] = {0xff, 0x7f};
    refused_with(info.sh_offset + 2, bad_len, 2, "past its section");
    /* an unknown record format */
    uint8_t bad_fmt = 9;
    refused_with(info.sh_offset, &bad_fmt, 1, "format 9");
    /* second's code in first's section: no order to trust; second named
     * first: a name twice */
    Elf64_Ehdr eh;
    memcpy(&eh, kernels_cubin, sizeof eh);
    unsigned first_text = section_named(".text.first");
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr sh = section_of(i);
        if (sh.sh_type != SHT_SYMTAB) continue;
        Elf64_Shdr names = section_of(sh.sh_link);
        uint32_t first_name = 0;
        for (uint64_t off = 0; off < sh.sh_size; off += sizeof(Elf64_Sym)) {
            Elf64_Sym sym;
            memcpy(&sym, kernels_cubin + sh.sh_offset + off, sizeof sym);
            if (strcmp((const char *)kernels_cubin + names.sh_offset + sym.st_name, "first") == 0) first_name = sym.st_name;
        }
        CHECK(first_name != 0);
        for (uint64_t off = 0; off < sh.sh_size; off += sizeof(Elf64_Sym)) {
            Elf64_Sym sym;
            memcpy(&sym, kernels_cubin + sh.sh_offset + off, sizeof sym);
            const char *name = (const char *)kernels_cubin + names.sh_offset + sym.st_name;
            if (strcmp(name, "_Z6second6float4sx") == 0) {
                uint16_t shndx = (uint16_t)first_text;
                refused_with(sh.sh_offset + off + offsetof(Elf64_Sym, st_shndx), &shndx, 2, "share a section");
                refused_with(sh.sh_offset + off + offsetof(Elf64_Sym, st_name), &first_name, 4, "the kernel first twice");
            }
        }
    }
}

/* PTX, bare: the driver compiles it at the load. */
static void ptx(void)
{
    struct image_kernels k;
    CHECK(read_exact((const uint8_t *)sample_ptx_text, sizeof sample_ptx_text, 90, 0, &k) == -1);
    CHECK(strstr(why, "PTX") != NULL);
}

/* Every strict prefix of the cubin fails its check, and is refused. */
static void prefixes(void)
{
    int accepted = 0;
    for (size_t n = 0; n < sizeof kernels_cubin; n += 7) {
        struct image_kernels k;
        if (read_exact(kernels_cubin, n ? n : 1, 90, 0, &k) == 0) {
            accepted++;
            image_kernels_free(&k);
        }
    }
    CHECK(accepted == 0);
}

static const struct image_kernel *named(const struct image_kernels *k, const char *name)
{
    for (uint32_t i = 0; i < k->n; i++)
        if (strcmp(k->k[i].name, name) == 0) return &k->k[i];
    printf("  no kernel %s\n", name);
    return NULL;
}

/* What bounds a launch: __launch_bounds__' threads, the registers
 * (REGCOUNT, under the cap where there is one), static shared memory (the
 * 400 bytes of bounded64's array, with whatever the toolkit reserves). */
static void limits(void)
{
    struct image_kernels k;
    CHECK(read_exact(limits_cubin, sizeof limits_cubin, 90, 0, &k) == 0);
    CHECK(k.n == 4);
    const struct image_kernel *b64 = named(&k, "bounded64"), *b256 = named(&k, "bounded256"),
                              *plain = named(&k, "plain"), *capped = named(&k, "capped");
    CHECK(b64 && b256 && plain && capped);
    if (b64 && b256 && plain && capped) {
        CHECK(b64->limits.known && b256->limits.known && plain->limits.known && capped->limits.known);
        CHECK(b64->limits.max_threads == 64);
        CHECK(b256->limits.max_threads == 256);
        CHECK(plain->limits.max_threads == 0 && capped->limits.max_threads == 0);
        CHECK(b64->limits.regs > 0 && b256->limits.regs > 0 && plain->limits.regs > 0);
        CHECK(capped->limits.regs > 0 && capped->limits.regs <= 40);
        CHECK(b64->limits.shared_bytes >= 400 && b64->limits.shared_bytes <= 400 + 1024);
        CHECK(plain->limits.shared_bytes <= 1024); /* its shared memory is all dynamic */
        CHECK(b64->limits.shared_bytes > plain->limits.shared_bytes);
    }
    image_kernels_free(&k);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    cubin();
    fatbin();
    damaged();
    ptx();
    prefixes();
    limits();
    printf("%d checks, %d failed\n", checks, failures);
    return failures != 0;
}
