/* tls_cert.c - the server's self-signed certificate (tls.h,
 * tls_self_signed). A server that listens beyond loopback always speaks
 * TLS; when the operator gives no certificate, this one lets it start
 * anyway, and clients pin its fingerprint (trust.h) the way ssh pins a
 * host key. */
#define _GNU_SOURCE
#include "tls.h"
#include "why.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#define VALID_DAYS 3650

static int mkdirs(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
        if (s) *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST) return -1;
        if (!s) return 0;
        *s = '/';
    }
}

static X509 *make_cert(EVP_PKEY *key)
{
    X509 *x = X509_new();
    if (!x) return NULL;
    unsigned char serial[16];
    RAND_bytes(serial, sizeof serial);
    serial[0] &= 0x7f; /* positive */
    BIGNUM *bn = BN_bin2bn(serial, sizeof serial, NULL);
    char host[256] = "scuda";
    gethostname(host, sizeof host - 1);
    char cn[300];
    snprintf(cn, sizeof cn, "scuda server %s", host);
    X509_NAME *name = X509_get_subject_name(x);
    int ok = X509_set_version(x, 2) && bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) &&
             X509_gmtime_adj(X509_getm_notBefore(x), -86400) &&
             X509_gmtime_adj(X509_getm_notAfter(x), 86400L * VALID_DAYS) &&
             X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1, 0) &&
             X509_set_issuer_name(x, name) && X509_set_pubkey(x, key) && X509_sign(x, key, EVP_sha256()) > 0;
    BN_free(bn);
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

/* Write path atomically (a temporary file, then rename) with mode. */
static int write_pem(const char *path, mode_t mode, EVP_PKEY *key, X509 *cert)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return -1;
    }
    int ok = key ? PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) : PEM_write_X509(f, cert);
    if (fclose(f) != 0 || !ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Make the key and the certificate. Returns 0, or -1 with err set. */
static int make_pair(const char *dir, const char *cert_path, const char *key_path, char *err, size_t errlen)
{
    errno = 0;
    EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    X509 *cert = key ? make_cert(key) : NULL;
    /* The key first: a certificate without its key is never left behind. */
    int rc = cert && write_pem(key_path, 0600, key, NULL) == 0 && write_pem(cert_path, 0644, NULL, cert) == 0 ? 0 : -1;
    if (rc != 0) {
        const char *why = errno ? strerror(errno) : ERR_reason_error_string(ERR_get_error());
        snprintf(err, errlen, "cannot make a TLS certificate in %s: %s", dir, why ? why : "OpenSSL failed");
    }
    X509_free(cert);
    EVP_PKEY_free(key);
    return rc;
}

static int have_pair(const char *cert_path, const char *key_path)
{
    return access(cert_path, R_OK) == 0 && access(key_path, R_OK) == 0;
}

int tls_self_signed(const char *dir, char *cert_path, char *key_path, size_t pathlen, int *created, char *err,
                    size_t errlen)
{
    snprintf(cert_path, pathlen, "%s/server-cert.pem", dir);
    snprintf(key_path, pathlen, "%s/server-key.pem", dir);
    *created = 0;
    if (have_pair(cert_path, key_path)) return 0;
    if (mkdirs(dir) != 0) return why_fail(err, errlen, "cannot create %s: %s", dir, strerror(errno));
    /* Servers started at once with one state directory make one pair: the
     * first makes it under the lock, the others then find it. */
    char lock_path[4200];
    snprintf(lock_path, sizeof lock_path, "%s/.lock", dir);
    int lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock < 0 || flock(lock, LOCK_EX) != 0) {
        snprintf(err, errlen, "cannot lock %s: %s", lock_path, strerror(errno));
        if (lock >= 0) close(lock);
        return -1;
    }
    int rc = 0;
    if (!have_pair(cert_path, key_path)) {
        rc = make_pair(dir, cert_path, key_path, err, errlen);
        *created = rc == 0;
    }
    close(lock);
    return rc;
}
