/* image_kernels.c - see image_kernels.h. The cubin has passed
 * image_check's ELF check (image_code): every section and symbol table
 * lies inside the bytes, string tables end in a NUL, and every symbol's
 * name lies inside its table. Fields are read with memcpy: a cubin inside
 * a fatbin sits at any offset.
 *
 * What makes the reader give up, so that the load takes the round trip:
 * not EM_CUDA; code for another SM than the device runs (the driver
 * refuses it, and the reply says so); no symbol table; a kernel whose code section is not an
 * ordinary one, or shared with another kernel (no order); two kernels of
 * one name; a kernel without its .nv.info section; a parameter record out
 * of place (ordinals not 0..n-1 once
 * each, a record past its section, a layout that disagrees with the
 * parameter bank's size). */
#define _GNU_SOURCE /* strdup */
#include "image_kernels.h"

#include "auth.h"
#include "image_check.h"
#include "why.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>

#define EM_CUDA_MACHINE 190
#define STO_CUDA_ENTRY 0x10
#define SHT_CUDA_INFO 0x70000000u
/* .nv.info records: a format byte, an attribute byte, then a 16-bit value
 * (formats 1-3) or a 16-bit length and that many bytes (format 4). */
#define EIFMT_SVAL 4
#define EIATTR_MAX_THREADS 0x05
#define EIATTR_PARAM_CBANK 0x0a
#define EIATTR_REQNTID 0x10
#define EIATTR_KPARAM_INFO 0x17
#define EIATTR_REGCOUNT 0x2f
/* KPARAM_INFO: u32 index, u16 ordinal, u16 offset, u32 whose bits 18-31
 * are the size in bytes. PARAM_CBANK: u32 symbol, u16 offset, u16 size. */
#define KPARAM_INFO_LEN 12
#define PARAM_CBANK_LEN 8
/* MAX_THREADS, REQNTID: u32 x, y, z. REGCOUNT (in the image's .nv.info):
 * u32 symbol index, u32 registers per thread. */
#define NTID_LEN 12
#define REGCOUNT_LEN 8
/* Kernels a reader takes on: cuBLAS-sized cubins have thousands. */
#define KERNELS_MAX 65536u
#define PARAMS_MAX 4096u

struct cubin {
    const uint8_t *p;
    Elf64_Ehdr eh;
};

static Elf64_Shdr section(const struct cubin *c, unsigned i)
{
    Elf64_Shdr sh;
    memcpy(&sh, c->p + c->eh.e_shoff + (size_t)i * sizeof sh, sizeof sh);
    return sh;
}

static const char *section_name(const struct cubin *c, const Elf64_Shdr *sh)
{
    if (c->eh.e_shstrndx == SHN_UNDEF) return "";
    return (const char *)c->p + section(c, c->eh.e_shstrndx).sh_offset + sh->sh_name;
}

/* A kernel while it is read: where its code is, which gives its order and
 * is what its .nv.info section names (sh_info). */
struct found {
    struct image_kernel k;
    unsigned shndx;
    uint64_t sym; /* its symbol's index, which REGCOUNT records name */
    int shared_sections;
    int has_info, has_cbank;
    uint32_t cbank_size;
    uint32_t seen; /* parameters whose record came */
};

struct reading {
    unsigned arch; /* the device's */
    struct found *f;
    uint32_t n;
    char *why;
    size_t whylen;
};

static int add_kernel(struct reading *r, const char *name, unsigned shndx, uint64_t sym)
{
    if (r->n == KERNELS_MAX) return why_fail(r->why, r->whylen, "more than %u kernels", KERNELS_MAX);
    if ((r->n & (r->n - 1)) == 0) { /* grow at powers of two */
        struct found *g = realloc(r->f, (r->n ? r->n * 2 : 1) * sizeof *g);
        if (!g) return why_fail(r->why, r->whylen, "out of memory");
        r->f = g;
    }
    struct found *f = &r->f[r->n];
    *f = (struct found){.shndx = shndx, .sym = sym, .k.limits.known = 1};
    if (!(f->k.name = strdup(name))) return why_fail(r->why, r->whylen, "out of memory");
    r->n++;
    return 0;
}

static int read_symbols(const struct cubin *c, const Elf64_Shdr *symtab, struct reading *r)
{
    Elf64_Shdr names = section(c, symtab->sh_link);
    for (uint64_t i = 0; i < symtab->sh_size / sizeof(Elf64_Sym); i++) {
        Elf64_Sym s;
        memcpy(&s, c->p + symtab->sh_offset + i * sizeof s, sizeof s);
        if (ELF64_ST_TYPE(s.st_info) != STT_FUNC || !(s.st_other & STO_CUDA_ENTRY)) continue;
        if (s.st_shndx == SHN_UNDEF || s.st_shndx >= c->eh.e_shnum)
            return why_fail(r->why, r->whylen, "a kernel whose code is in no ordinary section");
        if (add_kernel(r, (const char *)c->p + names.sh_offset + s.st_name, s.st_shndx, i) != 0) return -1;
    }
    return 0;
}

/* By binary search: check_order left r->f sorted by code section,
 * highest first, each section once. */
static struct found *kernel_of_section(struct reading *r, uint64_t shndx)
{
    uint32_t lo = 0, hi = r->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r->f[mid].shndx == shndx) return &r->f[mid];
        if (r->f[mid].shndx > shndx) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static int param_record(struct found *f, const uint8_t *v, struct reading *r)
{
    uint16_t ordinal, offset;
    uint32_t info;
    memcpy(&ordinal, v + 4, 2);
    memcpy(&offset, v + 6, 2);
    memcpy(&info, v + 8, 4);
    if (ordinal >= f->k.nparams) {
        if (ordinal >= PARAMS_MAX) return why_fail(r->why, r->whylen, "%s: parameter %u", f->k.name, ordinal);
        uint32_t n = ordinal + 1u;
        uint32_t *off = realloc(f->k.offset, n * sizeof *off), *size = off ? realloc(f->k.size, n * sizeof *size) : NULL;
        if (off) f->k.offset = off;
        if (!off || !size) return why_fail(r->why, r->whylen, "out of memory");
        f->k.size = size;
        for (uint32_t i = f->k.nparams; i < n; i++) f->k.offset[i] = f->k.size[i] = UINT32_MAX;
        f->k.nparams = n;
    }
    if (f->k.size[ordinal] != UINT32_MAX)
        return why_fail(r->why, r->whylen, "%s: parameter %u described twice", f->k.name, ordinal);
    f->k.offset[ordinal] = offset;
    f->k.size[ordinal] = info >> 18;
    f->seen++;
    return 0;
}

/* A launch bound: the product of its x, y and z; a record of another
 * shape leaves the kernel's limits unknown. */
static void ntid_record(struct found *f, uint16_t vlen, const uint8_t *v)
{
    uint32_t d[3];
    if (vlen != NTID_LEN) {
        f->k.limits.known = 0;
        return;
    }
    memcpy(d, v, sizeof d);
    uint64_t n = (uint64_t)d[0] * d[1] * d[2];
    if (n == 0 || n > UINT32_MAX) f->k.limits.known = 0;
    else if (!f->k.limits.max_threads || n < f->k.limits.max_threads) f->k.limits.max_threads = (uint32_t)n;
}

/* One kernel's .nv.info section: its parameters and their bank, and its
 * launch bounds. */
static int read_info(const uint8_t *d, uint64_t len, struct found *f, struct reading *r)
{
    for (uint64_t at = 0; at < len;) {
        if (len - at < 4) return why_fail(r->why, r->whylen, "%s: a truncated .nv.info record", f->k.name);
        uint8_t fmt = d[at], attr = d[at + 1];
        uint16_t vlen = 0;
        if (fmt == EIFMT_SVAL) memcpy(&vlen, d + at + 2, 2);
        else if (fmt < 1 || fmt > 3) return why_fail(r->why, r->whylen, "%s: .nv.info format %u", f->k.name, fmt);
        if (vlen > len - at - 4) return why_fail(r->why, r->whylen, "%s: a .nv.info record past its section", f->k.name);
        const uint8_t *v = d + at + 4;
        if (fmt == EIFMT_SVAL && attr == EIATTR_KPARAM_INFO) {
            if (vlen != KPARAM_INFO_LEN)
                return why_fail(r->why, r->whylen, "%s: a parameter record of %u bytes", f->k.name, vlen);
            if (param_record(f, v, r) != 0) return -1;
        } else if (fmt == EIFMT_SVAL && attr == EIATTR_PARAM_CBANK) {
            if (vlen != PARAM_CBANK_LEN) return why_fail(r->why, r->whylen, "%s: a parameter bank record", f->k.name);
            uint16_t size;
            memcpy(&size, v + 6, 2);
            f->has_cbank = 1;
            f->cbank_size = size;
        } else if (fmt == EIFMT_SVAL && (attr == EIATTR_MAX_THREADS || attr == EIATTR_REQNTID)) {
            ntid_record(f, vlen, v);
        }
        at += 4u + vlen;
    }
    return 0;
}

static int by_symbol(const void *a, const void *b)
{
    const struct found *x = *(struct found *const *)a, *y = *(struct found *const *)b;
    return x->sym < y->sym ? -1 : x->sym > y->sym;
}

static struct found *kernel_of_symbol(struct found **by_sym, uint32_t n, uint64_t sym)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (by_sym[mid]->sym == sym) return by_sym[mid];
        if (by_sym[mid]->sym < sym) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* The image's own .nv.info: each kernel's registers per thread (REGCOUNT,
 * by symbol; device functions have records too). Records of other kinds,
 * or malformed ones, say nothing of a launch's limits; a kernel without a
 * record keeps regs 0. */
static void read_regcounts(const uint8_t *d, uint64_t len, struct reading *r)
{
    struct found **by_sym = malloc((r->n ? r->n : 1) * sizeof *by_sym);
    if (!by_sym) return;
    for (uint32_t i = 0; i < r->n; i++) by_sym[i] = &r->f[i];
    qsort(by_sym, r->n, sizeof *by_sym, by_symbol);
    for (uint64_t at = 0; len - at >= 4;) {
        uint8_t fmt = d[at], attr = d[at + 1];
        uint16_t vlen = 0;
        if (fmt == EIFMT_SVAL) memcpy(&vlen, d + at + 2, 2);
        if (vlen > len - at - 4) break;
        if (fmt == EIFMT_SVAL && attr == EIATTR_REGCOUNT && vlen == REGCOUNT_LEN) {
            uint32_t rec[2];
            memcpy(rec, d + at + 4, sizeof rec);
            struct found *f = kernel_of_symbol(by_sym, r->n, rec[0]);
            if (f && rec[1] > f->k.limits.regs) f->k.limits.regs = rec[1];
        }
        at += 4u + vlen;
    }
    free(by_sym);
}

/* .nv.shared.<kernel> (sh_info: the kernel's code section): its static
 * shared memory. Two such sections leave the kernel's limits unknown. */
static void read_shared(const Elf64_Shdr *sh, struct reading *r)
{
    struct found *f = kernel_of_section(r, sh->sh_info);
    if (!f) return;
    if (f->shared_sections++ || sh->sh_size > UINT32_MAX) f->k.limits.known = 0;
    else f->k.limits.shared_bytes = (uint32_t)sh->sh_size;
}

static int read_infos(const struct cubin *c, struct reading *r)
{
    for (unsigned i = 0; i < c->eh.e_shnum; i++) {
        Elf64_Shdr sh = section(c, i);
        const char *name = section_name(c, &sh);
        if (strncmp(name, ".nv.shared.", 11) == 0 && strncmp(name, ".nv.shared.reserved.", 20) != 0)
            read_shared(&sh, r);
        if (sh.sh_type == SHT_CUDA_INFO && strcmp(name, ".nv.info") == 0)
            read_regcounts(c->p + sh.sh_offset, sh.sh_size, r);
        if (sh.sh_type != SHT_CUDA_INFO || strncmp(name, ".nv.info.", 9) != 0) continue;
        struct found *f = kernel_of_section(r, sh.sh_info);
        if (!f) continue;
        if (f->has_info++) return why_fail(r->why, r->whylen, "%s: two .nv.info sections", f->k.name);
        if (read_info(c->p + sh.sh_offset, sh.sh_size, f, r) != 0) return -1;
    }
    return 0;
}

/* Every parameter described once, none overlapping the end the bank
 * declares: the end of the last one is the bank's size. */
static int check_layout(struct found *f, struct reading *r)
{
    if (!f->has_info) return why_fail(r->why, r->whylen, "%s: no .nv.info section", f->k.name);
    if (f->seen != f->k.nparams) return why_fail(r->why, r->whylen, "%s: a parameter without its record", f->k.name);
    uint32_t end = 0;
    for (uint32_t i = 0; i < f->k.nparams; i++)
        if (f->k.offset[i] + f->k.size[i] > end) end = f->k.offset[i] + f->k.size[i];
    if ((f->k.nparams || f->has_cbank) && (!f->has_cbank || f->cbank_size != end))
        return why_fail(r->why, r->whylen, "%s: parameters end at %u, its parameter bank holds %u", f->k.name, end,
                        f->has_cbank ? f->cbank_size : 0);
    f->k.param_bytes = end;
    return 0;
}

static int by_section_descending(const void *a, const void *b)
{
    const struct found *x = a, *y = b;
    return x->shndx < y->shndx ? 1 : x->shndx > y->shndx ? -1 : 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted by code section: a tie, or a name twice, leaves no order to
 * trust. */
static int check_order(struct reading *r)
{
    if (r->n < 2) return 0;
    qsort(r->f, r->n, sizeof *r->f, by_section_descending);
    for (uint32_t i = 1; i < r->n; i++)
        if (r->f[i].shndx == r->f[i - 1].shndx)
            return why_fail(r->why, r->whylen, "kernels %s and %s share a section", r->f[i - 1].k.name, r->f[i].k.name);
    char **names = malloc(r->n * sizeof *names);
    if (!names) return why_fail(r->why, r->whylen, "out of memory");
    for (uint32_t i = 0; i < r->n; i++) names[i] = r->f[i].k.name;
    qsort(names, r->n, sizeof *names, by_name);
    int rc = 0;
    for (uint32_t i = 1; i < r->n && !rc; i++)
        if (strcmp(names[i], names[i - 1]) == 0) rc = why_fail(r->why, r->whylen, "the kernel %s twice", names[i]);
    free(names);
    return rc;
}

/* The SM a cubin's code is for, from its header: e_flags bits 8-15 in the
 * ELF ABI of CUDA 12.8 and later (version 8), bits 0-7 before (7); 0 for
 * an ABI this reader does not know. */
static unsigned cubin_arch(const Elf64_Ehdr *eh)
{
    if (eh->e_ident[EI_ABIVERSION] == 8) return (eh->e_flags >> 8) & 0xffu;
    if (eh->e_ident[EI_ABIVERSION] == 7) return eh->e_flags & 0xffu;
    return 0;
}

static int read_cubin(const uint8_t *p, struct reading *r)
{
    struct cubin c = {.p = p};
    memcpy(&c.eh, p, sizeof c.eh);
    if (c.eh.e_machine != EM_CUDA_MACHINE) return why_fail(r->why, r->whylen, "an ELF file for machine %u", c.eh.e_machine);
    /* The driver runs a cubin on a device of its major version and at
     * least its minor (image_code's choice in a fatbin); else it refuses
     * the load, and the load's reply should say so. */
    unsigned sm = cubin_arch(&c.eh);
    if (sm / 10 != r->arch / 10 || sm > r->arch)
        return why_fail(r->why, r->whylen, "code for sm_%u (ELF ABI %u), the device is sm_%u", sm,
                        c.eh.e_ident[EI_ABIVERSION], r->arch);
    int symtabs = 0;
    for (unsigned i = 0; i < c.eh.e_shnum; i++) {
        Elf64_Shdr sh = section(&c, i);
        if (sh.sh_type != SHT_SYMTAB) continue;
        if (symtabs++ || read_symbols(&c, &sh, r) != 0)
            return symtabs > 1 ? why_fail(r->why, r->whylen, "two symbol tables") : -1;
    }
    if (!symtabs) return why_fail(r->why, r->whylen, "a cubin without a symbol table");
    if (check_order(r) != 0 || read_infos(&c, r) != 0) return -1;
    for (uint32_t i = 0; i < r->n; i++)
        if (check_layout(&r->f[i], r) != 0) return -1;
    return 0;
}

static int code_kernels(int kind, const uint8_t *code, size_t len, void *arg)
{
    (void)len;
    struct reading *r = arg;
    if (kind != IMAGE_CODE_ELF) return why_fail(r->why, r->whylen, "PTX, which the driver compiles at the load");
    return read_cubin(code, r);
}

static void free_found(struct reading *r)
{
    for (uint32_t i = 0; i < r->n; i++) {
        free(r->f[i].k.name);
        free(r->f[i].k.offset);
        free(r->f[i].k.size);
    }
    free(r->f);
}

int image_kernels(const void *image, size_t len, unsigned arch, int is_library, struct image_kernels *out, char *why,
                  size_t whylen)
{
    struct reading r = {.arch = arch, .why = why, .whylen = whylen};
    if (image_code(image, len, arch, IMAGE_CODE_UNIQUE, code_kernels, &r, why, whylen) != 0) {
        free_found(&r);
        return -1;
    }
    struct image_kernel *k = calloc(r.n ? r.n : 1, sizeof *k);
    if (!k) {
        free_found(&r);
        return why_fail(why, whylen, "out of memory");
    }
    for (uint32_t i = 0; i < r.n; i++) k[is_library ? r.n - 1 - i : i] = r.f[i].k;
    free(r.f);
    *out = (struct image_kernels){.n = r.n, .k = k};
    return 0;
}

void image_kernels_free(struct image_kernels *k)
{
    for (uint32_t i = 0; k && i < k->n; i++) {
        free(k->k[i].name);
        free(k->k[i].offset);
        free(k->k[i].size);
    }
    if (k) free(k->k);
}

void image_kernels_digest(const char *const *names, uint32_t n, uint8_t out[32])
{
    auth_sha256 c;
    auth_sha256_init(&c);
    for (uint32_t i = 0; i < n; i++) auth_sha256_update(&c, names[i], strlen(names[i]) + 1);
    auth_sha256_final(&c, out);
}
