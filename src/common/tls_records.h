/* tls_records.h - sealed records: the record layer of a TLS link once its
 * handshake is done (docs/architecture.md, 9.12 TLS).
 *
 * OpenSSL runs the TLS 1.3 handshake and derives the keys (tls.c, with
 * its exporter); from then on every byte of the connection travels here,
 * as kernel TLS would carry it, in user space and without OpenSSL's
 * record copies:
 *
 *   record = { u32 plaintext length, big-endian } ciphertext, 16-byte tag
 *
 * AES-128-GCM (OpenSSL's EVP), one key and 12-byte IV base per direction;
 * the nonce is the IV base XOR the direction's 64-bit record number, which
 * each end counts itself, and the length is the additional data. So a
 * record replayed, reordered, dropped, cut or altered fails its tag, and
 * the link is closed. The length's first byte is always 0 (records are far
 * below 16 MiB): never a bulk join's go byte (preface.h).
 *
 * No extra copy: a reader whose buffer takes a whole record receives the
 * ciphertext straight into it and decrypts it there while it is still in
 * cache; only records that do not fit (a frame header read on its own)
 * and read-ahead pass through the link's buffer. A writer encrypts a
 * writev's pieces into one record buffer without gathering them first,
 * and sends each record with one system call.
 *
 * Threads: the two directions share nothing but the fd. One thread at a
 * time reads (the receive lock; a wait for input from another thread
 * waits for it), and writes are whole and in order (the send lock, held
 * from encryption to the last byte sent). */
#ifndef SCUDA_TLS_RECORDS_H
#define SCUDA_TLS_RECORDS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define REC_KEY_LEN 16
#define REC_IV_LEN 12
#define REC_HEADER_LEN 4
#define REC_TAG_LEN 16
/* The most plaintext one record carries. One record is encrypted into a
 * buffer and sent from it: small enough that the buffer stays in L2 between
 * the two, large enough that a system call moves a lot. */
#ifndef REC_MAX_PLAIN /* -D for measuring other sizes */
#define REC_MAX_PLAIN (128u << 10)
#endif

/* One direction's key and IV base. */
struct rec_keys {
    uint8_t key[REC_KEY_LEN];
    uint8_t iv[REC_IV_LEN];
};

struct rec_link;

/* Records on connected socket fd (made non-blocking by the caller). tx
 * seals what this end sends, rx opens what it receives. read_ahead: take
 * as much as the socket holds per recv(); 0: exactly one record at a time,
 * for a connection whose socket goes on to other readers (a bulk join's
 * first session). NULL when out of memory. */
struct rec_link *rec_new(int fd, const struct rec_keys *tx, const struct rec_keys *rx, int read_ahead);
void rec_free(struct rec_link *r);

/* Every later wait of this link gives up after timeout_ms (-1: never). */
void rec_set_timeout(struct rec_link *r, int timeout_ms);
/* This process waits on the link (a session's or client's, not the
 * server's parent's): a read that found part of a large record may wait
 * for its rest even when asked not to wait, boundedly, rather than copy
 * it. */
void rec_may_wait(struct rec_link *r);

/* Read 1..cap bytes. timeout_ms: 0 = no wait (EAGAIN), -1 = the link's,
 * else at most that (ETIMEDOUT). -1 with errno: ECONNRESET on the socket's
 * end (also within a record), EPROTO for a record that fails its tag or
 * its length (logged once), the socket's error otherwise. Errors stick. */
ssize_t rec_read_some(struct rec_link *r, void *buf, size_t cap, int timeout_ms);
/* Send every byte of every iovec, each wait bounded by the link's timeout.
 * Returns 0, or -1 with errno. */
int rec_writev(struct rec_link *r, const struct iovec *iov, int iovcnt);
/* Never waiting: seal up to one record of buf and send what the socket
 * takes. Returns the plaintext bytes once their record left whole, or -1
 * with errno (EAGAIN: part of it is still here; call again with the same
 * bytes). For the server's parent. */
ssize_t rec_write_some(struct rec_link *r, const void *buf, size_t n);
/* 1 when a read would not wait: plaintext or a whole record held, or the
 * socket's end or an error; else 0. Takes what the socket holds now. */
int rec_input_ready(struct rec_link *r);
/* Wait until rec_input_ready, at most timeout_ms (-1: forever): 1, 0 on
 * timeout, -1 on a poll error. */
int rec_wait_input(struct rec_link *r, int timeout_ms);
/* 1 when the link holds nothing a read could return without the socket:
 * no plaintext and no whole record. */
int rec_drained(struct rec_link *r);

#endif
