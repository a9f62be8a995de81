/* nvml_wire.h - limits both sides of a forwarded NVML call agree on.
 *
 * How an NVML call travels (codegen/gen_nvml.py writes both ends):
 *   request: the arguments in parameter order, then the buffers whose size
 *            depends on other arguments (arrays, string buffers). A handle
 *            is its u64 virtual id; a pointer to one value is a u8 present
 *            flag and a blob of the caller's bytes; an output buffer is a
 *            present flag only.
 *   reply:   the nvmlReturn_t, then every output in the same order, sent
 *            whatever the result, because NVML writes some outputs on
 *            failure (counts on NVML_ERROR_INSUFFICIENT_SIZE). Arrays and
 *            strings come back on success only.
 * Both sides compute every buffer size from the arguments themselves; the
 * session never sizes a buffer from a length the client merely claims. */
#ifndef SCUDA_NVML_WIRE_H
#define SCUDA_NVML_WIRE_H

#include <stddef.h>

/* A string buffer is at most this big: NVML's longest strings are a few
 * hundred bytes, so a larger length is cut to this on both sides. */
#define NVML_STR_CAP (64u << 10)
/* One struct, and one array, at most (the caller's struct or count says). */
#define NVML_MAX_STRUCT (1u << 20)
#define NVML_MAX_ARRAY (32u << 20)

static inline size_t nvml_str_cap(size_t n) { return n < NVML_STR_CAP ? n : NVML_STR_CAP; }

/* nvidia-smi's private table (nvmlInternalGetExportTable), as driver 580
 * lays it out: word 0 is the table's size in bytes, word N the function of
 * slot N. Slot meanings, as nvidia-smi 580.159 calls them (traced with
 * SCUDA_NVML_TRACE=1; see src/client/nvml/nvml_xt.c): */
#define NVML_XT_SMI_UUID                                                       \
    {0xc4, 0xfe, 0x3e, 0x6c, 0xc9, 0x8f, 0x6c, 0x4e,                           \
     0xa3, 0x27, 0xee, 0x69, 0x6e, 0x12, 0xf7, 0xc4}
#define NVML_XT_SLOTS 512         /* slots SCUDA's copy of the table has */
#define NVML_XT_RESET 20          /* GPU reset: never forwarded */
#define NVML_XT_OUTPUT_LINE 26    /* called with each line nvidia-smi prints */
#define NVML_XT_BUS_ID 81         /* fn(unsigned index, char *busId, unsigned len) */
#define NVML_XT_RESET_DONE 197    /* GPU reset: never forwarded */
#define NVML_XT_PROCS_FIRST 213   /* fn(device, unsigned *count, entries, flags): */
#define NVML_XT_PROCS_LAST 215    /*   one slot per kind of process */
#define NVML_XT_PROC_ENTRY 4128   /* bytes per process entry (pid, memory, ..., name) */
#define NVML_XT_MAX_PROCS 4096
/* Any other slot called with a device handle first (GPU part number, ...)
 * is forwarded blind: each argument that points to readable memory travels
 * as a snapshot of that memory, the others as values. */
#define NVML_XT_SNAPSHOT 256
#define NVML_XT_ARGS 6

#endif
