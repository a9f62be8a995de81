/* config.h - where the client finds its server and token.
 *
 * The server address comes from, in order:
 *   1. a --server flag on the command line
 *   2. env SCUDA_SERVER, a comma-separated list (the shim connects to
 *      every entry, scuda_server_list_entry reading each, and numbers
 *      their devices as one list; the CLI and the NVML shim use the first)
 *   3. the first line of ~/.config/scuda/host, written by `scuda HOST:PORT`
 *
 * Addresses are "host:port", "[ipv6]:port", or "host" (default port). */
#ifndef SCUDA_CONFIG_H
#define SCUDA_CONFIG_H

#include <stddef.h>

/* Relative to the home directory. */
#define SCUDA_HOST_FILE ".config/scuda/host"

/* Resolve the server address into out. Returns 0 and sets *source (if
 * non-NULL) to "--server", "SCUDA_SERVER", or the host file's path; -1 when
 * none is configured; -2 when the configured value does not fit in outlen
 * (*source then names where it came from). The host file's path is kept in
 * a static buffer, valid until the next call: not thread-safe. The address
 * is not validated here; use scuda_parse_hostport. */
int scuda_resolve_server(const char *cli_value, char *out, size_t outlen, const char **source);

/* The number of non-empty entries of a comma-separated server list
 * (SCUDA_SERVER): the servers a shim opens. */
int scuda_server_list_len(const char *list);

/* Entry `index` (from 0) of a comma-separated server list, counting only
 * the entries scuda_server_list_len counts, trimmed, into out. Returns 0;
 * -1 when the list has no such entry; -2 when it does not fit in outlen.
 * Entry 0 is what scuda_resolve_server takes from SCUDA_SERVER. */
int scuda_server_list_entry(const char *list, int index, char *out, size_t outlen);

/* Write addr as the only line of ~/.config/scuda/host (mode 0600), creating
 * the directories. The file is replaced atomically (write then rename), so
 * a reader never sees half an address. Returns 0, or -1 with a message that
 * names the file and the cause in err. */
int scuda_save_server(const char *addr, char *err, size_t errlen);

/* The host file's full path: "$HOME/.config/scuda/host", or the passwd
 * entry's home when HOME is unset. Returns 0, or -1 if no home is known or
 * the path does not fit. */
int scuda_host_file_path(char *out, size_t outlen);

/* Split "host:port", "[v6]:port" or "host" (port SCUDA_DEFAULT_PORT).
 * A bare IPv6 address must be bracketed: "::1:80" is ambiguous. The port
 * must be 0..65535 and the host non-empty, without spaces. host or port may
 * be NULL to only validate. Returns 0, or -1 on a malformed address or a
 * host longer than hostlen - 1. */
int scuda_parse_hostport(const char *s, char *host, size_t hostlen, int *port);

/* The server's module cache directory when --module-cache is not given:
 * "$XDG_CACHE_HOME/scuda/modules" when that variable holds an absolute
 * path (the XDG rule), else "<home>/.cache/scuda/modules". Returns 0, or
 * -1 if no home is known or the path does not fit. */
int scuda_module_cache_default(char *out, size_t outlen);

/* The client's compile cache directory (compile_cache.h): env
 * SCUDA_COMPILE_CACHE, else "$XDG_CACHE_HOME/scuda/compile" or
 * "<home>/.cache/scuda/compile". Returns 1 with the directory in out; 0
 * when the cache is off (SCUDA_COMPILE_CACHE=off or 0, or
 * CUDA_CACHE_DISABLE=1 as for the driver's own cache); -1 when no home is
 * known or the path does not fit. */
int scuda_compile_cache_dir(char *out, size_t outlen);

/* The client's store of function attributes (src/client/attr_store.h):
 * the same rules, with env SCUDA_ATTR_CACHE and the leaf "attributes". */
int scuda_attr_cache_dir(char *out, size_t outlen);

/* The client's token: env SCUDA_TOKEN; when that is unset or empty, the
 * token in the file SCUDA_TOKEN_FILE names (token_file.h: the token alone
 * or `NAME TOKEN`; read once per process, with a warning when others can
 * read the file and an error naming the file when it is unusable). NULL
 * when there is none. */
const char *scuda_token(void);

/* How many extra connections carry large copies (striping,
 * docs/architecture.md, 3.7 Bulk data):
 * env SCUDA_BULK_STREAMS, an integer from 0 to BULK_MAX_STREAMS (16).
 * Unset or empty: SCUDA_BULK_STREAMS_DEFAULT, or over TLS (tls != 0)
 * SCUDA_BULK_STREAMS_TLS_DEFAULT: a sealed stream spends a core on AES-GCM
 * at each end besides the copy, so it takes twice the connections to move
 * as many bytes as plain TCP (measured on loopback: architecture.md, 9.12).
 * 0 or 1 turns striping off (a single extra stream is no faster than the
 * main connection). Returns the count, or -1 when the value is not such an
 * integer (the caller says so and uses the default). */
#define SCUDA_BULK_STREAMS_DEFAULT 4
#define SCUDA_BULK_STREAMS_TLS_DEFAULT 8
int scuda_bulk_streams(int tls);
int scuda_bulk_streams_default(int tls);

/* How long the client tries to resume its session after the main
 * connection broke (docs/architecture.md, 3.11 Resume): env
 * SCUDA_RESUME_WITHIN, seconds from 0 (never: a broken connection fails
 * every call, as before) to 3600. Unset or empty: the default. Returns
 * milliseconds, or -1 when the value is not such a number (the caller
 * says so and uses the default). The server's --resume-within has the
 * same default. */
#define SCUDA_RESUME_WITHIN_DEFAULT_S 30
long scuda_resume_within_ms(void);

/* An environment switch: set, not empty and not "0". */
int scuda_env_on(const char *name);

/* ---- TLS (docs/operate.md, TLS) -------------------------------------------
 *
 * Whether a connection to addr uses TLS: always beyond loopback, unless
 * SCUDA_INSECURE=1 (plain TCP, logged as a warning once per process); on
 * loopback only with SCUDA_TLS=1. Returns 1 for TLS, 0 for plain. */
int scuda_tls_for(const char *addr);

/* How the client authenticates the server, first that is set:
 *   SCUDA_TLS_FINGERPRINT=sha256:HEX  the certificate's SHA-256, pinned;
 *   SCUDA_TLS_CA=FILE                 a chain to these CAs and the name
 *                                     of the address in the certificate;
 *   the known_hosts file              "HOST:PORT sha256:HEX" lines, one per
 *                                     server, written by `scuda trust`.
 * Each returns NULL when unset or empty. */
const char *scuda_tls_fingerprint(void);
const char *scuda_tls_ca(void);
/* SCUDA_TLS_CERT, SCUDA_TLS_KEY: the client certificate and key, or NULL. */
const char *scuda_tls_cert(void);
const char *scuda_tls_key(void);

/* "$XDG_CONFIG_HOME/scuda/known_hosts" when that variable holds an
 * absolute path, else "<home>/.config/scuda/known_hosts". Returns 0, or -1
 * if no home is known or the path does not fit. */
int scuda_known_hosts_path(char *out, size_t outlen);

/* The server's state directory (its generated TLS certificate and key):
 * "$XDG_STATE_HOME/scuda" when that variable holds an absolute path, else
 * "<home>/.local/state/scuda". Returns 0, or -1 as above. */
int scuda_state_dir_default(char *out, size_t outlen);

#endif
