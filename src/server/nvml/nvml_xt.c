/* nvml_xt.c - the session's side of nvidia-smi's private NVML table (see
 * src/client/nvml/nvml_xt.c), and nvmlErrorString's text.
 *
 * The client names a slot; the session calls that slot of the real table
 * with the prototype the slot is known to have. Only the slots listed in
 * nvml_wire.h are callable: calling another with a guessed prototype could
 * crash the session. */
#include "nvml_server.h"

#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"

typedef nvmlReturn_t (*xt_by_index_fn)(unsigned, nvmlDevice_t *, uintptr_t);
typedef nvmlReturn_t (*xt_procs_fn)(nvmlDevice_t, unsigned *, void *);
typedef nvmlReturn_t (*xt_u32_fn)(nvmlDevice_t, unsigned *);

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

CUresult srv_scuda_nvml_xt_handle_by_index(srv_call *c)
{
    unsigned slot = wr_u32(&c->in), index = wr_u32(&c->in);
    uint64_t flags = wr_u64(&c->in);
    int present = wr_u8(&c->in);
    if (!wr_ok_end(&c->in) || slot != NVML_XT_HANDLE_BY_INDEX || !present) return NV(NVML_ERROR_INVALID_ARGUMENT);
    xt_by_index_fn fn = (xt_by_index_fn)slot_fn(slot);
    if (fn == NULL) return NV(NVML_ERROR_NOT_SUPPORTED);
    unsigned real_index;
    nvmlReturn_t r = nvml_served_index(index, &real_index);
    nvmlDevice_t dev = NULL;
    if (r == NVML_SUCCESS) r = fn(real_index, &dev, (uintptr_t)flags);
    struct ns_frame k;
    ns_begin(&k, c);
    r = ns_put_handle(&k, NH_DEVICE, dev, r);
    return ns_end(&k, r);
}

CUresult srv_scuda_nvml_xt_process_list(srv_call *c)
{
    unsigned slot = wr_u32(&c->in);
    uint64_t dev_id = wr_u64(&c->in);
    unsigned cap = wr_u32(&c->in);
    int present = wr_u8(&c->in);
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
    r = fn((nvmlDevice_t)dev, &count, entries);
    /* Entries come back as the slot laid them out (pid, memory, instance
     * ids, name), so nothing here depends on that layout. */
    unsigned n = r == NVML_SUCCESS && entries ? (count < cap ? count : cap) : 0;
    wb_put_u32(&c->out, count);
    if (present) wb_put_blob(&c->out, entries, (size_t)n * NVML_XT_PROC_ENTRY);
    free(entries);
    c->out_on_error = 1;
    return NV(r);
}

CUresult srv_scuda_nvml_xt_device_u32(srv_call *c)
{
    unsigned slot = wr_u32(&c->in);
    uint64_t dev_id = wr_u64(&c->in);
    if (!wr_ok_end(&c->in) || slot != NVML_XT_HOST_PCIE_GEN) return NV(NVML_ERROR_INVALID_ARGUMENT);
    xt_u32_fn fn = (xt_u32_fn)slot_fn(slot);
    if (fn == NULL) return NV(NVML_ERROR_NOT_SUPPORTED);
    void *dev;
    nvmlReturn_t r = nh_get(NH_DEVICE, dev_id, &dev);
    if (r != NVML_SUCCESS) return NV(r);
    unsigned v = 0;
    r = fn((nvmlDevice_t)dev, &v);
    wb_put_u32(&c->out, v);
    c->out_on_error = 1;
    return NV(r);
}
