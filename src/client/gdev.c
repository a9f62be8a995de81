/* gdev.c - see gdev.h. */
#include "gdev.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "../common/visible_devices.h"

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

void gdev_uuid_text(const struct gdev *g, char *out, size_t outlen)
{
    const unsigned char *b = (const unsigned char *)g->info->uuid.bytes;
    snprintf(out, outlen, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* t's devices as a "server" list for visible_select: each UUID as NVML
 * and nvidia-smi -L write it. */
static void uuid_list(const struct gdev_table *t, char *out, size_t outlen)
{
    size_t at = 0;
    out[0] = '\0';
    for (int g = 0; g < t->count && at < outlen; g++) {
        char u[48];
        gdev_uuid_text(&t->dev[g], u, sizeof u);
        int n = snprintf(out + at, outlen - at, "%s%s", g ? "," : "", u);
        if (n < 0) break;
        at += (size_t)n;
    }
}

int gdev_apply_visible(struct gdev_table *t, const char *visible)
{
    static char list[SCUDA_MAX_GLOBAL_DEVICES * 48];
    int pick[SCUDA_MAX_GLOBAL_DEVICES];
    uuid_list(t, list, sizeof list);
    int n = visible_select(list, visible, pick, SCUDA_MAX_GLOBAL_DEVICES);
    struct gdev kept[SCUDA_MAX_GLOBAL_DEVICES];
    memset(kept, 0, sizeof kept);
    for (int i = 0; i < n; i++) kept[i] = t->dev[pick[i]];
    memcpy(t->dev, kept, (size_t)n * sizeof kept[0]);
    t->count = n;
    return n;
}
