/* export_tables.h - the driver's private tables, answered by the shim itself.
 *
 * cudart (static and shared), cuBLAS, cuDNN and PyTorch ask the driver for
 * undocumented tables of function pointers through cuGetExportTable(), by
 * UUID. The shim answers every table it knows with its own static table and
 * its own code. docs/export-tables.md describes each table and slot, what we
 * return and how we know.
 *
 * Slots that touch driver state call the public driver API (cuCtxGetCurrent,
 * cuDevicePrimaryCtxRetain, ...), which the shim implements. Nothing in here
 * talks to the network. */
#ifndef SCUDA_EXPORT_TABLES_H
#define SCUDA_EXPORT_TABLES_H

#include <stdint.h>

#include <cuda.h>

/* The body of the shim's cuGetExportTable(). Returns CUDA_SUCCESS and our
 * table for a known UUID; CUDA_ERROR_INVALID_VALUE and *ppExportTable = NULL
 * for an unknown one (logged once per UUID) or NULL arguments. */
CUresult scuda_get_export_table(const void **ppExportTable, const CUuuid *pExportTableId);

/* The shim calls this when a context goes away (cuCtxDestroy, and
 * cuDevicePrimaryCtxReset or the last cuDevicePrimaryCtxRelease of a primary
 * context). It drops the context-local storage that cudart attached to it and
 * runs the destructor callbacks cudart registered, outside our lock. */
void scuda_export_tables_context_destroyed(CUcontext ctx);

/* Optional, defined by the shim if it can: the primary context handle of a
 * device, without taking a reference or activating it. The cudart interface
 * slot that asks for it uses this when it is there, and otherwise falls back
 * to cuDevicePrimaryCtxRetain (one reference more than the real driver). */
CUresult scuda_primary_ctx_lookup(CUdevice dev, CUcontext *pctx) __attribute__((weak));

/* What the integrity slot hashes, besides the devices. The field order and
 * sizes are the byte layout cudart expects (48 bytes, no padding). */
struct scuda_integrity_input {
    uint32_t driver_version;     /* cuDriverGetVersion() */
    uint32_t runtime_version;    /* first argument of the slot */
    uint32_t pid;                /* getpid() */
    uint32_t thread;             /* pthread_self(), truncated to 32 bits */
    const void *cudart_table;    /* address of the cudart interface table */
    const void *integrity_table; /* address of the integrity table */
    const void *integrity_fn;    /* address of the integrity slot function */
    uint64_t unix_seconds;       /* second argument of the slot */
};

/* One device's part of the integrity hash (28 bytes, no padding). */
struct scuda_integrity_device {
    unsigned char uuid[16];      /* cuDeviceGetUuid() */
    int32_t pci_domain;
    int32_t pci_bus;
    int32_t pci_device;
};

/* The integrity digest for known inputs: HMAC-MD2 over the input and then
 * every device, in ordinal order. Exposed so that tests can check it against
 * values read from the real driver. */
void scuda_integrity_digest(const struct scuda_integrity_input *in,
                            const struct scuda_integrity_device *devs, int ndevs,
                            uint64_t out[2]);

#endif
