/* test_image_check.c - module images are checked against their own headers
 * (src/common/image_check.c): well-formed ELF, fatbin and PTX images pass;
 * every strict prefix of them, and each header field that points past the
 * bytes, is refused. Each image sits in a heap buffer of exactly its size,
 * so the ASan build also catches a read past the end. */
#include <elf.h>
#include <lz4.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nvcc_fatbins.h"
#include "sample_images.h"
#include "common/image_check.h"

static char why[256];

/* image_check on a copy of exactly len bytes. */
static int check_exact(const uint8_t *img, size_t len)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy) return -2;
    memcpy(copy, img, len);
    int r = image_check(copy, len, why, sizeof why);
    free(copy);
    return r;
}

static void every_prefix_refused(const char *what, const uint8_t *img, size_t len)
{
    int accepted = 0;
    for (size_t n = 0; n < len; n++) accepted += check_exact(img, n) == 0;
    CHECK(accepted == 0);
    if (accepted) printf("  %s: %d strict prefixes accepted\n", what, accepted);
}

static void good_images(void)
{
    size_t len;
    uint8_t *ptx = sample_ptx(&len);
    CHECK(check_exact(ptx, len) == 0);
    every_prefix_refused("PTX", ptx, len);
    free(ptx);
    uint8_t *elf = sample_elf(&len);
    CHECK(check_exact(elf, len) == 0);
    every_prefix_refused("ELF", elf, len);
    free(elf);
    uint8_t *fat = sample_fatbin(&len);
    CHECK(check_exact(fat, len) == 0);
    every_prefix_refused("fatbin", fat, len);
    /* more bytes than the headers declare are harmless */
    uint8_t *longer = calloc(1, len + 100);
    memcpy(longer, fat, len);
    CHECK(check_exact(longer, len + 100) == 0);
    free(longer);
    free(fat);
}

static void bad_ptx(void)
{
    CHECK(check_exact((const uint8_t *)"A", 1) != 0);     /* the 1-byte image */
    CHECK(check_exact((const uint8_t *)"", 1) != 0);      /* empty text */
    CHECK(check_exact((const uint8_t *)"", 0) != 0);      /* nothing */
    CHECK(check_exact((const uint8_t *)".version", 8) != 0); /* no NUL */
    CHECK(check_exact((const uint8_t *)".ver\001sion", 10) != 0);
    CHECK(check_exact((const uint8_t *)".version 8.0\n\0junk", 19) == 0); /* the driver stops at the NUL */
}

/* Apply one change to a fresh sample ELF (at offset `base` of the image
 * built by `build`), and expect a refusal. */
typedef void (*elf_edit)(uint8_t *elf);

static void expect_refused(uint8_t *(*build)(size_t *), size_t base, elf_edit edit, const char *what)
{
    size_t len;
    uint8_t *img = build(&len);
    edit(img + base);
    int r = check_exact(img, len);
    CHECK(r != 0);
    if (r == 0) printf("  accepted: %s\n", what);
    free(img);
}

static Elf64_Ehdr *hdr(uint8_t *e) { return (Elf64_Ehdr *)e; }
static Elf64_Shdr *sec(uint8_t *e, int i) { return (Elf64_Shdr *)(e + hdr(e)->e_shoff) + i; }

static void class32(uint8_t *e) { e[EI_CLASS] = ELFCLASS32; }
static void big_endian(uint8_t *e) { e[EI_DATA] = ELFDATA2MSB; }
static void short_ehsize(uint8_t *e) { hdr(e)->e_ehsize = 32; }
static void shoff_far(uint8_t *e) { hdr(e)->e_shoff += 8; }
static void shnum_more(uint8_t *e) { hdr(e)->e_shnum++; }
static void shentsize_odd(uint8_t *e) { hdr(e)->e_shentsize = 40; }
static void phoff_far(uint8_t *e) { hdr(e)->e_phoff = UINT64_MAX - 8; }
static void shstrndx_out(uint8_t *e) { hdr(e)->e_shstrndx = S_COUNT; }
static void shstrndx_text(uint8_t *e) { hdr(e)->e_shstrndx = S_TEXT; }
static void text_long(uint8_t *e) { sec(e, S_TEXT)->sh_size = 1 << 20; }
static void text_wraps(uint8_t *e) { sec(e, S_TEXT)->sh_offset = UINT64_MAX - 4; }
static void strtab_unterminated(uint8_t *e) { sec(e, S_STRTAB)->sh_size--; }
static void name_out(uint8_t *e) { sec(e, S_TEXT)->sh_name = 4000; }
static void symtab_entsize(uint8_t *e) { sec(e, S_SYMTAB)->sh_entsize = 16; }
static void symtab_link(uint8_t *e) { sec(e, S_SYMTAB)->sh_link = S_TEXT; }
static void symbol_name_out(uint8_t *e)
{
    Elf64_Sym *s = (Elf64_Sym *)(e + sec(e, S_SYMTAB)->sh_offset) + 1;
    s->st_name = 100;
}
static void segment_long(uint8_t *e) { ((Elf64_Phdr *)(e + hdr(e)->e_phoff))->p_filesz = 1 << 20; }
static void extended_numbering(uint8_t *e) { hdr(e)->e_shnum = 0; }

static const struct {
    elf_edit edit;
    const char *what;
} elf_edits[] = {
    {class32, "32-bit"}, {big_endian, "big-endian"}, {short_ehsize, "short header size"},
    {shoff_far, "section table past the end"}, {shnum_more, "one section too many"},
    {shentsize_odd, "odd section entry size"}, {phoff_far, "program headers past the end"},
    {shstrndx_out, "name table index out of range"}, {shstrndx_text, "name table not a string table"},
    {text_long, "section past the end"}, {text_wraps, "section offset wraps"},
    {strtab_unterminated, "string table without its NUL"}, {name_out, "section name out of its table"},
    {symtab_entsize, "symbol entry size"}, {symtab_link, "symbol names not in a string table"},
    {symbol_name_out, "symbol name out of its table"}, {segment_long, "segment past the end"},
    {extended_numbering, "extended section numbering"},
};

static void bad_elf(void)
{
    size_t fat_len, ptx_len = (sizeof sample_ptx_text + 7) & ~(size_t)7;
    free(sample_fatbin(&fat_len));
    size_t in_fatbin = 16 + 2 * SAMPLE_FATBIN_ENTRY + ptx_len; /* where the fatbin's ELF starts */
    for (size_t i = 0; i < sizeof elf_edits / sizeof elf_edits[0]; i++) {
        expect_refused(sample_elf, 0, elf_edits[i].edit, elf_edits[i].what);
        expect_refused(sample_fatbin, in_fatbin, elf_edits[i].edit, elf_edits[i].what);
    }
}

static void set_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static void set_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void set_u16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

static void fat_claims_1mib(uint8_t *f) { set_u64(f + 8, 1 << 20); }
static void fat_header_small(uint8_t *f) { set_u16(f + 6, 8); }
static void fat_header_huge(uint8_t *f) { set_u16(f + 6, 0xffff); }
static void fat_size_wraps(uint8_t *f) { set_u64(f + 8, UINT64_MAX - 8); }
static void entry_header_small(uint8_t *f) { set_u32(f + 16 + 4, 16); }
static void entry_header_huge(uint8_t *f) { set_u32(f + 16 + 4, 0x7fffffff); }
static void entry_payload_long(uint8_t *f) { set_u64(f + 16 + 8, 1 << 20); }
static void entry_payload_wraps(uint8_t *f) { set_u64(f + 16 + 8, UINT64_MAX - 32); }
static void wrapper(uint8_t *f) { set_u32(f, 0x466243b1u); }

static void bad_fatbin(void)
{
    static const struct {
        elf_edit edit;
        const char *what;
    } edits[] = {
        {fat_claims_1mib, "declares 1 MiB"}, {fat_header_small, "header size 8"},
        {fat_header_huge, "header size 65535"}, {fat_size_wraps, "size wraps"},
        {entry_header_small, "entry header of 16 bytes"}, {entry_header_huge, "entry header past the end"},
        {entry_payload_long, "entry payload past the end"}, {entry_payload_wraps, "entry payload wraps"},
        {wrapper, "a fatbin wrapper"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++)
        expect_refused(sample_fatbin, 0, edits[i].edit, edits[i].what);
    /* The case: a 16-byte fatbin header that claims 1 MiB. */
    uint8_t head[16] = {0};
    set_u32(head, SAMPLE_FATBIN_MAGIC);
    set_u16(head + 6, 16);
    set_u64(head + 8, 1 << 20);
    CHECK(check_exact(head, sizeof head) != 0);
    CHECK(strstr(why, "1048576") != NULL);
}

/* ---- image_globals: the variables an image declares ---------------------- */

static char names[512];

static int collect(const char *name, void *arg)
{
    (void)arg;
    size_t n = strlen(names);
    snprintf(names + n, sizeof names - n, "%s%s", n ? " " : "", name);
    return 0;
}

static int list(const uint8_t *img, size_t len, unsigned arch)
{
    names[0] = '\0';
    why[0] = '\0';
    return image_globals(img, len, arch, collect, NULL, why, sizeof why);
}

static const char vars_ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    "// .global .u32 commented_out;\n/* .const .u32 also_not; */\n"
    ".visible .global .align 4 .u32 counter = 42;\n"
    ".global .align 1 .b8 bytes[6] = {1, 2, 3, 4, 5, 6}, second, third[2];\n"
    ".visible .const .align 4 .b8 table[16] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0};\n"
    ".global .texref tex;\n.extern .global .f64 elsewhere;\n"
    ".visible .entry k(.param .u64 p)\n{\n\tld.global.u32 %r1, [counter];\n\t.global .u32 inside;\n\tret;\n}\n";

/* A cubin: a counter in .nv.global, a table in .nv.constant3, a kernel's
 * parameter bank in .nv.constant0.k and a function symbol, which are no
 * variables. */
enum { V_NULL, V_SHSTRTAB, V_STRTAB, V_SYMTAB, V_GLOBAL, V_CONST3, V_CONST0, V_COUNT };

static uint8_t *elf_with_vars(size_t *len)
{
    static const char shstr[] = "\0.shstrtab\0.strtab\0.symtab\0.nv.global\0.nv.constant3\0.nv.constant0.k";
    static const char str[] = "\0dcounter\0dtable\0params\0k";
    const size_t names = sizeof(Elf64_Ehdr), strs = names + sizeof shstr;
    const size_t syms = (strs + sizeof str + 7) & ~(size_t)7, data = syms + 5 * sizeof(Elf64_Sym);
    const size_t shoff = data + 32;
    *len = shoff + V_COUNT * sizeof(Elf64_Shdr);
    uint8_t *p = calloc(1, *len);
    Elf64_Ehdr eh = {.e_type = ET_EXEC, .e_machine = 190, .e_version = EV_CURRENT, .e_shoff = shoff,
                     .e_ehsize = sizeof eh, .e_shentsize = sizeof(Elf64_Shdr), .e_shnum = V_COUNT,
                     .e_shstrndx = V_SHSTRTAB};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64, eh.e_ident[EI_DATA] = ELFDATA2LSB, eh.e_ident[EI_VERSION] = EV_CURRENT;
    memcpy(p, &eh, sizeof eh);
    memcpy(p + names, shstr, sizeof shstr);
    memcpy(p + strs, str, sizeof str);
    Elf64_Sym sym[5] = {
        [1] = {.st_name = 1, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT), .st_shndx = V_GLOBAL, .st_size = 4},
        [2] = {.st_name = 10, .st_info = ELF64_ST_INFO(STB_LOCAL, STT_OBJECT), .st_shndx = V_CONST3, .st_size = 16},
        [3] = {.st_name = 17, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT), .st_shndx = V_CONST0, .st_size = 8},
        [4] = {.st_name = 24, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), .st_shndx = V_GLOBAL},
    };
    memcpy(p + syms, sym, sizeof sym);
    Elf64_Shdr sh[V_COUNT] = {
        [V_SHSTRTAB] = {.sh_name = 1, .sh_type = SHT_STRTAB, .sh_offset = names, .sh_size = sizeof shstr},
        [V_STRTAB] = {.sh_name = 11, .sh_type = SHT_STRTAB, .sh_offset = strs, .sh_size = sizeof str},
        [V_SYMTAB] = {.sh_name = 19, .sh_type = SHT_SYMTAB, .sh_offset = syms, .sh_size = sizeof sym,
                      .sh_link = V_STRTAB, .sh_entsize = sizeof(Elf64_Sym)},
        [V_GLOBAL] = {.sh_name = 27, .sh_type = SHT_NOBITS, .sh_offset = data, .sh_size = 4},
        [V_CONST3] = {.sh_name = 38, .sh_type = SHT_PROGBITS, .sh_offset = data, .sh_size = 16},
        [V_CONST0] = {.sh_name = 52, .sh_type = SHT_PROGBITS, .sh_offset = data + 16, .sh_size = 8},
    };
    memcpy(p + shoff, sh, sizeof sh);
    return p;
}

/* A fatbin of entries (kind, arch, flags, payload), in order. */
struct fat_part {
    uint16_t kind;
    uint32_t arch;
    uint64_t flags;
    const uint8_t *payload;
    size_t len;
};

static uint8_t *fatbin_of(const struct fat_part *parts, int n, size_t *len)
{
    uint64_t entries = 0;
    for (int i = 0; i < n; i++) entries += SAMPLE_FATBIN_ENTRY + ((parts[i].len + 7) & ~(size_t)7);
    *len = 16 + entries;
    uint8_t *p = calloc(1, *len), *e = p + 16;
    uint32_t magic = SAMPLE_FATBIN_MAGIC;
    uint16_t version = 1, header = 16;
    memcpy(p, &magic, 4), memcpy(p + 4, &version, 2), memcpy(p + 6, &header, 2), memcpy(p + 8, &entries, 8);
    for (int i = 0; i < n; i++) {
        size_t padded = (parts[i].len + 7) & ~(size_t)7;
        sample_entry(e, parts[i].kind, padded);
        memcpy(e + 28, &parts[i].arch, 4);
        memcpy(e + 40, &parts[i].flags, 8);
        memcpy(e + SAMPLE_FATBIN_ENTRY, parts[i].payload, parts[i].len);
        e += SAMPLE_FATBIN_ENTRY + padded;
    }
    return p;
}

static void listed_globals(void)
{
    CHECK(list((const uint8_t *)vars_ptx, sizeof vars_ptx, 90) == 0);
    CHECK(strcmp(names, "counter bytes second third table elsewhere") == 0);
    if (strcmp(names, "counter bytes second third table elsewhere")) printf("  PTX: %s\n", names);
    size_t elf_len, fat_len;
    uint8_t *elf = elf_with_vars(&elf_len);
    CHECK(image_check(elf, elf_len, why, sizeof why) == 0);
    CHECK(list(elf, elf_len, 90) == 0 && strcmp(names, "dcounter dtable") == 0);
    if (strcmp(names, "dcounter dtable")) printf("  ELF: %s (%s)\n", names, why);
    /* The cubin for the device's major version, else the PTX. */
    const uint8_t *ptx = (const uint8_t *)sample_ptx_text;
    struct fat_part parts[] = {{1, 52, 0, (const uint8_t *)vars_ptx, sizeof vars_ptx},
                               {2, 80, 0, ptx, sizeof sample_ptx_text},
                               {2, 90, 0, elf, elf_len},
                               {2, 100, 0x2000, ptx, sizeof sample_ptx_text}};
    uint8_t *fat = fatbin_of(parts, 4, &fat_len);
    CHECK(list(fat, fat_len, 90) == 0 && strcmp(names, "dcounter dtable") == 0);
    CHECK(list(fat, fat_len, 75) == 0 && strcmp(names, "counter bytes second third table elsewhere") == 0);
    CHECK(list(fat, fat_len, 100) == -1 && strstr(why, "compressed"));
    CHECK(list(fat, fat_len, 50) == -1 && strstr(why, "no code for sm_50"));
    free(fat);
    free(elf);
}

/* ---- compressed entries ---------------------------------------------------- */

/* image_globals on a copy of exactly len bytes, at sm_90. */
static int list_exact(const uint8_t *img, size_t len)
{
    uint8_t *copy = malloc(len);
    memcpy(copy, img, len);
    int rc = list(copy, len, 90);
    free(copy);
    return rc;
}

/* What nvcc compressed lists the variables its uncompressed twin lists:
 * zstd cubins and PTX, LZ4 PTX, as the toolkit lays them out. */
static void nvcc_compressed_listed(void)
{
    char plain[sizeof names];
    CHECK(list_exact(nvcc_elf_plain, sizeof nvcc_elf_plain) == 0);
    CHECK(strstr(names, "counter") && strstr(names, "table") && strstr(names, "coeffs"));
    snprintf(plain, sizeof plain, "%s", names);
    CHECK(check_exact(nvcc_elf_zstd, sizeof nvcc_elf_zstd) == 0);
    CHECK(list_exact(nvcc_elf_zstd, sizeof nvcc_elf_zstd) == 0 && strcmp(names, plain) == 0);
    if (strcmp(names, plain)) printf("  zstd cubin: '%s' (%s), plain: '%s'\n", names, why, plain);

    CHECK(list_exact(nvcc_ptx_plain, sizeof nvcc_ptx_plain) == 0);
    CHECK(strcmp(names, "counter table coeffs") == 0);
    snprintf(plain, sizeof plain, "%s", names);
    CHECK(list_exact(nvcc_ptx_zstd, sizeof nvcc_ptx_zstd) == 0 && strcmp(names, plain) == 0);
    if (strcmp(names, plain)) printf("  zstd PTX: '%s' (%s)\n", names, why);
    CHECK(list_exact(nvcc_ptx_lz4, sizeof nvcc_ptx_lz4) == 0 && strcmp(names, plain) == 0);
    if (strcmp(names, plain)) printf("  LZ4 PTX: '%s' (%s)\n", names, why);
}

/* nvcc's plain cubin: the payload of the fatbin's one entry. */
#define NVCC_ELF (nvcc_elf_plain + 16 + 64)
static uint64_t nvcc_elf_len(void)
{
    uint64_t len;
    memcpy(&len, nvcc_elf_plain + 16 + 8, 8);
    return len;
}

/* A fatbin of one sm_90 entry whose payload is `packed` (padded to 8),
 * with the compressed and uncompressed sizes given. */
static uint8_t *packed_fatbin(uint16_t kind, uint64_t flags, const void *packed, uint32_t packed_len,
                              uint64_t unpacked_len, size_t *len)
{
    struct fat_part part = {kind, 90, flags, packed, packed_len};
    uint8_t *p = fatbin_of(&part, 1, len);
    memcpy(p + 16 + 16, &packed_len, 4);
    memcpy(p + 16 + 56, &unpacked_len, 8);
    return p;
}

/* The cubin, LZ4-compressed as a raw block (nvcc -compress-mode=speed
 * leaves one this small as it is). */
static int lz4_of(const uint8_t *src, size_t len, char *dst, int cap) { return LZ4_compress_default((const char *)src, dst, (int)len, cap); }

static void lz4_cubin_listed(void)
{
    CHECK(list_exact(nvcc_elf_plain, sizeof nvcc_elf_plain) == 0);
    char plain[sizeof names];
    snprintf(plain, sizeof plain, "%s", names);
    static char packed[8192];
    int n = lz4_of(NVCC_ELF, nvcc_elf_len(), packed, sizeof packed);
    CHECK(n > 0);
    size_t len;
    uint8_t *fat = packed_fatbin(2, 0x2011, packed, (uint32_t)n, nvcc_elf_len(), &len);
    CHECK(list_exact(fat, len) == 0 && strcmp(names, plain) == 0);
    if (strcmp(names, plain)) printf("  LZ4 cubin: '%s' (%s)\n", names, why);
    free(fat);
}

/* One refused compressed entry: image_globals answers -1 with `reason`. */
static void expect_unpack_refused(const char *what, uint16_t kind, uint64_t flags, const void *packed,
                                  uint32_t packed_len, uint64_t unpacked_len, const char *reason)
{
    size_t len;
    uint8_t *fat = packed_fatbin(kind, flags, packed, packed_len, unpacked_len, &len);
    int rc = list_exact(fat, len);
    CHECK(rc == -1 && strstr(why, reason) != NULL);
    if (rc != -1 || !strstr(why, reason)) printf("  %s: rc %d, why '%s', wanted '%s'\n", what, rc, why, reason);
    free(fat);
}

static void bad_compressed_refused(void)
{
    static char lz4[8192];
    const uint64_t elf_len = nvcc_elf_len();
    uint32_t n = (uint32_t)lz4_of(NVCC_ELF, elf_len, lz4, sizeof lz4);
    /* nvcc's zstd cubin: its frame, its sizes. */
    const uint8_t *zstd = nvcc_elf_zstd + 16 + 64;
    uint32_t zn;
    memcpy(&zn, nvcc_elf_zstd + 16 + 16, 4);
    static const uint8_t garbage[64] = {0x13, 0x37, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

    expect_unpack_refused("LZ4, truncated", 2, 0x2000, lz4, n - 40, elf_len, "LZ4 block");
    expect_unpack_refused("LZ4, garbage", 2, 0x2000, garbage, sizeof garbage, elf_len, "LZ4 block is corrupt");
    expect_unpack_refused("LZ4, garbage, small", 2, 0x2000, garbage, sizeof garbage, 1000, "LZ4");
    expect_unpack_refused("LZ4, short size", 2, 0x2000, lz4, n, elf_len - 1, "LZ4 block is corrupt");
    expect_unpack_refused("LZ4, long size", 2, 0x2000, lz4, n, elf_len + 8, "holds 4968 bytes, not the 4976");
    expect_unpack_refused("LZ4, bomb", 2, 0x2000, lz4, n, (uint64_t)n * 256, "more than LZ4 can make");
    expect_unpack_refused("zstd, truncated", 2, 0x8000, zstd, zn - 40, elf_len, "zstd data is corrupt");
    expect_unpack_refused("zstd, garbage", 2, 0x8000, garbage, sizeof garbage, elf_len, "no zstd frame");
    expect_unpack_refused("zstd, wrong size", 2, 0x8000, zstd, zn, elf_len - 8, "holds 4968 bytes, not the 4960");
    expect_unpack_refused("over 1 GiB", 2, 0x8000, zstd, zn, ((uint64_t)1 << 30) + 1, "outside 1 .. 1073741824");
    expect_unpack_refused("no size", 2, 0x8000, zstd, zn, 0, "outside 1 ..");
    expect_unpack_refused("both codecs", 2, 0xA000, zstd, zn, elf_len, "neither LZ4 nor zstd");
    expect_unpack_refused("a size, no codec", 2, 0x0011, zstd, zn, elf_len, "neither LZ4 nor zstd");

    /* A compressed size past the payload is the image check's refusal:
     * the driver would read that many bytes. */
    size_t len;
    uint8_t *fat = packed_fatbin(2, 0x8000, zstd, zn, elf_len, &len);
    uint32_t past = (uint32_t)((zn + 7) & ~7u) + 1;
    memcpy(fat + 16 + 16, &past, 4);
    CHECK(check_exact(fat, len) != 0 && strstr(why, "compressed bytes run past"));
    free(fat);

    /* What decompresses is checked as an ELF entry is: a section table
     * past the end is refused, not walked. */
    uint8_t *broken = malloc(elf_len);
    memcpy(broken, NVCC_ELF, elf_len);
    uint64_t shoff = elf_len;
    memcpy(broken + offsetof(Elf64_Ehdr, e_shoff), &shoff, 8);
    n = (uint32_t)lz4_of(broken, elf_len, lz4, sizeof lz4);
    expect_unpack_refused("a broken ELF inside", 2, 0x2000, lz4, n, elf_len, "its code for sm_90: ELF section");
    /* And PTX must end in its NUL. */
    n = (uint32_t)lz4_of((const uint8_t *)"ptx", 3, lz4, sizeof lz4);
    expect_unpack_refused("PTX with no NUL", 1, 0x2000, lz4, n, 3, "not NUL-terminated");
    free(broken);
}

int main(void)
{
    good_images();
    bad_ptx();
    bad_elf();
    bad_fatbin();
    listed_globals();
    nvcc_compressed_listed();
    lz4_cubin_listed();
    bad_compressed_refused();
    /* The shortest PTX image_check accepts is listed inside its bytes. */
    CHECK(list_exact((const uint8_t *)"x", 2) == 0 && names[0] == '\0');
    printf("%d checks, %d failures\n", checks, failures);
    return failures != 0;
}
