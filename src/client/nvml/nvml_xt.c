/* nvml_xt.c - nvmlInternalGetExportTable: nvidia-smi's private NVML table.
 *
 * nvidia-smi asks libnvidia-ml for a table of functions by UUID (not in
 * nvml.h) and takes some of what it prints from it: the PCI bus id of each
 * device, the process lists, the GPU part number. In REMOTE mode the shim
 * hands out its own copy of the table, in which every slot is a trampoline
 * that knows its slot number:
 *   - the bus-id and process-list slots are forwarded to the same slot of
 *     the real table in the session (devices mapped to the ones it serves);
 *   - the output-line slot (called with each line nvidia-smi prints; it
 *     prints the line itself either way) returns NVML_ERROR_NOT_SUPPORTED;
 *   - any other slot called with one of our device handles is forwarded
 *     blind: arguments that point to readable memory travel as snapshots,
 *     and the bytes the real slot changed are written back;
 *   - anything else logs its slot once and returns NOT_SUPPORTED.
 * Slot meanings were learnt by watching nvidia-smi 580 call the real table:
 * SCUDA_NVML_TRACE=1 in PASSTHROUGH mode logs every slot call with its
 * arguments and what it wrote, and SCUDA_NVML_TRACE_SKIP=N,... answers
 * those slots NOT_SUPPORTED instead of calling them (to see what a slot is
 * for). Assumes the x86-64/arm64 calling conventions, where a function that
 * takes fewer integer arguments than the trampoline's six ignores the rest. */
#define _GNU_SOURCE
#include "nvml_shim.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Device `index` of the client's list: with several servers, asked of
 * its server under that server's index. */
static nvmlReturn_t bus_id(unsigned index, char *buf, unsigned len)
{
    if (buf == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    struct server *srv = &servers[0];
    if (servers_used > 1) {
        nvmlReturn_t r = nvml_device_on_server(index, &srv, &index);
        if (r != NVML_SUCCESS) return r;
    }
    rpc_call c;
    rpc_begin_on(&c, NVML_OP_scuda_nvml_xt_bus_id, srv);
    wb_put_u32(&c.req, index);
    wb_put_u32(&c.req, len);
    nvmlReturn_t r = nvml_call(&c);
    nvml_get_bytes(&c.out, buf, len);
    rpc_end(&c);
    return r;
}

static nvmlReturn_t process_list(unsigned slot, uintptr_t dev, unsigned *count, void *entries, uintptr_t flags)
{
    struct server *srv = nvml_server_of((const void *)dev);
    if (count == NULL || srv == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned cap = entries ? *count : 0;
    if (cap > NVML_XT_MAX_PROCS) cap = NVML_XT_MAX_PROCS;
    rpc_call c;
    rpc_begin_on(&c, NVML_OP_scuda_nvml_xt_processes, srv);
    wb_put_u32(&c.req, slot);
    wb_put_u64(&c.req, nvml_wire_id((const void *)dev));
    wb_put_u32(&c.req, cap);
    wb_put_u8(&c.req, entries != NULL);
    wb_put_u64(&c.req, flags);
    nvmlReturn_t r = nvml_call(&c);
    uint32_t n = wr_u32(&c.out);
    if (!c.out.bad) *count = n;
    nvml_get_bytes(&c.out, entries, (size_t)cap * NVML_XT_PROC_ENTRY);
    rpc_end(&c);
    return r;
}

/* Copies up to `want` bytes at addr without faulting; returns how many
 * (0: not a pointer to readable memory, so the argument is a value). */
static size_t snapshot(uintptr_t addr, unsigned char *out, size_t want)
{
    if (addr < 65536) return 0;
    for (size_t n = want; n >= 8; n /= 4) {
        struct iovec local = {out, n}, remote = {(void *)addr, n};
        if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)n) return n;
    }
    return 0;
}

static nvmlReturn_t device_call(unsigned slot, const uintptr_t *a)
{
    unsigned char snap[NVML_XT_ARGS][NVML_XT_SNAPSHOT];
    size_t len[NVML_XT_ARGS] = {0};
    struct server *srv = nvml_server_of((const void *)a[0]);
    if (srv == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    rpc_call c;
    rpc_begin_on(&c, NVML_OP_scuda_nvml_xt_device_call, srv);
    wb_put_u32(&c.req, slot);
    wb_put_u64(&c.req, nvml_wire_id((const void *)a[0])); /* the device's id; the session checks it */
    for (int i = 1; i < NVML_XT_ARGS; i++) {
        len[i] = snapshot(a[i], snap[i], sizeof snap[i]);
        wb_put_u32(&c.req, (uint32_t)len[i]);
        if (len[i]) wb_put_raw(&c.req, snap[i], len[i]);
        else wb_put_u64(&c.req, a[i]);
    }
    nvmlReturn_t r = nvml_call(&c);
    for (int i = 1; i < NVML_XT_ARGS; i++) {
        const unsigned char *v = len[i] ? wr_view(&c.out, len[i]) : NULL;
        /* Only the bytes the real slot changed: the rest of the snapshot
         * may be the caller's other variables. */
        for (size_t j = 0; v && j < len[i]; j++)
            if (v[j] != snap[i][j]) ((unsigned char *)a[i])[j] = v[j];
    }
    rpc_end(&c);
    return r;
}

static nvmlReturn_t remote_slot(unsigned slot, const uintptr_t *a)
{
    if (slot == NVML_XT_OUTPUT_LINE) return NVML_ERROR_NOT_SUPPORTED; /* nvidia-smi prints anyway */
    if (slot == NVML_XT_BUS_ID) return bus_id((unsigned)a[0], (char *)a[1], (unsigned)a[2]);
    if (slot >= NVML_XT_PROCS_FIRST && slot <= NVML_XT_PROCS_LAST)
        return process_list(slot, a[0], (unsigned *)a[1], (void *)a[2], a[3]);
    nvmlReturn_t r = slot == NVML_XT_RESET || slot == NVML_XT_RESET_DONE ? NVML_ERROR_NOT_SUPPORTED
                                                                          : device_call(slot, a);
    if (r == NVML_ERROR_NOT_SUPPORTED && !__atomic_exchange_n(&unknown_logged[slot], 1, __ATOMIC_RELAXED))
        LOG_INFO("slot %u of NVML's internal table (nvidia-smi's): NVML_ERROR_NOT_SUPPORTED", slot);
    return r;
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

/* SCUDA_NVML_TRACE_SKIP=N,M,...: those slots answer NOT_SUPPORTED. */
static int skipped(unsigned slot)
{
    const char *e = getenv("SCUDA_NVML_TRACE_SKIP");
    char *end;
    while (e && *e) {
        unsigned long n = strtoul(e, &end, 10);
        if (end == e) break;
        if (n == slot) return 1;
        e = *end == ',' ? end + 1 : end;
    }
    return 0;
}

static uintptr_t traced_slot(unsigned slot, uintptr_t a0, uintptr_t a1, uintptr_t a2, uintptr_t a3,
                             uintptr_t a4, uintptr_t a5)
{
    if (skipped(slot)) {
        dprintf(2, "scuda-nvml-trace xt slot %u (%#lx, %#lx, %#lx, %#lx): skipped\n", slot, (unsigned long)a0,
                (unsigned long)a1, (unsigned long)a2, (unsigned long)a3);
        return NVML_ERROR_NOT_SUPPORTED;
    }
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
    const uintptr_t a[NVML_XT_ARGS] = {a0, a1, a2, a3, a4, a5};
    return (uintptr_t)nvml_traced("nvmlInternalGetExportTable slot", remote_slot(slot, a));
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

static nvmlReturn_t open_on(struct server *srv, const void *uuid, uint64_t *size)
{
    rpc_call c;
    rpc_begin_on(&c, NVML_OP_scuda_nvml_xt_open, srv);
    wb_put_raw(&c.req, uuid, 16);
    nvmlReturn_t r = nvml_call(&c);
    *size = wr_u64(&c.out);
    if (c.out.bad && r == NVML_SUCCESS) r = NVML_ERROR_UNKNOWN;
    rpc_end(&c);
    return r;
}

/* Opened in every server's session (the slots of a device go to its
 * server); the size is the first server's. */
static nvmlReturn_t open_remote(const void *uuid, uint64_t *size)
{
    nvmlReturn_t r = open_on(&servers[0], uuid, size);
    for (int k = 1; k < servers_used && r == NVML_SUCCESS; k++) {
        uint64_t other;
        r = open_on(&servers[k], uuid, &other);
    }
    return r;
}

/* Filled once: word 0 says how many of our slots the real table has. */
static const void *our_table(uint64_t real_size)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    if (table[0] == 0) {
        memcpy(table, trampolines, sizeof table);
        table[0] = (uintptr_t)(real_size < sizeof table ? real_size : sizeof table);
    }
    pthread_mutex_unlock(&lock);
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
    /* Callers may ask before nvmlInit: settle the mode (connect) first. */
    nvmlReturn_t init = nvml_shim_init();
    if (init != NVML_SUCCESS) return nvml_traced("nvmlInternalGetExportTable", init);
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
