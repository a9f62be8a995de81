/* SCUDA CPU stand-in driver: run-time linking (cuLinkCreate_v2,
 * cuLinkAddData_v2, cuLinkAddFile_v2, cuLinkComplete, cuLinkDestroy).
 *
 * The stand-in links PTX texts: the image is the first input's text with
 * every later input's appended, less its .version/.target/.address_size
 * lines, so cuModuleLoadData finds every input's entries and variables in
 * it. Each input adds a line to the info log; an input that is not PTX is
 * CUDA_ERROR_INVALID_IMAGE with a line in the error log. As driver 580: a
 * size of 0, or an add after the completion, is INVALID_VALUE; a second
 * completion is INVALID_HANDLE; a missing file is FILE_NOT_FOUND. */
#include "standin_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct si_link {
    char *info, *error; /* the application's log buffers (NULL: none) */
    size_t info_cap, error_cap;
    char *text;         /* the inputs so far */
    size_t len;
    int inputs;
    bool complete;
} si_link;

static si_hset si_links;

static void si_log_append(char *buf, size_t cap, const char *line)
{
    if (!buf || !cap)
        return;
    size_t used = strnlen(buf, cap - 1);
    snprintf(buf + used, cap - used, "%s", line);
}

CUresult CUDAAPI cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void **optionValues,
                                 CUlinkState *stateOut)
{
    if (!stateOut || (numOptions && (!options || !optionValues)))
        return CUDA_ERROR_INVALID_VALUE;
    si_link *l = si_xcalloc(1, sizeof *l);
    for (unsigned i = 0; i < numOptions; i++) {
        if (options[i] == CU_JIT_INFO_LOG_BUFFER) l->info = optionValues[i];
        if (options[i] == CU_JIT_ERROR_LOG_BUFFER) l->error = optionValues[i];
        if (options[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES) l->info_cap = (size_t)(uintptr_t)optionValues[i];
        if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) l->error_cap = (size_t)(uintptr_t)optionValues[i];
    }
    if (l->info && l->info_cap) l->info[0] = '\0';
    if (l->error && l->error_cap) l->error[0] = '\0';
    si_enter();
    si_hset_add(&si_links, l);
    si_leave();
    *stateOut = (CUlinkState)l;
    return CUDA_SUCCESS;
}

/* Does line [p, end) start with one of the header directives? */
static bool si_header_line(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    static const char *const dirs[] = {".version", ".target", ".address_size"};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(dirs[i]);
        if ((size_t)(end - p) >= n && memcmp(p, dirs[i], n) == 0)
            return true;
    }
    return false;
}

static void si_link_append(si_link *l, const char *text, size_t n)
{
    l->text = realloc(l->text, l->len + n + 2);
    if (!l->text)
        abort();
    for (const char *p = text, *end = text + n; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl + 1 : end;
        if (l->inputs == 0 || !si_header_line(p, eol)) {
            memcpy(l->text + l->len, p, (size_t)(eol - p));
            l->len += (size_t)(eol - p);
        }
        p = eol;
    }
    l->text[l->len++] = '\n';
    l->text[l->len] = '\0';
}

static CUresult si_link_add(si_link *l, CUjitInputType type, const char *data, size_t size, const char *name)
{
    if (l->complete || size == 0 || !data)
        return CUDA_ERROR_INVALID_VALUE;
    size_t n = strnlen(data, size);
    char line[256];
    if (type != CU_JIT_INPUT_PTX || !memmem(data, n, ".version", 8)) {
        snprintf(line, sizeof line, "standin: %s: not PTX text\n", name ? name : "?");
        si_log_append(l->error, l->error_cap, line);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    si_link_append(l, data, n);
    l->inputs++;
    snprintf(line, sizeof line, "standin: linked %s (%zu bytes)\n", name ? name : "?", n);
    si_log_append(l->info, l->info_cap, line);
    return CUDA_SUCCESS;
}

static CUresult si_link_get(CUlinkState st, si_link **out)
{
    si_enter();
    bool ok = st && si_hset_has(&si_links, st);
    si_leave();
    *out = (si_link *)st;
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,
                                  unsigned int numOptions, CUjit_option *options, void **optionValues)
{
    (void)numOptions, (void)options, (void)optionValues;
    si_link *l;
    CUresult rc = si_link_get(state, &l);
    return rc ? rc : si_link_add(l, type, data, size, name);
}

CUresult CUDAAPI cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path, unsigned int numOptions,
                                  CUjit_option *options, void **optionValues)
{
    (void)numOptions, (void)options, (void)optionValues;
    si_link *l;
    CUresult rc = si_link_get(state, &l);
    if (rc)
        return rc;
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(path, "rb");
    if (!f)
        return CUDA_ERROR_FILE_NOT_FOUND;
    char *buf = si_xcalloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    rc = si_link_add(l, type, buf, n, path);
    free(buf);
    return rc;
}

CUresult CUDAAPI cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    si_link *l;
    CUresult rc = si_link_get(state, &l);
    if (rc)
        return rc;
    if (!cubinOut || !sizeOut)
        return CUDA_ERROR_INVALID_VALUE;
    if (l->complete)
        return CUDA_ERROR_INVALID_HANDLE;
    l->complete = true;
    if (l->inputs == 0)
        return CUDA_ERROR_INVALID_VALUE;
    *cubinOut = l->text;
    *sizeOut = l->len + 1;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLinkDestroy(CUlinkState state)
{
    si_link *l;
    CUresult rc = si_link_get(state, &l);
    if (rc)
        return rc;
    si_enter();
    si_hset_del(&si_links, l);
    si_leave();
    free(l->text);
    free(l);
    return CUDA_SUCCESS;
}
