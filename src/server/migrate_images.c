/* migrate_images.c - see migrate_images.h. Both sides: the exporter's
 * offer, the importer's answer and what it keeps meanwhile. */
#include "migrate_images.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "migrate_state.h"
#include "migrate_switch.h"
#include "module_cache.h"
#include "session.h"
#include "../common/auth.h"
#include "../common/protocol.h"

#define ENTRY (MODULE_KEY_LEN + 8) /* digest, then the length (u64, little-endian) */
#define ANSWER_TIMEOUT_MS 30000

static int is_image(const struct msg_migrate_item *it)
{
    return (it->kind == MIG_MODULE || it->kind == MIG_LIBRARY) && it->data && it->data_len > 0;
}

/* ---- the exporter ------------------------------------------------------------- */

/* Read the importer's answer: n flags. */
static int read_answer(int fd, uint8_t *have, unsigned n, char *why, size_t whylen)
{
    void *payload = NULL;
    struct msg_arena a;
    msg_arena_init(&a);
    struct msg_migrate_item it;
    char err[256] = "";
    int rc = migrate_read_item(fd, ANSWER_TIMEOUT_MS, &payload, &a, &it, err, sizeof err);
    if (rc == 0 && (it.kind != MIG_IMAGES_HAVE || it.data_len != n || !it.data)) rc = -1;
    if (rc == 0) memcpy(have, it.data, n);
    else snprintf(why, whylen, "the other server did not say which module images it has (%s)",
                  err[0] ? err : "it gave up; its log says why");
    free(payload);
    msg_arena_free(&a);
    return rc;
}

int migrate_images_offer(int fd, struct msg_migrate_item *items, long n, uint32_t *seq, uint8_t **keys,
                         unsigned *by_hash, unsigned *total, char *why, size_t whylen)
{
    unsigned count = 0;
    for (long i = 0; i < n; i++) count += is_image(&items[i]);
    *keys = NULL, *by_hash = 0, *total = count;
    /* No images, or more than one frame can name: every image as bytes. */
    if (count == 0 || (uint64_t)count * ENTRY > SCUDA_MAX_FRAME / 2) return 0;
    uint8_t *query = malloc((size_t)count * ENTRY), *have = malloc(count);
    *keys = query;
    if (!query || !have) {
        free(have);
        snprintf(why, whylen, "out of host memory for the images' digests");
        return -1;
    }
    for (long i = 0, j = 0; i < n; i++) {
        if (!is_image(&items[i])) continue;
        auth_sha256_digest(items[i].data, (size_t)items[i].data_len, query + j * ENTRY);
        memcpy(query + j * ENTRY + MODULE_KEY_LEN, &items[i].data_len, 8);
        j++;
    }
    struct msg_migrate_item q = {.kind = MIG_IMAGES_QUERY, .a = count, .data = query,
                                 .data_len = (uint64_t)count * ENTRY};
    int rc = migrate_send_item(fd, &q, (*seq)++);
    if (rc != 0) snprintf(why, whylen, "the connection to the other server failed");
    if (rc == 0) rc = read_answer(fd, have, count, why, whylen);
    for (long i = 0, j = 0; i < n && rc == 0; i++) {
        if (!is_image(&items[i])) continue;
        if (have[j] == 1) {
            items[i].c = items[i].data_len;
            items[i].a = 1;
            items[i].data = query + j * ENTRY;
            items[i].data_len = MODULE_KEY_LEN;
            (*by_hash)++;
        }
        j++;
    }
    free(have);
    return rc;
}

/* ---- the importer --------------------------------------------------------------- */

static struct cached {
    uint8_t key[MODULE_KEY_LEN];
    uint64_t len;
    void *image; /* len + 1 bytes; NULL once taken */
} *cached;
static size_t ncached;
static unsigned named, received, queries;

CUresult migrate_images_answer(struct session *s, const struct msg_migrate_item *it, char *why, size_t whylen)
{
    uint64_t count = it->a;
    /* A query per round of loading ahead, then one for those loaded
     * since, at the hold (migrate_preload.h). */
    if (++queries > MIGRATE_IMAGE_QUERIES_MAX || !it->data || count == 0 || count > SCUDA_MAX_FRAME / ENTRY ||
        it->data_len != count * ENTRY) {
        snprintf(why, whylen, "a malformed query for module images, or one too many");
        return CUDA_ERROR_INVALID_VALUE;
    }
    uint8_t *have = calloc(count, 1);
    struct cached *more = realloc(cached, (ncached + count) * sizeof *cached);
    if (more) cached = more;
    if (!have || !more) {
        free(have);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    const uint8_t *q = it->data;
    for (uint64_t i = 0; i < count; i++) {
        struct cached *c = &cached[ncached];
        memcpy(c->key, q + i * ENTRY, MODULE_KEY_LEN);
        memcpy(&c->len, q + i * ENTRY + MODULE_KEY_LEN, 8);
        if ((c->image = module_cache_get(c->key, c->len))) have[i] = 1, ncached++;
    }
    struct msg_migrate_item answer = {.kind = MIG_IMAGES_HAVE, .data = have, .data_len = count};
    int rc = migrate_send_item(s->fd, &answer, 0);
    free(have);
    if (rc != 0) snprintf(why, whylen, "the exporting server went away");
    return rc == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult migrate_images_take(const struct msg_migrate_item *it, void **image, size_t *len, char *why, size_t whylen)
{
    *image = NULL;
    if (it->a == 0) {
        if (!it->data || it->data_len == 0) {
            snprintf(why, whylen, "image %#llx: no image", (unsigned long long)it->id);
            return CUDA_ERROR_INVALID_IMAGE;
        }
        /* The driver wants an aligned image; the frame's bytes need not be. */
        if (!(*image = malloc((size_t)it->data_len + 1))) return CUDA_ERROR_OUT_OF_MEMORY;
        memcpy(*image, it->data, (size_t)it->data_len);
        ((char *)*image)[it->data_len] = '\0';
        *len = (size_t)it->data_len;
        received++;
        return CUDA_SUCCESS;
    }
    for (size_t i = 0; it->data && it->data_len == MODULE_KEY_LEN && i < ncached; i++) {
        struct cached *c = &cached[i];
        if (!c->image || c->len != it->c || memcmp(c->key, it->data, MODULE_KEY_LEN) != 0) continue;
        *image = c->image, *len = (size_t)c->len; /* module_cache_get ends it with a NUL */
        c->image = NULL;
        named++;
        return CUDA_SUCCESS;
    }
    snprintf(why, whylen, "image %#llx was named by a digest this server did not offer", (unsigned long long)it->id);
    return CUDA_ERROR_INVALID_IMAGE;
}

void migrate_images_loaded(const struct msg_migrate_item *it, const void *image, size_t len)
{
    if (it->a != 0) return;
    module_cache_received(len);
    module_cache_put(image, len);
}

void migrate_images_counts(unsigned *by_hash, unsigned *total)
{
    *by_hash = named;
    *total = named + received;
}
