/* compile_cache.h - the compile cache that the driver offers NVRTC and the
 * JIT libraries, kept on the client (docs/architecture.md, 3.8.3).
 *
 * NVRTC asks the driver (export table da9151d3, export_tables.c) before
 * each stage of a compile whether it has made the same compile before: the
 * stage, the compiler's options and build, and the input (NVVM bitcode,
 * then PTX) name an entry; a hit hands back the stage's output and NVRTC
 * skips that stage. Natively the driver keeps the outputs on disk next to
 * its JIT cache (~/.nv/ComputeCache). cuDNN's runtime-compiled attention
 * compiles the same kernel again for each new sequence length, so without
 * this cache each generated token costs a 250 ms compile in the client
 * against 50 ms natively.
 *
 * The compiles run in the client process, so their cache lives on the
 * client too, in a directory of keyed entries (module_store.h); nothing
 * crosses the wire. The five calls, as driver 580 answers them: */
#ifndef SCUDA_CLIENT_COMPILE_CACHE_H
#define SCUDA_CLIENT_COMPILE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

/* No stage output larger than this is kept (a cubin of a large kernel is
 * a few MiB). */
#define COMPILE_CACHE_MAX_ENTRY (32u << 20)
/* The directory's bound when CUDA_CACHE_MAXSIZE does not set one. */
#define COMPILE_CACHE_DEFAULT_LIMIT (256ull << 20)

/* An entry for one stage of a compile: *handle names it until
 * compile_cache_close. stage is the caller's (NVRTC: 2 for NVVM IR to PTX,
 * 1 for PTX to SASS); options and compiler are NUL-terminated strings
 * (compiler may hold two, the build's target and date). Returns
 * CUDA_ERROR_NOT_INITIALIZED when the cache is off or unusable, as the
 * driver does with CUDA_CACHE_DISABLE=1: the caller then compiles. */
CUresult compile_cache_open(void **handle, unsigned stage, const void *input, unsigned len, const char *options,
                            const char *compiler);
CUresult compile_cache_close(void *handle);
/* The entry's output, in a buffer for compile_cache_release:
 * CUDA_ERROR_NOT_FOUND on a miss. */
CUresult compile_cache_lookup(void *handle, unsigned flags, void **data, unsigned *len);
/* Keep len bytes of output for the entry (the caller compiled it). */
CUresult compile_cache_store(void *handle, unsigned flags, const void *data, unsigned len);
CUresult compile_cache_release(void *data);

/* Use dir (created if missing) bounded to limit bytes, or no cache with
 * dir NULL, instead of what the environment says. For tests. */
void compile_cache_configure(const char *dir, uint64_t limit);

#endif
