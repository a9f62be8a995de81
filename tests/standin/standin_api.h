/*
 * SCUDA CPU stand-in driver: extra (non-CUDA) symbols for tests.
 *
 * These are exported by libcuda-standin.so next to the cu* entry points.
 * Test code that talks to the stand-in directly (or a server-side test
 * hook) can look them up with dlsym.
 */
#ifndef SCUDA_STANDIN_API_H
#define SCUDA_STANDIN_API_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Number of successful kernel launches (cuLaunchKernel, cuLaunchKernelEx,
 * cuLaunchCooperativeKernel, any variant) since the library was loaded. */
__attribute__((visibility("default")))
unsigned long long standin_launch_count(void);

/* Details of launch number `index` (0-based, in launch order). The last
 * STANDIN_LAUNCH_LOG_SIZE launches are kept. Any output pointer may be NULL.
 * name: kernel (PTX entry) name, NUL-terminated, truncated to name_size.
 * params: the parameter buffer as laid out by cuFuncGetParamInfo (padding
 * bytes are zero); *params_size gets its full size, at most params_cap bytes
 * are copied. Returns 0, or -1 if index is not (or no longer) in the log. */
#define STANDIN_LAUNCH_LOG_SIZE 1024
__attribute__((visibility("default")))
int standin_launch_get(unsigned long long index, char *name, size_t name_size,
                       unsigned int grid[3], unsigned int block[3],
                       unsigned int *shared_mem_bytes, void *params,
                       size_t params_cap, size_t *params_size);

/* Back to just after cuInit: every context destroyed with what it owns
 * (created ones freed, primary ones inactive and unretained), the sticky
 * error cleared. For the session fuzzer (tests/fuzz/libfuzzer), between
 * inputs. Libraries, graphs and pools, which no context owns, stay. */
__attribute__((visibility("default")))
void standin_reset(void);

#ifdef __cplusplus
}
#endif

#endif /* SCUDA_STANDIN_API_H */
