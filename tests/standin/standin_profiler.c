/* standin_profiler.c - the legacy profiler's set-up, as every driver since
 * CUDA 12.0 answers it: refused, no file read or written. */
#include <cudaProfiler.h>

#include "standin_internal.h"

CUresult CUDAAPI cuProfilerInitialize(const char *configFile, const char *outputFile, CUoutput_mode outputMode)
{
    (void)configFile, (void)outputFile, (void)outputMode;
    return CUDA_ERROR_NOT_SUPPORTED;
}
