/* fuzz_image.c - the module image check (src/common/image_check.c) on
 * mutated images, in-process.
 *
 * Seeds: a PTX text, a cubin-like ELF and a fatbin holding both
 * (tests/unit/sample_images.h), and nvcc's fatbins of a zstd cubin and of
 * LZ4 PTX (tests/unit/nvcc_fatbins.h). Each iteration mutates one (bytes flipped,
 * header fields set to edge values, truncated, extended) into a heap
 * buffer of exactly its size and checks it. Two properties:
 *   - the check never reads outside the buffer (the ASan build,
 *     -DSCUDA_SANITIZE=ON, catches it);
 *   - an image it accepts can be walked the way a driver walks it (every
 *     header table, section, segment, name, symbol name, fatbin entry and
 *     the PTX text, a compressed entry's compressed bytes) without leaving
 *     the buffer. The walk checks each range before touching it, so a
 *     release build catches that too;
 *   - listing an accepted image's variables (image_globals, which
 *     decompresses a compressed entry) and its kernels (image_kernels)
 *     stays inside the buffer and its own, under ASan.
 * FUZZ_ITERATIONS (default 500000) and FUZZ_SEED tune it. */
#define _GNU_SOURCE
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SCUDA_LIBFUZZER
#include "fuzz_rng.h"
#endif
#include "../unit/nvcc_fatbins.h"
#include "../unit/sample_images.h"
#include "common/image_check.h"
#include "common/image_kernels.h"


static unsigned long failures;

/* ---- the walk: what a driver reads of an accepted image ------------------------ */

static const uint8_t *buf_start;
static size_t buf_len;
static volatile uint8_t sink;

/* The n bytes at p lie in the buffer: read them. Else count a failure. */
static int reach(const uint8_t *p, uint64_t n, const char *what)
{
    uint64_t at = (uint64_t)(p - buf_start);
    if (p < buf_start || at > buf_len || n > buf_len - at) {
        if (failures++ < 20) fprintf(stderr, "FAIL: accepted image: %s (%llu bytes at %llu) outside its %zu bytes\n",
                                     what, (unsigned long long)n, (unsigned long long)at, buf_len);
        return 0;
    }
    for (uint64_t i = 0; i < n; i++) sink ^= p[i];
    return 1;
}

/* A NUL-terminated string at p, read as strlen would. */
static int reach_string(const uint8_t *p, const char *what)
{
    if (!reach(p, 0, what)) return 0;
    const uint8_t *nul = memchr(p, 0, buf_len - (size_t)(p - buf_start));
    return nul ? reach(p, (uint64_t)(nul - p) + 1, what) : reach(p, buf_len + 1, what);
}

static int walk_elf(const uint8_t *p)
{
    Elf64_Ehdr eh;
    if (!reach(p, sizeof eh, "ELF header")) return 0;
    memcpy(&eh, p, sizeof eh);
    const uint8_t *shdrs = p + eh.e_shoff, *phdrs = p + eh.e_phoff;
    if (!reach(shdrs, (uint64_t)eh.e_shnum * eh.e_shentsize, "section headers")) return 0;
    if (!reach(phdrs, (uint64_t)eh.e_phnum * eh.e_phentsize, "program headers")) return 0;
    Elf64_Shdr names = {0}, sh, link;
    if (eh.e_shstrndx) memcpy(&names, shdrs + (size_t)eh.e_shstrndx * sizeof sh, sizeof names);
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        memcpy(&sh, shdrs + (size_t)i * sizeof sh, sizeof sh);
        if (sh.sh_type != SHT_NOBITS && !reach(p + sh.sh_offset, sh.sh_size, "a section")) return 0;
        if (eh.e_shstrndx && !reach_string(p + names.sh_offset + sh.sh_name, "a section name")) return 0;
        if (sh.sh_type != SHT_SYMTAB) continue;
        memcpy(&link, shdrs + (size_t)sh.sh_link * sizeof sh, sizeof link);
        for (uint64_t off = 0; off + sizeof(Elf64_Sym) <= sh.sh_size; off += sizeof(Elf64_Sym)) {
            Elf64_Sym sym;
            memcpy(&sym, p + sh.sh_offset + off, sizeof sym);
            if (!reach_string(p + link.sh_offset + sym.st_name, "a symbol name")) return 0;
        }
    }
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, phdrs + (size_t)i * sizeof ph, sizeof ph);
        if (!reach(p + ph.p_offset, ph.p_filesz, "a segment")) return 0;
    }
    return 1;
}

static void walk_fatbin(const uint8_t *p)
{
    uint16_t header;
    uint64_t size;
    memcpy(&header, p + 6, 2);
    memcpy(&size, p + 8, 8);
    if (!reach(p, (uint64_t)header + size, "the fatbin")) return;
    for (const uint8_t *e = p + header, *end = e + size; end - e >= SAMPLE_FATBIN_ENTRY;) {
        uint32_t eh;
        uint64_t payload;
        memcpy(&eh, e + 4, 4);
        memcpy(&payload, e + 8, 8);
        if (!reach(e, (uint64_t)eh + payload, "a fatbin entry")) return;
        uint32_t packed = 0;
        if (eh >= 20) memcpy(&packed, e + 16, 4);
        if (!reach(e + eh, packed, "a compressed entry's bytes")) return;
        if (payload >= SELFMAG && memcmp(e + eh, ELFMAG, SELFMAG) == 0 && !walk_elf(e + eh)) return;
        e += eh + payload;
    }
}

/* Every name image_globals hands out is read to its NUL. */
static int read_name(const char *name, void *arg)
{
    (void)arg;
    for (const char *c = name; *c; c++) sink ^= (uint8_t)*c;
    return 0;
}

static void list_globals(const uint8_t *p, size_t len)
{
    char why[256];
    static const unsigned archs[] = {52, 75, 90, 100};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        image_globals(p, len, archs[i], read_name, NULL, why, sizeof why);
        struct image_kernels k;
        if (image_kernels(p, len, archs[i], (int)(i & 1), &k, why, sizeof why) != 0) continue;
        for (uint32_t j = 0; j < k.n; j++) read_name(k.k[j].name, NULL);
        image_kernels_free(&k);
    }
}

static void walk(const uint8_t *p, size_t len)
{
    uint32_t magic = 0;
    buf_start = p;
    buf_len = len;
    if (len >= 4) memcpy(&magic, p, 4);
    if (len >= SELFMAG && memcmp(p, ELFMAG, SELFMAG) == 0) walk_elf(p);
    else if (magic == SAMPLE_FATBIN_MAGIC) walk_fatbin(p);
    else reach_string(p, "the PTX text");
}

#ifdef SCUDA_LIBFUZZER
/* The libFuzzer target (tests/fuzz/libfuzzer/): the input is the image,
 * in libFuzzer's buffer of exactly its size; the same walk judges what
 * the check accepts. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[256];
    if (image_check(data, size, why, sizeof why) == 0) {
        walk(data, size);
        list_globals(data, size);
    }
    if (failures) abort();
    return 0;
}
#else
/* ---- mutation -------------------------------------------------------------------- */

static uint64_t edge_value(size_t len)
{
    static const uint64_t fixed[] = {0, 1, 2, 7, 8, 15, 16, 63, 64, 0xff, 0xffff, 0xff00, 1u << 20,
                                     0x7fffffff, 0xffffffff, UINT64_MAX, UINT64_MAX - 7};
    uint64_t pick = below(4);
    if (pick == 0) return len;
    if (pick == 1) return len + below(9) - 4;
    return fixed[below(sizeof fixed / sizeof fixed[0])];
}

/* Header fields sit at the start and, for ELF, in the section table at
 * the end: aim there more often than elsewhere. */
static size_t field_offset(size_t len)
{
    size_t where = below(3);
    if (where == 0 && len > 64) return below(64);
    if (where == 1 && len > 6 * 64) return len - 6 * 64 + below(6 * 64);
    return below(len);
}

static size_t mutate(uint8_t *p, size_t len, size_t cap)
{
    switch (below(5)) {
    case 0: /* flip a few bytes */
        for (int i = 1 + (int)below(8); i > 0 && len; i--) p[below(len)] ^= (uint8_t)(1 + below(255));
        return len;
    case 1: { /* a 2, 4 or 8-byte field set to an edge value */
        size_t w = (size_t)1 << (1 + below(3));
        if (len < w) return len;
        size_t off = field_offset(len - w + 1);
        uint64_t v = edge_value(len);
        memcpy(p + off, &v, w);
        return len;
    }
    case 2: /* truncated */
        return below(len + 1);
    case 3: { /* extended with random bytes */
        size_t more = below(cap - len + 1);
        for (size_t i = 0; i < more; i++) p[len + i] = (uint8_t)rnd();
        return len + more;
    }
    default: /* a NUL or a non-text byte somewhere */
        if (len) p[below(len)] = below(2) ? 0 : (uint8_t)below(32);
        return len;
    }
}

#define SEEDS 5

static uint8_t *copy_of(const uint8_t *p, size_t n, size_t *len)
{
    uint8_t *c = malloc(n);
    memcpy(c, p, n);
    *len = n;
    return c;
}

static void make_seeds(uint8_t *img[SEEDS], size_t len[SEEDS])
{
    img[0] = sample_ptx(&len[0]);
    img[1] = sample_elf(&len[1]);
    img[2] = sample_fatbin(&len[2]);
    img[3] = copy_of(nvcc_elf_zstd, sizeof nvcc_elf_zstd, &len[3]);
    img[4] = copy_of(nvcc_ptx_lz4, sizeof nvcc_ptx_lz4, &len[4]);
}

/* --write-seeds DIR: the seeds, as the libFuzzer image target's seed
 * corpus (tests/fuzz/corpus/image). */
static int write_seeds(const char *dir)
{
    static const char *names[SEEDS] = {"sample.ptx", "sample.cubin", "sample.fatbin", "nvcc-zstd-cubin.fatbin",
                                       "nvcc-lz4-ptx.fatbin"};
    size_t len[SEEDS];
    uint8_t *img[SEEDS];
    make_seeds(img, len);
    int rc = 0;
    for (int i = 0; i < SEEDS; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(img[i], 1, len[i], f) != len[i] || fclose(f) != 0) {
            fprintf(stderr, "fuzz_image: cannot write %s\n", path);
            rc = 1;
        }
        free(img[i]);
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0) return write_seeds(argv[2]);
    const char *it = getenv("FUZZ_ITERATIONS");
    unsigned long iterations = it ? strtoul(it, NULL, 10) : 500000;
    uint64_t seed = rng_seed();
    printf("fuzz_image: %lu iterations, FUZZ_SEED=%llu\n", iterations, (unsigned long long)seed);
    size_t seed_len[SEEDS];
    uint8_t *seeds[SEEDS];
    make_seeds(seeds, seed_len);
    unsigned long accepted = 0;
    char why[256];
    for (unsigned long i = 0; i < iterations; i++) {
        int s = (int)below(SEEDS);
        size_t cap = seed_len[s] + 256, len = seed_len[s];
        uint8_t *work = malloc(cap);
        memcpy(work, seeds[s], len);
        for (int m = 1 + (int)below(3); m > 0; m--) len = mutate(work, len, cap);
        uint8_t *exact = malloc(len ? len : 1); /* exactly its size: ASan sees any overread */
        memcpy(exact, work, len);
        if (image_check(exact, len, why, sizeof why) == 0) {
            accepted++;
            walk(exact, len);
            list_globals(exact, len);
        }
        free(exact);
        free(work);
    }
    for (int s = 0; s < SEEDS; s++) free(seeds[s]);
    printf("fuzz_image: %lu of %lu mutated images accepted, %lu failures\n", accepted, iterations, failures);
    return failures != 0;
}
#endif
