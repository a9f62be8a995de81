/* memo.h - the client's cache of query results (call class `memo`,
 * docs/architecture.md, 3.3 Call classes).
 *
 * Queries whose answer only changes when the application changes it
 * (cuFuncGetAttribute, cuKernelGetAttribute, cuOccupancy*, ...) go to the
 * server once; later calls with the same op, current context and argument
 * bytes are answered here. Any call marked `invalidates_memo` in
 * codegen/driver_spec.py (cuFuncSetAttribute, cuKernelSetAttribute, module
 * unload, ...) clears the whole cache.
 *
 * The key is the request payload exactly as the generated stub encodes it
 * (handles travel as their ids), the value is the reply's outputs.
 *
 *   uint64_t gen;
 *   if (memo_lookup(op, ctx, key, key_len, val, &val_len, &gen)) -> answered
 *   else { call the server; on success memo_insert(op, ctx, key, key_len,
 *                                                  out, out_len, gen); }
 *
 * `gen` closes the race with an invalidation that happens while the query
 * is in flight: memo_insert drops a value fetched before the latest
 * memo_invalidate_all(). Thread-safe; bounded (MEMO_SLOTS entries, least
 * recently inserted evicted per set). */
#ifndef SCUDA_CLIENT_MEMO_H
#define SCUDA_CLIENT_MEMO_H

#include <stddef.h>
#include <stdint.h>

#define MEMO_MAX_KEY 192   /* longer keys are never cached */
#define MEMO_MAX_VALUE 64  /* longer values are never cached */
#define MEMO_SLOTS 4096

/* 1 and the value (copied to value[MEMO_MAX_VALUE], its length in
 * *value_len) on a hit; 0 on a miss, with *gen set for memo_insert. */
int memo_lookup(uint16_t op, uint32_t ctx, const void *key, size_t key_len, void *value, size_t *value_len,
                uint64_t *gen);
void memo_insert(uint16_t op, uint32_t ctx, const void *key, size_t key_len, const void *value, size_t value_len,
                 uint64_t gen);
void memo_invalidate_all(void);
/* The same, for a value about one function or kernel (its wire id): a
 * set of that handle's attribute drops only what it can change
 * (memo_invalidate_about). */
void memo_insert_about(uint16_t op, uint32_t ctx, const void *key, size_t key_len, const void *value,
                       size_t value_len, uint64_t gen, uint64_t subject);
/* After set_op (cuKernelSetAttribute or cuFuncSetAttribute) changed an
 * attribute of subject: drop the values about subject, the values about
 * no known handle (occupancy, limits), and every value of the other of
 * the two attribute queries (a kernel's function and the kernel share
 * attributes); values about other functions and kernels stay. Queries in
 * flight do not insert (their gen is old). */
void memo_invalidate_about(uint16_t set_op, uint64_t subject);
/* The generation memo_lookup gives on a miss: for a caller that fills
 * the memo with answers it fetched some other way (func_attrs.c). */
uint64_t memo_generation(void);

/* Attribute settings (spec `setting=P`): the value the last successful set
 * with these other arguments gave. They outlive memo_invalidate_all() (a
 * set of one attribute does not undo another) and go with
 * memo_forget_settings(), when a module, library or context goes away. */
int memo_setting_is(uint16_t op, uint32_t ctx, const void *key, size_t key_len, const void *value,
                    size_t value_len);
void memo_setting_put(uint16_t op, uint32_t ctx, const void *key, size_t key_len, const void *value,
                      size_t value_len);
void memo_forget_settings(void);

/* For tests and SCUDA_LOG=debug statistics. */
struct memo_stats {
    uint64_t hits, misses, inserts, invalidations;
};
void memo_get_stats(struct memo_stats *st);

#endif
