/* dispatch.h - how a session executes one request.
 *
 * Every op has a handler. The generated table (dispatch.gen.c) maps op ids
 * to handlers: generated ones for calls whose arguments the generator can
 * encode, hand-written ones (srv_<name> in the server's *.c files) for the
 * rest. A handler decodes its arguments from c->in, calls the real driver
 * through `real` (driver_table.gen.h), appends outputs to c->out and returns
 * the CUresult. A malformed request returns CUDA_ERROR_INVALID_VALUE; the
 * session logs it and carries on. */
#ifndef SCUDA_SERVER_DISPATCH_H
#define SCUDA_SERVER_DISPATCH_H

#include <cuda.h>
#include <stdint.h>

#include "../common/driver_table.gen.h"
#include "../common/messages.gen.h"
#include "../common/wire.h"

struct session;

typedef struct srv_call {
    struct session *s;
    uint16_t op;
    uint32_t seq;
    int async;        /* the client wants no reply */
    wire_reader in;   /* arguments */
    wire_buf out;     /* outputs after the CUresult */
    /* A handler may send bulk bytes without copying them into `out`: they
     * go on the wire after `out` as a blob (u64 length + bytes). */
    const void *bulk;
    size_t bulk_len;
    void *bulk_free;  /* freed after the reply is sent */
    int out_on_error; /* send `out` even when the call fails (JIT logs) */
    int replied;      /* the handler sent the reply itself (streamed bulk) */
    struct staging *staging; /* a host-to-device payload, received into pinned memory */
    struct msg_arena arena;  /* what decoding the request allocates; freed after the reply */
} srv_call;

typedef CUresult (*op_handler)(srv_call *c);

struct op_entry {
    const char *name;
    op_handler handler;
    /* May wait for the GPU (synchronize, blocking copies): run it on a
     * worker thread so that other client threads' calls go on. */
    uint8_t blocking;
    /* Waits for or observes earlier work (synchronize, query, copy to the
     * host): its reply reports an earlier one-way call's error (session.c). */
    uint8_t observes;
    /* Manages contexts or needs none (spec flag any_context): runs in the
     * caller's thread's current context, whatever it is. */
    uint8_t any_context;
    /* The request ends in a bulk field (spec option `bulk`) after this
     * many bytes of fixed fields and the length: a large one is received
     * straight into staging memory (session.c). 0: none. */
    uint32_t bulk_head;
};

/* Indexed by op id; handler NULL = op unknown to this server. */
extern const struct op_entry op_table[];
extern const unsigned op_table_len;

/* The stream (or event, *is_event) a blocking call waits for, read from
 * its request as the spec's waits= says: 1 when the op names one and the
 * request holds it (dispatch.gen.c). The session runs such a call inline
 * when that work has completed. */
int op_wait_target(uint16_t op, const wire_reader *in, uint64_t *id, int *is_event);

/* NVML ops (op >= NVML_OP_BASE), provided by src/server/nvml/ when built. */
const struct op_entry *nvml_op_lookup(uint16_t op) __attribute__((weak));

/* The real driver, loaded by path in the session process. */
extern struct driver_table real;

/* Calls the real driver's `name`, or reports that this driver lacks it:
 * a server with an older driver answers NOT_SUPPORTED (and logs the name
 * once) instead of calling through a NULL pointer. Hand-written handlers
 * call the driver only through this; generated ones check for NULL. */
CUresult driver_lacks(const char *name);
#define REAL(name, ...) (real.name ? real.name(__VA_ARGS__) : driver_lacks(#name))

/* Virtual handles: the session maps the client's ids to real handles. */
enum handle_kind {
    HK_NONE = 0,
    HK_CONTEXT, HK_STREAM, HK_EVENT, HK_MODULE, HK_FUNCTION, HK_LIBRARY,
    HK_KERNEL, HK_GRAPH, HK_GRAPH_EXEC, HK_GRAPH_NODE, HK_MEMPOOL, HK_ARRAY,
    HK_MIPMAPPED_ARRAY, HK_LINK_STATE, HK_USER_OBJECT, HK_GREEN_CTX,
    HK_EXTERNAL_MEMORY, HK_EXTERNAL_SEMAPHORE, HK_GRAPHICS_RESOURCE,
    HK_TEXREF, HK_SURFREF, HK_DEV_RESOURCE_DESC, HK_ASYNC_CALLBACK,
    HK_LOGS_CALLBACK, HK_MEM_DECOMPRESS,
    HK_MEM_ALLOC, /* CUmemGenericAllocationHandle: a 64-bit value, reference counted */
    HK_COUNT
};

/* Ids. The client picks the id of every handle it creates
 * (handle_new_id(): 0x10000 upward in steps of 16, so never 0 or the
 * special streams 1 and 2). Handles the driver returns that the client
 * never created (a device's default memory pool, the nodes of a captured
 * graph, a retained VMM allocation) get an id the SESSION picks, from a
 * range the client never reaches: bit 62 set, upward in steps of 16.
 * handle_put() refuses ids in that range, so the two never collide. */
#define HANDLE_SERVER_ID_BASE (1ull << 62)
static inline int handle_is_server_id(uint64_t id) { return (id & HANDLE_SERVER_ID_BASE) != 0; }

/* Look up id as a handle of `kind`. Id 0 is NULL. For streams, the special
 * values CU_STREAM_LEGACY and CU_STREAM_PER_THREAD map to themselves. A
 * CUkernel id is accepted where a CUfunction is asked for (the driver
 * allows launching a CUkernel). Unknown id: CUDA_ERROR_INVALID_HANDLE. */
CUresult handle_get(struct session *s, uint64_t id, enum handle_kind kind, void **real_handle);
/* handle_get for HK_FUNCTION, also telling whether the id names a CUkernel
 * (parameter layouts are asked of a kernel differently). */
CUresult handle_get_function(struct session *s, uint64_t id, void **real_handle, int *is_kernel);
/* Record that client id `id` now names `real_handle`. Fails (INVALID_VALUE)
 * when the id is 0, a special value, a server id, or already in use. */
CUresult handle_put(struct session *s, uint64_t id, enum handle_kind kind, void *real_handle);
/* handle_put for a session id (bit 62) that a migration carries over. */
CUresult handle_put_server(uint64_t id, enum handle_kind kind, void *real_handle);
/* Forget id (after the real handle was destroyed). For HK_MEM_ALLOC, drop
 * one reference: the id goes with the last one. */
void handle_drop(struct session *s, uint64_t id);
/* Forget every id, as a new session would start. Only the session fuzzer
 * calls it, between inputs, after the driver dropped every handle. */
void handle_forget_all(void);
/* The id of a real handle, or 0 when it has none. */
uint64_t handle_find_id(struct session *s, enum handle_kind kind, const void *real_handle);
/* The id of a real handle the driver returned: its existing id, or a new
 * server id registered now. NULL is 0; CU_STREAM_LEGACY/PER_THREAD map to
 * themselves. For HK_MEM_ALLOC each call adds a reference (the driver's
 * retain). Contexts come only from the client (it keeps the context
 * stack): one without an id is 0, as is running out of memory. */
uint64_t handle_export(struct session *s, enum handle_kind kind, void *real_handle);

#endif
