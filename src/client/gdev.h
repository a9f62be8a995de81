/* gdev.h - the client's one device list over every server it uses.
 *
 * The application sees one list of devices: each server's devices in that
 * server's order, the servers in SCUDA_SERVER's order. Server k's devices
 * hold ordinals g0_k .. g0_k + n_k - 1. Each entry says which server the
 * device is on and what that server calls it (its local ordinal), which is
 * what goes on the wire. With one server the table is that server's list
 * and every ordinal is its own local ordinal.
 *
 * Kept apart from servers.c and the connection so that it can be built
 * and tested from session infos alone. */
#ifndef SCUDA_CLIENT_GDEV_H
#define SCUDA_CLIENT_GDEV_H

#include "common/session_info.h"

/* Address windows are 4 TiB per device from 0x2000_0000_0000 and must end
 * below 0x8000_0000_0000, which leaves room for 24; 32 keeps a margin
 * for lists the window check will refuse with a clear message. */
#define SCUDA_MAX_GLOBAL_DEVICES 32
_Static_assert(SCUDA_MAX_DEVICES <= SCUDA_MAX_GLOBAL_DEVICES, "one server's devices always fit the list");

struct server;

struct gdev {
    struct server *s;              /* the server the device is on */
    int local;                     /* its ordinal there (what the wire carries) */
    const struct device_info *info; /* in that server's session info */
};

struct gdev_table {
    int count;
    struct gdev dev[SCUDA_MAX_GLOBAL_DEVICES];
};

/* Append server s's devices, described by si, to t, and set *g0 to the
 * ordinal of the first. Returns 0, or -1 when they would not fit (t is then
 * unchanged). The entries point into si, which must outlive t. */
int gdev_append(struct gdev_table *t, struct server *s, const struct session_info *si, int *g0);
/* The device at `ordinal`, or NULL when there is none. */
const struct gdev *gdev_get(const struct gdev_table *t, int ordinal);
/* Keep and reorder t's devices as the driver reads CUDA_VISIBLE_DEVICES
 * (`visible`, set: an empty value keeps none): an index picks that device
 * of t, a UUID ("GPU-...", spelt as nvidia-smi -L writes it, in either
 * case) the device that has it; the first entry that names none, or one
 * already taken, ends the list (common/visible_devices.c, the server's
 * parser). Returns how many devices t keeps. Not thread-safe: cuInit's. */
int gdev_apply_visible(struct gdev_table *t, const char *visible);
/* g's UUID as NVML and nvidia-smi -L write it ("GPU-xxxxxxxx-..."). */
void gdev_uuid_text(const struct gdev *g, char *out, size_t outlen);
/* The ordinal of server s's device `local`, or -1 when the table has none. */
int gdev_find(const struct gdev_table *t, const struct server *s, int local);

#endif
