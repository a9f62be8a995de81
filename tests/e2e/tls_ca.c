/* tls_ca.c - SCUDA_TLS_CA end to end (docs/operate.md, TLS): a server
 * with a certificate for 127.0.0.1 signed by a CA the test makes with the
 * `openssl` command, and clients that trust that CA and nothing else (no
 * fingerprint, no known_hosts):
 *
 *   - a client with SCUDA_TLS_CA=ca.pem works;
 *   - a client with another CA is refused before it sends anything, and
 *     the refusal names the verification failure;
 *   - a certificate of the right CA for another name is refused;
 *   - with --tls-client-ca, a client certificate from that CA stands in for
 *     a token and its subject CN becomes the user; one from another CA, or
 *     none, without a token, is refused as a bad token;
 *   - a client admitted by its certificate alone gets working bulk
 *     connections: a 64 MiB copy each way is striped, byte for byte. */
#define _GNU_SOURCE
#include "harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[512];

/* Run a shell command in dir; fail the test if it fails. */
__attribute__((format(printf, 1, 2))) static void sh(const char *fmt, ...)
{
    char inner[1536], cmd[2200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(inner, sizeof inner, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "cd '%s' && %s >>openssl.log 2>&1", dir, inner);
    CHECK(system(cmd) == 0, "failed (see %s/openssl.log): %s", dir, inner);
}

#define NEW_KEY "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"

/* A self-signed CA: NAME.pem and NAME.key. */
static void make_ca(const char *name)
{
    sh("openssl req -x509 " NEW_KEY " -days 2 -subj /CN=%s -keyout %s.key -out %s.pem", name, name, name);
}

/* NAME.pem and NAME.key: a certificate for the subject alt name san
 * ("IP:..." or "DNS:..."), signed by ca. */
static void make_leaf(const char *name, const char *san, const char *ca)
{
    char ext[700];
    snprintf(ext, sizeof ext, "%s/%s.ext", dir, name);
    FILE *f = fopen(ext, "w");
    CHECK(f && fprintf(f, "subjectAltName=%s\nbasicConstraints=CA:FALSE\n", san) > 0 && fclose(f) == 0, "%s", ext);
    sh("openssl req " NEW_KEY " -subj /CN=%s -keyout %s.key -out %s.csr", name, name, name);
    sh("openssl x509 -req -in %s.csr -days 2 -CA %s.pem -CAkey %s.key -CAcreateserial -extfile %s.ext -out %s.pem",
       name, ca, ca, name, name);
}

static void start_server(struct h_server *srv, const char *tag, const char *leaf, const char *client_ca)
{
    static char cert[2][600], key[2][600];
    static int n;
    int i = n++ % 2;
    snprintf(cert[i], sizeof cert[i], "%s/%s.pem", dir, leaf);
    snprintf(key[i], sizeof key[i], "%s/%s.key", dir, leaf);
    static char ca[600];
    snprintf(ca, sizeof ca, "%s/%s.pem", dir, client_ca ? client_ca : "");
    struct h_server_opts opt = {.token = "t0ken", .tls = 1,
                                .extra_args = {"--tls-cert", cert[i], "--tls-key", key[i],
                                               client_ca ? "--tls-client-ca" : NULL, ca}};
    h_server_start(srv, tag, &opt);
    /* Trust by the CA alone: no pin of any kind. */
    unsetenv("SCUDA_TLS_FINGERPRINT");
}

static void trust_ca(const char *ca)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s.pem", dir, ca);
    setenv("SCUDA_TLS_CA", path, 1);
}

/* ---- clients -------------------------------------------------------------- */

static int working_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    h_copy_round_trip(7);
    return 0;
}

/* Private to the shim (src/client/bulk.c): how many bulk connections are up. */
extern int scuda_client_bulk_streams(void);

#define STRIPED_BYTES (64u << 20)
#define PIECE (1u << 20) /* below the striping threshold: over the main connection */

/* 64 MiB each way, both striped (SCUDA_BULK_STREAMS=4): the bytes that
 * went in are checked in pieces over the main connection, the bytes that
 * came back against what went in. */
static int striping_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    uint8_t *src = malloc(STRIPED_BYTES), *back = malloc(STRIPED_BYTES), *piece = malloc(PIECE);
    CHECK(src && back && piece);
    h_pattern(src, STRIPED_BYTES, 64);
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, STRIPED_BYTES));
    CU(cuMemcpyHtoD_v2(d, src, STRIPED_BYTES));
    CHECK(scuda_client_bulk_streams() == 4, "%d bulk connections after a 64 MiB copy, expected 4",
          scuda_client_bulk_streams());
    for (size_t off = 0; off < STRIPED_BYTES; off += PIECE) {
        CU(cuMemcpyDtoH_v2(piece, d + off, PIECE));
        long at = h_diff(piece, src + off, PIECE);
        CHECK(at < 0, "striped host-to-device copy: byte %zu differs", off + (size_t)at);
    }
    memset(back, 0, STRIPED_BYTES);
    CU(cuMemcpyDtoH_v2(back, d, STRIPED_BYTES));
    long at = h_diff(back, src, STRIPED_BYTES);
    CHECK(at < 0, "striped device-to-host copy: byte %ld differs", at);
    CHECK(scuda_client_bulk_streams() == 4, "striping ended during the copies");
    CU(cuMemFree_v2(d));
    free(src);
    free(back);
    free(piece);
    return 0;
}

static int refused_client(void *arg)
{
    (void)arg;
    CHECK(cuInit(0) == CUDA_ERROR_NO_DEVICE, "cuInit worked, but the server should have been refused");
    return 0;
}

/* Run a refused client; its stderr (malloc'd). */
static char *run_refused(const char *tag)
{
    char path[512];
    int err_fd = h_temp_file(tag, path, sizeof path);
    h_wait_ok(h_spawn(refused_client, NULL, 30, -1, err_fd), 30000, tag);
    close(err_fd);
    return h_read_file(path, NULL);
}

/* The server got no SCUDA hello since it had accepted `accepted_before`
 * clients: no token proof, no session. */
static void check_nothing_sent(const struct h_server *srv, int accepted_before, const char *what)
{
    h_sleep_ms(200);
    CHECK(h_server_log_count(srv, "accepted") == accepted_before && h_server_log_count(srv, "bad token") == 0,
          "%s: the server saw a hello from a client that does not trust it", what);
    /* The client may be gone before the server has read its alert. */
    CHECK(h_wait_log(srv, "TLS handshake failed", 1, 10000) == 1, "%s: the server saw no failed handshake", what);
}

static void use_client_cert(const char *name)
{
    char cert[600], key[600];
    snprintf(cert, sizeof cert, "%s/%s.pem", dir, name);
    snprintf(key, sizeof key, "%s/%s.key", dir, name);
    setenv("SCUDA_TLS_CERT", cert, 1);
    setenv("SCUDA_TLS_KEY", key, 1);
}

static void client_cert_cases(void)
{
    struct h_server srv;
    start_server(&srv, "client-ca", "server", "ca");
    trust_ca("ca");

    /* A certificate from the client CA, no token: the CN is the user. */
    unsetenv("SCUDA_TOKEN");
    use_client_cert("alice");
    h_wait_ok(h_spawn(working_client, NULL, 30, -1, -1), 30000, "a client with a certificate and no token");
    CHECK(h_server_log_count(&srv, "user alice, client build") == 1 && h_server_log_count(&srv, "(user alice)") >= 1,
          "the certificate's CN should be the session's user");
    printf("ok a client certificate from --tls-client-ca authenticates its client as its CN, without a token\n");

    /* Its bulk connections run the same handshake with no token: the
     * certificate must admit them too, or large copies lose striping. */
    setenv("SCUDA_BULK_STREAMS", "4", 1);
    h_wait_ok(h_spawn(striping_client, NULL, 60, -1, -1), 60000, "striped copies of a client with a certificate");
    unsetenv("SCUDA_BULK_STREAMS");
    CHECK(h_server_log_count(&srv, "bulk: 4 connections joined") == 1 && h_server_log_count(&srv, "refused") == 0,
          "the bulk connections of a client admitted by its certificate should join its session");
    printf("ok a client admitted by its certificate alone stripes 64 MiB each way over its bulk connections\n");

    /* A certificate from another CA and no token: refused as a bad token. */
    use_client_cert("mallory");
    char *err = run_refused("mallory");
    CHECK(strstr(err, "bad token"), "a certificate from another CA should not authenticate:\n%s", err);
    free(err);
    CHECK(h_server_log_count(&srv, "client certificate ignored") == 1 && h_server_log_count(&srv, "user mallory") == 0,
          "the server should log why it ignored the certificate");
    printf("ok a client certificate from another CA does not authenticate\n");

    /* No certificate and no token: refused, as ever; a token still works. */
    unsetenv("SCUDA_TLS_CERT");
    unsetenv("SCUDA_TLS_KEY");
    err = run_refused("no-cert");
    CHECK(strstr(err, "bad token"), "%s", err);
    free(err);
    setenv("SCUDA_TOKEN", "t0ken", 1);
    h_wait_ok(h_spawn(working_client, NULL, 30, -1, -1), 30000, "a client with a token and no certificate");
    CHECK(h_server_log_count(&srv, "user default, client build") == 1, "the token's user");
    printf("ok without a certificate: no token is refused, a token works\n");
    h_server_stop(&srv);
    unsetenv("SCUDA_TOKEN");
}

int main(void)
{
    h_begin("tls_ca", 110);
    unsetenv("E2E_TLS");
    snprintf(dir, sizeof dir, "%s/tls_ca.pki", E2E_LOG_DIR);
    h_remove_tree(dir);
    CHECK(mkdir(dir, 0700) == 0, "mkdir %s", dir);
    make_ca("ca");
    make_ca("other-ca");
    make_leaf("server", "IP:127.0.0.1", "ca");
    make_leaf("elsewhere", "DNS:elsewhere.example,IP:10.9.9.9", "ca");
    make_leaf("alice", "DNS:alice.example", "ca");
    make_leaf("mallory", "DNS:mallory.example", "other-ca");

    /* No known_hosts to fall back on. */
    char config[600];
    snprintf(config, sizeof config, "%s/config", dir);
    setenv("XDG_CONFIG_HOME", config, 1);
    setenv("SCUDA_TOKEN", "t0ken", 1);

    struct h_server srv;
    start_server(&srv, "ca", "server", NULL);
    trust_ca("ca");
    h_wait_ok(h_spawn(working_client, NULL, 30, -1, -1), 30000, "a client that trusts the server's CA");
    printf("ok SCUDA_TLS_CA alone (no fingerprint, no known_hosts) trusts a server its CA signed\n");

    trust_ca("other-ca");
    char *err = run_refused("other-ca");
    CHECK(strstr(err, "certificate was refused") && strstr(err, "unable to get local issuer certificate"),
          "the refusal should name the verification failure:\n%s", err);
    free(err);
    check_nothing_sent(&srv, 1, "another CA");
    printf("ok a client with another CA is refused, naming why, and sends nothing\n");
    h_server_stop(&srv);

    struct h_server wrong;
    start_server(&wrong, "ca-elsewhere", "elsewhere", NULL);
    trust_ca("ca");
    err = run_refused("wrong-name");
    CHECK(strstr(err, "certificate was refused") && strstr(err, "IP address mismatch"),
          "the refusal should say the certificate names another address:\n%s", err);
    free(err);
    check_nothing_sent(&wrong, 0, "another name");
    printf("ok a certificate of the right CA for another name is refused\n");
    h_server_stop(&wrong);

    client_cert_cases();
    unsetenv("SCUDA_TLS_CA");
    printf("PASS tls_ca\n");
    return 0;
}
