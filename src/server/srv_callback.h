/* srv_callback.h - driver callbacks that belong to the client
 * (cuLogsRegisterCallback, cuDeviceRegisterAsyncNotification): the
 * session registers a callback of its own, with the client's callback id
 * as its data, and sends each event back as host work for that id; the
 * client runs the application's callback (src/client/callback_table.h). */
#ifndef SCUDA_SRV_CALLBACK_H
#define SCUDA_SRV_CALLBACK_H

#include <stdint.h>

#include "../common/wire.h"

/* Queues the event's record (body) as host work of this kind for the
 * client's callback id (the driver callback's data), and frees body. A
 * record that ran out of memory is dropped: the callback may run on a
 * driver thread, where there is no one to tell. */
void srv_callback_send(uint8_t kind, void *client_id, wire_buf *body);

#endif
