/* protocol.h - the SCUDA wire protocol (its version: SCUDA_PROTOCOL_VERSION).
 *
 * Everything on the wire is little-endian with explicit sizes; no C struct
 * containing pointers is ever sent raw.
 *
 * Connection start (docs/architecture.md, 3.1 Handshake):
 *   client -> server  preface       { magic u32 "SCP1", u8 transport, u8 kind, u16 0 }
 *   server -> client  answer        { magic u32 "SCP1", u8 status, u8 0, u16 0 }
 *   then, when transport is TLS, a TLS 1.3 handshake, and everything
 *   below travels inside TLS (preface.h, tls.h)
 *   server -> client  server_hello  { magic u32, version u16, flags u16, nonce[16],
 *                                     server_build u32, opset }
 *   client -> server  client_hello  { magic u32, version u16, flags u16,
 *                                     client_build u32, device_mask u64, proof[32],
 *                                     opset }
 *   opset = { driver_ops u16, nvml_ops u16, driver_digest u64, nvml_digest u64 }:
 *   what the build's op registries hold (opset.h); a build is its
 *   SCUDA_VERSION_PACKED (version.h). A server refuses a client whose ops
 *   it does not all know (WELCOME_BAD_VERSION, naming both versions); a
 *   client refuses such a server itself where it can tell, after sending
 *   a client_hello without a proof so that the server's log says why.
 *   server -> client  welcome       { status u32, message blob,
 *                                     then, if status == 0, the session info
 *                                     (see session_info.h) }
 * proof = HMAC-SHA256(token, nonce) when the server has a token, else zeros.
 * Both ends encode and decode these three, and the join request below,
 * with common/hello.c and nowhere else.
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
 * HELLO_BULK_JOIN asks to join an existing session as one of its bulk
 *                 connections (see "Bulk connections" below). The
 *                 client_hello is followed by a join request; no session
 *                 limit applies (a join makes no session).
 * HELLO_MIGRATE_IN comes from another server moving one of its sessions
 *                 here ("Migration" below): a session, under the same
 *                 token check and session limit, that imports.
 * HELLO_RESUME   reconnects to a session whose main connection broke (see
 *                 "Resume" below). The client_hello is followed by a
 *                 resume request; no session limit applies.
 * HELLO_VISIBLE_DEVICES asks for a CUDA session, like 0, and is followed
 *                 by a visible request { u16 length, length bytes of the
 *                 client's CUDA_VISIBLE_DEVICES, zeros to VISIBLE_REQ_LEN }
 *                 (printable ASCII, at most VISIBLE_MAX bytes; length 0:
 *                 set but empty, no devices). The session composes it with
 *                 the GPUs the server exposes before its driver loads
 *                 (docs/architecture.md, 9.22). A client sends it only to
 *                 a server whose server_hello carries HELLO_SERVER_VISIBLE;
 *                 an older server's client refuses the connection itself
 *                 rather than show the program GPUs it excluded.
 * A server that does not know a flag refuses with WELCOME_BAD_VERSION.
 *
 * Migration (docs/architecture.md, 9.17). Server A's session, asked with
 * op scuda_migrate, connects to server B as a client would (its own
 * SCUDA_TOKEN / SCUDA_TOKEN_FILE, TLS as the client's variables say) with
 * HELLO_MIGRATE_IN, and gets a session welcome. Then A sends frames, each
 * { header: op scuda_migrate, seq 0, 1, ...; payload: one migrate_item
 * record (codegen/driver_spec.py) }: first MIG_IMAGES_QUERY (the images'
 * digests), which B answers with one MIG_IMAGES_HAVE item frame (which of
 * them its module cache has for A's user: those then go by digest), then
 * contexts, the driver-placing events
 * in the order they happened (modules, libraries, kernels, functions,
 * globals, managed memory), function attributes, streams, events,
 * allocations, the application's VMM, a deferred error, then device
 * bytes (at most MIGRATE_CHUNK per item), then MIG_END with the byte
 * count. B replays each under the same ids and at the same addresses and
 * answers once, { header: op scuda_migrate, FRAME_REPLY; payload: one
 * migrate_verdict }: its result, the reason, and the SHA-256 of what it
 * holds (migrate_state.h), which A compares with its own. B may answer
 * early, when it gave up; A then stops sending.
 *
 * Resume (docs/architecture.md, 3.11). The reply to the first ping hands
 * the client the session's resume secret (32 random bytes, never on the
 * wire again) and its --resume-within. Each end numbers the frames it
 * sends on the main connection, 1, 2, ...: every client frame (the first
 * ping is 1); every session frame except pongs (the first ping's reply is
 * 1). A frame is RECEIVED when its reader has read it whole: the session
 * holds a request's whole payload (a one-way call then runs, exactly
 * once, whatever becomes of the connection); the client has a reply in
 * the caller's buffers, an output frame written to stdio, a host-work
 * frame done. A frame cut in the middle is dropped by its reader and
 * sent again whole. Each end keeps what it sent until the other
 * acknowledges it: pings and pongs carry `ack`, the count of frames
 * received, and so does a one-way scuda_resume_ack the client sends every
 * 128 frames it read (a busy client sends no pings); a reply acknowledges its request and everything before it;
 * a one-way frame that carries bytes too large to copy (FRAME_ACK_ME)
 * is acknowledged by a pong at once, and its call returns after that.
 * When the connection breaks the client connects again with HELLO_RESUME
 * and a resume request
 *   { u32 session pid, u32 RESUME_INDEX, u8 proof[32], u64 received }
 * proof = auth_join_proof(resume secret, nonce of THIS connection, pid,
 * RESUME_INDEX). The parent routes it as a bulk join (same refusal, same
 * delay, same user check); the session answers with a welcome "resumed"
 * then u64 received (its count of the client's frames). Then both ends
 * send again, in order, the kept frames numbered above the other's
 * count, and go on. A reply whose device bytes the session did not keep
 * (FRAME_BULK) comes back as an empty FRAME_REDO reply with its result:
 * the client sends the request again (a copy to the host reads device
 * memory and changes nothing, so running it again is safe).
 *
 * Bulk connections (striping, docs/architecture.md). One TCP stream cannot
 * fill a fast link, so large copies also travel over K extra connections
 * to the same port, which join the session:
 *   1. On the main connection, op scuda_bulk_setup (its message is in
 *      codegen/driver_spec.py, MESSAGES, like every op's) grants k
 *      connections and hands out the session's pid, the largest chunk and
 *      a fresh random join secret of this session, known only to it and to
 *      this client.
 *   2. For i in 0..k-1 the client connects again, and after the usual
 *      server_hello/client_hello (token proof included, flags
 *      HELLO_BULK_JOIN) sends a join request
 *        { u32 session pid, u32 index i, u8 proof[32] },
 *      proof = HMAC-SHA256(secret, nonce of THIS connection, pid, i)
 *      (auth_join_proof): the secret never crosses the wire again and a
 *      recorded join cannot be replayed. The parent hands the socket to
 *      the session with that pid (SCM_RIGHTS), which checks the proof and
 *      answers with a welcome { status, message blob } and no session
 *      info: "bulk" on success, else WELCOME_BAD_JOIN and why.
 *   3. Then, on bulk connection i, only chunks: a chunk header
 *        { u64 copy id, u64 offset, u32 length, u32 zero }
 *      and `length` bytes. A striped copy of n bytes in chunks of c bytes
 *      has chunks j = 0..ceil(n/c)-1 at offset j*c; chunk j travels, in
 *      order, on connection j mod k: client -> server for scuda_bulk_htod,
 *      server -> client for scuda_bulk_dtoh. Both sides check every header
 *      against the copy announced on the main connection (the bulk_copy
 *      record: address, stream, mode, n, c, copy id): scuda_bulk_htod is
 *      one-way, like scuda_memcpy_htod; scuda_bulk_dtoh replies (no bytes)
 *      after every chunk has been sent. Copy ids increase. A copy whose CUDA call fails still moves all
 *      its chunks (device-to-host ones as zeros), so the connections stay
 *      in step; anything else wrong on a bulk connection ends striping for
 *      the session (both sides close every bulk connection) and fails the
 *      copy; later copies use the main connection.
 *
 * Then frames, both ways. Each frame is a 16-byte header and `length` bytes
 * of payload.
 *   request  (client -> server): op, flags, seq, ctx; payload = arguments,
 *                                as the op's message or generated stub
 *                                encodes them (codegen/driver_spec.py)
 *   reply    (server -> client): op echoed, FRAME_REPLY, seq echoed;
 *                                payload = u32 CUresult, then outputs
 *   output   (server -> client): FRAME_OUTPUT, payload = u8 stream (1 stdout,
 *                                2 stderr) then bytes: device printf text
 *                                captured in the session, sent before the
 *                                reply of the synchronizing call that
 *                                flushed it.
 *   host work (server -> client): FRAME_HOST_WORK, payload = the host_work
 *                                record (u8 kind, u64 record id: the
 *                                client's, from scuda_capture_dtoh/_hostfn), then for
 *                                HOST_WORK_DATA the bytes a replayed copy
 *                                brought to the client's buffer. Sent, like
 *                                output, before the next reply.
 * A request with FRAME_ASYNC gets no reply. If it fails, the server keeps
 * the error (the first one) until a call that observes earlier work
 * (synchronize, query, copy to the host: op flag `observes`) succeeds
 * itself: that reply carries the kept error as its CUresult, with
 * FRAME_DEFERRED, and the call's outputs all the same. Every other reply
 * carries its own call's result (CUDA's contract for asynchronous errors,
 * without losing what the later call did). */
#ifndef SCUDA_PROTOCOL_H
#define SCUDA_PROTOCOL_H

#include <stdint.h>
#include <string.h>

/* How a copy request wants its copy done: with the semantics of cuMemcpy*
 * (synchronous) or of cuMemcpy*Async on its stream. */
enum copy_mode { COPY_SYNC = 0, COPY_ASYNC = 1 };

#define SCUDA_MAGIC 0x31554353u /* "SCU1" */
/* 2: a one-way call's error comes back only on an observing call's reply
 * (FRAME_DEFERRED); kernel-node queries carry the function's name.
 * 3: every hand-written op is a typed message of codegen/driver_spec.py
 * (MESSAGES); launches carry packed bytes without a layout; the op
 * registry lost the ids nothing sent.
 * 4: the client's preface, then TLS 1.3 (preface.h); a bulk join runs a
 * second TLS session after its join request.
 * 5: after the TLS handshake the records are SCUDA's sealed records
 * (tls_records.h, keys from OpenSSL's exporter), not OpenSSL's; the
 * preface carries the version, so a v4 TLS peer is refused before its
 * handshake instead of reading records it cannot parse.
 * 6: a broken main connection resumes (HELLO_RESUME): frames are
 * numbered, pings and pongs acknowledge them, the first ping's reply
 * hands out the resume secret.
 * 7: both hellos carry the build's version and op set (opset.h): a
 * client and a server that cannot work together refuse at connect. A v6
 * peer reads the first SERVER_HELLO_HEAD_LEN bytes and stops at the
 * version, as a v7 one does with a v6 server_hello. */
#define SCUDA_PROTOCOL_VERSION 7
#define SCUDA_DEFAULT_PORT 14833
#define SCUDA_DEFAULT_ADDR "127.0.0.1:14833"

#define SCUDA_NONCE_LEN 16
#define SCUDA_PROOF_LEN 32
#define HELLO_OPSET_LEN (2 + 2 + 8 + 8)
/* Every version's server_hello starts with these bytes (magic, version,
 * flags, nonce); a reader checks the version before reading the rest. */
#define SERVER_HELLO_HEAD_LEN (4 + 2 + 2 + SCUDA_NONCE_LEN)
#define SERVER_HELLO_LEN (SERVER_HELLO_HEAD_LEN + 4 + HELLO_OPSET_LEN)
#define CLIENT_HELLO_LEN (4 + 2 + 2 + 4 + 8 + SCUDA_PROOF_LEN + HELLO_OPSET_LEN)

/* server_hello flags: for information only, a client sends its proof
 * whether or not they say a token is wanted. */
#define HELLO_SERVER_TOKEN (1u << 0) /* this server checks a token */
#define HELLO_SERVER_VISIBLE (1u << 1) /* this server takes HELLO_VISIBLE_DEVICES */
#define HELLO_SERVER_ZSTD (1u << 2) /* this server takes HELLO_BULK_JOIN | HELLO_JOIN_ZSTD */

/* client_hello flags (see above). */
#define HELLO_RAW_ECHO (1u << 0)
#define HELLO_RAW_SINK (1u << 1)
#define RAW_SINK_MAX (64ull << 30) /* largest raw sink transfer */
#define HELLO_BULK_JOIN (1u << 2)
#define HELLO_MIGRATE_IN (1u << 4) /* another server moving a session here (below) */
#define HELLO_RESUME (1u << 3)
#define HELLO_VISIBLE_DEVICES (1u << 5) /* a CUDA session, with the client's CUDA_VISIBLE_DEVICES */
/* With HELLO_BULK_JOIN only, and only to a server whose server_hello
 * carries HELLO_SERVER_ZSTD: this bulk connection may carry compressed
 * chunks, both ways (below, "Compressed chunks"). */
#define HELLO_JOIN_ZSTD (1u << 6)
/* Another server's session joining one of this server's sessions with a
 * one-time grant (a peer link: docs/architecture.md, 3.12). Its
 * client_hello carries no token proof: the grant is its credential. A
 * join request follows, as for HELLO_BULK_JOIN, proved with the grant's
 * secret over the index of the link slot it grants. */
#define HELLO_PEER_JOIN (1u << 7)

/* The visible request (above): a fixed size, so that the parent reads it
 * like a join request; room for 25 full GPU UUIDs. */
#define VISIBLE_REQ_LEN 1024
#define VISIBLE_MAX (VISIBLE_REQ_LEN - 2)

/* Flags that ask for a CUDA session on a GPU (a session moving in too). */
static inline int hello_wants_cuda_session(uint16_t flags) { return flags == 0 || flags == HELLO_VISIBLE_DEVICES; }

/* Resume (above). */
#define RESUME_SECRET_LEN 32
#define RESUME_INDEX 0xffffffffu          /* the join index a resume proof is made for */
#define RESUME_REQ_LEN (4 + 4 + 32 + 8)   /* resume request after the client_hello */

/* Bulk connections (above). */
#define BULK_MAX_STREAMS 16
#define BULK_SECRET_LEN 32
#define BULK_JOIN_LEN (4 + 4 + 32)     /* join request after the client_hello */
#define BULK_CHUNK_HEAD 24             /* chunk header */
#define BULK_CHUNK_MIN (64u << 10)
#define BULK_CHUNK_MAX (4u << 20)
#define BULK_COPY_MAX (1ull << 40)     /* largest striped copy */

/* Peer links (HELLO_PEER_JOIN). */
#define PEER_SECRET_LEN 32

/* A chunk header: u64 copy id, u64 offset, u32 length, u32 packed. Both
 * sides build the header they expect and compare its first
 * BULK_CHUNK_HEAD_FIXED bytes with what arrives.
 *
 * Compressed chunks (docs/architecture.md, "Compressed copies"). packed
 * is 0: the chunk's length bytes follow. Else, only on a connection that
 * joined with HELLO_JOIN_ZSTD, packed bytes follow, one zstd frame of
 * exactly length bytes, and 0 < packed < length; anything else ends
 * striping. The
 * announcement (bulk_copy) says in bits 1-7 of its mode byte whether, and
 * how eagerly, the chunks' sender compresses (compress.h, the policy);
 * those bits are 0 unless every bulk connection joined with
 * HELLO_JOIN_ZSTD. */
#define BULK_CHUNK_HEAD_FIXED 20
#define BULK_MODE_COPY 1u /* bit 0 of bulk_copy.mode: enum copy_mode */
#define BULK_MODE_POLICY_SHIFT 1
static inline void bulk_head_encode_packed(uint8_t h[BULK_CHUNK_HEAD], uint64_t id, uint64_t off, uint32_t len,
                                           uint32_t packed)
{
    memcpy(h, &id, 8);
    memcpy(h + 8, &off, 8);
    memcpy(h + 16, &len, 4);
    memcpy(h + 20, &packed, 4);
}
static inline void bulk_head_encode(uint8_t h[BULK_CHUNK_HEAD], uint64_t id, uint64_t off, uint32_t len)
{
    bulk_head_encode_packed(h, id, off, len, 0);
}
static inline uint32_t bulk_head_packed(const uint8_t h[BULK_CHUNK_HEAD])
{
    uint32_t packed;
    memcpy(&packed, h + 20, 4);
    return packed;
}

/* Largest frame payload either side accepts. Bulk copies larger than
 * SCUDA_CHUNK are split into several frames by the sender. */
#define SCUDA_MAX_FRAME (64u << 20)
/* Room for a reply's result and lengths around bulk bytes: a bulk payload
 * is at most SCUDA_MAX_FRAME - SCUDA_REPLY_MARGIN, and a reader accepts a
 * reply of up to SCUDA_MAX_FRAME + SCUDA_REPLY_MARGIN. */
#define SCUDA_REPLY_MARGIN 64u
/* Room for a request's own arguments next to the bytes it carries. */
#define SCUDA_REQUEST_MARGIN 4096u
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
    FRAME_DEFERRED = 1u << 5,  /* reply: the CUresult is an earlier one-way call's; this call succeeded */
    FRAME_ACK_ME = 1u << 6,    /* request: acknowledge it with a pong once read whole (resume) */
    FRAME_REDO = 1u << 7,      /* reply: its bytes were lost in a resume; send the request again */
    /* request: a frame of a failover journal, run once already by the
     * server that died, whose caller waited for its reply before it went
     * on: the standby finishes it before it runs later frames. */
    FRAME_REPLAYED = 1u << 8,
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
    HOST_WORK_LOG = 4,    /* a driver log line for a cuLogsRegisterCallback record: u32 level, the text */
    HOST_WORK_NOTIFY = 5, /* a cuDeviceRegisterAsyncNotification record's notification: u32 type, u64 bytes over budget */
};

/* Welcome status codes. */
enum welcome_status {
    WELCOME_OK = 0,
    WELCOME_BAD_VERSION = 1,
    WELCOME_BAD_TOKEN = 2,
    WELCOME_SERVER_FULL = 3,
    WELCOME_NO_DEVICE = 4,
    WELCOME_INTERNAL = 5,
    WELCOME_BAD_JOIN = 6, /* a bulk join the server cannot match to a session */
};

#endif
