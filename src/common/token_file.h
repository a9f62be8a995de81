/* token_file.h - named tokens: the server's --token-file and the
 * client's SCUDA_TOKEN_FILE (docs/operate.md, "Admission and tokens").
 *
 * One entry a line: `NAME TOKEN`, or a bare `TOKEN`, which is user
 * "default" (the format of a one-token file before names existed). '#'
 * starts a comment line; blank lines are skipped. A name is 1 to 63
 * bytes of [A-Za-z0-9._@-]; a token is 1 to 4096 bytes without spaces or
 * control bytes. Names and tokens are unique within a file: a proof then
 * names exactly one user. */
#ifndef SCUDA_TOKEN_FILE_H
#define SCUDA_TOKEN_FILE_H

#include <stddef.h>

#define TOKEN_NAME_MAX 64     /* bytes of a name, with its NUL */
#define TOKEN_MAX_LEN 4096    /* bytes of a token */
#define TOKEN_FILE_MAX_BYTES (1u << 20)
#define TOKEN_DEFAULT_USER "default"

struct token_entry {
    char name[TOKEN_NAME_MAX];
    char *token; /* malloc'd, NUL-terminated */
};

struct token_set {
    struct token_entry *entries;
    int count;
};

/* Parse text (len bytes; need not be NUL-terminated) into *set. Returns 0,
 * or -1 with "line N: what is wrong" in err, and *set left empty. */
int token_set_parse(const char *text, size_t len, struct token_set *set, char *err, size_t errlen);

/* Read and parse a file. Returns 0, or -1 with "FILE: ..." or
 * "FILE line N: ..." in err. *shared is set to 1 when the file can be
 * read by its group or by others (the caller warns). */
int token_set_load(const char *path, struct token_set *set, int *shared, char *err, size_t errlen);

/* A set of one entry (SCUDA_TOKEN on the server): user `name`. Returns 0,
 * or -1 when out of memory. */
int token_set_single(struct token_set *set, const char *name, const char *token);

/* The entry named `name`, or NULL. */
const struct token_entry *token_set_find(const struct token_set *set, const char *name);

/* Frees every token (wiped first) and empties the set. */
void token_set_free(struct token_set *set);

#endif
