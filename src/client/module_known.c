/* module_known.c - see module_known.h. */
#define _GNU_SOURCE
#include "module_known.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "servers.h"
#include "../common/messages.gen.h"

/* Direct-mapped by digest: bounded, and a newcomer replaces one entry. */
#define KNOWN_SLOTS 4096

/* A function of a kept image: its name, and its parameter layout once a
 * launch of it asked the session (module_known_learn). */
struct known_func {
    char *name;
    uint32_t nparams;
    uint32_t *offset, *size;
    uint32_t param_bytes;
    int layout_known;
    struct kernel_limits limits;
};

struct known_image {
    int used;
    int server;
    int is_library;
    uint64_t len;
    uint8_t digest[AUTH_SHA256_LEN];
    struct known_func *funcs;
    uint32_t n;
};

static struct known_image known[KNOWN_SLOTS];
/* Bytes counted against each server's MODULE_PIN_MAX: they only grow,
 * until the session moves to another server (resume_moves), which keeps
 * nothing yet: then that server's images are forgotten and counted anew. */
static uint64_t counted[SCUDA_MAX_SERVERS];
static unsigned moves_seen[SCUDA_MAX_SERVERS];
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;

static void free_funcs(struct known_func *funcs, uint32_t n);

/* Under known_lock: forget what a session that moved kept. */
static void follow_moves(int server)
{
    unsigned moves = resume_moves(&servers[server]);
    if (moves == moves_seen[server]) return;
    moves_seen[server] = moves;
    counted[server] = 0;
    for (size_t i = 0; i < KNOWN_SLOTS; i++) {
        if (!known[i].used || known[i].server != server) continue;
        free_funcs(known[i].funcs, known[i].n);
        known[i] = (struct known_image){0};
    }
}

static struct known_image *slot_of(int server, const uint8_t digest[AUTH_SHA256_LEN], int is_library)
{
    uint32_t h;
    memcpy(&h, digest, sizeof h); /* a SHA-256 is spread already */
    return &known[(h ^ (uint32_t)server * 31u ^ (uint32_t)is_library) & (KNOWN_SLOTS - 1)];
}

static int same(const struct known_image *k, int server, const uint8_t digest[AUTH_SHA256_LEN], uint64_t len,
                int is_library)
{
    return k->used && k->server == server && k->len == len && k->is_library == is_library &&
           memcmp(k->digest, digest, AUTH_SHA256_LEN) == 0;
}

static void free_funcs(struct known_func *funcs, uint32_t n)
{
    for (uint32_t i = 0; funcs && i < n; i++) {
        free(funcs[i].name);
        free(funcs[i].offset);
        free(funcs[i].size);
    }
    free(funcs);
}

/* A copy of a layout (nparams pairs; at least one element each). */
static int copy_layout(uint32_t n, const uint32_t *offset, const uint32_t *size, uint32_t **o, uint32_t **z)
{
    *o = malloc((n ? n : 1) * sizeof **o);
    *z = malloc((n ? n : 1) * sizeof **z);
    if (!*o || !*z) {
        free(*o);
        free(*z);
        return -1;
    }
    if (n) memcpy(*o, offset, n * sizeof **o), memcpy(*z, size, n * sizeof **z);
    return 0;
}

static struct known_func *copy_names(const struct func_desc *funcs, uint32_t n)
{
    struct known_func *k = calloc(n ? n : 1, sizeof *k);
    for (uint32_t i = 0; k && i < n; i++) {
        if (!(k[i].name = strdup(funcs[i].name))) {
            free_funcs(k, i);
            return NULL;
        }
        k[i].limits = funcs[i].limits;
        if (funcs[i].layout_known &&
            copy_layout(funcs[i].nparams, funcs[i].offset, funcs[i].size, &k[i].offset, &k[i].size) == 0) {
            k[i].nparams = funcs[i].nparams;
            k[i].param_bytes = funcs[i].param_bytes;
            k[i].layout_known = 1;
        }
    }
    return k;
}

/* The application's copy of a kept function: name, and layout if known. */
static int copy_out(const struct known_func *k, struct func_desc *d)
{
    *d = (struct func_desc){.name = strdup(k->name), .limits = k->limits};
    if (!d->name) return -1;
    if (!k->layout_known) return 0;
    if (copy_layout(k->nparams, k->offset, k->size, &d->offset, &d->size) != 0) return 0; /* asked at launch */
    d->nparams = k->nparams;
    d->param_bytes = k->param_bytes;
    d->layout_known = 1;
    return 0;
}

int module_known_note(int server, const uint8_t digest[AUTH_SHA256_LEN], uint64_t len, int is_library,
                       const struct func_desc *funcs, uint32_t n)
{
    if (server < 0 || server >= SCUDA_MAX_SERVERS) return -1;
    struct known_func *names = copy_names(funcs, n);
    if (!names) return -1;
    pthread_mutex_lock(&known_lock);
    follow_moves(server);
    struct known_image *k = slot_of(server, digest, is_library);
    int keep = !same(k, server, digest, len, is_library) && len <= MODULE_PIN_MAX &&
               counted[server] <= MODULE_PIN_MAX - len;
    int kept = keep ? 1 : same(k, server, digest, len, is_library) ? 0 : -1;
    if (keep) {
        counted[server] += len;
        free_funcs(k->funcs, k->n);
        *k = (struct known_image){.used = 1, .server = server, .is_library = is_library, .len = len,
                                  .funcs = names, .n = n};
        memcpy(k->digest, digest, AUTH_SHA256_LEN);
        names = NULL;
    }
    pthread_mutex_unlock(&known_lock);
    free_funcs(names, n);
    return kept;
}

int module_known_get(int server, const uint8_t digest[AUTH_SHA256_LEN], uint64_t len, int is_library,
                     struct func_desc **funcs, uint32_t *n)
{
    if (server < 0 || server >= SCUDA_MAX_SERVERS) return 0;
    pthread_mutex_lock(&known_lock);
    follow_moves(server);
    const struct known_image *k = slot_of(server, digest, is_library);
    int found = same(k, server, digest, len, is_library);
    struct func_desc *d = found ? calloc(k->n ? k->n : 1, sizeof *d) : NULL;
    uint32_t i = 0;
    while (d && i < k->n && copy_out(&k->funcs[i], &d[i]) == 0) i++;
    if (d && i < k->n) {
        while (i--) free(d[i].name), free(d[i].offset), free(d[i].size);
        free(d);
        d = NULL;
    }
    if (d) *n = k->n;
    pthread_mutex_unlock(&known_lock);
    *funcs = d;
    return d != NULL;
}

void module_known_learn(int server, const uint8_t digest[AUTH_SHA256_LEN], uint64_t len, int is_library,
                        uint32_t index, const struct func_desc *d)
{
    if (server < 0 || server >= SCUDA_MAX_SERVERS || !d->layout_known) return;
    uint32_t *offset, *size;
    if (copy_layout(d->nparams, d->offset, d->size, &offset, &size) != 0) return;
    pthread_mutex_lock(&known_lock);
    follow_moves(server);
    struct known_image *k = slot_of(server, digest, is_library);
    struct known_func *f = same(k, server, digest, len, is_library) && index < k->n ? &k->funcs[index] : NULL;
    if (f && !f->layout_known && strcmp(f->name, d->name) == 0) {
        f->offset = offset;
        f->size = size;
        f->nparams = d->nparams;
        f->param_bytes = d->param_bytes;
        f->layout_known = 1;
        offset = size = NULL;
    }
    pthread_mutex_unlock(&known_lock);
    free(offset);
    free(size);
}
