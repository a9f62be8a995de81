/* copy.h - plain host<->device transfers (copy.c), under every
 * cuMemcpy* of memcpy.c and mirrored memory's page moves (coherence.c):
 * no capture checks, no coherence bookkeeping.
 * async_mode 0 copies with cuMemcpyHtoD/DtoH semantics, 1 on `st`. */
#ifndef SCUDA_CLIENT_COPY_H
#define SCUDA_CLIENT_COPY_H

#include <cuda.h>
#include <stddef.h>

CUresult copy_to_device(CUdeviceptr dst, const void *src, size_t n, CUstream st, int async_mode);
CUresult copy_from_device(void *dst, CUdeviceptr src, size_t n, CUstream st, int async_mode);

#endif
