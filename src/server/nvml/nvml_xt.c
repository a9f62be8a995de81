/* nvml_xt.c - the session's side of nvidia-smi's private NVML table (see
 * src/client/nvml/nvml_xt.c), and nvmlErrorString's text.
 *
 * The client names a slot; the session calls that slot of the real table:
 * the bus-id and process-list slots with their known prototypes, and any
 * other slot (but GPU reset) only when the client calls it on one of the
 * session's devices, with the client's arguments as values or snapshots
 * (see nvml_wire.h). A slot that misreads them can crash this session only. */
#include "nvml_server.h"

#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"

typedef nvmlReturn_t (*xt_bus_id_fn)(unsigned, char *, unsigned);
typedef nvmlReturn_t (*xt_procs_fn)(nvmlDevice_t, unsigned *, void *, uintptr_t);
typedef int (*xt_any_fn)(uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t);

#define XT_BUFFER (64u << 10) /* what a blindly forwarded slot may write into one argument */

static const unsigned char smi_uuid[16] = NVML_XT_SMI_UUID;
static const uintptr_t *table; /* the real table, once the client opened it */

static void *slot_fn(unsigned slot)
{
    if (table == NULL || slot == 0 || slot >= table[0] / sizeof *table) return NULL;
    return (void *)table[slot];
}

CUresult srv_scuda_nvml_error_string(srv_call *c)
{
    uint32_t code = wr_u32(&c->in);
    if (!wr_ok_end(&c->in)) return NV(NVML_ERROR_INVALID_ARGUMENT);
    nvmlReturn_t r = nvml_load();
    if (r != NVML_SUCCESS || !nvml_real.nvmlErrorString) return NV(r != NVML_SUCCESS ? r : NVML_ERROR_FUNCTION_NOT_FOUND);
    wb_put_str(&c->out, nvml_real.nvmlErrorString((nvmlReturn_t)code));
    return NV(NVML_SUCCESS);
}

CUresult srv_scuda_nvml_xt_open(srv_call *c)
{
    unsigned char uuid[16];
    wr_raw(&c->in, uuid, sizeof uuid);
    if (!wr_ok_end(&c->in)) return NV(NVML_ERROR_INVALID_ARGUMENT);
    nvmlReturn_t r = nvml_load();
    if (r != NVML_SUCCESS) return NV(r);
    if (!nvml_real.nvmlInternalGetExportTable) return NV(NVML_ERROR_FUNCTION_NOT_FOUND);
    const void *t = NULL;
    r = nvml_real.nvmlInternalGetExportTable(&t, uuid);
    if (r != NVML_SUCCESS || t == NULL) return NV(r != NVML_SUCCESS ? r : NVML_ERROR_UNKNOWN);
    if (memcmp(uuid, smi_uuid, sizeof uuid) == 0) table = t;
    wb_put_u64(&c->out, ((const uintptr_t *)t)[0]);
    return NV(NVML_SUCCESS);
}

CUresult srv_scuda_nvml_xt_bus_id(srv_call *c)
{
    unsigned index = wr_u32(&c->in), len = wr_u32(&c->in);
    if (!wr_ok_end(&c->in) || len > 4096) return NV(NVML_ERROR_INVALID_ARGUMENT);
    xt_bus_id_fn fn = (xt_bus_id_fn)slot_fn(NVML_XT_BUS_ID);
    if (fn == NULL) return NV(NVML_ERROR_NOT_SUPPORTED);
    unsigned real_index;
    nvmlReturn_t r = nvml_served_index(index, &real_index);
    char buf[4096] = "";
    if (r == NVML_SUCCESS) r = fn(real_index, buf, len);
    struct ns_frame k;
    ns_begin(&k, c);
    ns_put_str(&k, buf, r, len);
    return ns_end(&k, r);
}

CUresult srv_scuda_nvml_xt_processes(srv_call *c)
{
    unsigned slot = wr_u32(&c->in);
    uint64_t dev_id = wr_u64(&c->in);
    unsigned cap = wr_u32(&c->in);
    int present = wr_u8(&c->in);
    uint64_t flags = wr_u64(&c->in);
    if (!wr_ok_end(&c->in) || slot < NVML_XT_PROCS_FIRST || slot > NVML_XT_PROCS_LAST || cap > NVML_XT_MAX_PROCS)
        return NV(NVML_ERROR_INVALID_ARGUMENT);
    xt_procs_fn fn = (xt_procs_fn)slot_fn(slot);
    if (fn == NULL) return NV(NVML_ERROR_NOT_SUPPORTED);
    void *dev;
    nvmlReturn_t r = nh_get(NH_DEVICE, dev_id, &dev);
    if (r != NVML_SUCCESS) return NV(r);
    void *entries = present ? calloc(cap ? cap : 1, NVML_XT_PROC_ENTRY) : NULL;
    if (present && entries == NULL) return NV(NVML_ERROR_MEMORY);
    unsigned count = cap;
    r = fn((nvmlDevice_t)dev, &count, entries, (uintptr_t)flags);
    /* Entries go back as the slot laid them out (pid, memory, instance
     * ids, name): nothing here depends on that layout but its size. */
    unsigned n = r == NVML_SUCCESS && entries ? (count < cap ? count : cap) : 0;
    wb_put_u32(&c->out, count);
    if (present) wb_put_blob(&c->out, entries, (size_t)n * NVML_XT_PROC_ENTRY);
    free(entries);
    c->out_on_error = 1;
    return NV(r);
}

/* A slot whose prototype is not known: its first argument must be a device
 * this session gave out; each other argument is a value, or a snapshot of
 * the client's memory it pointed to, which gets a buffer of its own here
 * (large enough for what such a slot writes: strings, counters). */
CUresult srv_scuda_nvml_xt_device_call(srv_call *c)
{
    unsigned slot = wr_u32(&c->in);
    uint64_t dev_id = wr_u64(&c->in);
    uintptr_t arg[NVML_XT_ARGS];
    size_t len[NVML_XT_ARGS] = {0};
    unsigned char *buf[NVML_XT_ARGS] = {0};
    nvmlReturn_t r = NVML_SUCCESS;
    for (int i = 1; i < NVML_XT_ARGS; i++) {
        len[i] = wr_u32(&c->in);
        if (len[i] == 0) {
            arg[i] = (uintptr_t)wr_u64(&c->in);
            continue;
        }
        const void *v = len[i] <= NVML_XT_SNAPSHOT ? wr_view(&c->in, len[i]) : NULL;
        buf[i] = calloc(1, XT_BUFFER);
        if (v == NULL || buf[i] == NULL) {
            r = NVML_ERROR_INVALID_ARGUMENT;
            break;
        }
        memcpy(buf[i], v, len[i]);
        arg[i] = (uintptr_t)buf[i];
    }
    xt_any_fn fn = slot == NVML_XT_RESET || slot == NVML_XT_RESET_DONE || slot == NVML_XT_OUTPUT_LINE ||
                           slot == NVML_XT_BUS_ID || (slot >= NVML_XT_PROCS_FIRST && slot <= NVML_XT_PROCS_LAST)
                       ? NULL
                       : (xt_any_fn)slot_fn(slot);
    void *dev = NULL;
    if (r == NVML_SUCCESS && !wr_ok_end(&c->in)) r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && (fn == NULL || dev_id == 0 || nh_get(NH_DEVICE, dev_id, &dev) != NVML_SUCCESS))
        r = NVML_ERROR_NOT_SUPPORTED; /* not a device call: nothing known to forward */
    if (r == NVML_SUCCESS) {
        r = (nvmlReturn_t)fn((uintptr_t)dev, arg[1], arg[2], arg[3], arg[4], arg[5]);
        for (int i = 1; i < NVML_XT_ARGS; i++)
            if (len[i]) wb_put_raw(&c->out, buf[i], len[i]);
        c->out_on_error = 1;
    }
    for (int i = 1; i < NVML_XT_ARGS; i++) free(buf[i]);
    return NV(r);
}
