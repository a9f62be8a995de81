/* standin_logs.c - the driver's log buffer, minimally: one entry, written
 * at load, which cuLogsDumpToMemory returns from an iterator (the index of
 * the next entry) as the driver does: newline-terminated entries, a NUL
 * after them, *size without it, the iterator advanced. */
#include <string.h>

#include "standin_internal.h"

static const char *const si_log_entries[] = {"[stand-in] driver log: loaded\n"};
#define SI_LOG_COUNT (sizeof si_log_entries / sizeof si_log_entries[0])

CUresult CUDAAPI cuLogsCurrent(CUlogIterator *iterator_out, unsigned int flags)
{
    if (!iterator_out || flags)
        return CUDA_ERROR_INVALID_VALUE;
    *iterator_out = SI_LOG_COUNT;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLogsDumpToMemory(CUlogIterator *iterator, char *buffer, size_t *size, unsigned int flags)
{
    if (!buffer || !size || flags)
        return CUDA_ERROR_INVALID_VALUE;
    size_t at = iterator ? *iterator : 0, used = 0;
    for (; at < SI_LOG_COUNT; at++) {
        size_t n = strlen(si_log_entries[at]);
        if (used + n + 1 > *size)
            break;
        memcpy(buffer + used, si_log_entries[at], n);
        used += n;
    }
    if (at < SI_LOG_COUNT && used == 0) {
        *size = 0;
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (*size)
        buffer[used] = '\0';
    *size = used;
    if (iterator)
        *iterator = (CUlogIterator)at;
    return CUDA_SUCCESS;
}
