/* jit_args.c - JIT options of a request as the driver takes them
 * (jit_args.h). */
#include <stdlib.h>
#include <string.h>

#include "jit_args.h"
#include "../common/jit_options.h"


void free_jit_logs(struct jit_options *j)
{
    free(j->info_log);
    free(j->error_log);
    j->info_log = j->error_log = NULL;
}

/* One option of the request; -1 when it may not cross the wire. */
static int add_jit_option(struct jit_options *j, CUjit_option o, uint64_t v)
{
    char **log = o == CU_JIT_INFO_LOG_BUFFER ? &j->info_log : o == CU_JIT_ERROR_LOG_BUFFER ? &j->error_log : NULL;
    if (log) {
        /* v is the size the client asked for; the size option follows. */
        if (v > MAX_JIT_LOG || *log) return -1;
        if (!(*log = calloc(1, v + 1))) return -1;
        j->val[j->n] = *log;
        j->opt[j->n] = o;
        j->n++;
        /* The driver learns a log buffer's size from its size option. */
        o = o == CU_JIT_INFO_LOG_BUFFER ? CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES : CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
        j->val[j->n] = (void *)(uintptr_t)v;
    } else if (jit_option_is_scalar(o)) {
        j->val[j->n] = (void *)(uintptr_t)v;
    } else {
        return -1; /* a pointer-valued option: never dereference client values */
    }
    j->opt[j->n++] = o;
    return 0;
}

int jit_options_from(const struct msg_jit_option *opts, uint32_t count, struct jit_options *j)
{
    memset(j, 0, sizeof *j);
    for (uint32_t i = 0; i < count; i++) {
        if (add_jit_option(j, (CUjit_option)opts[i].option, opts[i].value) != 0) {
            free_jit_logs(j);
            return -1;
        }
    }
    return 0;
}

