/* preface.h - the first bytes of every SCUDA connection (protocol.h,
 * "Preface"): before anything else the client says whether TLS follows,
 * and the server answers in plain bytes whether it agrees. A client and a
 * server that disagree then both say why ("this server requires TLS")
 * instead of waiting on each other until a timeout.
 *
 *   client -> server  preface { magic u32 "SCP1", u8 transport, u8 kind, u8 version, u8 zero }
 *   server -> client  answer  { magic u32 "SCP1", u8 status,    u8 zero, u16 zero }
 *
 * transport: PREFACE_PLAIN or PREFACE_TLS. kind: PREFACE_SESSION for every
 * connection except the first TLS session of a bulk join (PREFACE_JOIN),
 * which reads exactly its own records (tls.h, keeps_socket): a second
 * TLS session follows it on the same socket. version: the client's
 * SCUDA_PROTOCOL_VERSION (0 from a v4 client): what follows a TLS
 * handshake changed in v5, so a TLS client of another version is refused
 * here (PREFACE_VERSION); a plain one learns the versions from the
 * server_hello. When the client asked for TLS and the status is
 * PREFACE_OK, the TLS handshake starts right after the answer. */
#ifndef SCUDA_PREFACE_H
#define SCUDA_PREFACE_H

#include <stdint.h>

#define PREFACE_MAGIC 0x31504353u /* "SCP1" */
/* A TLS bulk join: once its join request went out in the first TLS
 * session, the session that took the socket over sends this byte in
 * plain, and the client then starts the second TLS session. A refusal
 * (the server's parent's) comes instead inside the first session, whose
 * sealed records start with 0 (tls_records.h): the client tells the two
 * apart. */
#define JOIN_GO_BYTE 0x47 /* 'G' */
#define PREFACE_LEN 8

enum preface_transport { PREFACE_PLAIN = 0, PREFACE_TLS = 1 };
enum preface_kind { PREFACE_SESSION = 0, PREFACE_JOIN = 1 };
enum preface_status {
    PREFACE_OK = 0,
    PREFACE_NEED_TLS = 1, /* a plain client, a server that requires TLS */
    PREFACE_NO_TLS = 2,   /* a TLS client, a server without TLS */
    PREFACE_BAD = 3,      /* not a preface this server knows */
    PREFACE_VERSION = 4,  /* a TLS client of another protocol version */
};

void preface_encode(uint8_t out[PREFACE_LEN], int transport, int kind);
/* Decode a client's preface. Returns 0, or -1 when it is not one (an older
 * client, which waits for a server_hello, or not SCUDA at all). */
int preface_decode(const uint8_t in[PREFACE_LEN], int *transport, int *kind);
/* The protocol version a decoded preface names (0: a v4 client's). */
int preface_version(const uint8_t in[PREFACE_LEN]);

void preface_answer_encode(uint8_t out[PREFACE_LEN], int status);
/* Decode the server's answer: the status, or -1 when it is not an answer
 * (an older server speaks its server_hello first: -2). */
int preface_answer_decode(const uint8_t in[PREFACE_LEN]);

#endif
