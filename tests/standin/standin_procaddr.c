/* SCUDA CPU stand-in driver: cuGetProcAddress.
 *
 * A name and a CUDA version pick a symbol through the table generated from
 * cudaTypedefs.h (standin_tables.h); the symbol is then looked up in this
 * library with dlsym. What the stand-in does not implement is absent: as
 * on driver 580, cuGetProcAddress then returns CUDA_SUCCESS with a NULL
 * pointer and CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND (or
 * CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) in symbolStatus. */
#include "standin_internal.h"
#include "standin_tables.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static void *si_self;
static pthread_once_t si_self_once = PTHREAD_ONCE_INIT;

static void si_self_open(void)
{
    Dl_info info;
    memset(&info, 0, sizeof(info));
    if (dladdr((void *)&cuGetProcAddress_v2, &info) && info.dli_fname)
        si_self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!si_self)
        si_self = dlopen(NULL, RTLD_LAZY);
}

static void *si_self_handle(void)
{
    pthread_once(&si_self_once, si_self_open);
    return si_self;
}

static void *si_lookup(const char *sym)
{
    void *h = si_self_handle();
    if (!h)
        return NULL;
    void *p = dlsym(h, sym);
    if (!p)
        return NULL;
    /* only our own definitions count (not a symbol found in a dependency) */
    Dl_info a, b;
    if (dladdr(p, &a) && dladdr((void *)&cuGetProcAddress_v2, &b) && a.dli_fbase != b.dli_fbase)
        return NULL;
    return p;
}

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                     cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                              CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;

    size_t n = sizeof(si_proc_table) / sizeof(si_proc_table[0]);
    const si_proc_row *best = NULL, *best_pt = NULL;
    bool known = false;
    for (size_t i = 0; i < n; i++) {
        const si_proc_row *r = &si_proc_table[i];
        if (strcmp(r->name, symbol) != 0)
            continue;
        known = true;
        if (r->version > cudaVersion)
            continue;
        if (r->per_thread) {
            if (!best_pt || r->version > best_pt->version)
                best_pt = r;
        } else if (!best || r->version > best->version) {
            best = r;
        }
    }

    void *p = NULL;
    /* as driver 580: a miss is CUDA_SUCCESS with *pfn = NULL, the reason in
     * symbolStatus (if given) */
    if (known) {
        if (!best) {
            if (symbolStatus)
                *symbolStatus = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
            return CUDA_SUCCESS;
        }
        if (per_thread && best_pt)
            p = si_lookup(best_pt->symbol);
        if (!p)
            p = si_lookup(best->symbol);
    } else if (strncmp(symbol, "cu", 2) == 0) {
        p = si_lookup(symbol);
    }
    if (!p) {
        if (symbolStatus)
            *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_SUCCESS;
    }
    *pfn = p;
    if (symbolStatus)
        *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

/* CUDA 11.3 form, without the status output */
#undef cuGetProcAddress
SI_API CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                         cuuint64_t flags);
SI_API CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                         cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
