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

struct known_image {
    int used;
    int server;
    int is_library;
    uint64_t len;
    uint8_t digest[AUTH_SHA256_LEN];
    char **names;
    uint32_t n;
};

static struct known_image known[KNOWN_SLOTS];
/* Bytes counted against each server's MODULE_PIN_MAX: they only grow,
 * until the session moves to another server (resume_moves), which keeps
 * nothing yet: then that server's images are forgotten and counted anew. */
static uint64_t counted[SCUDA_MAX_SERVERS];
static unsigned moves_seen[SCUDA_MAX_SERVERS];
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;

static void free_names(char **names, uint32_t n);

/* Under known_lock: forget what a session that moved kept. */
static void follow_moves(int server)
{
    unsigned moves = resume_moves(&servers[server]);
    if (moves == moves_seen[server]) return;
    moves_seen[server] = moves;
    counted[server] = 0;
    for (size_t i = 0; i < KNOWN_SLOTS; i++) {
        if (!known[i].used || known[i].server != server) continue;
        free_names(known[i].names, known[i].n);
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

static void free_names(char **names, uint32_t n)
{
    for (uint32_t i = 0; names && i < n; i++) free(names[i]);
    free(names);
}

static char **copy_names(const struct func_desc *funcs, uint32_t n)
{
    char **names = calloc(n ? n : 1, sizeof *names);
    for (uint32_t i = 0; names && i < n; i++) {
        if (!(names[i] = strdup(funcs[i].name))) {
            free_names(names, i);
            return NULL;
        }
    }
    return names;
}

void module_known_note(int server, const uint8_t digest[AUTH_SHA256_LEN], uint64_t len, int is_library,
                       const struct func_desc *funcs, uint32_t n)
{
    if (server < 0 || server >= SCUDA_MAX_SERVERS) return;
    char **names = copy_names(funcs, n);
    if (!names) return;
    pthread_mutex_lock(&known_lock);
    follow_moves(server);
    struct known_image *k = slot_of(server, digest, is_library);
    int keep = !same(k, server, digest, len, is_library) && len <= MODULE_PIN_MAX &&
               counted[server] <= MODULE_PIN_MAX - len;
    if (keep) {
        counted[server] += len;
        free_names(k->names, k->n);
        *k = (struct known_image){.used = 1, .server = server, .is_library = is_library, .len = len,
                                  .names = names, .n = n};
        memcpy(k->digest, digest, AUTH_SHA256_LEN);
        names = NULL;
    }
    pthread_mutex_unlock(&known_lock);
    free_names(names, n);
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
    while (d && i < k->n && (d[i].name = strdup(k->names[i]))) i++;
    if (d && i < k->n) {
        while (i) free(d[--i].name);
        free(d);
        d = NULL;
    }
    if (d) *n = k->n;
    pthread_mutex_unlock(&known_lock);
    *funcs = d;
    return d != NULL;
}
