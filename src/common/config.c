/* config.c - server address and token lookup. See config.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "why.h"
#include "protocol.h"
#include "token_file.h"
#include "transport.h"

/* Copy s[0..n) into out without surrounding whitespace. Returns the copied
 * length, or -1 if it does not fit. */
static int copy_trimmed(const char *s, size_t n, char *out, size_t outlen)
{
    while (n > 0 && isspace((unsigned char)s[0])) s++, n--;
    while (n > 0 && isspace((unsigned char)s[n - 1])) n--;
    if (n >= outlen) return -1;
    memcpy(out, s, n);
    out[n] = '\0';
    return (int)n;
}

static const char *home_dir(void)
{
    const char *home = getenv("HOME");
    if (home != NULL && home[0] != '\0') return home;
    /* HOME can be missing under sudo -i, systemd units and cron. */
    struct passwd *pw = getpwuid(getuid());
    return pw != NULL && pw->pw_dir != NULL && pw->pw_dir[0] != '\0' ? pw->pw_dir : NULL;
}

int scuda_host_file_path(char *out, size_t outlen)
{
    const char *home = home_dir();
    if (home == NULL) return -1;
    int n = snprintf(out, outlen, "%s/%s", home, SCUDA_HOST_FILE);
    return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

/* "$XDG_CACHE_HOME/scuda/LEAF" when that variable holds an absolute path
 * (the XDG rule), else "<home>/.cache/scuda/LEAF". */
static int cache_dir_default(const char *leaf, char *out, size_t outlen)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = home_dir();
    int n;
    if (xdg != NULL && xdg[0] == '/')
        n = snprintf(out, outlen, "%s/scuda/%s", xdg, leaf);
    else if (home != NULL)
        n = snprintf(out, outlen, "%s/.cache/scuda/%s", home, leaf);
    else
        return -1;
    return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

int scuda_module_cache_default(char *out, size_t outlen)
{
    return cache_dir_default("modules", out, outlen);
}

/* A client cache: the directory variable env names, "off" or "0" for
 * none, else the default leaf; CUDA_CACHE_DISABLE=1 turns it off as it
 * does the driver's own cache. */
static int client_cache_dir(const char *env, const char *leaf, char *out, size_t outlen)
{
    const char *v = getenv(env);
    if (v != NULL && v[0] != '\0') {
        if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0) return 0;
        int n = snprintf(out, outlen, "%s", v);
        return n < 0 || (size_t)n >= outlen ? -1 : 1;
    }
    if (scuda_env_on("CUDA_CACHE_DISABLE")) return 0;
    return cache_dir_default(leaf, out, outlen) == 0 ? 1 : -1;
}

int scuda_compile_cache_dir(char *out, size_t outlen)
{
    return client_cache_dir("SCUDA_COMPILE_CACHE", "compile", out, outlen);
}

int scuda_attr_cache_dir(char *out, size_t outlen)
{
    return client_cache_dir("SCUDA_ATTR_CACHE", "attributes", out, outlen);
}

int scuda_server_list_entry(const char *list, int index, char *out, size_t outlen)
{
    if (list == NULL || index < 0) return -1;
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma != NULL ? (size_t)(comma - p) : strlen(p);
        int got = copy_trimmed(p, n, out, outlen);
        /* An entry too long to copy still counts, so later indices keep
         * naming the same entries as scuda_server_list_len counts. */
        if (got != 0 && index-- == 0) return got < 0 ? -2 : 0;
        if (comma == NULL) return -1;
        p = comma + 1;
    }
}

/* The first non-empty entry of a comma-separated list. */
static int from_list(const char *list, char *out, size_t outlen) { return scuda_server_list_entry(list, 0, out, outlen); }

int scuda_server_list_len(const char *list)
{
    int n = 0;
    for (const char *p = list; p != NULL && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        for (size_t i = 0; i < len; i++)
            if (!isspace((unsigned char)p[i])) {
                n++;
                break;
            }
        p = comma != NULL ? comma + 1 : NULL;
    }
    return n;
}

/* The first line of the host file that is neither blank nor a # comment. */
static int from_file(const char *path, char *out, size_t outlen)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) return -1;
    char line[1024];
    int rc = -1;
    while (fgets(line, sizeof line, f) != NULL) {
        size_t n = strlen(line);
        if (n == sizeof line - 1 && line[n - 1] != '\n') {
            rc = -2; /* no address is this long */
            break;
        }
        int got = copy_trimmed(line, n, out, outlen);
        if (got < 0) {
            rc = -2;
            break;
        }
        if (got > 0 && out[0] != '#') {
            rc = 0;
            break;
        }
    }
    fclose(f);
    return rc;
}

int scuda_resolve_server(const char *cli_value, char *out, size_t outlen, const char **source)
{
    static char path[4096];
    const char *src_dummy;
    if (source == NULL) source = &src_dummy;

    if (cli_value != NULL && cli_value[0] != '\0') {
        *source = "--server";
        return copy_trimmed(cli_value, strlen(cli_value), out, outlen) < 0 ? -2 : 0;
    }

    const char *env = getenv("SCUDA_SERVER");
    if (env != NULL) {
        int rc = from_list(env, out, outlen);
        if (rc != -1) {
            *source = "SCUDA_SERVER";
            return rc;
        }
        /* Set but empty: treat as unset, like most tools do. */
    }

    if (scuda_host_file_path(path, sizeof path) == 0) {
        int rc = from_file(path, out, outlen);
        if (rc != -1) {
            *source = path;
            return rc;
        }
    }
    *source = NULL;
    return -1;
}

/* ---- saving ----------------------------------------------------------- */

static int fail(char *err, size_t errlen, const char *what, const char *path)
{
    return why_fail(err, errlen, "%s %s: %s", what, path, strerror(errno));
}

/* mkdir -p for the directories between HOME and the file. $HOME itself is
 * never created: a missing home directory is a misconfiguration to report. */
static int make_parents(const char *path, size_t home_len, char *err, size_t errlen)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + home_len + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) return fail(err, errlen, "cannot create directory", dir);
        *p = '/';
    }
    return 0;
}

static int write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

int scuda_save_server(const char *addr, char *err, size_t errlen)
{
    char path[4096], tmp[4200];
    int port;
    if (scuda_parse_hostport(addr, NULL, 0, &port) != 0)
        return why_fail(err, errlen, "'%s' is not a server address: expected HOST:PORT or [IPv6]:PORT",
                        addr != NULL ? addr : "");
    if (port == 0) /* port 0 means "pick one" when listening; no server has it */
        return why_fail(err, errlen, "'%s' has port 0: give the port the server printed", addr);
    const char *home = home_dir();
    if (home == NULL || scuda_host_file_path(path, sizeof path) != 0)
        return why_fail(err, errlen, "cannot find the home directory: set HOME");
    if (make_parents(path, strlen(home), err, errlen) != 0) return -1;

    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    unlink(tmp); /* left over from a crashed save by a process with our pid */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return fail(err, errlen, "cannot create", tmp);

    char line[1100];
    int n = snprintf(line, sizeof line, "%s\n", addr);
    /* fchmod: the umask could have left the file narrower than 0600. */
    if (n < 0 || (size_t)n >= sizeof line || fchmod(fd, 0600) != 0 || write_all(fd, line, (size_t)n) != 0 ||
        fsync(fd) != 0) {
        if (n < 0 || (size_t)n >= sizeof line) errno = ENAMETOOLONG;
        fail(err, errlen, "cannot write", tmp);
        close(fd);
        unlink(tmp);
        return -1;
    }
    if (close(fd) != 0) {
        fail(err, errlen, "cannot write", tmp);
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        fail(err, errlen, "cannot replace", path);
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* ---- parsing ---------------------------------------------------------- */

static int parse_port(const char *s, int *port)
{
    int v = 0;
    if (*s == '\0') return -1;
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9') return -1;
        v = v * 10 + (*s - '0');
        if (v > 65535) return -1;
    }
    if (port != NULL) *port = v;
    return 0;
}

static int valid_host_chars(const char *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)h[i];
        if (isspace(c) || !isprint(c) || c == '[' || c == ']' || c == '/' || c == ',') return 0;
    }
    return 1;
}

int scuda_parse_hostport(const char *s, char *host, size_t hostlen, int *port)
{
    if (s == NULL) return -1;
    const char *h, *rest;
    size_t hn;

    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (close == NULL) return -1;
        h = s + 1;
        hn = (size_t)(close - h);
        rest = close + 1;
        if (hn == 0 || memchr(h, ':', hn) == NULL) return -1; /* brackets are for IPv6 */
    } else {
        const char *colon = strchr(s, ':');
        if (colon != NULL && strchr(colon + 1, ':') != NULL) return -1; /* bare IPv6 */
        h = s;
        hn = colon != NULL ? (size_t)(colon - s) : strlen(s);
        rest = s + hn;
        if (hn == 0) return -1;
    }
    if (!valid_host_chars(h, hn)) return -1;

    int p = SCUDA_DEFAULT_PORT;
    if (*rest == ':') {
        if (parse_port(rest + 1, &p) != 0) return -1;
    } else if (*rest != '\0') {
        return -1;
    }

    if (host != NULL) {
        if (hn >= hostlen) return -1;
        memcpy(host, h, hn);
        host[hn] = '\0';
    }
    if (port != NULL) *port = p;
    return 0;
}

/* SCUDA_TOKEN_FILE, read once: the token does not change under a running
 * process, and its threads (bulk connections) ask for it concurrently. */
static pthread_once_t token_file_once = PTHREAD_ONCE_INIT;
static char *token_from_file;

static void read_token_file_env(void)
{
    const char *path = getenv("SCUDA_TOKEN_FILE");
    if (path == NULL || path[0] == '\0') return;
    struct token_set set;
    int shared = 0;
    char err[512];
    if (token_set_load(path, &set, &shared, err, sizeof err) != 0) {
        LOG_ERROR("SCUDA_TOKEN_FILE: %s; the server will refuse this client. Put your token in it, "
                  "alone or as `NAME TOKEN`", err);
        return;
    }
    if (set.count != 1) {
        LOG_ERROR("SCUDA_TOKEN_FILE: token file %s holds %d tokens; a client's file holds one, "
                  "alone or as `NAME TOKEN`", path, set.count);
    } else {
        token_from_file = strdup(set.entries[0].token);
        if (shared)
            LOG_WARN("token file %s can be read by other users, who could use your token; run: chmod 600 %s",
                     path, path);
    }
    token_set_free(&set);
}

const char *scuda_token(void)
{
    const char *t = getenv("SCUDA_TOKEN");
    if (t != NULL && t[0] != '\0') return t;
    pthread_once(&token_file_once, read_token_file_env);
    return token_from_file;
}

int scuda_bulk_streams_default(int tls) { return tls ? SCUDA_BULK_STREAMS_TLS_DEFAULT : SCUDA_BULK_STREAMS_DEFAULT; }

int scuda_bulk_streams(int tls)
{
    const char *e = getenv("SCUDA_BULK_STREAMS");
    if (e == NULL || e[0] == '\0') return scuda_bulk_streams_default(tls);
    int v = 0;
    for (const char *p = e; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
        if (v > BULK_MAX_STREAMS) return -1;
    }
    return v;
}

long scuda_resume_within_ms(void)
{
    const char *e = getenv("SCUDA_RESUME_WITHIN");
    if (e == NULL || e[0] == '\0') return SCUDA_RESUME_WITHIN_DEFAULT_S * 1000L;
    char *end;
    double s = strtod(e, &end);
    if (*end != '\0' || !(s >= 0) || s > 3600) return -1;
    return (long)(s * 1000);
}

int scuda_env_on(const char *name)
{
    const char *e = getenv(name);
    return e && *e && strcmp(e, "0") != 0;
}

/* ---- TLS -------------------------------------------------------------------- */

int scuda_tls_for(const char *addr)
{
    if (addr_is_loopback(addr)) return scuda_env_on("SCUDA_TLS");
    if (!scuda_env_on("SCUDA_INSECURE")) return 1;
    static atomic_int warned;
    if (!atomic_exchange(&warned, 1)) {
        LOG_WARN("SCUDA_INSECURE=1: plain TCP to %s. Every call, copy and result crosses the network in clear: "
                 "anyone on the path can read them or inject calls into the session. Unset SCUDA_INSECURE to "
                 "use TLS", addr);
    }
    return 0;
}

static const char *env_value(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

const char *scuda_tls_fingerprint(void) { return env_value("SCUDA_TLS_FINGERPRINT"); }
const char *scuda_tls_ca(void) { return env_value("SCUDA_TLS_CA"); }
const char *scuda_tls_cert(void) { return env_value("SCUDA_TLS_CERT"); }
const char *scuda_tls_key(void) { return env_value("SCUDA_TLS_KEY"); }

/* "$XDG_VAR/scuda/leaf" or "<home>/fallback/scuda/leaf". */
static int xdg_path(const char *var, const char *fallback, const char *leaf, char *out, size_t outlen)
{
    const char *xdg = getenv(var);
    const char *home = home_dir();
    int n;
    if (xdg != NULL && xdg[0] == '/')
        n = snprintf(out, outlen, "%s/scuda%s%s", xdg, leaf[0] ? "/" : "", leaf);
    else if (home != NULL)
        n = snprintf(out, outlen, "%s/%s/scuda%s%s", home, fallback, leaf[0] ? "/" : "", leaf);
    else
        return -1;
    return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

int scuda_known_hosts_path(char *out, size_t outlen)
{
    return xdg_path("XDG_CONFIG_HOME", ".config", "known_hosts", out, outlen);
}

int scuda_state_dir_default(char *out, size_t outlen)
{
    return xdg_path("XDG_STATE_HOME", ".local/state", "", out, outlen);
}
