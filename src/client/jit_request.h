/* jit_request.h - an application's JIT options as they travel (module
 * loads, run-time linking): scalar ones by value; for the log buffers
 * their sizes, and the session's logs are copied back into them, with the
 * size options updated as the driver does. Wall time (an output) is not
 * reported. */
#ifndef SCUDA_CLIENT_JIT_REQUEST_H
#define SCUDA_CLIENT_JIT_REQUEST_H

#include <cuda.h>

#include "../common/messages.gen.h"

struct jit_request {
    unsigned n;
    CUjit_option *opt;
    void **val;
};

/* The options that travel into opts (room for JIT_MAX_OPTIONS), their
 * number into *count: -1 when there are more (which the session would
 * refuse). With scalars_only, log buffers stay behind. */
int jit_request_put(const struct jit_request *j, struct msg_jit_option *opts, uint32_t *count, int scalars_only);

/* The value of a log buffer's size option (0: none). */
size_t jit_request_log_size(const struct jit_request *j, CUjit_option size_opt);

/* Copy a log of the session into the application's buffer for buf_opt,
 * truncated to cap bytes (its size option as the call began: the option
 * is an output too), and set that option to the bytes written. */
void jit_request_take_log(const struct jit_request *j, CUjit_option buf_opt, CUjit_option size_opt, size_t cap,
                          const char *log);

#endif
