/* callback_table.h - application callbacks that the session's driver
 * calls back for (cuLogsRegisterCallback, cuDeviceRegisterAsyncNotification):
 * the callback is client code, so the client keeps it and its user data
 * under an id that the session sends back with each event. One table per
 * kind of callback, so an id from one kind never runs the other kind's. */
#ifndef SCUDA_CALLBACK_TABLE_H
#define SCUDA_CALLBACK_TABLE_H

#include <stdint.h>

#include "rpc.h"
#include "../common/idmap.h"

/* Any callback's type; the owner casts it back to the type it stored
 * (a function pointer converts to another and back unchanged in C). */
typedef void (*callback_fn)(void);

struct callback_entry {
    callback_fn fn;
    void *user;
};

/* Keeps fn and user under a fresh id: 0 and *id_out, or -1 when out of memory. */
int callback_table_add(struct idmap *table, callback_fn fn, void *user, uint64_t *id_out);
/* Sends the session the registration of id (c: begun and filled by the
 * caller) and ends c; when the session refused, forgets id, so only
 * callbacks the session's driver holds are kept. */
CUresult callback_table_register(struct idmap *table, uint64_t id, rpc_call *c);
/* Forgets id (nothing when it is absent). */
void callback_table_remove(struct idmap *table, uint64_t id);
/* 1 and *out when id is kept; 0 when not (an event for a callback already
 * unregistered, or an id the client never gave). */
int callback_table_find(struct idmap *table, uint64_t id, struct callback_entry *out);

#endif
