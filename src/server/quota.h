/* quota.h - the per-session device memory quota (--mem-quota).
 *
 * Every allocation path of the session goes through the driver table
 * `real`, generated handlers and hand-written ones alike, so the quota
 * wraps the table's allocation and free entries once, when the session
 * starts, instead of touching each handler. */
#ifndef SCUDA_SERVER_QUOTA_H
#define SCUDA_SERVER_QUOTA_H

#include <stdint.h>

#include "../common/driver_table.gen.h"

/* Wrap t's allocation entry points so that the session never holds more
 * than `quota` bytes of device memory (0: no quota, only counted). */
void quota_install(struct driver_table *t, uint64_t quota);

/* Device bytes the session holds now (counted even without a quota). */
uint64_t quota_used(void);

/* Forget every allocation, as a new session would start. Only the session
 * fuzzer calls it, between inputs, after the driver freed everything. */
void quota_forget_all(void);

#endif
