/* token_file.c - see token_file.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "token_file.h"
#include "why.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '@' || c == '-';
}

static int is_blank(char c) { return c == ' ' || c == '\t'; }

/* A token byte: printable, not a space (a space would split the line). */
static int token_char(char c) { return (unsigned char)c > ' ' && (unsigned char)c < 0x7f; }

/* The fields of one line, [s, end): at most two; a third is an error. */
struct fields {
    const char *f[3];
    size_t len[3];
    int n;
};

static void split(const char *s, const char *end, struct fields *out)
{
    out->n = 0;
    while (s < end && out->n < 3) {
        while (s < end && is_blank(*s)) s++;
        if (s == end) break;
        const char *start = s;
        while (s < end && !is_blank(*s)) s++;
        out->f[out->n] = start;
        out->len[out->n] = (size_t)(s - start);
        out->n++;
    }
}

static int add_entry(struct token_set *set, const char *name, size_t nlen, const char *tok, size_t tlen)
{
    struct token_entry *e = realloc(set->entries, (size_t)(set->count + 1) * sizeof *e);
    if (!e) return -1;
    set->entries = e;
    char *t = malloc(tlen + 1);
    if (!t) return -1;
    memcpy(t, tok, tlen);
    t[tlen] = '\0';
    memcpy(e[set->count].name, name, nlen);
    e[set->count].name[nlen] = '\0';
    e[set->count].token = t;
    set->count++;
    return 0;
}

/* Checks one line's fields; returns NULL, or what is wrong with it. */
static const char *check_fields(const struct token_set *set, const struct fields *fl, const char **name,
                                size_t *nlen, const char **tok, size_t *tlen)
{
    if (fl->n > 2) return "more than two fields: expected `NAME TOKEN` or a single TOKEN";
    *name = fl->n == 2 ? fl->f[0] : TOKEN_DEFAULT_USER;
    *nlen = fl->n == 2 ? fl->len[0] : strlen(TOKEN_DEFAULT_USER);
    *tok = fl->f[fl->n - 1];
    *tlen = fl->len[fl->n - 1];
    if (*nlen >= TOKEN_NAME_MAX) return "the name is longer than 63 bytes";
    for (size_t i = 0; i < *nlen; i++)
        if (!name_char((*name)[i])) return "the name may hold only letters, digits and . _ @ -";
    if (*tlen > TOKEN_MAX_LEN) return "the token is longer than 4096 bytes";
    for (size_t i = 0; i < *tlen; i++)
        if (!token_char((*tok)[i])) return "the token holds a control or non-ASCII byte";
    for (int i = 0; i < set->count; i++) {
        if (strlen(set->entries[i].name) == *nlen && memcmp(set->entries[i].name, *name, *nlen) == 0)
            return "the name appears twice (a bare token is user \"default\")";
        if (strlen(set->entries[i].token) == *tlen && memcmp(set->entries[i].token, *tok, *tlen) == 0)
            return "the token appears twice: each user needs a token of their own";
    }
    return NULL;
}

int token_set_parse(const char *text, size_t len, struct token_set *set, char *err, size_t errlen)
{
    memset(set, 0, sizeof *set);
    const char *p = text, *end = text + len;
    for (int line = 1; p < end; line++) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        size_t linelen = (size_t)(eol - p);
        if (linelen > 0 && p[linelen - 1] == '\r') linelen--;
        const char *problem = linelen > 0 && memchr(p, '\0', linelen) ? "a NUL byte" : NULL;
        struct fields fl;
        split(p, p + linelen, &fl);
        if (!problem && fl.n > 0 && fl.f[0][0] != '#') {
            const char *name, *tok;
            size_t nlen, tlen;
            problem = check_fields(set, &fl, &name, &nlen, &tok, &tlen);
            if (!problem && add_entry(set, name, nlen, tok, tlen) != 0) problem = "out of memory";
        }
        if (problem) {
            snprintf(err, errlen, "line %d: %s", line, problem);
            token_set_free(set);
            return -1;
        }
        p = eol + 1;
    }
    if (set->count == 0) return why_fail(err, errlen, "no token in it (only blank or comment lines)");
    return 0;
}

/* The whole file, at most TOKEN_FILE_MAX_BYTES. Returns a malloc'd buffer
 * or NULL with the reason in err. */
static char *read_all(int fd, size_t *len, char *err, size_t errlen)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            snprintf(err, errlen, "out of memory");
            return NULL;
        }
        if (n == cap) {
            if (cap >= TOKEN_FILE_MAX_BYTES) {
                snprintf(err, errlen, "larger than %u bytes", TOKEN_FILE_MAX_BYTES);
                free(buf);
                return NULL;
            }
            char *b = realloc(buf, cap * 2);
            if (!b) free(buf);
            buf = b;
            cap *= 2;
            continue;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            snprintf(err, errlen, "cannot read it: %s", strerror(errno));
            free(buf);
            return NULL;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    *len = n;
    return buf;
}

int token_set_load(const char *path, struct token_set *set, int *shared, char *err, size_t errlen)
{
    memset(set, 0, sizeof *set);
    *shared = 0;
    char why[200];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return why_fail(err, errlen, "token file %s: cannot open it: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) *shared = (st.st_mode & 077) != 0;
    size_t len = 0;
    char *text = read_all(fd, &len, why, sizeof why);
    close(fd);
    if (!text) return why_fail(err, errlen, "token file %s: %s", path, why);
    int rc = token_set_parse(text, len, set, why, sizeof why);
    memset(text, 0, len); /* the secrets do not outlive the parse in a stray buffer */
    free(text);
    if (rc != 0) snprintf(err, errlen, "token file %s: %s", path, why);
    return rc;
}

int token_set_single(struct token_set *set, const char *name, const char *token)
{
    memset(set, 0, sizeof *set);
    size_t nlen = strlen(name);
    if (nlen >= TOKEN_NAME_MAX) nlen = TOKEN_NAME_MAX - 1;
    return add_entry(set, name, nlen, token, strlen(token));
}

const struct token_entry *token_set_find(const struct token_set *set, const char *name)
{
    for (int i = 0; set && i < set->count; i++)
        if (strcmp(set->entries[i].name, name) == 0) return &set->entries[i];
    return NULL;
}

void token_set_free(struct token_set *set)
{
    for (int i = 0; i < set->count; i++) {
        volatile char *t = set->entries[i].token;
        for (size_t k = 0; t[k]; k++) t[k] = 0;
        free(set->entries[i].token);
    }
    free(set->entries);
    memset(set, 0, sizeof *set);
}
