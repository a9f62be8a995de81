/* test_tls_link.c - TLS links (tls.h) over a socketpair, after the
 * handshake: records leave in few system calls (one send() per 16 KiB
 * record is the cost this guards against), both directions at once from
 * two threads stay intact, waits are honest about bytes already taken
 * off the socket, every wait is bounded, the socket's end and altered
 * bytes read as ECONNRESET and EPROTO, and what travels after the
 * handshake is sealed records. */
#define _GNU_SOURCE
#include "common/tls.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"

/* ---- counting the system calls that write one fd ---------------------- */

/* The fd whose writes are counted; -1: none. The test's own definitions
 * of the write calls take precedence over libc's for this program and
 * for OpenSSL's socket BIO alike. */
static atomic_int counted_fd = -1;
static atomic_int writes;

#define NEXT(name, type) ((type)dlsym(RTLD_NEXT, name))

ssize_t write(int fd, const void *buf, size_t n)
{
    if (fd == atomic_load(&counted_fd)) atomic_fetch_add(&writes, 1);
    return NEXT("write", ssize_t (*)(int, const void *, size_t))(fd, buf, n);
}

ssize_t send(int fd, const void *buf, size_t n, int flags)
{
    if (fd == atomic_load(&counted_fd)) atomic_fetch_add(&writes, 1);
    return NEXT("send", ssize_t (*)(int, const void *, size_t, int))(fd, buf, n, flags);
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    if (fd == atomic_load(&counted_fd)) atomic_fetch_add(&writes, 1);
    return NEXT("sendmsg", ssize_t (*)(int, const struct msghdr *, int))(fd, msg, flags);
}

/* ---- a pair of linked ends ------------------------------------------- */

struct pair {
    int cfd, sfd;
    struct tls_link *client, *server;
};

static struct tls_server *srv;

struct accept_arg {
    struct tls_link *l;
    int rc;
    char err[256];
};

static void *accept_thread(void *p)
{
    struct accept_arg *a = p;
    a->rc = tls_accept(a->l, 5000, a->err, sizeof a->err);
    return NULL;
}

static int make_pair(struct pair *p)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return -1;
    int buf = 1 << 20;
    for (int i = 0; i < 2; i++) {
        setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
        setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    }
    p->cfd = sv[0];
    p->sfd = sv[1];
    char err[256];
    p->client = tls_client_link(p->cfd, NULL, "127.0.0.1", 1, err, sizeof err);
    struct accept_arg a = {.l = tls_server_link(srv, p->sfd, 1, err, sizeof err)};
    if (!p->client || !a.l) return -1;
    pthread_t t;
    pthread_create(&t, NULL, accept_thread, &a);
    int rc = tls_connect(p->client, 5000, err, sizeof err);
    pthread_join(t, NULL);
    p->server = a.l;
    if (rc != 0 || a.rc != 0) {
        printf("handshake: %s / %s\n", rc ? err : "ok", a.rc ? a.err : "ok");
        return -1;
    }
    tls_set_timeout(p->client, 10000);
    tls_set_timeout(p->server, 10000);
    return 0;
}

static void free_pair(struct pair *p)
{
    tls_link_free(p->client);
    tls_link_free(p->server);
    close(p->cfd);
    close(p->sfd);
}

/* ---- moving data ---------------------------------------------------- */

static void fill(unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 131 + seed + (i >> 13));
}

struct xfer {
    struct tls_link *l;
    size_t n;
    unsigned seed;
    int ok;
};

/* A 16-byte header and n bytes in one writev, as a frame is sent. */
static void *send_thread(void *p)
{
    struct xfer *x = p;
    unsigned char *b = malloc(x->n), head[16];
    fill(b, x->n, x->seed);
    fill(head, sizeof head, x->seed + 1);
    struct iovec iov[2] = {{head, sizeof head}, {b, x->n}};
    x->ok = tls_writev(x->l, iov, 2) == 0;
    free(b);
    return NULL;
}

static void *recv_thread(void *p)
{
    struct xfer *x = p;
    unsigned char *got = malloc(x->n), *want = malloc(x->n), head[16], whead[16];
    fill(want, x->n, x->seed);
    fill(whead, sizeof whead, x->seed + 1);
    x->ok = tls_read_full(x->l, head, sizeof head, -1) == 0 && tls_read_full(x->l, got, x->n, -1) == 0 &&
            !memcmp(head, whead, sizeof head) && !memcmp(got, want, x->n);
    free(got);
    free(want);
    return NULL;
}

/* 96 KiB (6 records) leave in one system call, not one per record. No
 * one reads meanwhile, and they fit in the socket's buffer: the count is
 * the writer's own, not the reader's pace. */
static void few_system_calls(void)
{
    struct pair p;
    CHECK(make_pair(&p) == 0);
    struct xfer s = {.l = p.client, .n = 96u << 10, .seed = 7}, r = {.l = p.server, .n = 96u << 10, .seed = 7};
    atomic_store(&writes, 0);
    atomic_store(&counted_fd, p.cfd);
    send_thread(&s);
    atomic_store(&counted_fd, -1);
    recv_thread(&r);
    CHECK(s.ok && r.ok);
    printf("96 KiB over TLS: %d write system calls\n", atomic_load(&writes));
    CHECK(atomic_load(&writes) <= 2);
    free_pair(&p);
}

/* Each end sends while it receives, from two threads per end. */
static void both_directions(void)
{
    struct pair p;
    CHECK(make_pair(&p) == 0);
    struct xfer x[4] = {{.l = p.client, .n = 3u << 20, .seed = 1}, {.l = p.server, .n = 3u << 20, .seed = 1},
                        {.l = p.server, .n = 5u << 20, .seed = 2}, {.l = p.client, .n = 5u << 20, .seed = 2}};
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, i % 2 ? recv_thread : send_thread, &x[i]);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++) CHECK(x[i].ok);
    free_pair(&p);
}

static int write_str(struct tls_link *l, const char *s)
{
    struct iovec iov = {(void *)s, strlen(s)};
    return tls_writev(l, &iov, 1);
}

/* Waits see records already taken off the socket; empty means empty. */
static void honest_waits(void)
{
    struct pair p;
    CHECK(make_pair(&p) == 0);
    char buf[64] = "";
    CHECK(tls_input_ready(p.server) == 0);
    errno = 0;
    CHECK(tls_read_some(p.server, buf, sizeof buf, 0) == -1 && errno == EAGAIN);
    errno = 0;
    CHECK(tls_read_some(p.server, buf, sizeof buf, 50) == -1 && errno == ETIMEDOUT);
    CHECK(tls_wait_input(p.server, 50) == 0);

    /* Two records; reading the first takes both off the socket. */
    CHECK(write_str(p.client, "first") == 0);
    CHECK(write_str(p.client, "second") == 0);
    CHECK(tls_wait_input(p.server, 5000) == 1);
    CHECK(tls_read_full(p.server, buf, 5, -1) == 0 && !memcmp(buf, "first", 5));
    char peek;
    CHECK(recv(p.sfd, &peek, 1, MSG_PEEK | MSG_DONTWAIT) == -1); /* the socket is empty */
    CHECK(tls_input_ready(p.server) == 1);
    CHECK(tls_wait_input(p.server, 0) == 1);
    CHECK(tls_drained(p.server) == 0);
    CHECK(tls_read_some(p.server, buf, sizeof buf, 0) == 6 && !memcmp(buf, "second", 6));
    CHECK(tls_input_ready(p.server) == 0);
    CHECK(tls_drained(p.server) == 1);
    free_pair(&p);
}

/* The socket's end reads as ECONNRESET; bytes that are not the peer's
 * records as EPROTO. */
static void ends_and_alterations(void)
{
    struct pair p;
    CHECK(make_pair(&p) == 0);
    char buf[64];
    CHECK(write_str(p.client, "last") == 0);
    shutdown(p.cfd, SHUT_WR);
    CHECK(tls_read_full(p.server, buf, 4, -1) == 0 && !memcmp(buf, "last", 4));
    errno = 0;
    CHECK(tls_read_some(p.server, buf, sizeof buf, -1) == -1 && errno == ECONNRESET);
    CHECK(tls_input_ready(p.server) == 1); /* a read would not wait */
    free_pair(&p);

    CHECK(make_pair(&p) == 0);
    CHECK(write_str(p.client, "fine") == 0);
    CHECK(tls_read_full(p.server, buf, 4, -1) == 0);
    /* An application-data record of 32 bytes no key made. */
    unsigned char forged[5 + 32] = {0x17, 0x03, 0x03, 0x00, 0x20};
    CHECK(send(p.cfd, forged, sizeof forged, 0) == (ssize_t)sizeof forged);
    errno = 0;
    CHECK(tls_read_some(p.server, buf, sizeof buf, -1) == -1 && errno == EPROTO);
    free_pair(&p);
}

/* After the handshake the bytes on the wire are SCUDA's sealed records
 * (tls_records.h), with keys both ends derived from it: a 5-byte write is
 * one record of a 4-byte big-endian length, 5 bytes and a 16-byte tag, not
 * a TLS application-data record (0x17 0x03 0x03). */
static void sealed_on_the_wire(void)
{
    struct pair p;
    CHECK(make_pair(&p) == 0);
    CHECK(write_str(p.client, "hello") == 0);
    unsigned char raw[64];
    ssize_t n = recv(p.sfd, raw, sizeof raw, MSG_PEEK);
    CHECK(n == 4 + 5 + 16);
    CHECK(raw[0] == 0 && raw[1] == 0 && raw[2] == 0 && raw[3] == 5);
    char buf[8];
    CHECK(tls_read_full(p.server, buf, 5, -1) == 0 && !memcmp(buf, "hello", 5));
    CHECK(write_str(p.server, "back") == 0);
    CHECK(tls_read_full(p.client, buf, 4, -1) == 0 && !memcmp(buf, "back", 4));
    char how[200];
    tls_describe(p.client, how, sizeof how);
    CHECK(strstr(how, "records sealed by SCUDA") != NULL);
    printf("after the handshake: %s\n", how);
    free_pair(&p);
}

int main(void)
{
    char dir[] = "/tmp/scuda-tls-link-XXXXXX", cert[512], key[512], err[512];
    int created;
    if (!mkdtemp(dir) || tls_self_signed(dir, cert, key, sizeof cert, &created, err, sizeof err) != 0 ||
        !(srv = tls_server_new(cert, key, err, sizeof err))) {
        printf("FAIL setting up the server's certificate: %s\n", err);
        return 1;
    }
    few_system_calls();
    both_directions();
    honest_waits();
    ends_and_alterations();
    sealed_on_the_wire();
    tls_server_free(srv);
    unlink(cert);
    unlink(key);
    char lock[600];
    snprintf(lock, sizeof lock, "%s/.lock", dir);
    unlink(lock);
    rmdir(dir);
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
