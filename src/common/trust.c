/* trust.c - see trust.h. */
#define _GNU_SOURCE
#include "trust.h"
#include "why.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

#define LINE_MAX_LEN 1024

int trust_parse_fingerprint(const char *in, char out[TLS_FP_LEN])
{
    if (strncasecmp(in, "sha256:", 7) == 0) in += 7;
    memcpy(out, "sha256:", 7);
    int n = 0;
    for (; *in; in++) {
        if (*in == ':') continue;
        if (!isxdigit((unsigned char)*in) || n == 64) return -1;
        out[7 + n++] = (char)tolower((unsigned char)*in);
    }
    out[7 + n] = '\0';
    return n == 64 ? 0 : -1;
}

int trust_host_key(const char *addr, char *out, size_t outlen)
{
    char host[256];
    int port;
    if (scuda_parse_hostport(addr, host, sizeof host, &port) != 0) return -1;
    int n = snprintf(out, outlen, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

/* Split a known_hosts line into its key and fingerprint; 0, or -1 for a
 * comment, a blank or a malformed line (skipped: like ssh, a bad line
 * never stops the others from working). */
static int parse_line(char *line, char **key, char fp[TLS_FP_LEN])
{
    char *save = NULL;
    char *k = strtok_r(line, " \t\r\n", &save);
    char *f = k ? strtok_r(NULL, " \t\r\n", &save) : NULL;
    if (!k || k[0] == '#' || !f || trust_parse_fingerprint(f, fp) != 0) return -1;
    *key = k;
    return 0;
}

int trust_known_lookup(const char *key, char fp[TLS_FP_LEN], char *err, size_t errlen)
{
    char path[4096];
    if (scuda_known_hosts_path(path, sizeof path) != 0) return 0;
    FILE *f = fopen(path, "re");
    if (!f) {
        if (errno == ENOENT) return 0;
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    char line[LINE_MAX_LEN];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char *k;
        found = parse_line(line, &k, fp) == 0 && strcmp(k, key) == 0;
    }
    fclose(f);
    return found;
}

static int make_dirs(char *path)
{
    for (char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
        *p = '\0';
        int rc = mkdir(path, 0700);
        *p = '/';
        if (rc != 0 && errno != EEXIST) return -1;
    }
    return 0;
}

/* Copy every line of the old file but key's into out. */
static void copy_other_lines(const char *path, const char *key, FILE *out)
{
    FILE *in = fopen(path, "re");
    if (!in) return;
    char line[LINE_MAX_LEN], copy[LINE_MAX_LEN], fp[TLS_FP_LEN];
    while (fgets(line, sizeof line, in)) {
        memcpy(copy, line, sizeof line);
        char *k;
        if (parse_line(copy, &k, fp) == 0 && strcmp(k, key) == 0) continue;
        fputs(line, out);
    }
    fclose(in);
}

int trust_known_pin(const char *key, const char fp[TLS_FP_LEN], char *err, size_t errlen)
{
    char path[4096], tmp[4200];
    if (scuda_known_hosts_path(path, sizeof path) != 0)
        return why_fail(err, errlen, "no home directory for the known_hosts file: set HOME or XDG_CONFIG_HOME");
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    int fd = make_dirs(path) == 0 ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : -1;
    FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!out) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    copy_other_lines(path, key, out);
    fprintf(out, "%s %s\n", key, fp);
    int bad = ferror(out);
    if (fclose(out) != 0 || bad || rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int trust_check(const char *addr, const char fp[TLS_FP_LEN], char *err, size_t errlen)
{
    char want[TLS_FP_LEN], key[300];
    const char *env = scuda_tls_fingerprint();
    if (env) {
        if (trust_parse_fingerprint(env, want) != 0) {
            snprintf(err, errlen, "SCUDA_TLS_FINGERPRINT '%s' is not sha256:HEX (64 hex digits); copy it from the "
                                  "server's log (the \"TLS certificate\" line)", env);
            return -1;
        }
        if (strcmp(want, fp) == 0) return 0;
        snprintf(err, errlen,
                 "the server presented certificate %s, but SCUDA_TLS_FINGERPRINT is %s: refused, nothing was sent. "
                 "Either someone is in between, or the server has a new certificate: compare with the "
                 "fingerprint the server logs at start, and if it is the new one set SCUDA_TLS_FINGERPRINT=%s",
                 fp, want, fp);
        return -1;
    }
    if (trust_host_key(addr, key, sizeof key) != 0) return why_fail(err, errlen, "bad address '%s'", addr);
    char path[4096] = "the known_hosts file";
    scuda_known_hosts_path(path, sizeof path);
    int known = trust_known_lookup(key, want, err, errlen);
    if (known < 0) return -1;
    if (known && strcmp(want, fp) == 0) return 0;
    if (known) {
        snprintf(err, errlen,
                 "the server's certificate CHANGED: %s pins %s, the server presented %s. Refused, nothing was "
                 "sent: someone may be in between. If the server got a new certificate on purpose (check the "
                 "fingerprint it logs at start), replace the pin with `scuda trust %s`",
                 path, want, fp, key);
        return -1;
    }
    snprintf(err, errlen,
             "unknown server: its certificate is %s. Refused, nothing was sent. Check that this is the fingerprint "
             "the server logged at start (\"TLS certificate ... %s\"), then pin it with `scuda trust %s` (or set "
             "SCUDA_TLS_FINGERPRINT=%s, or SCUDA_TLS_CA to the CA that signed it)",
             fp, fp, key, fp);
    return -1;
}
