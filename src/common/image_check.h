/* image_check.h - module images checked against their own headers.
 *
 * cuModuleLoadData, cuModuleLoadDataEx and cuLibraryLoadData take no
 * length: the driver finds an image's extent in the image itself. The
 * session holds exactly the bytes the client sent, so before any driver
 * (or the module cache) sees an image, every structure its headers
 * declare must lie inside those bytes:
 *
 *   ELF     64-bit little-endian; the file header, the section and
 *           program header tables, every section's and segment's bytes;
 *           string tables NUL-terminated, section names inside theirs.
 *   fatbin  magic 0xBA55ED50; its header and the total size it declares;
 *           each entry's header and payload inside that, an uncompressed
 *           ELF entry checked as an ELF of its payload's size, a
 *           compressed entry's compressed bytes inside its payload.
 *   PTX     text, NUL-terminated within the bytes.
 *
 * Anything else (cudart's fatbin wrapper, which holds a pointer into the
 * client's memory, among others) is refused. */
#ifndef SCUDA_COMMON_IMAGE_CHECK_H
#define SCUDA_COMMON_IMAGE_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* 0 when the len bytes at image are such an image; else -1, with the
 * reason in why (for the log). image need not be aligned. */
int image_check(const void *image, size_t len, char *why, size_t whylen);

/* The names of the variables in device memory an image declares
 * (__device__, __constant__, __managed__) in the code the driver loads on
 * a device of compute capability `arch` (major * 10 + minor): a fatbin's
 * cubin of the same major and the highest minor up to arch, else its
 * highest PTX up to arch; a bare ELF or PTX image itself. For a cubin,
 * the STT_OBJECT symbols of the global and constant banks; for PTX, the
 * module scope .global and .const declarations. `each` gets every name
 * (NUL-terminated, valid during the call; a name may be one the driver
 * does not know, such as a string literal's) and stops the walk by
 * returning nonzero, which is returned. A compressed entry (LZ4 or zstd)
 * is decompressed first (fatbin_unpack.h) and its ELF checked as
 * image_check checks an uncompressed one. Else 0, or -1 with why: the
 * image fails image_check, its code for arch does not decompress or fails
 * the check, or it holds none for arch. */
int image_globals(const void *image, size_t len, unsigned arch, int (*each)(const char *name, void *arg), void *arg,
                  char *why, size_t whylen);

/* The code the driver loads on a device of compute capability `arch`, as
 * image_globals picks it, checked and decompressed: fn sees it (a cubin,
 * IMAGE_CODE_ELF, or NUL-terminated PTX text, IMAGE_CODE_PTX, len
 * counting the NUL; valid during the call) and its answer is returned.
 * Else -1 with why, as for image_globals. With IMAGE_CODE_UNIQUE in
 * flags, a fatbin with another entry of the chosen one's kind and
 * architecture is refused too: sm_90 and sm_90a entries share the number
 * 90 (the "a" is a bit of the entry's flags, 0x100000), and which of them
 * the driver prefers was not measured. */
enum { IMAGE_CODE_ELF = 1, IMAGE_CODE_PTX = 2 };
#define IMAGE_CODE_UNIQUE 1u
typedef int (*image_code_fn)(int kind, const uint8_t *code, size_t len, void *arg);
int image_code(const void *image, size_t len, unsigned arch, unsigned flags, image_code_fn fn, void *arg, char *why,
               size_t whylen);

#endif
