/* jit_request.c - JIT options as they travel (jit_request.h). */
#include <stdint.h>
#include <string.h>

#include "jit_request.h"
#include "../common/jit_options.h"

static int is_log_buffer(CUjit_option o) { return o == CU_JIT_INFO_LOG_BUFFER || o == CU_JIT_ERROR_LOG_BUFFER; }

size_t jit_request_log_size(const struct jit_request *j, CUjit_option size_opt)
{
    for (unsigned i = 0; j && i < j->n; i++)
        if (j->opt[i] == size_opt) return (size_t)(uintptr_t)j->val[i];
    return 0;
}

int jit_request_put(const struct jit_request *j, struct msg_jit_option *opts, uint32_t *count, int scalars_only)
{
    uint32_t n = 0;
    for (unsigned i = 0; j && i < j->n; i++) {
        CUjit_option o = j->opt[i];
        if (!jit_option_is_scalar(o) && (scalars_only || !is_log_buffer(o))) continue;
        if (n == JIT_MAX_OPTIONS) return -1;
        uint64_t v = (uint64_t)(uintptr_t)j->val[i];
        if (o == CU_JIT_INFO_LOG_BUFFER) v = jit_request_log_size(j, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
        if (o == CU_JIT_ERROR_LOG_BUFFER) v = jit_request_log_size(j, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
        opts[n++] = (struct msg_jit_option){.option = (uint32_t)o, .value = v};
    }
    *count = n;
    return 0;
}

void jit_request_take_log(const struct jit_request *j, CUjit_option buf_opt, CUjit_option size_opt, size_t cap,
                          const char *log)
{
    for (unsigned i = 0; j && i < j->n; i++) {
        if (j->opt[i] != buf_opt || !j->val[i]) continue;
        size_t len = log ? strlen(log) : 0;
        if (cap == 0) return;
        if (len >= cap) len = cap - 1;
        memcpy(j->val[i], log ? log : "", len);
        ((char *)j->val[i])[len] = '\0';
        for (unsigned k = 0; k < j->n; k++)
            if (j->opt[k] == size_opt) j->val[k] = (void *)(uintptr_t)(len + 1);
    }
}
