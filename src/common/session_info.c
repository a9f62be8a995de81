/* session_info.c - see session_info.h. */
#define _GNU_SOURCE
#include "session_info.h"

#include <string.h>

static void put_fixed_str(wire_buf *b, const char *s, size_t cap)
{
    size_t n = strnlen(s, cap - 1);
    wb_put_blob(b, s, n);
}

static int get_fixed_str(wire_reader *r, char *dst, size_t cap)
{
    size_t n;
    const char *s = wr_blob(r, &n);
    if (r->bad || n >= cap) return -1;
    if (n) memcpy(dst, s, n);
    dst[n] = '\0';
    return 0;
}

void session_info_encode(wire_buf *b, const struct session_info *si)
{
    wb_put_i32(b, si->driver_version);
    wb_put_u32(b, si->session_pid);
    wb_put_u32(b, si->device_count);
    for (uint32_t d = 0; d < si->device_count; d++) {
        const struct device_info *di = &si->dev[d];
        put_fixed_str(b, di->name, sizeof di->name);
        wb_put_raw(b, di->uuid.bytes, sizeof di->uuid.bytes);
        wb_put_u64(b, di->total_mem);
        put_fixed_str(b, di->pci_bus_id, sizeof di->pci_bus_id);
        wb_put_u32(b, di->attr_count);
        for (uint32_t a = 0; a < di->attr_count; a++) {
            wb_put_i32(b, di->attr_value[a]);
            wb_put_i32(b, di->attr_result[a]);
        }
    }
    wb_put_i32(b, si->loading_mode);
    put_fixed_str(b, si->driver_build, sizeof si->driver_build);
}

int session_info_decode(wire_reader *r, struct session_info *si)
{
    memset(si, 0, sizeof *si);
    si->driver_version = wr_i32(r);
    si->session_pid = wr_u32(r);
    si->device_count = wr_u32(r);
    if (r->bad || si->device_count > SCUDA_MAX_DEVICES) return -1;
    for (uint32_t d = 0; d < si->device_count; d++) {
        struct device_info *di = &si->dev[d];
        if (get_fixed_str(r, di->name, sizeof di->name) != 0) return -1;
        wr_raw(r, di->uuid.bytes, sizeof di->uuid.bytes);
        di->total_mem = wr_u64(r);
        if (get_fixed_str(r, di->pci_bus_id, sizeof di->pci_bus_id) != 0) return -1;
        di->attr_count = wr_u32(r);
        if (r->bad || di->attr_count > SCUDA_ATTR_SLOTS) return -1;
        for (uint32_t a = 0; a < di->attr_count; a++) {
            di->attr_value[a] = wr_i32(r);
            di->attr_result[a] = wr_i32(r);
        }
    }
    /* Each absent from an older server. */
    if (!r->bad && r->left >= 4) si->loading_mode = wr_i32(r);
    if (!r->bad && r->left > 0 && get_fixed_str(r, si->driver_build, sizeof si->driver_build) != 0) return -1;
    return r->bad ? -1 : 0;
}
