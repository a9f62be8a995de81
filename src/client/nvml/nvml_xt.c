/* nvml_xt.c - nvmlInternalGetExportTable: nvidia-smi's private NVML table.
 *
 * nvidia-smi asks libnvidia-ml for a table of functions by UUID (not in
 * nvml.h) and takes some of what it prints from it: device handles, the
 * process lists, the host's PCIe generation. In REMOTE mode the shim hands
 * out its own copy of the table: every slot is a trampoline that knows its
 * slot number. The slots whose use is known are forwarded to the same slot
 * of the real table in the session; any other slot logs its number once and
 * returns NVML_ERROR_NOT_SUPPORTED. Slot meanings were learnt by watching
 * nvidia-smi 580 call the real table (SCUDA_NVML_TRACE=1 in PASSTHROUGH mode
 * logs each slot call, its arguments and what it wrote).
 *
 * Assumes the x86-64/arm64 calling conventions, where a function that takes
 * fewer integer arguments than the trampoline's six ignores the rest. */
#define _GNU_SOURCE
#include "nvml_shim.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/nvml/nvml_ops.gen.h"

typedef uintptr_t (*xt_fn)(uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t);

static const unsigned char smi_uuid[16] = NVML_XT_SMI_UUID;
static uintptr_t table[NVML_XT_SLOTS];   /* what callers get */
static const uintptr_t *real_table;     /* PASSTHROUGH: the local NVML's */
static size_t real_slots;
static int unknown_logged[NVML_XT_SLOTS];

/* ---- REMOTE: the forwarded slots ---------------------------------------- */

static nvmlReturn_t handle_by_index(unsigned slot, unsigned index, nvmlDevice_t *out, uintptr_t flags)
{
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    rpc_call c;
    rpc_begin(&c, NVML_OP_scuda_nvml_xt_handle_by_index);
    wb_put_u32(&c.req, slot);
    wb_put_u32(&c.req, index);
    wb_put_u64(&c.req, flags);
    wb_put_u8(&c.req, 1);
    nvmlReturn_t r = nvml_call(&c);
    nvml_get_handle(&c.out, (void **)out);
    rpc_end(&c);
    return r;
}

static nvmlReturn_t process_list(unsigned slot, nvmlDevice_t dev, unsigned *count, void *entries)
{
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned cap = entries ? *count : 0;
    if (cap > NVML_XT_MAX_PROCS) cap = NVML_XT_MAX_PROCS;
    rpc_call c;
    rpc_begin(&c, NVML_OP_scuda_nvml_xt_process_list);
    wb_put_u32(&c.req, slot);
    wb_put_u64(&c.req, (uint64_t)(uintptr_t)dev);
    wb_put_u32(&c.req, cap);
    wb_put_u8(&c.req, entries != NULL);
    nvmlReturn_t r = nvml_call(&c);
    uint32_t n = wr_u32(&c.out);
    if (!c.out.bad) *count = n;
    nvml_get_bytes(&c.out, entries, (size_t)cap * NVML_XT_PROC_ENTRY);
    rpc_end(&c);
    return r;
}

static nvmlReturn_t device_u32(unsigned slot, nvmlDevice_t dev, unsigned *out)
{
    if (out == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    rpc_call c;
    rpc_begin(&c, NVML_OP_scuda_nvml_xt_device_u32);
    wb_put_u32(&c.req, slot);
    wb_put_u64(&c.req, (uint64_t)(uintptr_t)dev);
    nvmlReturn_t r = nvml_call(&c);
    uint32_t v = wr_u32(&c.out);
    if (r == NVML_SUCCESS && !c.out.bad) *out = v;
    rpc_end(&c);
    return r;
}

static uintptr_t remote_slot(unsigned slot, uintptr_t a0, uintptr_t a1, uintptr_t a2)
{
    nvmlReturn_t r;
    if (slot == NVML_XT_HANDLE_BY_INDEX)
        r = handle_by_index(slot, (unsigned)a0, (nvmlDevice_t *)a1, a2);
    else if (slot >= NVML_XT_PROCS_FIRST && slot <= NVML_XT_PROCS_LAST)
        r = process_list(slot, (nvmlDevice_t)a0, (unsigned *)a1, (void *)a2);
    else if (slot == NVML_XT_HOST_PCIE_GEN)
        r = device_u32(slot, (nvmlDevice_t)a0, (unsigned *)a1);
    else {
        if (!__atomic_exchange_n(&unknown_logged[slot], 1, __ATOMIC_RELAXED))
            LOG_WARN("slot %u of NVML's internal table (nvidia-smi's) is not supported by SCUDA; "
                     "returning NVML_ERROR_NOT_SUPPORTED", slot);
        r = NVML_ERROR_NOT_SUPPORTED;
    }
    return (uintptr_t)nvml_traced("nvmlInternalGetExportTable slot", r);
}

/* ---- PASSTHROUGH with SCUDA_NVML_TRACE: the real slot, logged ----------- */

/* Read memory that may not be mapped without faulting (an argument that is
 * not a pointer reads as "--"). */
static void peek(uintptr_t addr, char *out, size_t outlen)
{
    unsigned char b[16];
    struct iovec local = {b, sizeof b}, remote = {(void *)addr, sizeof b};
    if (addr < 4096 || process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)sizeof b) {
        snprintf(out, outlen, "--");
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < sizeof b && n + 3 < outlen; i++) n += (size_t)snprintf(out + n, outlen - n, "%02x", b[i]);
}

static uintptr_t traced_slot(unsigned slot, uintptr_t a0, uintptr_t a1, uintptr_t a2, uintptr_t a3,
                             uintptr_t a4, uintptr_t a5)
{
    if (slot >= real_slots || real_table[slot] == 0) {
        dprintf(2, "scuda-nvml-trace xt slot %u: beyond the real table\n", slot);
        return NVML_ERROR_NOT_SUPPORTED;
    }
    char b1[40], b2[40], b2name[40], a1before[40];
    peek(a1, a1before, sizeof a1before);
    uintptr_t r = ((xt_fn)real_table[slot])(a0, a1, a2, a3, a4, a5);
    peek(a1, b1, sizeof b1);
    peek(a2, b2, sizeof b2);
    peek(a2 + 32, b2name, sizeof b2name);
    dprintf(2, "scuda-nvml-trace xt slot %u (%#lx, %#lx, %#lx, %#lx) -> %ld; *a1 %s -> %s; *a2 %s, +32 %s\n",
            slot, (unsigned long)a0, (unsigned long)a1, (unsigned long)a2, (unsigned long)a3, (long)(int)r,
            a1before, b1, b2, b2name);
    return r;
}

/* ---- the trampolines ---------------------------------------------------------- */

static uintptr_t slot_call(unsigned slot, uintptr_t a0, uintptr_t a1, uintptr_t a2, uintptr_t a3, uintptr_t a4,
                           uintptr_t a5)
{
    if (nvml_mode == NVML_MODE_PASSTHROUGH) return traced_slot(slot, a0, a1, a2, a3, a4, a5);
    if (nvml_mode != NVML_MODE_REMOTE) return NVML_ERROR_UNINITIALIZED;
    return remote_slot(slot, a0, a1, a2);
}

#define SLOT(n)                                                                                       \
    static uintptr_t slot_##n(uintptr_t a0, uintptr_t a1, uintptr_t a2, uintptr_t a3, uintptr_t a4,  \
                              uintptr_t a5)                                                            \
    {                                                                                                 \
        return slot_call(n, a0, a1, a2, a3, a4, a5);                                                  \
    }
#define SLOT8(n) SLOT(n##0) SLOT(n##1) SLOT(n##2) SLOT(n##3) SLOT(n##4) SLOT(n##5) SLOT(n##6) SLOT(n##7)
#define ADDR(n) (uintptr_t)slot_##n,
#define ADDR8(n) ADDR(n##0) ADDR(n##1) ADDR(n##2) ADDR(n##3) ADDR(n##4) ADDR(n##5) ADDR(n##6) ADDR(n##7)
/* Slot numbers are octal here (0100 is 64): 8 x 8 x 8 = 512 slots. */
#define ROW(M, h) M(h##0) M(h##1) M(h##2) M(h##3) M(h##4) M(h##5) M(h##6) M(h##7)
#define ALL(M) ROW(M, 00) ROW(M, 01) ROW(M, 02) ROW(M, 03) ROW(M, 04) ROW(M, 05) ROW(M, 06) ROW(M, 07)
ALL(SLOT8)
static const uintptr_t trampolines[NVML_XT_SLOTS] = {ALL(ADDR8)};

/* ---- the export ------------------------------------------------------------------ */

static nvmlReturn_t open_remote(const void *uuid, uint64_t *size)
{
    rpc_call c;
    rpc_begin(&c, NVML_OP_scuda_nvml_xt_open);
    wb_put_raw(&c.req, uuid, 16);
    nvmlReturn_t r = nvml_call(&c);
    *size = wr_u64(&c.out);
    if (c.out.bad && r == NVML_SUCCESS) r = NVML_ERROR_UNKNOWN;
    rpc_end(&c);
    return r;
}

static const void *our_table(uint64_t real_size)
{
    memcpy(table, trampolines, sizeof table);
    uint64_t ours = sizeof table;
    table[0] = (uintptr_t)(real_size < ours ? real_size : ours);
    return table;
}

static void log_unknown_uuid(const unsigned char *u)
{
    char s[40];
    for (int i = 0; i < 16; i++) snprintf(s + 2 * i, 3, "%02x", u[i]);
    LOG_WARN("NVML internal table %s is not supported by SCUDA; returning NVML_ERROR_NOT_SUPPORTED", s);
}

NVML_EXPORT nvmlReturn_t nvmlInternalGetExportTable(const void **ppTable, const void *uuid)
{
    if (nvml_mode == NVML_MODE_PASSTHROUGH) {
        if (!nvml_local.nvmlInternalGetExportTable) return NVML_ERROR_FUNCTION_NOT_FOUND;
        nvmlReturn_t r = nvml_local.nvmlInternalGetExportTable(ppTable, uuid);
        if (!nvml_trace_on || r != NVML_SUCCESS || !ppTable || !*ppTable || memcmp(uuid, smi_uuid, 16) != 0)
            return nvml_traced("nvmlInternalGetExportTable", r);
        real_table = *ppTable;
        real_slots = real_table[0] / sizeof(uintptr_t);
        dprintf(2, "scuda-nvml-trace xt table size %lu bytes\n", (unsigned long)real_table[0]);
        *ppTable = our_table(real_table[0]);
        return r;
    }
    if (nvml_mode != NVML_MODE_REMOTE) return NVML_ERROR_UNINITIALIZED;
    if (ppTable == NULL || uuid == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    uint64_t size = 0;
    nvmlReturn_t r = open_remote(uuid, &size);
    if (r == NVML_SUCCESS && memcmp(uuid, smi_uuid, 16) != 0) {
        static int logged;
        if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED)) log_unknown_uuid(uuid);
        r = NVML_ERROR_NOT_SUPPORTED;
    }
    if (r == NVML_SUCCESS) *ppTable = our_table(size);
    return nvml_traced("nvmlInternalGetExportTable", r);
}
