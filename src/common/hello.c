/* hello.c - see hello.h.
 *
 * Each message is read whole with one bounded read and decoded with a
 * wire_reader, so a decoder never sees a short message; each is written
 * with one write, so a peer never waits on half of one. */
#include "hello.h"
#include "why.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "auth.h"
#include "session_info.h"
#include "token_file.h"
#include "transport.h"
#include "version.h"
#include "wire.h"

/* ---- the client's half ---------------------------------------------------- */

static void put_opset(wire_buf *b, const struct scuda_opset *o)
{
    wb_put_u16(b, o->driver_ops);
    wb_put_u16(b, o->nvml_ops);
    wb_put_u64(b, o->driver_digest);
    wb_put_u64(b, o->nvml_digest);
}

static void get_opset(wire_reader *r, uint32_t version, struct scuda_opset *o)
{
    o->version = version;
    o->driver_ops = wr_u16(r);
    o->nvml_ops = wr_u16(r);
    o->driver_digest = wr_u64(r);
    o->nvml_digest = wr_u64(r);
}

static int greeting_lost(char *err, size_t errlen)
{
    snprintf(err, errlen, "%s",
             errno == ETIMEDOUT ? "no greeting in time: is a SCUDA server listening there?"
                                : "the connection closed before the server's greeting");
    return -1;
}

int hello_read_server_info(int fd, int timeout_ms, uint8_t nonce[SCUDA_NONCE_LEN], struct scuda_opset *server,
                           char *err, size_t errlen)
{
    uint16_t flags;
    return hello_read_server_flags(fd, timeout_ms, nonce, &flags, server, err, errlen);
}

int hello_read_server_flags(int fd, int timeout_ms, uint8_t nonce[SCUDA_NONCE_LEN], uint16_t *flags,
                            struct scuda_opset *server, char *err, size_t errlen)
{
    /* The head first: a server of another version sends another tail,
     * and waiting for ours would turn its clear refusal into a timeout. */
    uint8_t hello[SERVER_HELLO_LEN];
    if (io_read_full_timeout(fd, hello, SERVER_HELLO_HEAD_LEN, timeout_ms) != 0) return greeting_lost(err, errlen);
    wire_reader r;
    wr_init(&r, hello, SERVER_HELLO_HEAD_LEN);
    uint32_t magic = wr_u32(&r);
    uint16_t version = wr_u16(&r);
    *flags = wr_u16(&r); /* what the server takes, for information */
    if (magic != SCUDA_MAGIC) return why_fail(err, errlen, "not a SCUDA server");
    if (version != SCUDA_PROTOCOL_VERSION) {
        snprintf(err, errlen, "the server speaks protocol v%u, this client (SCUDA %s) v%u", version,
                 SCUDA_VERSION_STRING, (unsigned)SCUDA_PROTOCOL_VERSION);
        return -2;
    }
    wr_raw(&r, nonce, SCUDA_NONCE_LEN);
    if (io_read_full_timeout(fd, hello + SERVER_HELLO_HEAD_LEN, SERVER_HELLO_LEN - SERVER_HELLO_HEAD_LEN,
                             timeout_ms) != 0)
        return greeting_lost(err, errlen);
    wr_init(&r, hello + SERVER_HELLO_HEAD_LEN, SERVER_HELLO_LEN - SERVER_HELLO_HEAD_LEN);
    uint32_t build = wr_u32(&r);
    get_opset(&r, build, server);
    return 0;
}

int hello_read_server(int fd, int timeout_ms, uint8_t nonce[SCUDA_NONCE_LEN], char *err, size_t errlen)
{
    uint16_t flags;
    return hello_read_server_judged(fd, timeout_ms, nonce, &flags, err, errlen);
}

int hello_read_server_judged(int fd, int timeout_ms, uint8_t nonce[SCUDA_NONCE_LEN], uint16_t *flags, char *err,
                             size_t errlen)
{
    struct scuda_opset server, self;
    int rc = hello_read_server_flags(fd, timeout_ms, nonce, flags, &server, err, errlen);
    if (rc != 0) return rc;
    enum opset_verdict v = opset_judge('c', &server);
    if (v != OPSET_SERVER_OLDER && v != OPSET_DIVERGED) return 0; /* else the server judges too */
    /* Tell the server, so that its log says why this client left: it
     * judges the op set before it looks at the (absent) proof. */
    (void)hello_send_client(fd, 0, 0, NULL, nonce, NULL, 0);
    opset_self(&self);
    opset_refusal(v, &self, &server, err, errlen);
    return -2;
}

int hello_send_client(int fd, uint16_t flags, uint64_t device_mask, const char *token,
                      const uint8_t nonce[SCUDA_NONCE_LEN], const void *extra, size_t extra_len)
{
    wire_buf b;
    wb_init(&b);
    wb_put_u32(&b, SCUDA_MAGIC);
    wb_put_u16(&b, SCUDA_PROTOCOL_VERSION);
    wb_put_u16(&b, flags);
    wb_put_u32(&b, SCUDA_VERSION_PACKED);
    wb_put_u64(&b, device_mask);
    uint8_t proof[SCUDA_PROOF_LEN];
    auth_proof(token, nonce, proof);
    wb_put_raw(&b, proof, sizeof proof);
    struct scuda_opset self;
    opset_self(&self);
    put_opset(&b, &self);
    if (extra_len) wb_put_raw(&b, extra, extra_len);
    int rc = b.oom ? (errno = ENOMEM, -1) : io_write_full(fd, b.data, b.len);
    wb_free(&b);
    return rc;
}

static int printable(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e) return 0;
    return 1;
}

int hello_visible_request(uint8_t req[VISIBLE_REQ_LEN], const char *value, char *err, size_t errlen)
{
    size_t len = strlen(value);
    if (len > VISIBLE_MAX)
        return why_fail(err, errlen, "CUDA_VISIBLE_DEVICES is %zu bytes, more than the %d SCUDA forwards; name "
                                     "fewer GPUs, or name them by index rather than UUID", len, VISIBLE_MAX);
    if (!printable(value, len))
        return why_fail(err, errlen, "CUDA_VISIBLE_DEVICES holds a byte that is not printable ASCII; set it to GPU "
                                     "indices or UUIDs, e.g. 0,1 or GPU-8f6c1d2e-...");
    memset(req, 0, VISIBLE_REQ_LEN);
    req[0] = (uint8_t)len;
    req[1] = (uint8_t)(len >> 8);
    memcpy(req + 2, value, len);
    return 0;
}

void hello_join_request(uint8_t req[BULK_JOIN_LEN], uint32_t pid, uint32_t index,
                        const uint8_t secret[BULK_SECRET_LEN], const uint8_t nonce[SCUDA_NONCE_LEN])
{
    memcpy(req, &pid, 4);
    memcpy(req + 4, &index, 4);
    auth_join_proof(secret, nonce, pid, index, req + 8);
}

void hello_resume_request(uint8_t req[RESUME_REQ_LEN], uint32_t pid, const uint8_t secret[RESUME_SECRET_LEN],
                          const uint8_t nonce[SCUDA_NONCE_LEN], uint64_t received)
{
    hello_join_request(req, pid, RESUME_INDEX, secret, nonce);
    memcpy(req + BULK_JOIN_LEN, &received, 8);
}

/* A welcome is { u32 status, u32 length } and a body of that length: the
 * message, then a session's session info. Far larger than any session
 * info: a length beyond it is not a SCUDA welcome. */
#define WELCOME_HEAD_LEN 8
#define WELCOME_MAX (1u << 20)

static int read_welcome(int fd, int timeout_ms, uint32_t *status, char *msg, size_t msglen,
                        struct session_info *si)
{
    uint8_t hdr[WELCOME_HEAD_LEN];
    *status = WELCOME_INTERNAL;
    if (io_read_full_timeout(fd, hdr, sizeof hdr, timeout_ms) != 0) {
        snprintf(msg, msglen, "%s",
                 errno == ETIMEDOUT ? "no welcome in time" : "the connection closed before the welcome");
        return -1;
    }
    wire_reader h;
    wr_init(&h, hdr, sizeof hdr);
    *status = wr_u32(&h);
    uint32_t len = wr_u32(&h);
    if (len > WELCOME_MAX) {
        snprintf(msg, msglen, "a malformed welcome");
        return -2;
    }
    uint8_t *body = malloc(len ? len : 1);
    if (!body || io_read_full_timeout(fd, body, len, timeout_ms) != 0) {
        snprintf(msg, msglen, "%s", body ? "a truncated welcome" : "out of memory for the welcome");
        free(body);
        return -1;
    }
    wire_reader r;
    wr_init(&r, body, len);
    const char *m = wr_str(&r); /* NULL when absent: no reason given */
    const char *bad = NULL;
    if (si && *status == WELCOME_OK) {
        if (session_info_decode(&r, si) != 0) bad = "malformed session info";
    } else if (!wr_ok_end(&r)) {
        bad = "an unexpected welcome"; /* e.g. a session's, where none was asked for */
    }
    snprintf(msg, msglen, "%s", bad ? bad : m ? m : "");
    free(body);
    return bad ? -2 : 0;
}

int hello_read_session_welcome(int fd, int timeout_ms, uint32_t *status, char *msg, size_t msglen,
                               struct session_info *si)
{
    return read_welcome(fd, timeout_ms, status, msg, msglen, si);
}

int hello_read_welcome(int fd, int timeout_ms, uint32_t *status, char *msg, size_t msglen)
{
    return read_welcome(fd, timeout_ms, status, msg, msglen, NULL);
}

/* ---- the server's half ---------------------------------------------------- */

/* n bytes of v, little-endian, as wire.h writes them (this encoder has
 * no buffer to run out of memory in). */
static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

void hello_encode_server(uint16_t flags, uint8_t nonce[SCUDA_NONCE_LEN], uint8_t out[SERVER_HELLO_LEN])
{
    auth_nonce(nonce, SCUDA_NONCE_LEN);
    uint32_t magic = SCUDA_MAGIC;
    uint16_t version = SCUDA_PROTOCOL_VERSION;
    for (int i = 0; i < 4; i++) out[i] = (uint8_t)(magic >> (8 * i));
    out[4] = (uint8_t)version;
    out[5] = (uint8_t)(version >> 8);
    out[6] = (uint8_t)flags;
    out[7] = (uint8_t)(flags >> 8);
    memcpy(out + 8, nonce, SCUDA_NONCE_LEN);
    struct scuda_opset self;
    opset_self(&self);
    uint8_t *t = out + SERVER_HELLO_HEAD_LEN;
    put_le(t, SCUDA_VERSION_PACKED, 4);
    put_le(t + 4, self.driver_ops, 2);
    put_le(t + 6, self.nvml_ops, 2);
    put_le(t + 8, self.driver_digest, 8);
    put_le(t + 16, self.nvml_digest, 8);
}

void hello_decode_client(const uint8_t in[CLIENT_HELLO_LEN], struct client_hello *ch)
{
    wire_reader r;
    wr_init(&r, in, CLIENT_HELLO_LEN);
    ch->magic = wr_u32(&r);
    ch->version = wr_u16(&r);
    ch->flags = wr_u16(&r);
    ch->build = wr_u32(&r);
    ch->device_mask = wr_u64(&r);
    wr_raw(&r, ch->proof, sizeof ch->proof);
    get_opset(&r, ch->build, &ch->opset);
}

void hello_decode_join_request(const uint8_t in[BULK_JOIN_LEN], struct join_request *jr)
{
    wire_reader r;
    wr_init(&r, in, BULK_JOIN_LEN);
    jr->pid = wr_u32(&r);
    jr->index = wr_u32(&r);
    wr_raw(&r, jr->proof, sizeof jr->proof);
}

void hello_decode_resume_request(const uint8_t in[RESUME_REQ_LEN], struct join_request *jr, uint64_t *received)
{
    hello_decode_join_request(in, jr);
    memcpy(received, in + BULK_JOIN_LEN, 8);
}

int hello_decode_visible_request(const uint8_t in[VISIBLE_REQ_LEN], char out[VISIBLE_MAX + 1])
{
    size_t len = (size_t)in[0] | (size_t)in[1] << 8;
    out[0] = '\0';
    if (len > VISIBLE_MAX || !printable((const char *)in + 2, len)) return -1;
    for (size_t i = 2 + len; i < VISIBLE_REQ_LEN; i++)
        if (in[i] != 0) return -1;
    memcpy(out, in + 2, len);
    out[len] = '\0';
    return 0;
}

long hello_encode_welcome(uint32_t status, const char *msg, uint8_t *out, size_t cap)
{
    wire_buf body;
    wb_init(&body);
    wb_put_str(&body, msg);
    long n = -1;
    if (!body.oom && body.len <= UINT32_MAX && 8 + body.len <= cap) {
        uint32_t len = (uint32_t)body.len;
        for (int i = 0; i < 4; i++) {
            out[i] = (uint8_t)(status >> (8 * i));
            out[4 + i] = (uint8_t)(len >> (8 * i));
        }
        memcpy(out + 8, body.data, body.len);
        n = (long)(8 + body.len);
    }
    wb_free(&body);
    return n;
}

int hello_find_user(const struct client_hello *ch, const struct token_set *tokens,
                    const uint8_t nonce[SCUDA_NONCE_LEN])
{
    uint8_t expect[SCUDA_PROOF_LEN];
    if (!tokens || tokens->count == 0) {
        auth_proof(NULL, nonce, expect);
        return auth_equal(expect, ch->proof, SCUDA_PROOF_LEN) ? 0 : -1;
    }
    int found = -1;
    for (int i = 0; i < tokens->count; i++) {
        auth_proof(tokens->entries[i].token, nonce, expect);
        int eq = auth_equal(expect, ch->proof, SCUDA_PROOF_LEN);
        /* No early exit and no branch on the result: select by mask. */
        int mask = -eq;
        found = (found & ~mask) | (i & mask);
    }
    return found;
}

int hello_check_client_ops(const struct client_hello *ch, char *msg, size_t msglen)
{
    enum opset_verdict v = opset_judge('s', &ch->opset);
    if (v == OPSET_OK) return 0;
    struct scuda_opset self;
    opset_self(&self);
    opset_refusal(v, &ch->opset, &self, msg, msglen);
    return -1;
}

int hello_send_server(int fd, uint16_t flags, uint8_t nonce[SCUDA_NONCE_LEN])
{
    uint8_t out[SERVER_HELLO_LEN];
    hello_encode_server(flags, nonce, out);
    return io_write_full(fd, out, sizeof out);
}

int hello_read_client(int fd, int timeout_ms, struct client_hello *ch)
{
    uint8_t in[CLIENT_HELLO_LEN];
    if (io_read_full_timeout(fd, in, sizeof in, timeout_ms) != 0) return -1;
    hello_decode_client(in, ch);
    return 0;
}

int hello_proof_ok(const struct client_hello *ch, const char *token, const uint8_t nonce[SCUDA_NONCE_LEN])
{
    uint8_t expect[SCUDA_PROOF_LEN];
    auth_proof(token, nonce, expect);
    return auth_equal(expect, ch->proof, SCUDA_PROOF_LEN);
}

int hello_read_join_request(int fd, int timeout_ms, struct join_request *jr)
{
    uint8_t req[BULK_JOIN_LEN];
    if (io_read_full_timeout(fd, req, sizeof req, timeout_ms) != 0) return -1;
    hello_decode_join_request(req, jr);
    return 0;
}

int hello_send_welcome(int fd, uint32_t status, const char *msg)
{
    return hello_send_session_welcome(fd, status, msg, NULL);
}

int hello_send_session_welcome(int fd, uint32_t status, const char *msg, const struct session_info *si)
{
    /* The body first: the head carries its length. */
    wire_buf body, head;
    wb_init(&body);
    wb_init(&head);
    wb_put_str(&body, msg);
    if (si) session_info_encode(&body, si);
    wb_put_u32(&head, status);
    wb_put_u32(&head, (uint32_t)body.len);
    int rc;
    if (body.oom || head.oom) {
        /* Half a welcome would only confuse the client: send none. */
        errno = ENOMEM;
        rc = -1;
    } else {
        struct iovec iov[2] = {{head.data, head.len}, {body.data, body.len}};
        rc = io_writev_full(fd, iov, 2);
    }
    wb_free(&head);
    wb_free(&body);
    return rc;
}
