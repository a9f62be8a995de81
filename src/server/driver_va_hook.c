/* driver_va_hook.c - mmap and mmap64 as the scuda executable exports them
 * to the libraries it dlopens (CMakeLists.txt: --export-dynamic-symbol),
 * so that the driver's calls reach the arena (driver_va.h).
 *
 * Every caller that is not the loaded driver, and every call before a
 * session turned the arena on (the parent, the CLI), goes straight to the
 * kernel. Compiled out under the sanitizers: their runtimes define mmap
 * themselves, and a second definition would take their interception away. */
#define _GNU_SOURCE
#include "driver_va.h"

#if DRIVER_VA_HOOKED
#include <sys/mman.h>

/* The return address names the caller: the driver's own code calls
 * through its PLT straight into this function. */
__attribute__((visibility("default"), noinline)) void *mmap(void *addr, size_t len, int prot, int flags, int fd,
                                                              off_t off)
{
    return driver_va_mmap(addr, len, prot, flags, fd, off, (uintptr_t)__builtin_return_address(0));
}

/* The same call on a 64-bit system (off_t is 64 bits). */
__attribute__((visibility("default"), noinline)) void *mmap64(void *addr, size_t len, int prot, int flags, int fd,
                                                                off64_t off)
{
    return driver_va_mmap(addr, len, prot, flags, fd, (off_t)off, (uintptr_t)__builtin_return_address(0));
}
#endif
