/* sample_images.h - small module images in each format the session
 * accepts (src/common/image_check.h), built in memory for the unit test
 * and the fuzzer. Each builder returns a malloc'd image and its length. */
#ifndef SCUDA_TEST_SAMPLE_IMAGES_H
#define SCUDA_TEST_SAMPLE_IMAGES_H

#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLE_FATBIN_MAGIC 0xBA55ED50u
#define SAMPLE_FATBIN_ENTRY 64

static const char sample_ptx_text[] = ".version 8.0\n.target sm_90\n.address_size 64\n\n"
                                      ".visible .entry noop()\n{\n\tret;\n}\n";

static inline uint8_t *sample_ptx(size_t *len)
{
    *len = sizeof sample_ptx_text; /* with its NUL, as the client sends it */
    uint8_t *p = malloc(*len);
    if (p) memcpy(p, sample_ptx_text, *len);
    return p;
}

/* Section offsets of the sample ELF, in file order. */
enum { S_NULL, S_SHSTRTAB, S_STRTAB, S_SYMTAB, S_TEXT, S_BSS, S_COUNT };

/* A cubin-like ELF: header, one program header, the sections' bytes, the
 * section header table last (as nvcc lays it out). */
static inline uint8_t *sample_elf(size_t *len)
{
    static const char shstr[] = "\0.shstrtab\0.strtab\0.symtab\0.text\0.bss";
    static const char str[] = "\0kernel";
    const size_t ph = sizeof(Elf64_Ehdr), sh_names = ph + sizeof(Elf64_Phdr), names = sh_names + sizeof shstr;
    const size_t syms = (names + sizeof str + 7) & ~(size_t)7, text = syms + 2 * sizeof(Elf64_Sym);
    const size_t shoff = text + 16;
    *len = shoff + S_COUNT * sizeof(Elf64_Shdr);
    uint8_t *p = calloc(1, *len);
    if (!p) return NULL;
    Elf64_Ehdr eh = {.e_type = ET_EXEC, .e_machine = 190 /* EM_CUDA */, .e_version = EV_CURRENT,
                     .e_phoff = ph, .e_shoff = shoff, .e_ehsize = sizeof eh, .e_phentsize = sizeof(Elf64_Phdr),
                     .e_phnum = 1, .e_shentsize = sizeof(Elf64_Shdr), .e_shnum = S_COUNT, .e_shstrndx = S_SHSTRTAB};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    memcpy(p, &eh, sizeof eh);
    Elf64_Phdr seg = {.p_type = PT_LOAD, .p_offset = text, .p_filesz = 16, .p_memsz = 16};
    memcpy(p + ph, &seg, sizeof seg);
    memcpy(p + sh_names, shstr, sizeof shstr);
    memcpy(p + names, str, sizeof str);
    Elf64_Sym sym = {.st_name = 1, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), .st_shndx = S_TEXT};
    memcpy(p + syms + sizeof sym, &sym, sizeof sym);
    memset(p + text, 0x5a, 16);
    Elf64_Shdr sh[S_COUNT] = {
        [S_SHSTRTAB] = {.sh_name = 1, .sh_type = SHT_STRTAB, .sh_offset = sh_names, .sh_size = sizeof shstr},
        [S_STRTAB] = {.sh_name = 11, .sh_type = SHT_STRTAB, .sh_offset = names, .sh_size = sizeof str},
        [S_SYMTAB] = {.sh_name = 19, .sh_type = SHT_SYMTAB, .sh_offset = syms, .sh_size = 2 * sizeof(Elf64_Sym),
                      .sh_link = S_STRTAB, .sh_entsize = sizeof(Elf64_Sym)},
        [S_TEXT] = {.sh_name = 27, .sh_type = SHT_PROGBITS, .sh_offset = text, .sh_size = 16},
        [S_BSS] = {.sh_name = 33, .sh_type = SHT_NOBITS, .sh_offset = shoff, .sh_size = 1 << 20},
    };
    memcpy(p + shoff, sh, sizeof sh);
    return p;
}

/* One fatbin entry header: kind (1 PTX, 2 ELF), header size, payload size. */
static inline void sample_entry(uint8_t *e, uint16_t kind, uint64_t payload)
{
    uint32_t header = SAMPLE_FATBIN_ENTRY;
    memset(e, 0, SAMPLE_FATBIN_ENTRY);
    memcpy(e, &kind, 2);
    memcpy(e + 4, &header, 4);
    memcpy(e + 8, &payload, 8);
}

/* A fatbin: its header, a PTX entry, then an ELF entry (sample_elf). */
static inline uint8_t *sample_fatbin(size_t *len)
{
    size_t elf_len;
    uint8_t *elf = sample_elf(&elf_len);
    const size_t ptx_len = (sizeof sample_ptx_text + 7) & ~(size_t)7;
    const uint64_t entries = 2 * SAMPLE_FATBIN_ENTRY + ptx_len + elf_len;
    *len = 16 + entries;
    uint8_t *p = elf ? calloc(1, *len) : NULL;
    if (!p) {
        free(elf);
        return NULL;
    }
    uint32_t magic = SAMPLE_FATBIN_MAGIC;
    uint16_t version = 1, header = 16;
    memcpy(p, &magic, 4);
    memcpy(p + 4, &version, 2);
    memcpy(p + 6, &header, 2);
    memcpy(p + 8, &entries, 8);
    uint8_t *e = p + 16;
    sample_entry(e, 1, ptx_len);
    memcpy(e + SAMPLE_FATBIN_ENTRY, sample_ptx_text, sizeof sample_ptx_text);
    e += SAMPLE_FATBIN_ENTRY + ptx_len;
    sample_entry(e, 2, elf_len);
    memcpy(e + SAMPLE_FATBIN_ENTRY, elf, elf_len);
    free(elf);
    return p;
}

#endif
