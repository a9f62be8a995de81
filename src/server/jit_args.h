/* jit_args.h - JIT options as the session's driver takes them, from the
 * jit_option records of a request (module loads, run-time linking): the
 * scalar values (src/common/jit_options.h), and buffers of the sizes the
 * client asked for in place of its log buffers. */
#ifndef SCUDA_SERVER_JIT_ARGS_H
#define SCUDA_SERVER_JIT_ARGS_H

#include <cuda.h>
#include <stdint.h>

#include "../common/messages.gen.h"

#define MAX_JIT_LOG (1u << 20)

/* JIT options as the driver takes them: the request's scalar values, and
 * buffers of the sizes the client asked for in place of its log buffers. */
struct jit_options {
    unsigned n;
    CUjit_option opt[JIT_MAX_OPTIONS + 2]; /* + the size options of two logs */
    void *val[JIT_MAX_OPTIONS + 2];
    char *info_log, *error_log;
};

/* The request's options into j; -1 (nothing to free) when one may not
 * cross the wire. */
int jit_options_from(const struct msg_jit_option *opts, uint32_t count, struct jit_options *j);
void free_jit_logs(struct jit_options *j);

#endif
