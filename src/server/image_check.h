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
 *           ELF entry checked as an ELF of its payload's size.
 *   PTX     text, NUL-terminated within the bytes.
 *
 * Anything else (cudart's fatbin wrapper, which holds a pointer into the
 * client's memory, among others) is refused. */
#ifndef SCUDA_SERVER_IMAGE_CHECK_H
#define SCUDA_SERVER_IMAGE_CHECK_H

#include <stddef.h>

/* 0 when the len bytes at image are such an image; else -1, with the
 * reason in why (for the log). image need not be aligned. */
int image_check(const void *image, size_t len, char *why, size_t whylen);

#endif
