/* version.h - SCUDA's release version: the one place it is written.
 * CMakeLists.txt reads it for the packages, `scuda --version` prints it,
 * and the handshake carries it (SCUDA_VERSION_PACKED) so that a refusal
 * can name both ends' versions (hello.h). Bump it with each release. */
#ifndef SCUDA_VERSION_H
#define SCUDA_VERSION_H

#define SCUDA_VERSION_MAJOR 0
#define SCUDA_VERSION_MINOR 9
#define SCUDA_VERSION_PATCH 0
#define SCUDA_VERSION_STRING "0.9.0"

/* major.minor.patch in one u32, as the handshake carries it. */
#define SCUDA_VERSION_PACKED \
    (((unsigned)SCUDA_VERSION_MAJOR << 16) | ((unsigned)SCUDA_VERSION_MINOR << 8) | (unsigned)SCUDA_VERSION_PATCH)

#endif
