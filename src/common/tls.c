/* tls.c - see tls.h. */
#define _GNU_SOURCE
#include "tls.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "log.h"

/* TLS 1.3 only, AES-GCM only: every CPU SCUDA runs on has AES
 * instructions, and the kernel's TLS offload takes these suites. */
#define CIPHER_SUITES "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384"

/* How much one holder of a link's mutex encrypts or decrypts before it
 * lets the other direction in: large enough for few lock round trips on
 * a bulk copy, small enough that a reply is not held up long behind one. */
#define BURST_BYTES (256u << 10)
/* The read-ahead buffer: a few records' worth per read system call. */
#define READ_AHEAD_BYTES (128u << 10)
/* Small pieces of a writev are gathered into one record up to this. */
#define GATHER_BYTES (16u << 10)
/* A link on memory takes up to this much ciphertext off the socket per
 * recv(). */
#define RECV_BYTES (256u << 10)

/* Where a link's records go. A link starts on a socket BIO (OpenSSL reads
 * and writes the fd itself: the handshake, and the server's parent, which
 * steps many connections without waiting). Its first waiting I/O settles
 * it: a link that keeps its socket and has no kernel TLS goes "on memory"
 * (link_bio: SSL reads and writes buffers of the link, and SCUDA does the
 * system calls itself, many records at a time and outside the SSL lock);
 * every other link stays on its socket. */
enum link_mode { MODE_UNSETTLED = 0, MODE_SOCKET = 1, MODE_MEM = 2 };

/* Links by fd. Far above the handful of connections one process holds; an
 * fd beyond it cannot carry TLS (tls_attach says so). */
#define MAX_FD 65536

struct tls_link {
    SSL *ssl;
    int fd;
    int timeout_ms; /* each wait of the link's I/O; -1: none */
    atomic_int reported; /* a protocol error was logged: the link is broken */
    int may_use_mem;     /* keeps its socket to the end (not a join's first) */
    atomic_int mode;     /* enum link_mode */
    pthread_mutex_t lock; /* every SSL call, and what its BIO touches */
    /* MODE_MEM only: SSL's BIO is link_bio, over these buffers. */
    int end_errno; /* the socket ended: ECONNRESET on EOF, else recv's errno */
    atomic_uint fed; /* refills of `in` so far: a reader that missed one must not sleep */
    /* Ciphertext received: SSL reads [in_off, in_len) under the lock;
     * pull() alone writes past in_len, under recv_lock, without the lock. */
    char *in;
    size_t in_off, in_len;
    pthread_mutex_t recv_lock;
    /* Ciphertext SSL made (under the lock), handed whole to the writer. */
    char *sealed;
    size_t sealed_len, sealed_cap;
    /* The writer's: ciphertext on its way out, held from encryption to
     * send() so that records leave in the order they were made. */
    pthread_mutex_t send_lock;
    char *out;
    size_t out_cap;
};

struct tls_server {
    SSL_CTX *ctx;
    char fingerprint[TLS_FP_LEN];
};

static struct tls_link *_Atomic links[MAX_FD];

/* ---- errors ---------------------------------------------------------------- */

/* OpenSSL's reason for the last failure on this thread, else `fallback`. */
static void ssl_reason(char *out, size_t outlen, const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    if (e) {
        const char *r = ERR_reason_error_string(e);
        snprintf(out, outlen, "%s", r ? r : fallback);
    } else {
        snprintf(out, outlen, "%s", fallback);
    }
    ERR_clear_error();
}

static int set_err(char *err, size_t errlen, const char *what)
{
    char why[160];
    ssl_reason(why, sizeof why, "unknown TLS error");
    snprintf(err, errlen, "%s: %s", what, why);
    return -1;
}

/* ---- contexts ------------------------------------------------------------- */

static SSL_CTX *new_ctx(const SSL_METHOD *method)
{
    SSL_CTX *ctx = SSL_CTX_new(method);
    if (!ctx) return NULL;
    if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) || !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) ||
        !SSL_CTX_set_ciphersuites(ctx, CIPHER_SUITES)) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    /* No resumption: every connection authenticates afresh, and nothing
     * arrives after the handshake that a join's hand-over would split. */
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    /* A write that stops on a full socket returns what it wrote; the retry
     * may pass the same bytes from where the caller's pointer now is. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* Frames carry their own lengths: a cut connection is an error there
     * already, and EOF reads as EOF rather than an SSL error. */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_TICKET);
    return ctx;
}

static int fingerprint_of(X509 *cert, char out[TLS_FP_LEN])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (!cert || !X509_digest(cert, EVP_sha256(), md, &n) || n != 32) return -1;
    memcpy(out, "sha256:", 7);
    for (unsigned i = 0; i < n; i++) snprintf(out + 7 + 2 * i, 3, "%02x", md[i]);
    return 0;
}

struct tls_server *tls_server_new(const char *cert_file, const char *key_file, char *err, size_t errlen)
{
    struct tls_server *srv = calloc(1, sizeof *srv);
    if (!srv || !(srv->ctx = new_ctx(TLS_server_method()))) {
        set_err(err, errlen, "cannot set up TLS");
        free(srv);
        return NULL;
    }
    char what[600];
    if (SSL_CTX_use_certificate_chain_file(srv->ctx, cert_file) != 1) {
        snprintf(what, sizeof what, "cannot use TLS certificate %s", cert_file);
    } else if (SSL_CTX_use_PrivateKey_file(srv->ctx, key_file, SSL_FILETYPE_PEM) != 1) {
        snprintf(what, sizeof what, "cannot use TLS key %s", key_file);
    } else if (SSL_CTX_check_private_key(srv->ctx) != 1) {
        snprintf(what, sizeof what, "TLS key %s does not belong to certificate %s", key_file, cert_file);
    } else {
        fingerprint_of(SSL_CTX_get0_certificate(srv->ctx), srv->fingerprint);
        return srv;
    }
    set_err(err, errlen, what);
    SSL_CTX_free(srv->ctx);
    free(srv);
    return NULL;
}

const char *tls_server_fingerprint(const struct tls_server *srv) { return srv->fingerprint; }

/* Accept every client certificate during the handshake: whether it
 * verified is read afterwards (tls_peer_user), so that a client with a
 * bad certificate but a good token is still admitted by its token, and
 * one with neither gets the same "bad token" refusal as without TLS. */
static int keep_going(int ok, X509_STORE_CTX *store)
{
    (void)ok;
    (void)store;
    return 1;
}

int tls_server_client_ca(struct tls_server *srv, const char *ca_file, char *err, size_t errlen)
{
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ca_file);
    if (!names || SSL_CTX_load_verify_locations(srv->ctx, ca_file, NULL) != 1) {
        char what[600];
        snprintf(what, sizeof what, "cannot read --tls-client-ca %s", ca_file);
        set_err(err, errlen, what);
        sk_X509_NAME_pop_free(names, X509_NAME_free);
        return -1;
    }
    SSL_CTX_set_client_CA_list(srv->ctx, names); /* the context owns names now */
    SSL_CTX_set_verify(srv->ctx, SSL_VERIFY_PEER, keep_going);
    return 0;
}

void tls_server_free(struct tls_server *srv)
{
    if (!srv) return;
    SSL_CTX_free(srv->ctx);
    free(srv);
}

/* ---- links ---------------------------------------------------------------- */

static struct tls_link *new_link(SSL_CTX *ctx, int fd, int allow_ktls, char *err, size_t errlen)
{
    struct tls_link *l = calloc(1, sizeof *l);
    if (!l || !(l->ssl = SSL_new(ctx)) || !SSL_set_fd(l->ssl, fd)) {
        set_err(err, errlen, "cannot set up TLS");
        if (l && l->ssl) SSL_free(l->ssl);
        free(l);
        return NULL;
    }
#ifdef SSL_OP_ENABLE_KTLS
    if (allow_ktls) SSL_set_options(l->ssl, SSL_OP_ENABLE_KTLS);
#endif
    if (allow_ktls) {
        /* A link that keeps its socket to the end may read ahead: one read
         * then takes many records, where it would otherwise take a 5-byte
         * header and then a body, two system calls per 16 KiB. A join's
         * first session must not: its socket goes on to a second session
         * whose bytes it would swallow. */
        SSL_set_read_ahead(l->ssl, 1);
        SSL_set_default_read_buffer_len(l->ssl, READ_AHEAD_BYTES);
    }
    l->fd = fd;
    l->timeout_ms = -1;
    l->may_use_mem = allow_ktls;
    pthread_mutex_init(&l->lock, NULL);
    pthread_mutex_init(&l->send_lock, NULL);
    pthread_mutex_init(&l->recv_lock, NULL);
    /* The handshake steps on a non-blocking socket like every later call. */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return l;
}

struct tls_link *tls_server_link(const struct tls_server *srv, int fd, int allow_ktls, char *err, size_t errlen)
{
    return new_link(srv->ctx, fd, allow_ktls, err, errlen);
}

struct tls_link *tls_client_link(int fd, const char *ca_file, const char *host, int allow_ktls, char *err,
                                 size_t errlen)
{
    SSL_CTX *ctx = new_ctx(TLS_client_method());
    if (!ctx) {
        set_err(err, errlen, "cannot set up TLS");
        return NULL;
    }
    if (ca_file) {
        if (SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
            char what[600];
            snprintf(what, sizeof what, "cannot read SCUDA_TLS_CA %s", ca_file);
            set_err(err, errlen, what);
            SSL_CTX_free(ctx);
            return NULL;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    }
    struct tls_link *l = new_link(ctx, fd, allow_ktls, err, errlen);
    SSL_CTX_free(ctx); /* the SSL holds its own reference */
    if (!l) return NULL;
    unsigned char ip[16];
    int is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
    if (!is_ip) SSL_set_tlsext_host_name(l->ssl, host);
    if (ca_file) {
        X509_VERIFY_PARAM *vp = SSL_get0_param(l->ssl);
        if (is_ip ? !X509_VERIFY_PARAM_set1_ip_asc(vp, host) : !SSL_set1_host(l->ssl, host)) {
            set_err(err, errlen, "cannot set the name to check");
            tls_link_free(l);
            return NULL;
        }
    }
    return l;
}

void tls_link_free(struct tls_link *l)
{
    if (!l) return;
    /* SSL_free sends nothing: no close_notify reaches the peer, so a
     * connection handed on stays usable by its new owner. */
    SSL_free(l->ssl);
    pthread_mutex_destroy(&l->lock);
    pthread_mutex_destroy(&l->send_lock);
    pthread_mutex_destroy(&l->recv_lock);
    free(l->out);
    free(l->sealed);
    free(l->in);
    free(l);
}

int tls_attach(int fd, struct tls_link *l)
{
    if (fd < 0 || fd >= MAX_FD) {
        errno = EMFILE;
        return -1;
    }
    atomic_store_explicit(&links[fd], l, memory_order_release);
    return 0;
}

struct tls_link *tls_of(int fd)
{
    if (fd < 0 || fd >= MAX_FD) return NULL;
    return atomic_load_explicit(&links[fd], memory_order_acquire);
}

static struct tls_link *detach(int fd)
{
    if (fd < 0 || fd >= MAX_FD) return NULL;
    return atomic_exchange(&links[fd], NULL);
}

void tls_detach_free(int fd) { tls_link_free(detach(fd)); }

/* Abandoned links stay reachable from here: they are not leaks, only
 * memory a forked child must not free. */
static struct tls_link *abandoned[64];
static _Atomic int n_abandoned;

void tls_detach_abandon(int fd)
{
    struct tls_link *l = detach(fd);
    if (!l) return;
    int i = atomic_fetch_add(&n_abandoned, 1);
    if (i < (int)(sizeof abandoned / sizeof abandoned[0])) abandoned[i] = l;
}

/* ---- waiting ------------------------------------------------------------- */

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* poll() for events; 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, int timeout_ms)
{
    int64_t end = timeout_ms >= 0 ? now_ms() + timeout_ms : 0;
    for (;;) {
        int left = timeout_ms < 0 ? -1 : (int)(end - now_ms() > 0 ? end - now_ms() : 0);
        struct pollfd p = {.fd = fd, .events = events};
        int rc = poll(&p, 1, left);
        if (rc < 0 && errno == EINTR) continue;
        return rc;
    }
}

/* Bytes that are not our peer's TLS records end the link: logged once. */
static void report_broken(struct tls_link *l, const char *why)
{
    if (!atomic_exchange(&l->reported, 1)) {
        LOG_WARN("TLS connection closed: %s. The bytes were altered on the way (a relay or a fault on the path), "
                 "or the peer does not speak SCUDA's TLS", why);
    }
}

/* After an SSL call failed with `code`: wait for what it wants, or turn
 * the failure into errno. Returns 0 to try again, -1 to give up. */
static int after_failure(struct tls_link *l, int code, int saved_errno, const char *why, int timeout_ms)
{
    short ev = code == SSL_ERROR_WANT_READ ? POLLIN : code == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
    if (ev) {
        if (timeout_ms == 0) {
            errno = EAGAIN;
            return -1;
        }
        int rc = wait_fd(l->fd, ev, timeout_ms);
        if (rc == 0) errno = ETIMEDOUT;
        return rc > 0 ? 0 : -1;
    }
    /* A link broken by bad records (perhaps found by tls_input_ready)
     * stays broken: OpenSSL then reports later calls as a bare EOF. */
    if (atomic_load(&l->reported) || code == SSL_ERROR_SSL) {
        report_broken(l, why);
        errno = EPROTO;
        return -1;
    }
    if (code == SSL_ERROR_ZERO_RETURN || (code == SSL_ERROR_SYSCALL && saved_errno == 0)) {
        errno = ECONNRESET;
        return -1;
    }
    errno = saved_errno;
    return -1;
}

/* ---- handshakes ----------------------------------------------------------- */

static int handshake_step(struct tls_link *l, int server, char *err, size_t errlen)
{
    pthread_mutex_lock(&l->lock);
    ERR_clear_error();
    errno = 0;
    int rc = server ? SSL_accept(l->ssl) : SSL_connect(l->ssl);
    int code = rc == 1 ? SSL_ERROR_NONE : SSL_get_error(l->ssl, rc);
    int saved = errno;
    char why[160];
    if (code == SSL_ERROR_SSL) ssl_reason(why, sizeof why, "TLS handshake failed");
    pthread_mutex_unlock(&l->lock);
    switch (code) {
    case SSL_ERROR_NONE: return TLS_STEP_DONE;
    case SSL_ERROR_WANT_READ: return TLS_STEP_WANT_READ;
    case SSL_ERROR_WANT_WRITE: return TLS_STEP_WANT_WRITE;
    case SSL_ERROR_SSL: snprintf(err, errlen, "TLS handshake failed: %s", why); break;
    default:
        snprintf(err, errlen, "TLS handshake failed: %s",
                 saved ? strerror(saved) : "the peer closed the connection");
    }
    return TLS_STEP_ERROR;
}

int tls_accept_step(struct tls_link *l, char *err, size_t errlen) { return handshake_step(l, 1, err, errlen); }

static int handshake(struct tls_link *l, int server, int timeout_ms, char *err, size_t errlen)
{
    int64_t end = now_ms() + timeout_ms;
    for (;;) {
        int st = handshake_step(l, server, err, errlen);
        if (st == TLS_STEP_DONE) break;
        if (st == TLS_STEP_ERROR) return -1;
        int64_t left = end - now_ms();
        if (left <= 0 || wait_fd(l->fd, st == TLS_STEP_WANT_READ ? POLLIN : POLLOUT, (int)left) <= 0) {
            snprintf(err, errlen, "no TLS handshake within %d ms", timeout_ms);
            return -1;
        }
    }
    char how[160];
    tls_describe(l, how, sizeof how);
    LOG_DEBUG("TLS: %s", how);
    return 0;
}

int tls_accept(struct tls_link *l, int timeout_ms, char *err, size_t errlen)
{
    return handshake(l, 1, timeout_ms, err, errlen);
}

int tls_connect(struct tls_link *l, int timeout_ms, char *err, size_t errlen)
{
    if (handshake(l, 0, timeout_ms, err, errlen) == 0) return 0;
    long v = SSL_get_verify_result(l->ssl);
    if (v != X509_V_OK) {
        snprintf(err, errlen, "the server's certificate was refused: %s", X509_verify_cert_error_string(v));
    }
    return -1;
}

int tls_client_cert(struct tls_link *l, const char *cert_file, const char *key_file, char *err, size_t errlen)
{
    char what[600];
    if (SSL_use_certificate_chain_file(l->ssl, cert_file) != 1) {
        snprintf(what, sizeof what, "cannot use SCUDA_TLS_CERT %s", cert_file);
    } else if (SSL_use_PrivateKey_file(l->ssl, key_file, SSL_FILETYPE_PEM) != 1) {
        snprintf(what, sizeof what, "cannot use SCUDA_TLS_KEY %s", key_file);
    } else if (SSL_check_private_key(l->ssl) != 1) {
        snprintf(what, sizeof what, "SCUDA_TLS_KEY %s does not belong to SCUDA_TLS_CERT %s", key_file, cert_file);
    } else {
        return 0;
    }
    set_err(err, errlen, what);
    return -1;
}

/* A user name from a certificate goes into logs, quotas and the session's
 * identity: letters, digits and ._@- only, as token names. */
static int safe_user_name(const char *s, size_t len)
{
    if (len == 0) return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && c != '.' && c != '_' && c != '-' && c != '@') return 0;
    }
    return 1;
}

int tls_peer_user(struct tls_link *l, char *out, size_t outlen, char *why, size_t whylen)
{
    X509 *cert = SSL_get1_peer_certificate(l->ssl);
    if (!cert) return 0;
    int rc = -1;
    long v = SSL_get_verify_result(l->ssl);
    X509_NAME *subject = X509_get_subject_name(cert);
    int at = subject ? X509_NAME_get_index_by_NID(subject, NID_commonName, -1) : -1;
    ASN1_STRING *cn = at >= 0 ? X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at)) : NULL;
    const char *name = cn ? (const char *)ASN1_STRING_get0_data(cn) : NULL;
    size_t len = cn ? (size_t)ASN1_STRING_length(cn) : 0;
    if (v != X509_V_OK) {
        snprintf(why, whylen, "its certificate does not verify against --tls-client-ca: %s",
                 X509_verify_cert_error_string(v));
    } else if (!name || !safe_user_name(name, len) || len >= outlen) {
        snprintf(why, whylen, "its certificate's subject CN is not a user name (letters, digits, ._@-, at most "
                              "%zu characters)", outlen - 1);
    } else {
        memcpy(out, name, len);
        out[len] = '\0';
        rc = 1;
    }
    X509_free(cert);
    return rc;
}

int tls_peer_fingerprint(struct tls_link *l, char out[TLS_FP_LEN])
{
    X509 *cert = SSL_get1_peer_certificate(l->ssl);
    int rc = fingerprint_of(cert, out);
    X509_free(cert);
    return rc;
}

int tls_file_fingerprint(const char *cert_file, char out[TLS_FP_LEN], char *err, size_t errlen)
{
    FILE *f = fopen(cert_file, "re");
    if (!f) {
        snprintf(err, errlen, "cannot open %s: %s", cert_file, strerror(errno));
        return -1;
    }
    X509 *cert = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    int rc = fingerprint_of(cert, out);
    X509_free(cert);
    if (rc != 0) snprintf(err, errlen, "%s holds no PEM certificate", cert_file);
    return rc;
}

void tls_describe(struct tls_link *l, char *out, size_t outlen)
{
    int ktx = 0, krx = 0;
#ifdef SSL_OP_ENABLE_KTLS
    ktx = BIO_get_ktls_send(SSL_get_wbio(l->ssl));
    krx = BIO_get_ktls_recv(SSL_get_rbio(l->ssl));
#endif
    snprintf(out, outlen, "%s %s, kernel TLS %s", SSL_get_version(l->ssl), SSL_get_cipher_name(l->ssl),
             ktx && krx ? "send and receive" : ktx ? "send only" : krx ? "receive only" : "off");
}

/* ---- settling a link ------------------------------------------------------- */

static int ktls_active(struct tls_link *l)
{
#ifdef SSL_OP_ENABLE_KTLS
    return BIO_get_ktls_send(SSL_get_wbio(l->ssl)) || BIO_get_ktls_recv(SSL_get_rbio(l->ssl));
#else
    (void)l;
    return 0;
#endif
}

/* The BIO of a link on memory: SSL reads the ciphertext pull() received
 * and writes its records into `sealed`, both only under the link's lock.
 * No copy through an OpenSSL memory BIO, and no system call inside. */
static int link_bio_read(BIO *b, char *buf, size_t n, size_t *got)
{
    struct tls_link *l = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    size_t have = l->in_len - l->in_off;
    *got = 0;
    if (have == 0) {
        if (!l->end_errno) BIO_set_retry_read(b); /* else EOF */
        return 0;
    }
    *got = n < have ? n : have;
    memcpy(buf, l->in + l->in_off, *got);
    l->in_off += *got;
    return 1;
}

static int link_bio_write(BIO *b, const char *buf, size_t n, size_t *put)
{
    struct tls_link *l = BIO_get_data(b);
    if (l->sealed_len + n > l->sealed_cap) {
        size_t cap = (l->sealed_len + n) * 2;
        char *p = realloc(l->sealed, cap);
        if (!p) return 0;
        l->sealed = p;
        l->sealed_cap = cap;
    }
    memcpy(l->sealed + l->sealed_len, buf, n);
    l->sealed_len += n;
    *put = n;
    return 1;
}

static long link_bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)num;
    (void)ptr;
    struct tls_link *l = BIO_get_data(b);
    switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;
    case BIO_CTRL_PENDING: return (long)(l->in_len - l->in_off);
    default: return 0;
    }
}

static BIO_METHOD *link_bio_method;
static pthread_once_t link_bio_once = PTHREAD_ONCE_INIT;

static void link_bio_init(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "scuda link");
    if (m && BIO_meth_set_read_ex(m, link_bio_read) && BIO_meth_set_write_ex(m, link_bio_write) &&
        BIO_meth_set_ctrl(m, link_bio_ctrl)) {
        link_bio_method = m;
    } else {
        BIO_meth_free(m);
    }
}

/* Move a finished link onto its own BIO. Records SSL already read ahead
 * stay in SSL's own buffer, so nothing read during the handshake is lost.
 * Under the lock; 0, or -1 when out of memory (the link stays on its
 * socket, which works, only slower). */
static int to_memory(struct tls_link *l)
{
    pthread_once(&link_bio_once, link_bio_init);
    BIO *b = link_bio_method ? BIO_new(link_bio_method) : NULL;
    char *in = malloc(RECV_BYTES);
    if (!b || !in) {
        BIO_free(b);
        free(in);
        return -1;
    }
    BIO_set_data(b, l);
    BIO_set_init(b, 1);
    SSL_set_bio(l->ssl, b, b); /* one reference, for both directions */
    l->in = in;
    return 0;
}

/* Settle the link's mode on its first waiting I/O: the server's parent
 * only steps links without waiting, so a link never leaves its socket BIO
 * in the parent, and a session forked from it finds an unsettled link. */
static void settle(struct tls_link *l)
{
    if (atomic_load_explicit(&l->mode, memory_order_acquire) != MODE_UNSETTLED) return;
    pthread_mutex_lock(&l->lock);
    if (atomic_load(&l->mode) == MODE_UNSETTLED && SSL_is_init_finished(l->ssl)) {
        int mem = l->may_use_mem && !ktls_active(l) && to_memory(l) == 0;
        atomic_store_explicit(&l->mode, mem ? MODE_MEM : MODE_SOCKET, memory_order_release);
        LOG_DEBUG("TLS on fd %d: %s", l->fd, mem ? "records through SCUDA's buffers" : "records through the socket BIO");
    }
    pthread_mutex_unlock(&l->lock);
}

static int on_memory(struct tls_link *l) { return atomic_load_explicit(&l->mode, memory_order_acquire) == MODE_MEM; }

/* ---- memory BIOs: the system calls ------------------------------------------ */

/* Take what the socket holds now into `in`, never waiting. Returns 1 when
 * something came (bytes, or the socket's end, which SSL then reads as
 * EOF) or SSL has bytes it did not take yet, 0 when nothing is there. */
static int pull(struct tls_link *l)
{
    pthread_mutex_lock(&l->recv_lock);
    pthread_mutex_lock(&l->lock);
    if (l->in_off == l->in_len) {
        l->in_off = l->in_len = 0;
    } else if (l->in_off > 0 && RECV_BYTES - l->in_len < RECV_BYTES / 4) {
        /* Room for a few records: move the part of one left over down. */
        memmove(l->in, l->in + l->in_off, l->in_len - l->in_off);
        l->in_len -= l->in_off;
        l->in_off = 0;
    }
    size_t tail = l->in_len;
    int more = l->end_errno || tail == RECV_BYTES;
    pthread_mutex_unlock(&l->lock);
    if (more) {
        pthread_mutex_unlock(&l->recv_lock);
        return 1;
    }
    ssize_t r;
    do r = recv(l->fd, l->in + tail, RECV_BYTES - tail, MSG_DONTWAIT);
    while (r < 0 && errno == EINTR);
    int e = errno, came = 1;
    pthread_mutex_lock(&l->lock);
    if (r > 0) {
        l->in_len += (size_t)r;
    } else if (r == 0 || (e != EAGAIN && e != EWOULDBLOCK)) {
        l->end_errno = r == 0 ? ECONNRESET : e;
    } else {
        came = 0;
    }
    if (came) atomic_fetch_add(&l->fed, 1);
    pthread_mutex_unlock(&l->lock);
    pthread_mutex_unlock(&l->recv_lock);
    return came;
}

/* Hand the records SSL made to the writer: swap `sealed` with `out`.
 * Under the lock and send_lock. Returns their length. */
static size_t take_sealed(struct tls_link *l)
{
    char *p = l->out;
    size_t cap = l->out_cap, n = l->sealed_len;
    l->out = l->sealed;
    l->out_cap = l->sealed_cap;
    l->sealed = p;
    l->sealed_cap = cap;
    l->sealed_len = 0;
    return n;
}

/* Send n bytes of l->out, each wait for room bounded by the link's
 * timeout. Under send_lock only. */
static int send_out(struct tls_link *l, size_t n)
{
    size_t off = 0;
    while (off < n) {
        ssize_t w = send(l->fd, l->out + off, n - off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        int rc = wait_fd(l->fd, POLLOUT, l->timeout_ms);
        if (rc == 0) errno = ETIMEDOUT;
        if (rc <= 0) return -1;
    }
    return 0;
}

/* ---- I/O -------------------------------------------------------------------- */

/* Set before the link is shared between threads (raw links). */
void tls_set_timeout(struct tls_link *l, int timeout_ms) { l->timeout_ms = timeout_ms; }

/* Read up to n bytes into p under the lock, several records at a time.
 * Returns the count (0 with *code set when nothing could be read); *fed:
 * pull()s as of this read. */
static size_t read_burst(struct tls_link *l, char *p, size_t n, int *code, int *saved, unsigned *fed, char *why,
                         size_t whylen)
{
    size_t got = 0;
    *code = SSL_ERROR_NONE;
    pthread_mutex_lock(&l->lock);
    while (got < n && got < BURST_BYTES) {
        ERR_clear_error();
        errno = 0;
        size_t k = 0;
        if (SSL_read_ex(l->ssl, p + got, n - got, &k)) {
            got += k;
            continue;
        }
        *code = SSL_get_error(l->ssl, 0);
        *saved = errno;
        if (*code == SSL_ERROR_SSL) ssl_reason(why, whylen, "TLS record error");
        /* On memory the socket's end is ours to tell: recv's error, not
         * SSL's idea of errno. */
        if (l->end_errno && (*code == SSL_ERROR_ZERO_RETURN || *code == SSL_ERROR_SYSCALL)) {
            *code = SSL_ERROR_SYSCALL;
            *saved = l->end_errno;
        }
        break;
    }
    *fed = atomic_load(&l->fed);
    pthread_mutex_unlock(&l->lock);
    return got;
}

/* On memory, SSL wants more ciphertext: take it from the socket, waiting
 * at most timeout_ms for it. 0 to read again, -1 with errno. */
static int refill(struct tls_link *l, unsigned fed_before, int timeout_ms)
{
    if (pull(l) || atomic_load(&l->fed) != fed_before) return 0;
    if (timeout_ms == 0) {
        errno = EAGAIN;
        return -1;
    }
    int rc = wait_fd(l->fd, POLLIN, timeout_ms);
    if (rc == 0) errno = ETIMEDOUT;
    return rc > 0 ? 0 : -1;
}

ssize_t tls_read_some(struct tls_link *l, void *buf, size_t cap, int timeout_ms)
{
    if (timeout_ms < 0) timeout_ms = l->timeout_ms;
    if (timeout_ms != 0) settle(l);
    for (;;) {
        int code, saved = 0;
        unsigned fed;
        char why[160] = "";
        size_t got = read_burst(l, buf, cap, &code, &saved, &fed, why, sizeof why);
        if (got > 0) return (ssize_t)got;
        int rc = code == SSL_ERROR_WANT_READ && on_memory(l) ? refill(l, fed, timeout_ms)
                                                             : after_failure(l, code, saved, why, timeout_ms);
        if (rc != 0) return -1;
    }
}

int tls_read_full(struct tls_link *l, void *buf, size_t n, int timeout_ms)
{
    char *p = buf;
    while (n > 0) {
        ssize_t k = tls_read_some(l, p, n, timeout_ms);
        if (k < 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Encrypt up to BURST_BYTES of p into `sealed` and take the records out.
 * Under send_lock. Returns the plaintext bytes taken and the ciphertext's
 * length in *out_n, or -1 with errno. */
static ssize_t seal(struct tls_link *l, const char *p, size_t n, size_t *out_n)
{
    size_t chunk = n < BURST_BYTES ? n : BURST_BYTES;
    pthread_mutex_lock(&l->lock);
    size_t w = 0;
    int ok = 1, code = SSL_ERROR_NONE, saved = 0;
    char why[160] = "";
    /* Partial writes (new_ctx) end each SSL_write at a record: go on to
     * the whole burst, so that it leaves in one send(). */
    while (ok && w < chunk) {
        ERR_clear_error();
        errno = 0;
        size_t k = 0;
        ok = SSL_write_ex(l->ssl, p + w, chunk - w, &k);
        w += ok ? k : 0;
    }
    if (!ok) {
        code = SSL_get_error(l->ssl, 0);
        saved = errno;
        if (code == SSL_ERROR_SSL) ssl_reason(why, sizeof why, "TLS write error");
    }
    /* Also whatever a reader's SSL_read left there (an alert): it goes
     * out in order with ours. */
    *out_n = take_sealed(l);
    pthread_mutex_unlock(&l->lock);
    if (ok) return (ssize_t)w;
    /* A memory BIO never says "wait": any failure ends the link. */
    after_failure(l, code == SSL_ERROR_WANT_WRITE || code == SSL_ERROR_WANT_READ ? SSL_ERROR_SSL : code, saved,
                  why[0] ? why : "TLS write error", 0);
    return -1;
}

/* write_all on memory: encrypt a burst, send it in one system call
 * (or as few as the socket allows), the next. Under send_lock. */
static int mem_write_all(struct tls_link *l, const char *p, size_t n)
{
    while (n > 0) {
        size_t out_n = 0;
        ssize_t w = seal(l, p, n, &out_n);
        if (w < 0 || send_out(l, out_n) != 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* One SSL_write on a socket-BIO link, under its lock: what it wrote, or
 * why not (for after_failure). */
struct sock_write {
    int ok, code, saved_errno;
    size_t written;
    char why[160];
};

static struct sock_write sock_write_once(struct tls_link *l, const void *p, size_t n)
{
    struct sock_write r = {0};
    pthread_mutex_lock(&l->lock);
    ERR_clear_error();
    errno = 0;
    r.ok = SSL_write_ex(l->ssl, p, n, &r.written);
    r.code = r.ok ? SSL_ERROR_NONE : SSL_get_error(l->ssl, 0);
    r.saved_errno = errno;
    if (r.code == SSL_ERROR_SSL) ssl_reason(r.why, sizeof r.why, "TLS write error");
    pthread_mutex_unlock(&l->lock);
    return r;
}

static int sock_write_all(struct tls_link *l, const char *p, size_t n)
{
    while (n > 0) {
        /* The same length for the same remaining bytes: a retry after
         * WANT_WRITE must repeat the call that stopped. */
        size_t chunk = n < BURST_BYTES ? n : BURST_BYTES;
        struct sock_write r = sock_write_once(l, p, chunk);
        if (r.ok) {
            p += r.written;
            n -= r.written;
            continue;
        }
        if (after_failure(l, r.code, r.saved_errno, r.why, l->timeout_ms) != 0) return -1;
    }
    return 0;
}

static int write_all(struct tls_link *l, const char *p, size_t n)
{
    return on_memory(l) ? mem_write_all(l, p, n) : sock_write_all(l, p, n);
}

ssize_t tls_write_some(struct tls_link *l, const void *buf, size_t n)
{
    if (on_memory(l)) {
        /* Records once made must leave: on memory this waits for room
         * like tls_writev. Only a settled link is on memory, and the
         * parent, the one caller that must not wait, never settles one. */
        size_t take = n < BURST_BYTES ? n : BURST_BYTES;
        pthread_mutex_lock(&l->send_lock);
        int rc = mem_write_all(l, buf, take);
        pthread_mutex_unlock(&l->send_lock);
        return rc == 0 ? (ssize_t)take : -1;
    }
    struct sock_write r = sock_write_once(l, buf, n);
    if (r.ok) return (ssize_t)r.written;
    after_failure(l, r.code, r.saved_errno, r.why, 0); /* 0: no wait; sets errno */
    return -1;
}

static int gather_and_write(struct tls_link *l, const struct iovec *iov, int iovcnt)
{
    char gather[GATHER_BYTES];
    size_t have = 0;
    for (int i = 0; i < iovcnt; i++) {
        const char *p = iov[i].iov_base;
        size_t n = iov[i].iov_len;
        if (have + n <= sizeof gather) {
            memcpy(gather + have, p, n);
            have += n;
            continue;
        }
        if (have && write_all(l, gather, have) != 0) return -1;
        have = 0;
        if (n < sizeof gather) {
            memcpy(gather, p, n);
            have = n;
        } else if (write_all(l, p, n) != 0) {
            return -1;
        }
    }
    return have ? write_all(l, gather, have) : 0;
}

int tls_writev(struct tls_link *l, const struct iovec *iov, int iovcnt)
{
    settle(l);
    if (!on_memory(l)) return gather_and_write(l, iov, iovcnt);
    /* One message's records leave together, whoever else writes. */
    pthread_mutex_lock(&l->send_lock);
    int rc = gather_and_write(l, iov, iovcnt);
    pthread_mutex_unlock(&l->send_lock);
    return rc;
}

/* Whether SSL can hand out something now: bytes, EOF or an error. It
 * processes whatever whole records it holds. Under the lock. */
static int ssl_has_input(struct tls_link *l, char *why, size_t whylen, int *broken)
{
    if (SSL_pending(l->ssl) > 0) return 1;
    ERR_clear_error();
    char c;
    size_t k;
    int ok = SSL_peek_ex(l->ssl, &c, 1, &k);
    int code = ok ? SSL_ERROR_NONE : SSL_get_error(l->ssl, 0);
    if (code == SSL_ERROR_SSL) {
        /* Bad records: reported here, as later calls see only an EOF. */
        ssl_reason(why, whylen, "TLS record error");
        *broken = 1;
    }
    ERR_clear_error();
    return ok || code != SSL_ERROR_WANT_READ;
}

int tls_input_ready(struct tls_link *l)
{
    char why[160] = "";
    int broken = 0;
    settle(l);
    pthread_mutex_lock(&l->lock);
    int ready = ssl_has_input(l, why, sizeof why, &broken);
    pthread_mutex_unlock(&l->lock);
    if (!ready && on_memory(l) && pull(l)) {
        /* On memory the socket's bytes are not SSL's until we take them. */
        pthread_mutex_lock(&l->lock);
        ready = ssl_has_input(l, why, sizeof why, &broken);
        pthread_mutex_unlock(&l->lock);
    }
    if (broken) report_broken(l, why);
    return ready;
}

int tls_wait_input(struct tls_link *l, int timeout_ms)
{
    int64_t end = timeout_ms >= 0 ? now_ms() + timeout_ms : 0;
    for (;;) {
        if (tls_input_ready(l)) return 1;
        int left = timeout_ms < 0 ? -1 : (int)(end - now_ms() > 0 ? end - now_ms() : 0);
        int rc = wait_fd(l->fd, POLLIN, left);
        if (rc <= 0) return rc;
        /* Readable may be part of a record only: ask SSL again. */
        if (timeout_ms >= 0 && now_ms() >= end) return tls_input_ready(l);
    }
}

int tls_drained(struct tls_link *l)
{
    pthread_mutex_lock(&l->lock);
    int drained = !SSL_has_pending(l->ssl) && l->in_off == l->in_len;
    pthread_mutex_unlock(&l->lock);
    return drained;
}
