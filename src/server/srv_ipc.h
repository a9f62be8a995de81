/* srv_ipc.h - interprocess sharing between sessions of one server
 * (docs/architecture.md, 9.18 IPC). Wraps the driver table's cuIpc*
 * entries, so the generated handlers go through it. */
#ifndef SCUDA_SERVER_SRV_IPC_H
#define SCUDA_SERVER_SRV_IPC_H

#include "../common/driver_table.gen.h"

/* Install after the window and the quota (their wrappers are what an
 * import reserves its addresses through). */
void ipc_install(struct driver_table *t);

#endif
