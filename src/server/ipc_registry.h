/* ipc_registry.h - what the sessions of one server have exported for
 * interprocess sharing (cuIpcGetMemHandle, cuIpcGetEventHandle), and who
 * they are (docs/architecture.md, 9.18 IPC).
 *
 * Sessions are sibling processes, so the table lives in a shared anonymous
 * mapping that the parent creates before it forks any session. Each entry
 * records the exporting session's pid and user and a random nonce; the
 * client only ever sees (slot, nonce), never the driver's handle, so a
 * handle cannot be forged, and an importer of another user is refused. */
#ifndef SCUDA_SERVER_IPC_REGISTRY_H
#define SCUDA_SERVER_IPC_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "identity.h"

#define IPC_EXPORTS_MAX 1024
#define IPC_SESSIONS_MAX 1024
#define IPC_NONCE_BYTES 16
#define IPC_DRIVER_HANDLE_BYTES 64

enum ipc_kind {
    IPC_MEM = 1,
    IPC_EVENT = 2,
    IPC_SHARED_ALLOC = 3, /* cuMemExportToShareableHandle: an application's allocation handle */
    IPC_SHARED_POOL = 4,  /* cuMemPoolExportToShareableHandle */
};
enum ipc_how {
    IPC_DRIVER = 1, /* the driver's own IPC handle (driver-placed memory, events) */
    IPC_VMM = 2,    /* a window chunk, exported as a file descriptor (ipc_broker.h) */
    IPC_FD = 3,     /* the driver's shareable file descriptor, handed over as it is (ipc_broker.h) */
};

struct ipc_export {
    uint32_t kind, how;
    pid_t pid; /* the exporting session */
    char user[SCUDA_IDENTITY_MAX];
    uint8_t nonce[IPC_NONCE_BYTES];
    uint8_t driver_handle[IPC_DRIVER_HANDLE_BYTES]; /* IPC_DRIVER */
    uint64_t offset, map_size;                        /* IPC_VMM: the pointer's place in its chunk */
    int dev;
};

/* Parent, before the first fork: map the table. Returns 0, or -1 (errno);
 * without it every IPC call is refused with a log line that says so. */
int ipc_registry_create(void);
bool ipc_registry_ready(void);

/* Session: enter this process and its user. Returns 0, or -1 when full. */
int ipc_registry_join(const char *user);

/* Add an export of this session; fills *slot and e->nonce. Entries of
 * sessions that are gone are reused. Returns 0, or -1 when full. */
int ipc_registry_add(struct ipc_export *e, uint32_t *slot);

/* The live export at slot with this nonce (copied to *e). false when there
 * is none: a stale, forged or foreign handle. */
bool ipc_registry_find(uint32_t slot, const uint8_t nonce[IPC_NONCE_BYTES], struct ipc_export *e);

/* The user of the session with this pid; false when pid is no session. */
bool ipc_registry_user_of(pid_t pid, char user[SCUDA_IDENTITY_MAX]);

#endif
