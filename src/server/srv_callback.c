/* srv_callback.c - see srv_callback.h. May run on a driver thread: no
 * CUDA call here. */
#include "graph_host.h"
#include "srv_callback.h"

void srv_callback_send(uint8_t kind, void *client_id, wire_buf *body)
{
    if (!body->oom) graph_host_queue(kind, (uint64_t)(uintptr_t)client_id, body->data, body->len);
    wb_free(body);
}
