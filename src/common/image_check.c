/* image_check.c - see image_check.h. Every field is read with memcpy: an
 * image inside a frame has no alignment, and fatbin entries and the ELF
 * files inside them sit at any offset. */
#define _GNU_SOURCE /* memmem */
#include "image_check.h"

#include "fatbin_unpack.h"
#include "why.h"

#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FATBIN_MAGIC 0xBA55ED50u
#define FATBIN_WRAPPER_MAGIC 0x466243b1u
/* Fatbin header: u32 magic, u16 version, u16 header size, u64 size of the
 * entries that follow it. */
#define FATBIN_HEADER 16
/* Entry header: u16 kind, u16 version, u32 header size, u64 payload size,
 * then compression, architecture and flags up to 64 bytes. */
#define FATBIN_ENTRY 64

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
    if (len < sizeof *eh) return why_fail(why, whylen, "an ELF image of %zu bytes is shorter than its header", len);
    memcpy(eh, p, sizeof *eh);
    if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
        eh->e_ident[EI_VERSION] != EV_CURRENT)
        return why_fail(why, whylen, "not a 64-bit little-endian ELF image");
    if (eh->e_ehsize < sizeof *eh || eh->e_ehsize > len)
        return why_fail(why, whylen, "ELF header size %u (of %zu bytes received)", eh->e_ehsize, len);
    /* No extended numbering (counts kept in section 0): cubins never need it. */
    if (eh->e_shnum >= SHN_LORESERVE || (eh->e_shnum ? eh->e_shentsize != sizeof(Elf64_Shdr) : eh->e_shoff != 0) ||
        eh->e_phnum == PN_XNUM || (eh->e_phnum && eh->e_phentsize != sizeof(Elf64_Phdr)))
        return why_fail(why, whylen, "ELF header tables of unexpected entry sizes or counts");
    if (!inside(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), len) ||
        !inside(eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr), len))
        return why_fail(why, whylen, "ELF section or program header table past the %zu bytes received", len);
    if (eh->e_shstrndx != SHN_UNDEF &&
        (eh->e_shstrndx >= eh->e_shnum || section(p, eh, eh->e_shstrndx).sh_type != SHT_STRTAB))
        return why_fail(why, whylen, "ELF section name table %u is not a string table", eh->e_shstrndx);
    return 0;
}

/* A symbol table's names lie inside the string table it links to. */
static int check_symbols(const uint8_t *p, const Elf64_Ehdr *eh, const Elf64_Shdr *sh, char *why, size_t whylen)
{
    if (sh->sh_entsize != sizeof(Elf64_Sym) || sh->sh_size % sizeof(Elf64_Sym) || sh->sh_link >= eh->e_shnum)
        return why_fail(why, whylen, "ELF symbol table of unexpected entry size or link");
    Elf64_Shdr names = section(p, eh, sh->sh_link);
    if (names.sh_type != SHT_STRTAB) return why_fail(why, whylen, "ELF symbol names not in a string table");
    for (uint64_t off = 0; off < sh->sh_size; off += sizeof(Elf64_Sym)) {
        Elf64_Sym sym;
        memcpy(&sym, p + sh->sh_offset + off, sizeof sym);
        if (sym.st_name >= names.sh_size) return why_fail(why, whylen, "ELF symbol name outside its string table");
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
            return why_fail(why, whylen, "ELF section %u (%llu bytes at %llu) ends past the %zu bytes received", i,
                            (unsigned long long)sh.sh_size, (unsigned long long)sh.sh_offset, len);
        if (sh.sh_type == SHT_STRTAB && sh.sh_size && p[sh.sh_offset + sh.sh_size - 1] != '\0')
            return why_fail(why, whylen, "ELF string table %u does not end in a NUL", i);
        if (eh->e_shstrndx != SHN_UNDEF && sh.sh_name >= names_size)
            return why_fail(why, whylen, "ELF section %u's name is outside the section name table", i);
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
            return why_fail(why, whylen, "ELF segment %u ends past the %zu bytes received", i, len);
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

/* An entry's header fields beyond its size: kind (1 PTX, 2 ELF) at 0, the
 * compressed size at 16, the architecture (major * 10 + minor) at 28, the
 * flags at 40 (compression: fatbin_unpack.h), the uncompressed size at 56. */
#define FATBIN_KIND_PTX 1
#define FATBIN_KIND_ELF 2

struct fat_entry {
    uint16_t kind;
    uint32_t arch;
    int compressed;
    uint64_t flags, packed_len, unpacked_len;
    const uint8_t *payload;
    uint64_t len;
};

/* The one walk of a fatbin's entries, for the check and for the listing:
 * each entry's header and payload inside the fatbin before fn sees it;
 * fn's nonzero answer ends the walk and is returned. */
static int walk_fatbin(const uint8_t *p, size_t len, int (*fn)(const struct fat_entry *, void *, char *, size_t),
                       void *arg, char *why, size_t whylen)
{
    if (len < FATBIN_HEADER) return why_fail(why, whylen, "a fatbin of %zu bytes is shorter than its header", len);
    uint16_t header;
    uint64_t size;
    memcpy(&header, p + 6, 2);
    memcpy(&size, p + 8, 8);
    if (!header_fits(header, FATBIN_HEADER, size, len))
        return why_fail(why, whylen, "the fatbin declares %u + %llu bytes; %zu were received", header,
                        (unsigned long long)size, len);
    /* A tail shorter than an entry header lies inside and holds no entry. */
    for (uint64_t at = header, end = header + size; end - at >= FATBIN_ENTRY;) {
        const uint8_t *e = p + at;
        uint32_t eheader, csize;
        uint64_t payload;
        memcpy(&eheader, e + 4, 4);
        memcpy(&payload, e + 8, 8);
        if (!header_fits(eheader, FATBIN_ENTRY, payload, end - at))
            return why_fail(why, whylen, "a fatbin entry (%u + %llu bytes) runs past the end of the fatbin", eheader,
                            (unsigned long long)payload);
        struct fat_entry fe = {.payload = e + eheader, .len = payload};
        memcpy(&fe.kind, e, 2);
        memcpy(&csize, e + 16, 4);
        memcpy(&fe.arch, e + 28, 4);
        memcpy(&fe.flags, e + 40, 8);
        memcpy(&fe.unpacked_len, e + 56, 8);
        fe.packed_len = csize;
        fe.compressed = (fe.flags & FATBIN_COMPRESSED) || csize != 0;
        int rc = fn(&fe, arg, why, whylen);
        if (rc) return rc;
        at += eheader + payload;
    }
    return 0;
}

/* A payload that is an ELF file (a cubin) is checked as one; compressed
 * payloads never start with the ELF magic, and their compressed bytes
 * must lie inside the payload (the driver reads that many). They are not
 * decompressed here: that is the driver's work at every load, and ours
 * only when a migration lists the variables (entry_globals). */
static int check_entry(const struct fat_entry *e, void *arg, char *why, size_t whylen)
{
    (void)arg;
    if (e->packed_len > e->len)
        return why_fail(why, whylen, "a fatbin entry's %llu compressed bytes run past its %llu-byte payload",
                        (unsigned long long)e->packed_len, (unsigned long long)e->len);
    if (e->len >= SELFMAG && memcmp(e->payload, ELFMAG, SELFMAG) == 0)
        return check_elf(e->payload, (size_t)e->len, why, whylen);
    return 0;
}

static int check_fatbin(const uint8_t *p, size_t len, char *why, size_t whylen)
{
    return walk_fatbin(p, len, check_entry, NULL, why, whylen);
}

/* ---- PTX ------------------------------------------------------------------------ */

static int check_ptx(const uint8_t *p, size_t len, char *why, size_t whylen)
{
    const uint8_t *end = memchr(p, '\0', len);
    if (!end) return why_fail(why, whylen, "neither ELF, fatbin nor PTX text NUL-terminated within its %zu bytes", len);
    if (end == p) return why_fail(why, whylen, "an empty image");
    for (const uint8_t *q = p; q < end; q++)
        if (*q < 0x20 && *q != '\t' && *q != '\n' && *q != '\v' && *q != '\f' && *q != '\r')
            return why_fail(why, whylen, "byte %zu (0x%02x) is not text: neither ELF, fatbin nor PTX", (size_t)(q - p), *q);
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
        return why_fail(why, whylen, "a fatbin wrapper, which points into the client's memory; send the fatbin itself");
    return check_ptx(p, len, why, whylen);
}

/* ---- the variables an image declares ----------------------------------------- */

/* Names are handed out NUL-terminated; longer ones are no variable the
 * driver would find (and the caller looks each up). */
#define NAME_MAX_LEN 1024

struct listing {
    int (*each)(const char *name, void *arg);
    void *arg;
};

static int hand_out(const struct listing *l, const uint8_t *name, size_t n)
{
    char buf[NAME_MAX_LEN + 1];
    if (n == 0 || n > NAME_MAX_LEN) return 0;
    memcpy(buf, name, n);
    buf[n] = '\0';
    return l->each(buf, l->arg);
}

/* Variables live in the global and constant banks (.nv.global,
 * .nv.global.init, .nv.constant3 ...); .nv.constant0.* are the kernels'
 * parameters. The image passed check_elf: every offset below is inside. */
static int variable_section(const uint8_t *p, const Elf64_Ehdr *eh, unsigned shndx)
{
    if (shndx == SHN_UNDEF || shndx >= eh->e_shnum || eh->e_shstrndx == SHN_UNDEF) return 0;
    Elf64_Shdr names = section(p, eh, eh->e_shstrndx), sh = section(p, eh, shndx);
    const char *name = (const char *)p + names.sh_offset + sh.sh_name;
    return strncmp(name, ".nv.global", 10) == 0 ||
           (strncmp(name, ".nv.constant", 12) == 0 && strncmp(name, ".nv.constant0", 13) != 0);
}

static int elf_globals(const uint8_t *p, const struct listing *l)
{
    Elf64_Ehdr eh;
    memcpy(&eh, p, sizeof eh);
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr sh = section(p, &eh, i);
        if (sh.sh_type != SHT_SYMTAB) continue;
        Elf64_Shdr names = section(p, &eh, sh.sh_link);
        for (uint64_t off = 0; off < sh.sh_size; off += sizeof(Elf64_Sym)) {
            Elf64_Sym sym;
            memcpy(&sym, p + sh.sh_offset + off, sizeof sym);
            if (ELF64_ST_TYPE(sym.st_info) != STT_OBJECT || !variable_section(p, &eh, sym.st_shndx)) continue;
            const uint8_t *name = p + names.sh_offset + sym.st_name;
            int rc = hand_out(l, name, strlen((const char *)name));
            if (rc) return rc;
        }
    }
    return 0;
}

static int ident_char(uint8_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$' || c == '%'; }

/* The length of the directive or name at q (a PTX token), 0 at anything else. */
static size_t token_len(const uint8_t *q, const uint8_t *end)
{
    size_t n = 0;
    while (q + n < end && (ident_char(q[n]) || (n == 0 && q[n] == '.'))) n++;
    return n;
}

/* One `.global` or `.const` declaration after its keyword: directives
 * (.align 4, .u32, .v4 ...), then names, each with an optional array
 * size and initializer, up to the ';'. References of textures, samplers
 * and surfaces are no memory. Returns where the walk goes on. */
static const uint8_t *ptx_declaration(const uint8_t *q, const uint8_t *end, const struct listing *l, int *rc)
{
    int depth = 0, want_name = 1;
    while (q < end && *q != ';' && !*rc) {
        size_t n = token_len(q, end);
        if (n && *q == '.' && want_name) {
            if ((n == 7 && memcmp(q, ".texref", 7) == 0) || (n == 8 && memcmp(q, ".surfref", 8) == 0) ||
                (n == 11 && memcmp(q, ".samplerref", 11) == 0))
                want_name = 0;
            q += n;
        } else if (n && want_name && depth == 0 && !(*q >= '0' && *q <= '9')) {
            *rc = hand_out(l, q, n);
            want_name = 0;
            q += n;
        } else {
            if (*q == '{' || *q == '[') depth++;
            if ((*q == '}' || *q == ']') && depth) depth--;
            if (*q == ',' && depth == 0) want_name = 1;
            q += n ? n : 1;
        }
    }
    return q;
}

/* Module scope `.global` and `.const` declarations of PTX text (the image
 * passed check_ptx: NUL-terminated). Comments are skipped; `ld.global` is
 * no declaration (the token must stand alone). */
static int ptx_globals(const uint8_t *p, const struct listing *l)
{
    const uint8_t *q = p, *end = p + strlen((const char *)p);
    int depth = 0, rc = 0;
    while (q < end && !rc) {
        if (q + 1 < end && q[0] == '/' && q[1] == '/') {
            while (q < end && *q != '\n') q++;
        } else if (q + 1 < end && q[0] == '/' && q[1] == '*') {
            const uint8_t *close = memmem(q + 2, (size_t)(end - q - 2), "*/", 2);
            q = close ? close + 2 : end;
        } else if (*q == '{' || *q == '}') {
            depth += *q == '{' ? 1 : (depth > 0 ? -1 : 0);
            q++;
        } else if (*q == '.' && (q == p || !(ident_char(q[-1]) || q[-1] == '.'))) {
            size_t n = token_len(q, end);
            int decl = depth == 0 && ((n == 7 && memcmp(q, ".global", 7) == 0) || (n == 6 && memcmp(q, ".const", 6) == 0));
            q = decl ? ptx_declaration(q + n, end, l, &rc) : q + n;
        } else {
            q++;
        }
    }
    return rc;
}

/* The fatbin entry the driver loads on `arch`: a cubin of the same major
 * version and the highest minor up to arch, else the highest PTX up to
 * arch (compiled there). */
struct choice {
    unsigned arch;
    const struct fat_entry *best;
    struct fat_entry kept;
    unsigned alike; /* entries of the best one's kind and architecture, itself included */
};

static int better(const struct fat_entry *e, const struct fat_entry *than, unsigned arch)
{
    int elf = e->kind == FATBIN_KIND_ELF, fits = elf ? e->arch / 10 == arch / 10 && e->arch <= arch
                                                     : e->kind == FATBIN_KIND_PTX && e->arch <= arch;
    if (!fits) return 0;
    if (!than) return 1;
    int than_elf = than->kind == FATBIN_KIND_ELF;
    return elf != than_elf ? elf : e->arch > than->arch;
}

static int choose(const struct fat_entry *e, void *arg, char *why, size_t whylen)
{
    (void)why, (void)whylen;
    struct choice *c = arg;
    if (better(e, c->best, c->arch)) c->kept = *e, c->best = &c->kept, c->alike = 1;
    else if (c->best && e->kind == c->best->kind && e->arch == c->best->arch) c->alike++;
    return 0;
}

static const char *entry_what(const struct fat_entry *e) { return e->kind == FATBIN_KIND_ELF ? "code" : "PTX"; }

/* An uncompressed entry: a decompressed ELF gets the check an ELF entry
 * got from image_check; then fn sees the code. */
static int plain_entry_code(const struct fat_entry *e, image_code_fn fn, void *arg, char *why, size_t whylen)
{
    if (e->kind == FATBIN_KIND_ELF) {
        if (e->len < SELFMAG || memcmp(e->payload, ELFMAG, SELFMAG) != 0)
            return why_fail(why, whylen, "its code for sm_%u is no ELF file", e->arch);
        char elf_why[200];
        if (check_elf(e->payload, (size_t)e->len, elf_why, sizeof elf_why) != 0)
            return why_fail(why, whylen, "its code for sm_%u: %s", e->arch, elf_why);
        return fn(IMAGE_CODE_ELF, e->payload, (size_t)e->len, arg);
    }
    const uint8_t *nul = memchr(e->payload, '\0', (size_t)e->len);
    if (!nul) return why_fail(why, whylen, "its PTX for sm_%u is not NUL-terminated", e->arch);
    return fn(IMAGE_CODE_PTX, e->payload, (size_t)(nul - e->payload) + 1, arg);
}

/* A compressed entry is decompressed for fn only, and dropped. */
static int entry_code(const struct fat_entry *e, image_code_fn fn, void *arg, char *why, size_t whylen)
{
    if (!e->compressed) return plain_entry_code(e, fn, arg, why, whylen);
    struct fatbin_packed in = {.flags = e->flags, .payload = e->payload, .payload_len = e->len,
                               .packed_len = e->packed_len, .unpacked_len = e->unpacked_len};
    uint8_t *bytes;
    char unpack_why[200];
    if (fatbin_unpack(&in, &bytes, unpack_why, sizeof unpack_why) != 0)
        return why_fail(why, whylen, "its compressed %s for sm_%u cannot be decompressed: %s", entry_what(e), e->arch,
                        unpack_why);
    struct fat_entry plain = *e;
    plain.compressed = 0, plain.payload = bytes, plain.len = e->unpacked_len;
    int rc = plain_entry_code(&plain, fn, arg, why, whylen);
    free(bytes);
    return rc;
}

int image_code(const void *image, size_t len, unsigned arch, unsigned flags, image_code_fn fn, void *arg, char *why,
               size_t whylen)
{
    if (image_check(image, len, why, whylen) != 0) return -1;
    const uint8_t *p = image;
    uint32_t magic = 0;
    /* PTX as short as "x" plus its NUL passes image_check. */
    if (len >= 4) memcpy(&magic, p, 4);
    if (len >= SELFMAG && memcmp(p, ELFMAG, SELFMAG) == 0) return fn(IMAGE_CODE_ELF, p, len, arg);
    if (magic != FATBIN_MAGIC) return fn(IMAGE_CODE_PTX, p, strlen((const char *)p) + 1, arg);
    struct choice c = {.arch = arch};
    if (walk_fatbin(p, len, choose, &c, why, whylen) != 0) return -1;
    if (!c.best) return why_fail(why, whylen, "its fatbin holds no code for sm_%u", arch);
    if ((flags & IMAGE_CODE_UNIQUE) && c.alike > 1)
        return why_fail(why, whylen, "its fatbin holds %u %s entries for sm_%u (sm_%ua among them?)", c.alike,
                        entry_what(c.best), c.best->arch, c.best->arch);
    return entry_code(c.best, fn, arg, why, whylen);
}

static int code_globals(int kind, const uint8_t *code, size_t len, void *arg)
{
    (void)len;
    return kind == IMAGE_CODE_ELF ? elf_globals(code, arg) : ptx_globals(code, arg);
}

int image_globals(const void *image, size_t len, unsigned arch, int (*each)(const char *name, void *arg), void *arg,
                  char *why, size_t whylen)
{
    struct listing l = {each, arg};
    return image_code(image, len, arch, 0, code_globals, &l, why, whylen);
}
