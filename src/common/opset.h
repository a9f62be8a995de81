/* opset.h - which ops a build knows, as the handshake compares them.
 *
 * A client may send every op of its registries (codegen/ops.txt for the
 * driver, codegen/nvml_ops.txt for NVML). Within a protocol version the
 * registries only grow at their end, so a server serves a client exactly
 * when the client's registries are prefixes of its own. Each end states
 * its registries as a count and a digest of that many ops (a chain of
 * SHA-256 over the names, made by codegen/gen_driver.py into
 * opset.gen.c, which keeps the digest of every prefix). The server checks
 * the client's digests against its own prefixes; the client checks the
 * server's where it can (a server with fewer ops cannot serve it). So a
 * client never reaches a server that lacks one of its ops, and the
 * refusal comes at connect, with both versions named (architecture.md,
 * 3.1 Handshake), instead of a NOT_SUPPORTED on the first new call. */
#ifndef SCUDA_OPSET_H
#define SCUDA_OPSET_H

#include <stddef.h>
#include <stdint.h>

/* What one end says about itself in its hello. */
struct scuda_opset {
    uint32_t version;       /* SCUDA_VERSION_PACKED of the build */
    uint16_t driver_ops;    /* how many driver ops it knows */
    uint16_t nvml_ops;      /* how many NVML ops it knows */
    uint64_t driver_digest; /* the digest of those driver ops */
    uint64_t nvml_digest;   /* the digest of those NVML ops */
};

/* Bytes of the ops part on the wire: u16, u16, u64, u64 (after a u32
 * version, which each hello carries in its own place). */
#define OPSET_WIRE_LEN (2 + 2 + 8 + 8)

/* This build's own. */
void opset_self(struct scuda_opset *o);

/* The verdicts of opset_judge. */
enum opset_verdict {
    OPSET_OK = 0,          /* the server serves every op the client knows */
    OPSET_SERVER_OLDER,    /* the server lacks ops the client knows */
    OPSET_DIVERGED,        /* the registries disagree: builds of different code */
    OPSET_UNKNOWN,         /* the judge cannot tell (a server with more ops than the judge) */
};

/* Judge a client against a server, one of which is this build (`self_is`:
 * 's' when this build is the server, 'c' when it is the client); `peer`
 * is the other end. This build knows the digest of every prefix of its
 * own registries, so it can tell whether the shorter side's ops are a
 * prefix of the longer's whenever it is the longer one or they are
 * equal. */
enum opset_verdict opset_judge(int self_is, const struct scuda_opset *peer);

/* "0.9.0 (ops 372+406, 1a2b3c4d)": the version, the counts and the start
 * of a digest of both, for messages. */
void opset_describe(const struct scuda_opset *o, char *out, size_t outlen);

/* The refusal message for a verdict, naming both ends and what to
 * upgrade (the client's view: "upgrade the server ..."). */
void opset_refusal(enum opset_verdict v, const struct scuda_opset *client, const struct scuda_opset *server,
                   char *out, size_t outlen);

/* Generated (opset.gen.c): entry N is the digest of the first N ops. */
extern const unsigned scuda_opset_driver_count;
extern const uint64_t scuda_opset_driver_prefix[];
extern const unsigned scuda_opset_nvml_count;
extern const uint64_t scuda_opset_nvml_prefix[];

#endif
