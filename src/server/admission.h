/* admission.h - the parent's handshakes: every accepted connection
 * authenticates here, in the parent's poll loop, before any process is
 * forked for it (docs/architecture.md, 2 Processes; docs/operate.md,
 * "Admission and tokens").
 *
 * Each pending connection is a small state machine on a non-blocking
 * socket:
 *   TRANSPORT (preface, TLS) -> SEND_SERVER_HELLO -> READ_CLIENT_HELLO
 *     [-> READ_JOIN_REQUEST] -> DECIDE -> admitted | JOIN_WAIT | SEND_REFUSAL
 * The parent never waits on one client. A handshake has one deadline,
 * from accept: bytes do not extend it. Handshakes in progress have a
 * bound of their own and a bound per source address; when one is hit,
 * the oldest pending handshake of the source that holds the most is
 * dropped, so a flood from one address evicts only itself. The bound per
 * source drops only handshakes older than a grace (an honest burst from
 * one address finishes within it); the global bound always makes room. */
#ifndef SCUDA_SERVER_ADMISSION_H
#define SCUDA_SERVER_ADMISSION_H

#include <poll.h>
#include <stdint.h>

#include "../common/token_file.h"

#define ADMISSION_DEADLINE_MS 5000
/* The per-source bound drops only handshakes pending at least this long. */
#define ADMISSION_GRACE_MS 1000
#define ADMISSION_DEFAULT_MAX 256
#define ADMISSION_DEFAULT_PER_SOURCE 8

struct tls_server;

/* A client that authenticated and asked for a session or a raw link. */
struct admitted {
    /* The callee owns it: blocking again over plain TCP; over TLS
     * non-blocking, with its link attached (tls_of), which a forked child
     * keeps using and the parent frees with io_close (no close_notify). */
    int fd;
    uint16_t flags;  /* 0 or HELLO_VISIBLE_DEVICES: a session; HELLO_RAW_*: a raw link */
    uint32_t build;  /* the client's build, for the log */
    const char *user;
    const char *peer;
    const char *visible; /* the client's CUDA_VISIBLE_DEVICES, checked; NULL when it sent none */
};

struct admission_config {
    int max_pending;    /* handshakes in progress, in all */
    int per_source;     /* handshakes in progress from one address */
    int max_sessions;   /* children, for "server full" */
    /* Every connection's transport: TLS with this (tls.h), or plain TCP
     * when NULL; the client's preface must agree (transport_phase.h). */
    const struct tls_server *tls;
    /* The users and their tokens now (server.c swaps it on reload); an
     * empty set means no token is needed (the listener is loopback). */
    const struct token_set *const *tokens;
    /* Fork what the client asked for. */
    void (*admit)(const struct admitted *a);
};

/* Returns 0, or -1 when out of memory. */
int admission_init(const struct admission_config *cfg);

/* Accept every connection waiting on the listener (non-blocking). */
void admission_accept(int lfd);
/* Poll entries, one per pending connection (fd -1 when it waits for
 * nothing on its socket): how many, and fill them. */
int admission_poll_count(void);
void admission_poll_fill(struct pollfd *p);
/* After poll(): move every pending connection on, and drop those past
 * their deadline. */
void admission_poll_done(const struct pollfd *p, int n);
/* How long poll() may sleep before a deadline or a delayed refusal is
 * due, at most cap_ms. */
int admission_timeout_ms(int cap_ms);
/* A session's verdict on the join whose handshake had this nonce. */
void admission_join_verdict(const uint8_t nonce[16], int ok);
/* Handshakes refused so far with welcome status `status` (WELCOME_*,
 * below ADMISSION_REFUSAL_KINDS); and those cut at their deadline
 * (returned) or evicted by the bounds (*evicted). */
#define ADMISSION_REFUSAL_KINDS 8
uint64_t admission_refused(unsigned status);
uint64_t admission_dropped(uint64_t *evicted);
/* In a forked child: close every pending connection's socket. */
void admission_forget_in_child(void);

#endif
