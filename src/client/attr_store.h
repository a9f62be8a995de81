/* attr_store.h - function attributes kept across processes
 * (docs/architecture.md, 3.8.6).
 *
 * A function's attributes, as one scuda_func_attributes answers them (the
 * 8 fixed when it was compiled, and the 8 settable ones as a load leaves
 * them), are the same in every process that loads the same image with the
 * same JIT options, on the same model of GPU under the same driver. Yet
 * every new process asks for them again: a round trip per function its
 * first step touches (cudart's cudaFuncGetAttributes, cuBLAS sizing its
 * kernels), 20 ms each over a WAN. So the client keeps the answers on
 * disk, as it keeps NVRTC's compiles (compile_cache.h), and a function
 * whose answers are there asks nothing.
 *
 * The key names everything the answers depend on: the load's identity
 * (the image's SHA-256 and its JIT options, func_identity), the
 * function's name, whether it is asked of as a kernel, and the GPU's name
 * and compute capability and the driver's version, as the session told
 * them at connect. A function asked of as a CUfunction may live on any of
 * its server's devices, so it is kept only when they are all one model.
 *
 * What a setting of this process could have changed is neither used nor
 * kept: nothing about a function whose attribute was set (func_desc's
 * attribute_set, marked before the set goes out), nothing at all once a
 * cache or shared memory configuration was set (attr_store_config_changed).
 *
 * The entries live in SCUDA_ATTR_CACHE, else "$XDG_CACHE_HOME/scuda/
 * attributes" (off with SCUDA_ATTR_CACHE=off or CUDA_CACHE_DISABLE=1),
 * keyed entries of module_store.h, whose reader checks each file's length
 * and digest; an entry that is not what this build writes is a miss. */
#ifndef SCUDA_CLIENT_ATTR_STORE_H
#define SCUDA_CLIENT_ATTR_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/messages.gen.h"
#include "../common/wire.h"
#include "../common/module_store.h"

struct server;

/* The directory's bound, in bytes: an entry is about a hundred bytes. */
#define ATTR_STORE_LIMIT (32ull << 20)

struct attr_answers {
    uint32_t known; /* bit a: attribute a's value is in values[a] (the driver answered it) */
    int32_t values[FUNC_ATTR_COUNT];
};

/* The key of h's answers asked of srv (dev: the server's ordinal of the
 * device a kernel is asked about, or -1 for a function): 1, or 0 when
 * they are not to be kept or used (the store is off, h's image has no
 * digest, h or this process set something, the devices differ). */
int attr_store_key(const void *h, const struct server *srv, int32_t dev, uint8_t key[MODULE_KEY_LEN]);

/* 1 and *a filled when an earlier process (or this one) kept answers
 * under key; else 0. */
int attr_store_recall(const uint8_t key[MODULE_KEY_LEN], struct attr_answers *a);

/* Keep a's answers under key (the caller checked, after the answers came,
 * that attr_store_key still gives a key for h). */
void attr_store_keep(const uint8_t key[MODULE_KEY_LEN], const struct attr_answers *a);

/* Answers of memo calls that depend only on a function, their other
 * arguments and the GPU (spec flag `kept`: occupancy per multiprocessor):
 * the same rules, keyed by the op, the function as above, and args (the
 * other arguments as the request encodes them). recall: 1 and the answer
 * (at most MEMO_MAX_VALUE bytes) in value; else 0. */
int memo_kept_recall(uint16_t op, const void *func, const wire_buf *args, void *value, size_t *value_len);
void memo_kept_keep(uint16_t op, const void *func, const wire_buf *args, const void *value, size_t value_len);

/* A cache or shared memory configuration was set (a function's, a
 * kernel's or a context's): nothing is used or kept from now on. */
void attr_store_config_changed(void);

#endif
