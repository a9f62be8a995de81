/* gdev.c - see gdev.h. */
#include "gdev.h"

#include <stddef.h>

int gdev_append(struct gdev_table *t, struct server *s, const struct session_info *si, int *g0)
{
    if (si->device_count > SCUDA_MAX_DEVICES || (int)si->device_count > SCUDA_MAX_GLOBAL_DEVICES - t->count)
        return -1;
    *g0 = t->count;
    for (unsigned i = 0; i < si->device_count; i++)
        t->dev[t->count++] = (struct gdev){.s = s, .local = (int)i, .info = &si->dev[i]};
    return 0;
}

const struct gdev *gdev_get(const struct gdev_table *t, int ordinal)
{
    return ordinal >= 0 && ordinal < t->count ? &t->dev[ordinal] : NULL;
}

int gdev_find(const struct gdev_table *t, const struct server *s, int local)
{
    for (int g = 0; g < t->count; g++)
        if (t->dev[g].s == s && t->dev[g].local == local) return g;
    return -1;
}
