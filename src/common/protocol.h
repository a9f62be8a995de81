/* protocol.h - SCUDA wire protocol, version 1.
 *
 * Everything on the wire is little-endian with explicit sizes; no C struct
 * containing pointers is ever sent raw.
 *
 * Connection start (DESIGN §3):
 *   server -> client  server_hello  { magic u32, version u16, flags u16, nonce[16] }
 *   client -> server  client_hello  { magic u32, version u16, flags u16,
 *                                     client_build u32, device_mask u64, proof[32] }
 *   server -> client  welcome       { status u32, message blob,
 *                                     then, if status == 0, the session info
 *                                     (see session_info.h) }
 * proof = HMAC-SHA256(token, nonce) when the server has a token, else zeros.
 *
 * client_hello flags: 0 asks for a CUDA session. One HELLO_RAW_* bit asks
 * instead, after the same token check and under the same session limit,
 * for a child that never touches CUDA and only measures the link
 * (`scuda bench`). Its welcome is { status, message blob } with no session
 * info, the message being "raw echo" or "raw sink". Then:
 *   HELLO_RAW_ECHO  every byte the client sends comes back, in order.
 *   HELLO_RAW_SINK  transfers: the client sends n u64 (1..RAW_SINK_MAX),
 *                   then n bytes; the server discards them and answers
 *                   with the count it read, u64. n = 0 or EOF ends.
 * A server that does not know a flag refuses with WELCOME_BAD_VERSION.
 *
 * Then frames, both ways. Each frame is a 16-byte header and `length` bytes
 * of payload.
 *   request  (client -> server): op, flags, seq, ctx; payload = arguments
 *   reply    (server -> client): op echoed, FRAME_REPLY, seq echoed;
 *                                payload = u32 CUresult, then outputs
 *   output   (server -> client): FRAME_OUTPUT, payload = u8 stream (1 stdout,
 *                                2 stderr) then bytes: device printf text
 *                                captured in the session, sent before the
 *                                reply of the synchronizing call that
 *                                flushed it.
 *   host work (server -> client): FRAME_HOST_WORK, payload = u8 kind, u64
 *                                record id (the client's, from
 *                                scuda_capture_dtoh/_hostfn), then for
 *                                HOST_WORK_DATA the bytes a replayed copy
 *                                brought to the client's buffer. Sent, like
 *                                output, before the next reply.
 * A request with FRAME_ASYNC gets no reply. If it fails, the server keeps
 * the error and returns it from the next synchronizing call (CUDA's
 * contract for asynchronous errors). */
#ifndef SCUDA_PROTOCOL_H
#define SCUDA_PROTOCOL_H

#include <stdint.h>

#define SCUDA_MAGIC 0x31554353u /* "SCU1" */
#define SCUDA_PROTOCOL_VERSION 1
/* Sent in the handshake for the server's log; bump with each release. */
#define SCUDA_CLIENT_BUILD 1
#define SCUDA_DEFAULT_PORT 14833
#define SCUDA_DEFAULT_ADDR "127.0.0.1:14833"

#define SCUDA_NONCE_LEN 16
#define SCUDA_PROOF_LEN 32

/* client_hello flags (see above). */
#define HELLO_RAW_ECHO (1u << 0)
#define HELLO_RAW_SINK (1u << 1)
#define RAW_SINK_MAX (64ull << 30) /* largest raw sink transfer */

/* Largest frame payload either side accepts. Bulk copies larger than
 * SCUDA_CHUNK are split into several frames by the sender. */
#define SCUDA_MAX_FRAME (64u << 20)
#define SCUDA_CHUNK (8u << 20)

#define FRAME_HEADER_LEN 16

/* Op ids from here on belong to NVML (libnvidia-ml.so.1 shim); their
 * registry is codegen/nvml_ops.txt, as append-only as codegen/ops.txt. */
#define NVML_OP_BASE 0x8000u

enum frame_flags {
    FRAME_ASYNC = 1u << 0,  /* request: no reply wanted */
    FRAME_REPLY = 1u << 1,  /* reply to request `seq` */
    FRAME_OUTPUT = 1u << 2, /* captured stdout/stderr of the session */
    FRAME_BULK = 1u << 3,   /* reply payload: u32 result, u64 n, n bulk bytes, outputs */
    FRAME_HOST_WORK = 1u << 4, /* host work of a graph replay (HOST_WORK_*), see above */
};

struct frame_header {
    uint32_t length; /* payload bytes, <= SCUDA_MAX_FRAME */
    uint16_t op;     /* op id, see ops.gen.h; stable forever */
    uint16_t flags;  /* enum frame_flags */
    uint32_t seq;    /* request sequence number, echoed in the reply */
    uint32_t ctx;    /* virtual id of the caller thread's current context, 0 = none */
};

void frame_header_encode(const struct frame_header *h, uint8_t out[FRAME_HEADER_LEN]);
void frame_header_decode(const uint8_t in[FRAME_HEADER_LEN], struct frame_header *h);

/* FRAME_HOST_WORK kinds. */
enum host_work_kind {
    HOST_WORK_DATA = 1,   /* copy the bytes into the record's client buffer */
    HOST_WORK_RUN = 2,    /* run the record's host function */
    HOST_WORK_FORGET = 3, /* no graph holds the record any more */
};

/* Welcome status codes. */
enum welcome_status {
    WELCOME_OK = 0,
    WELCOME_BAD_VERSION = 1,
    WELCOME_BAD_TOKEN = 2,
    WELCOME_SERVER_FULL = 3,
    WELCOME_NO_DEVICE = 4,
    WELCOME_INTERNAL = 5,
};

#endif
