/* ipc_broker.h - moving an exported chunk's file descriptor from the
 * session that exported it to a session that imports it.
 *
 * A file descriptor lives in one process; sessions are sibling processes
 * of one server. The exporting session listens on an abstract Unix socket
 * named after the server and its own pid; the importer connects, names the
 * export (slot and nonce) and gets the descriptor by SCM_RIGHTS. The
 * exporter hands it over only to a process of the server's own uid
 * (SO_PEERCRED) that is a session of the export's user in the registry. */
#ifndef SCUDA_SERVER_IPC_BROKER_H
#define SCUDA_SERVER_IPC_BROKER_H

#include <stdint.h>
#include <sys/types.h>

#include "ipc_registry.h"

/* Exporter: keep fd (the broker owns it from now) for slot, and listen if
 * not yet. Returns 0, or -1 (logged). */
int ipc_broker_offer(uint32_t slot, const uint8_t nonce[IPC_NONCE_BYTES], int fd);

/* Importer: ask session `pid` for slot's descriptor. Every wait is bounded
 * (IPC_BROKER_WAIT_MS). Returns the fd, or -1 with *why set to the cause. */
int ipc_broker_fetch(pid_t pid, uint32_t slot, const uint8_t nonce[IPC_NONCE_BYTES], const char **why);

#define IPC_BROKER_WAIT_MS 5000

#endif
