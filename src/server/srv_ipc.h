/* srv_ipc.h - interprocess sharing between sessions of one server
 * (docs/architecture.md, 9.18 IPC). Wraps the driver table's cuIpc*
 * entries, so the generated handlers go through it. */
#ifndef SCUDA_SERVER_SRV_IPC_H
#define SCUDA_SERVER_SRV_IPC_H

#include <stdint.h>

#include "../common/driver_table.gen.h"

#define IPC_TOKEN_BYTES 64

/* Install after the window and the quota (their wrappers are what an
 * import reserves its addresses through). */
void ipc_install(struct driver_table *t);

/* Shareable handles (srv_shareable.c): publish fd, a descriptor the driver
 * exported (the broker owns it from now), as `kind` (IPC_SHARED_*) under
 * `key` (a second export of one key gives the same token), and write the
 * token the client keeps. */
CUresult ipc_share_fd(uint32_t kind, uint64_t key, int fd, uint8_t token[IPC_TOKEN_BYTES]);
/* The descriptor a token names, when this session may open it (same user,
 * live export): a new fd in *fd, which the caller closes. A session's own
 * export is opened from its own copy. */
CUresult ipc_open_fd(uint32_t kind, const uint8_t token[IPC_TOKEN_BYTES], int *fd);

#endif
