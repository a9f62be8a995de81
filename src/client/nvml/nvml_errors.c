/* nvml_errors.c - nvmlErrorString.
 *
 * Programs print these strings (nvidia-smi, pynvml's exceptions), so in
 * REMOTE mode they are the server's NVML's own text, asked for once per
 * code and kept for the life of the process (the caller keeps the pointer).
 * Before a connection exists (nvmlInit failed, or was never called) a few
 * common codes have NVML's text built in. */
#define _GNU_SOURCE
#include "nvml_shim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/nvml/nvml_ops.gen.h"

#define CACHED_CODES 64 /* codes 0..63; NVML_ERROR_UNKNOWN (999) goes in the last slot */

static const char *cache[CACHED_CODES + 1];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *builtin(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    default: return "Unknown Error";
    }
}

static const char *ask_server(nvmlReturn_t r)
{
    rpc_call c;
    rpc_begin(&c, NVML_OP_scuda_nvml_error_string);
    wb_put_u32(&c.req, (uint32_t)r);
    const char *text = NULL;
    if (nvml_call(&c) == NVML_SUCCESS) {
        const char *s = wr_str(&c.out);
        if (s) text = strdup(s);
    }
    rpc_end(&c);
    return text;
}

NVML_EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    if (nvml_mode == NVML_MODE_PASSTHROUGH && nvml_local.nvmlErrorString) return nvml_local.nvmlErrorString(result);
    if (nvml_mode != NVML_MODE_REMOTE) return builtin(result);
    int slot = result == NVML_ERROR_UNKNOWN ? CACHED_CODES : (unsigned)result < CACHED_CODES ? (int)result : -1;
    if (slot < 0) return builtin(NVML_ERROR_UNKNOWN);
    pthread_mutex_lock(&cache_lock);
    if (cache[slot] == NULL) cache[slot] = ask_server(result);
    const char *s = cache[slot];
    pthread_mutex_unlock(&cache_lock);
    return s ? s : builtin(result);
}
