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
#include "tls_records.h"

/* TLS 1.3 only, AES-GCM only: every CPU SCUDA runs on has AES
 * instructions. These carry the handshake; the records after it are
 * SCUDA's (tls_records.h). */
#define CIPHER_SUITES "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384"

/* The exporter label both ends derive the record keys with (RFC 8446,
 * 7.5): bound to this handshake's secrets and to SCUDA. */
#define RECORDS_LABEL "EXPORTER-scuda-records"

/* Links by fd. Far above the handful of connections one process holds; an
 * fd beyond it cannot carry TLS (tls_attach says so). */
#define MAX_FD 65536

struct tls_link {
    SSL *ssl; /* the handshake, and the peer's certificate after it */
    int fd;
    int server;
    int keeps_socket;          /* read ahead: no second session follows */
    int timeout_ms;            /* each wait of the link's I/O; -1: none */
    struct rec_link *_Atomic rec; /* the records, once the handshake is done */
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

/* OpenSSL frees its global state in an atexit handler unless told not to.
 * SCUDA's threads (liveness pings, writers, striping helpers) seal records
 * until the process is gone, and exit does not stop them: in the client
 * the application decides when to exit, mid-ping as often as not. The
 * memory goes with the process anyway. */
static void init_without_atexit(void) { OPENSSL_init_ssl(OPENSSL_INIT_NO_ATEXIT, NULL); }

static void init_once(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_without_atexit);
}

static SSL_CTX *new_ctx(const SSL_METHOD *method)
{
    init_once();
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

static struct tls_link *new_link(SSL_CTX *ctx, int fd, int server, int keeps_socket, char *err, size_t errlen)
{
    struct tls_link *l = calloc(1, sizeof *l);
    if (!l || !(l->ssl = SSL_new(ctx)) || !SSL_set_fd(l->ssl, fd)) {
        set_err(err, errlen, "cannot set up TLS");
        if (l && l->ssl) SSL_free(l->ssl);
        free(l);
        return NULL;
    }
    /* No read-ahead in the handshake: SSL must read exactly its own
     * records, since the peer's first sealed record may follow its
     * Finished in the same segment. */
    l->fd = fd;
    l->server = server;
    l->keeps_socket = keeps_socket;
    l->timeout_ms = -1;
    /* The handshake steps on a non-blocking socket like every later call. */
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return l;
}

struct tls_link *tls_server_link(const struct tls_server *srv, int fd, int keeps_socket, char *err, size_t errlen)
{
    return new_link(srv->ctx, fd, 1, keeps_socket, err, errlen);
}

struct tls_link *tls_client_link(int fd, const char *ca_file, const char *host, int keeps_socket, char *err,
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
    struct tls_link *l = new_link(ctx, fd, 0, keeps_socket, err, errlen);
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
    rec_free(atomic_load(&l->rec));
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

/* ---- handshakes ----------------------------------------------------------- */

/* The handshake is done: both ends derive one key and IV base per
 * direction from its secrets, and the records are SCUDA's from here on.
 * Returns 0, or -1 with the reason in err. */
static int start_records(struct tls_link *l, char *err, size_t errlen)
{
    /* client key, server key, client IV, server IV */
    uint8_t km[2 * (REC_KEY_LEN + REC_IV_LEN)];
    struct rec_keys client, server;
    if (SSL_export_keying_material(l->ssl, km, sizeof km, RECORDS_LABEL, strlen(RECORDS_LABEL), NULL, 0, 0) != 1)
        return set_err(err, errlen, "TLS handshake failed: cannot derive the record keys");
    memcpy(client.key, km, REC_KEY_LEN);
    memcpy(server.key, km + REC_KEY_LEN, REC_KEY_LEN);
    memcpy(client.iv, km + 2 * REC_KEY_LEN, REC_IV_LEN);
    memcpy(server.iv, km + 2 * REC_KEY_LEN + REC_IV_LEN, REC_IV_LEN);
    struct rec_link *r = l->server ? rec_new(l->fd, &server, &client, l->keeps_socket)
                                   : rec_new(l->fd, &client, &server, l->keeps_socket);
    OPENSSL_cleanse(km, sizeof km);
    OPENSSL_cleanse(&client, sizeof client);
    OPENSSL_cleanse(&server, sizeof server);
    if (!r) {
        snprintf(err, errlen, "TLS handshake failed: out of memory for the records");
        return -1;
    }
    rec_set_timeout(r, l->timeout_ms);
    atomic_store(&l->rec, r);
    return 0;
}

static int handshake_step(struct tls_link *l, char *err, size_t errlen)
{
    ERR_clear_error();
    errno = 0;
    int rc = l->server ? SSL_accept(l->ssl) : SSL_connect(l->ssl);
    int code = rc == 1 ? SSL_ERROR_NONE : SSL_get_error(l->ssl, rc);
    int saved = errno;
    char why[160];
    if (code == SSL_ERROR_SSL) ssl_reason(why, sizeof why, "TLS handshake failed");
    switch (code) {
    case SSL_ERROR_NONE:
        if (!atomic_load(&l->rec) && start_records(l, err, errlen) != 0) return TLS_STEP_ERROR;
        return TLS_STEP_DONE;
    case SSL_ERROR_WANT_READ: return TLS_STEP_WANT_READ;
    case SSL_ERROR_WANT_WRITE: return TLS_STEP_WANT_WRITE;
    case SSL_ERROR_SSL: snprintf(err, errlen, "TLS handshake failed: %s", why); break;
    default:
        snprintf(err, errlen, "TLS handshake failed: %s",
                 saved ? strerror(saved) : "the peer closed the connection");
    }
    return TLS_STEP_ERROR;
}

int tls_accept_step(struct tls_link *l, char *err, size_t errlen) { return handshake_step(l, err, errlen); }

static int handshake(struct tls_link *l, int timeout_ms, char *err, size_t errlen)
{
    int64_t end = now_ms() + timeout_ms;
    for (;;) {
        int st = handshake_step(l, err, errlen);
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
    return handshake(l, timeout_ms, err, errlen);
}

int tls_connect(struct tls_link *l, int timeout_ms, char *err, size_t errlen)
{
    if (handshake(l, timeout_ms, err, errlen) == 0) return 0;
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
    init_once();
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
    snprintf(out, outlen, "%s %s handshake, records sealed by SCUDA (AES-128-GCM)", SSL_get_version(l->ssl),
             SSL_get_cipher_name(l->ssl));
}

/* ---- I/O: the records (tls_records.c) ----------------------------------------- */

/* The link's records; NULL (errno ENOTCONN) before its handshake ended. */
static struct rec_link *records(struct tls_link *l)
{
    struct rec_link *r = atomic_load(&l->rec);
    if (!r) errno = ENOTCONN;
    return r;
}

/* A call that may wait tells the records this process waits on the link:
 * the server's parent never makes one. */
static struct rec_link *waiting(struct tls_link *l)
{
    struct rec_link *r = records(l);
    if (r) rec_may_wait(r);
    return r;
}

/* Set before the link is shared between threads (raw links). */
void tls_set_timeout(struct tls_link *l, int timeout_ms)
{
    l->timeout_ms = timeout_ms;
    struct rec_link *r = atomic_load(&l->rec);
    if (r) rec_set_timeout(r, timeout_ms);
}

ssize_t tls_read_some(struct tls_link *l, void *buf, size_t cap, int timeout_ms)
{
    struct rec_link *r = timeout_ms != 0 ? waiting(l) : records(l);
    return r ? rec_read_some(r, buf, cap, timeout_ms) : -1;
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

int tls_writev(struct tls_link *l, const struct iovec *iov, int iovcnt)
{
    struct rec_link *r = waiting(l);
    return r ? rec_writev(r, iov, iovcnt) : -1;
}

ssize_t tls_write_some(struct tls_link *l, const void *buf, size_t n)
{
    struct rec_link *r = records(l);
    return r ? rec_write_some(r, buf, n) : -1;
}

int tls_input_ready(struct tls_link *l)
{
    struct rec_link *r = waiting(l);
    return r ? rec_input_ready(r) : 1; /* a read would fail at once */
}

int tls_wait_input(struct tls_link *l, int timeout_ms)
{
    struct rec_link *r = waiting(l);
    return r ? rec_wait_input(r, timeout_ms) : -1;
}

int tls_drained(struct tls_link *l)
{
    struct rec_link *r = atomic_load(&l->rec);
    return r ? rec_drained(r) : 1;
}
