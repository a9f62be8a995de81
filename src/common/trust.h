/* trust.h - whether the client trusts the server it reached: pinned
 * fingerprints (SCUDA_TLS_FINGERPRINT, the known_hosts file) and the
 * messages that say what to check and how to fix it (docs/operate.md, TLS).
 * A CA (SCUDA_TLS_CA) is checked by OpenSSL in the handshake (tls.h). */
#ifndef SCUDA_TRUST_H
#define SCUDA_TRUST_H

#include <stddef.h>

#include "tls.h"

/* Normalize "sha256:AB:CD...", "abcd..." (64 hex digits, any case, colons
 * allowed) to "sha256:abcd...". Returns 0, or -1 when it is not one. */
int trust_parse_fingerprint(const char *in, char out[TLS_FP_LEN]);

/* The known_hosts key of an address: "host:port", "[v6]:port", with the
 * default port filled in. Returns 0, or -1 on a malformed address. */
int trust_host_key(const char *addr, char *out, size_t outlen);

/* The pin for key in the known_hosts file: 1 and fp filled, 0 when there
 * is none (or no file), -1 when the file cannot be read (reason in err). */
int trust_known_lookup(const char *key, char fp[TLS_FP_LEN], char *err, size_t errlen);

/* Pin key to fp in the known_hosts file, replacing its old line; the file
 * is rewritten atomically, mode 0600. Returns 0, or -1 (reason in err). */
int trust_known_pin(const char *key, const char fp[TLS_FP_LEN], char *err, size_t errlen);

/* Whether the server at addr, which presented fp, is the one configured
 * (SCUDA_TLS_FINGERPRINT, else the known_hosts file; callers skip this
 * when SCUDA_TLS_CA did the check). Returns 0, or -1 with the whole
 * message in err: what was presented, what was expected, how to check
 * the fingerprint and how to accept it. */
int trust_check(const char *addr, const char fp[TLS_FP_LEN], char *err, size_t errlen);

#endif
