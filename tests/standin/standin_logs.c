/* standin_logs.c - the driver's log buffer: an entry written at load and
 * one per failed allocation (as the driver logs why an allocation failed),
 * which cuLogsDumpToMemory returns from an iterator (the index of the next
 * entry) as the driver does: newline-terminated entries, a NUL after
 * them, *size without it, the iterator advanced; each entry also goes to
 * the callbacks registered (cuLogsRegisterCallback), at error level, on
 * the thread that writes it, as the driver does. The stand-in keeps the
 * first SI_LOG_MAX entries and drops later ones (the driver keeps the
 * latest 25600 bytes; no test writes that many). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "standin_internal.h"

#define SI_LOG_MAX 256
#define SI_LOG_LINE 160

static char si_log_entries[SI_LOG_MAX][SI_LOG_LINE] = {"[stand-in] driver log: loaded\n"};
static size_t si_log_count = 1;

#define SI_LOG_CALLBACKS 8
static struct si_log_callback {
    CUlogsCallback fn;
    void *user;
} si_log_callbacks[SI_LOG_CALLBACKS];

void si_log_add(const char *fmt, ...)
{
    if (si_log_count == SI_LOG_MAX)
        return;
    char *e = si_log_entries[si_log_count];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e, SI_LOG_LINE - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = strlen(e);
    for (int i = 0; i < SI_LOG_CALLBACKS; i++)
        if (si_log_callbacks[i].fn)
            si_log_callbacks[i].fn(si_log_callbacks[i].user, CU_LOG_LEVEL_ERROR, e, len);
    e[len] = '\n', e[len + 1] = '\0';
    si_log_count++;
}

CUresult CUDAAPI cuLogsRegisterCallback(CUlogsCallback callbackFunc, void *userData,
                                        CUlogsCallbackHandle *callback_out)
{
    if (!callbackFunc || !callback_out)
        return CUDA_ERROR_INVALID_VALUE;
    si_enter();
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < SI_LOG_CALLBACKS; i++) {
        if (!si_log_callbacks[i].fn) {
            si_log_callbacks[i] = (struct si_log_callback){callbackFunc, userData};
            *callback_out = (CUlogsCallbackHandle)&si_log_callbacks[i];
            rc = CUDA_SUCCESS;
            break;
        }
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuLogsUnregisterCallback(CUlogsCallbackHandle callback)
{
    struct si_log_callback *cb = (struct si_log_callback *)callback;
    si_enter();
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < SI_LOG_CALLBACKS; i++) {
        if (cb == &si_log_callbacks[i] && cb->fn) {
            cb->fn = NULL;
            rc = CUDA_SUCCESS;
        }
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuLogsCurrent(CUlogIterator *iterator_out, unsigned int flags)
{
    if (!iterator_out || flags)
        return CUDA_ERROR_INVALID_VALUE;
    si_enter();
    *iterator_out = (CUlogIterator)si_log_count;
    si_leave();
    return CUDA_SUCCESS;
}

static CUresult si_log_dump(CUlogIterator *iterator, char *buffer, size_t *size)
{
    size_t at = iterator ? *iterator : 0, used = 0;
    for (; at < si_log_count; at++) {
        size_t n = strlen(si_log_entries[at]);
        if (used + n + 1 > *size)
            break;
        memcpy(buffer + used, si_log_entries[at], n);
        used += n;
    }
    if (at < si_log_count && used == 0) {
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

CUresult CUDAAPI cuLogsDumpToMemory(CUlogIterator *iterator, char *buffer, size_t *size, unsigned int flags)
{
    if (!buffer || !size || flags)
        return CUDA_ERROR_INVALID_VALUE;
    si_enter();
    CUresult rc = si_log_dump(iterator, buffer, size);
    si_leave();
    return rc;
}
