/* session_info.h - what the session tells the client when it starts.
 *
 * Device queries are the bulk of the driver calls real workloads make
 * (about 13,000 of the 15,000 calls of a GPT-2 training step:
 * docs/architecture.md, 3.3 Call classes), so every device
 * attribute is fetched once, here, and answered in the client from then on. */
#ifndef SCUDA_SESSION_INFO_H
#define SCUDA_SESSION_INFO_H

#include <cuda.h>
#include <stdint.h>

#include "wire.h"

#define SCUDA_MAX_DEVICES 16
/* Attribute slots we carry, indexed by CUdevice_attribute. Larger than
 * CU_DEVICE_ATTRIBUTE_MAX so a newer server can send attributes an older
 * client does not know by name; the count travels on the wire. */
#define SCUDA_ATTR_SLOTS 256

struct device_info {
    char name[256];
    CUuuid uuid;
    uint64_t total_mem;
    char pci_bus_id[32];
    int32_t attr_value[SCUDA_ATTR_SLOTS];
    int32_t attr_result[SCUDA_ATTR_SLOTS]; /* the real driver's CUresult for that attribute */
    uint32_t attr_count;                   /* slots filled (the server's CU_DEVICE_ATTRIBUTE_MAX) */
};

struct session_info {
    int32_t driver_version;
    uint32_t device_count;
    uint32_t session_pid; /* the server-side session process, for logs */
    struct device_info dev[SCUDA_MAX_DEVICES];
    /* The session's driver's CUmoduleLoadingMode (lazy unless the server
     * runs with CUDA_MODULE_LOADING=EAGER); 0 from a server that does not
     * say. It travels last, so that either end may be the older. */
    int32_t loading_mode;
    /* The driver library's file name, which carries its build
     * ("libcuda.so.580.159.03"): two builds of one CUDA version may JIT
     * PTX differently (the client's attribute cache keys on it). "" from a
     * server that does not say. Travels after loading_mode. */
    char driver_build[64];
};

void session_info_encode(wire_buf *b, const struct session_info *si);
/* Returns 0, or -1 when the payload is malformed or out of bounds. */
int session_info_decode(wire_reader *r, struct session_info *si);

#endif
