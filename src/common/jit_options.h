/* jit_options.h - which JIT options may cross the wire.
 *
 * A JIT option's value is either a scalar or a pointer into the caller's
 * memory (log buffers, symbol tables). Only scalars are meaningful in the
 * session, and a pointer sent as a value would be dereferenced there: both
 * sides keep to this list (log buffers are handled separately: their
 * sizes travel, and the session supplies its own buffers). */
#ifndef SCUDA_JIT_OPTIONS_H
#define SCUDA_JIT_OPTIONS_H

#include <cuda.h>

static inline int jit_option_is_scalar(CUjit_option o)
{
    switch (o) {
    case CU_JIT_MAX_REGISTERS:
    case CU_JIT_THREADS_PER_BLOCK:
    case CU_JIT_OPTIMIZATION_LEVEL:
    case CU_JIT_TARGET_FROM_CUCONTEXT:
    case CU_JIT_TARGET:
    case CU_JIT_FALLBACK_STRATEGY:
    case CU_JIT_GENERATE_DEBUG_INFO:
    case CU_JIT_LOG_VERBOSE:
    case CU_JIT_GENERATE_LINE_INFO:
    case CU_JIT_CACHE_MODE:
    case CU_JIT_POSITION_INDEPENDENT_CODE:
    case CU_JIT_MIN_CTA_PER_SM:
    case CU_JIT_MAX_THREADS_PER_BLOCK:
    case CU_JIT_OVERRIDE_DIRECTIVE_VALUES:
        return 1;
    default:
        return 0;
    }
}

#endif
