/* migrate_images.h - a migration sends module and library images by
 * their SHA-256 first, and their bytes only where the other server lacks
 * them (docs/architecture.md, 9.17; the module cache, 3.8).
 *
 * Before the items, the exporter sends one MIG_IMAGES_QUERY (data: per
 * image its SHA-256 and its length, 40 bytes) and reads the importer's
 * MIG_IMAGES_HAVE (data: one byte per image, 1 where its module cache
 * has the image for the user the exporter proved). An image the importer
 * has then goes as its digest alone (MIG_MODULE or MIG_LIBRARY with a =
 * 1, c = the length, data = the digest). The importer's cache answers as
 * it answers that user's clients (module_cache.h): only for images that
 * user loaded there before, so the question tells nobody what others
 * loaded; and it keeps the images it receives, for the next move. */
#ifndef SCUDA_SERVER_MIGRATE_IMAGES_H
#define SCUDA_SERVER_MIGRATE_IMAGES_H

#include <stddef.h>
#include <stdint.h>

#include "../common/messages.gen.h"

struct session;

/* Queries one migration may make: one per round of loading ahead
 * (migrate_preload.c), and one at the hold. The importer refuses more. */
#define MIGRATE_IMAGE_QUERIES_MAX 7

/* Exporter: ask which of the images among items[0..n) the importer has,
 * and turn those items into references by digest (their digests stored
 * in *keys, freed by the caller after the items went out). *by_hash and
 * *total count the images. Returns 0, or -1 with why. */
int migrate_images_offer(int fd, struct msg_migrate_item *items, long n, uint32_t *seq, uint8_t **keys,
                         unsigned *by_hash, unsigned *total, char *why, size_t whylen);

/* Importer: answer a MIG_IMAGES_QUERY, keeping the images it has until
 * the items that name them arrive. */
CUresult migrate_images_answer(struct session *s, const struct msg_migrate_item *it, char *why, size_t whylen);

/* Importer: the bytes of an image item (its own, or the cached image its
 * digest names), malloc'd with a NUL after them (the driver reads PTX up
 * to one). Returns CUDA_SUCCESS, or an error with why. */
CUresult migrate_images_take(const struct msg_migrate_item *it, void **image, size_t *len, char *why, size_t whylen);

/* Importer: an image received as bytes was loaded: the cache keeps it. */
void migrate_images_loaded(const struct msg_migrate_item *it, const void *image, size_t len);

/* Importer: images named by digest, and in all, for the log. */
void migrate_images_counts(unsigned *by_hash, unsigned *total);

#endif
