/* shim.h - the state every exported driver entry point checks first.
 *
 * The shim runs in one of three modes, settled by cuInit:
 *   REMOTE       a SCUDA server is configured: calls go over the wire
 *   PASSTHROUGH  no server is configured and this machine has a real
 *                driver: every call goes straight to it
 *   (neither)    before cuInit, or cuInit failed: calls return the error
 *                the real driver would (NOT_INITIALIZED) or cuInit's error */
#ifndef SCUDA_CLIENT_SHIM_H
#define SCUDA_CLIENT_SHIM_H

#include <cuda.h>

#include "../common/driver_table.gen.h"

enum shim_mode {
    SHIM_UNINITIALIZED = 0,
    SHIM_REMOTE = 1,
    SHIM_PASSTHROUGH = 2,
    SHIM_FAILED = 3,
    SHIM_REMOTE_TRACED = 4, /* remote, and SCUDA_TRACE=1: every call's name on stderr */
};

/* What the shim exports: the driver's API, and nothing else (the build
 * hides every other symbol). */
#define EXPORT __attribute__((visibility("default")))

extern volatile int shim_mode;
static inline int shim_remote(void) { return shim_mode == SHIM_REMOTE || shim_mode == SHIM_REMOTE_TRACED; }
/* SCUDA_TRACE=1: one stderr line per driver call the program makes (a
 * debugging aid; it costs nothing otherwise, being a mode of its own).
 * The library's own calls through the API, made inside an entry point,
 * are not the program's: only the outermost entry on a thread is named.
 * shim_trace_enter counts the thread's depth and returns 1; the cleanup
 * of SHIM_ENTER's guard (shim_trace_leave) counts it back down on every
 * return path. */
extern _Thread_local int shim_trace_depth;
int shim_trace_enter(const char *name);
static inline void shim_trace_leave(const int *entered)
{
    if (__builtin_expect(*entered, 0)) shim_trace_depth--;
}
extern CUresult shim_init_error;            /* cuInit's result when FAILED */
extern struct driver_table real_driver;     /* filled in PASSTHROUGH mode */

/* First statement of every exported entry point. `args` is the
 * parenthesised argument list, forwarded unchanged in passthrough mode.
 * It declares the trace guard, so it stands at the function's top level,
 * once per function. */
#define SHIM_ENTER(name, args)                                                  \
    __attribute__((cleanup(shim_trace_leave))) int shim_traced_ = 0;            \
    do {                                                                        \
        if (__builtin_expect(shim_mode != SHIM_REMOTE, 0)) {                    \
            if (shim_mode == SHIM_REMOTE_TRACED) {                              \
                shim_traced_ = shim_trace_enter(#name);                         \
                break;                                                          \
            }                                                                   \
            if (shim_mode == SHIM_PASSTHROUGH)                                  \
                return real_driver.name ? real_driver.name args                 \
                                        : CUDA_ERROR_NOT_SUPPORTED;             \
            return shim_mode == SHIM_FAILED ? shim_init_error                   \
                                            : CUDA_ERROR_NOT_INITIALIZED;       \
        }                                                                       \
    } while (0)

/* The virtual id of the calling thread's current context (0 = none). */
uint32_t shim_current_ctx_id(void);

/* Stream captures in progress in this process (capture.c), counted by the
 * generated cuStreamBeginCapture* (after success) and cuStreamEndCapture
 * stubs. While there are none no stream can be capturing, so copies with a
 * host side need not ask the session (capture_refuse in capture.h). */
void capture_begun(void);
void capture_ended(CUresult r);

#endif
