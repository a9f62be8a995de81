/* image_check.c - see image_check.h. Every field is read with memcpy: an
 * image inside a frame has no alignment, and fatbin entries and the ELF
 * files inside them sit at any offset. */
#include "image_check.h"

#include <elf.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define FATBIN_MAGIC 0xBA55ED50u
#define FATBIN_WRAPPER_MAGIC 0x466243b1u
/* Fatbin header: u32 magic, u16 version, u16 header size, u64 size of the
 * entries that follow it. */
#define FATBIN_HEADER 16
/* Entry header: u16 kind, u16 version, u32 header size, u64 payload size,
 * then compression, architecture and flags up to 64 bytes. */
#define FATBIN_ENTRY 64

static int fail(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    return -1;
}

/* [off, off + size) lies inside [0, len). */
static int inside(uint64_t off, uint64_t size, uint64_t len) { return off <= len && size <= len - off; }

/* A header of at least `least` bytes, saying it is `header` bytes long and
 * `size` more follow it: all of it inside `len`. */
static int header_fits(uint64_t header, uint64_t least, uint64_t size, uint64_t len)
{
    return header >= least && inside(header, size, len);
}

/* ---- ELF ------------------------------------------------------------------- */

static Elf64_Shdr section(const uint8_t *p, const Elf64_Ehdr *eh, unsigned i)
{
    Elf64_Shdr sh;
    memcpy(&sh, p + eh->e_shoff + (size_t)i * sizeof sh, sizeof sh);
    return sh;
}

/* The header and where its tables are; the tables themselves inside. */
static int check_elf_header(const uint8_t *p, size_t len, Elf64_Ehdr *eh, char *why, size_t whylen)
{
    if (len < sizeof *eh) return fail(why, whylen, "an ELF image of %zu bytes is shorter than its header", len);
    memcpy(eh, p, sizeof *eh);
    if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
        eh->e_ident[EI_VERSION] != EV_CURRENT)
        return fail(why, whylen, "not a 64-bit little-endian ELF image");
    if (eh->e_ehsize < sizeof *eh || eh->e_ehsize > len)
        return fail(why, whylen, "ELF header size %u (of %zu bytes received)", eh->e_ehsize, len);
    /* No extended numbering (counts kept in section 0): cubins never need it. */
    if (eh->e_shnum >= SHN_LORESERVE || (eh->e_shnum ? eh->e_shentsize != sizeof(Elf64_Shdr) : eh->e_shoff != 0) ||
        eh->e_phnum == PN_XNUM || (eh->e_phnum && eh->e_phentsize != sizeof(Elf64_Phdr)))
        return fail(why, whylen, "ELF header tables of unexpected entry sizes or counts");
    if (!inside(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), len) ||
        !inside(eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr), len))
        return fail(why, whylen, "ELF section or program header table past the %zu bytes received", len);
    if (eh->e_shstrndx != SHN_UNDEF &&
        (eh->e_shstrndx >= eh->e_shnum || section(p, eh, eh->e_shstrndx).sh_type != SHT_STRTAB))
        return fail(why, whylen, "ELF section name table %u is not a string table", eh->e_shstrndx);
    return 0;
}

/* A symbol table's names lie inside the string table it links to. */
static int check_symbols(const uint8_t *p, const Elf64_Ehdr *eh, const Elf64_Shdr *sh, char *why, size_t whylen)
{
    if (sh->sh_entsize != sizeof(Elf64_Sym) || sh->sh_size % sizeof(Elf64_Sym) || sh->sh_link >= eh->e_shnum)
        return fail(why, whylen, "ELF symbol table of unexpected entry size or link");
    Elf64_Shdr names = section(p, eh, sh->sh_link);
    if (names.sh_type != SHT_STRTAB) return fail(why, whylen, "ELF symbol names not in a string table");
    for (uint64_t off = 0; off < sh->sh_size; off += sizeof(Elf64_Sym)) {
        Elf64_Sym sym;
        memcpy(&sym, p + sh->sh_offset + off, sizeof sym);
        if (sym.st_name >= names.sh_size) return fail(why, whylen, "ELF symbol name outside its string table");
    }
    return 0;
}

/* Every section's bytes inside; string tables end in a NUL, so every
 * string in them ends inside too; every section's name inside its table. */
static int check_sections(const uint8_t *p, size_t len, const Elf64_Ehdr *eh, char *why, size_t whylen)
{
    uint64_t names_size = eh->e_shstrndx != SHN_UNDEF ? section(p, eh, eh->e_shstrndx).sh_size : 0;
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        Elf64_Shdr sh = section(p, eh, i);
        if (sh.sh_type != SHT_NOBITS && !inside(sh.sh_offset, sh.sh_size, len))
            return fail(why, whylen, "ELF section %u (%llu bytes at %llu) ends past the %zu bytes received", i,
                        (unsigned long long)sh.sh_size, (unsigned long long)sh.sh_offset, len);
        if (sh.sh_type == SHT_STRTAB && sh.sh_size && p[sh.sh_offset + sh.sh_size - 1] != '\0')
            return fail(why, whylen, "ELF string table %u does not end in a NUL", i);
        if (eh->e_shstrndx != SHN_UNDEF && sh.sh_name >= names_size)
            return fail(why, whylen, "ELF section %u's name is outside the section name table", i);
        if ((sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM) && check_symbols(p, eh, &sh, why, whylen))
            return -1;
    }
    return 0;
}

static int check_segments(const uint8_t *p, size_t len, const Elf64_Ehdr *eh, char *why, size_t whylen)
{
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, p + eh->e_phoff + (size_t)i * sizeof ph, sizeof ph);
        if (!inside(ph.p_offset, ph.p_filesz, len))
            return fail(why, whylen, "ELF segment %u ends past the %zu bytes received", i, len);
    }
    return 0;
}

static int check_elf(const uint8_t *p, size_t len, char *why, size_t whylen)
{
    Elf64_Ehdr eh;
    if (check_elf_header(p, len, &eh, why, whylen) != 0) return -1;
    if (check_sections(p, len, &eh, why, whylen) != 0) return -1;
    return check_segments(p, len, &eh, why, whylen);
}

/* ---- fatbin ------------------------------------------------------------------ */

/* One entry among the `left` bytes that remain of the fatbin; *step is its
 * whole size. A payload that is an ELF file (a cubin) is checked as one;
 * compressed payloads never start with the ELF magic. */
static int check_entry(const uint8_t *e, uint64_t left, uint64_t *step, char *why, size_t whylen)
{
    uint32_t header;
    uint64_t payload;
    memcpy(&header, e + 4, 4);
    memcpy(&payload, e + 8, 8);
    if (!header_fits(header, FATBIN_ENTRY, payload, left))
        return fail(why, whylen, "a fatbin entry (%u + %llu bytes) runs past the end of the fatbin", header,
                    (unsigned long long)payload);
    *step = header + payload;
    if (payload >= SELFMAG && memcmp(e + header, ELFMAG, SELFMAG) == 0)
        return check_elf(e + header, (size_t)payload, why, whylen);
    return 0;
}

static int check_fatbin(const uint8_t *p, size_t len, char *why, size_t whylen)
{
    if (len < FATBIN_HEADER) return fail(why, whylen, "a fatbin of %zu bytes is shorter than its header", len);
    uint16_t header;
    uint64_t size;
    memcpy(&header, p + 6, 2);
    memcpy(&size, p + 8, 8);
    if (!header_fits(header, FATBIN_HEADER, size, len))
        return fail(why, whylen, "the fatbin declares %u + %llu bytes; %zu were received", header,
                    (unsigned long long)size, len);
    /* A tail shorter than an entry header lies inside and holds no entry. */
    for (uint64_t at = header, end = header + size, step = 0; end - at >= FATBIN_ENTRY; at += step)
        if (check_entry(p + at, end - at, &step, why, whylen) != 0) return -1;
    return 0;
}

/* ---- PTX ------------------------------------------------------------------------ */

static int check_ptx(const uint8_t *p, size_t len, char *why, size_t whylen)
{
    const uint8_t *end = memchr(p, '\0', len);
    if (!end) return fail(why, whylen, "neither ELF, fatbin nor PTX text NUL-terminated within its %zu bytes", len);
    if (end == p) return fail(why, whylen, "an empty image");
    for (const uint8_t *q = p; q < end; q++)
        if (*q < 0x20 && *q != '\t' && *q != '\n' && *q != '\v' && *q != '\f' && *q != '\r')
            return fail(why, whylen, "byte %zu (0x%02x) is not text: neither ELF, fatbin nor PTX", (size_t)(q - p), *q);
    return 0;
}

int image_check(const void *image, size_t len, char *why, size_t whylen)
{
    const uint8_t *p = image;
    uint32_t magic = 0;
    if (len >= 4) memcpy(&magic, p, 4);
    if (len >= SELFMAG && memcmp(p, ELFMAG, SELFMAG) == 0) return check_elf(p, len, why, whylen);
    if (magic == FATBIN_MAGIC) return check_fatbin(p, len, why, whylen);
    if (magic == FATBIN_WRAPPER_MAGIC)
        return fail(why, whylen, "a fatbin wrapper, which points into the client's memory; send the fatbin itself");
    return check_ptx(p, len, why, whylen);
}
