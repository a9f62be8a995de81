/* test_image_check.c - module images are checked against their own headers
 * (src/server/image_check.c): well-formed ELF, fatbin and PTX images pass;
 * every strict prefix of them, and each header field that points past the
 * bytes, is refused. Each image sits in a heap buffer of exactly its size,
 * so the ASan build also catches a read past the end. */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sample_images.h"
#include "server/image_check.h"

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

int main(void)
{
    good_images();
    bad_ptx();
    bad_elf();
    bad_fatbin();
    printf("%d checks, %d failures\n", checks, failures);
    return failures != 0;
}
