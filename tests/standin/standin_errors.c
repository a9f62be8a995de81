/* SCUDA CPU stand-in driver: cuGetErrorName, cuGetErrorString. */
#include "standin_internal.h"
#include "standin_tables.h"

#include <stddef.h>

static const si_error_row *si_error_lookup(CUresult error)
{
    size_t n = sizeof(si_error_table) / sizeof(si_error_table[0]);
    for (size_t i = 0; i < n; i++)
        if (si_error_table[i].code == (int)error)
            return &si_error_table[i];
    return NULL;
}

/* Both work before cuInit, like the real driver. */
CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const si_error_row *r = si_error_lookup(error);
    if (!r) {
        *pStr = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pStr = r->msg;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const si_error_row *r = si_error_lookup(error);
    if (!r) {
        *pStr = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pStr = r->name;
    return CUDA_SUCCESS;
}
