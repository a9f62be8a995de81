/* module_cache.h - module images a session can load without receiving them
 * again (docs/architecture.md, 3.8 Modules).
 *
 * The client first asks for a load by the image's SHA-256 alone
 * (scuda_module_load_by_hash); the session looks in a table in its own
 * memory, then in the server's disk store (module_store.h). Only on a miss
 * does the client send the bytes (scuda_module_load), and what arrives is
 * kept under the digest computed here, so a client that lies about a
 * digest can only miss: it can never plant bytes under another image's
 * name. Thread-safe: loads run on the session's worker threads.
 *
 * An image is found only for a user who loaded it before on this server
 * (session_identity(), identity.h): to anyone else the answer is "not
 * cached", and the client sends the bytes, which then marks that user.
 * Otherwise the cache would tell any client whether someone else had
 * loaded a given image (a private model's kernels, say). Images are still
 * stored once, whoever loaded them; only the answer is per user. */
#ifndef SCUDA_SERVER_MODULE_CACHE_H
#define SCUDA_SERVER_MODULE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/module_store.h"

/* The session's memory table: at most this many bytes of images, none
 * larger than the second figure (those come from disk every time). */
#define MODULE_MEMORY_MAX (64u << 20)
#define MODULE_MEMORY_ENTRY_MAX (16u << 20)

/* Where the disk store is (NULL: none) and how large it may grow. */
void module_cache_init(const char *dir, uint64_t disk_limit);

/* A copy of the image with this digest and length (len + 1 bytes, the last
 * one NUL), or NULL when this session has to receive it. Free it. */
void *module_cache_get(const uint8_t key[MODULE_KEY_LEN], uint64_t len);

/* An image was loaded from the session's own copy (module_pins.h): a hit
 * in memory, which counts as a use of the image in memory and on disk. */
void module_cache_hit_kept(const uint8_t key[MODULE_KEY_LEN], uint64_t len);

/* The client sent len bytes of an image (counted for the summary). */
void module_cache_received(size_t len);

/* Keep an image the driver just loaded from bytes the client sent. */
void module_cache_put(const void *image, size_t len);
/* The same, giving the digest it computed (which module_pins.h keeps the
 * image under). */
void module_cache_put_key(const void *image, size_t len, uint8_t key[MODULE_KEY_LEN]);

/* The images this session's user loaded here, most recently used first:
 * up to max digests into keys (module_store_user_images). 0 without a
 * disk store; -1 when it cannot be read. */
int module_cache_listing(uint8_t (*keys)[MODULE_KEY_LEN], int max);
/* Map the stored image with this digest (module_store_map); -1 without
 * a disk store or such a file. */
int module_cache_map(const uint8_t key[MODULE_KEY_LEN], struct store_mapping *m);

/* One log line with this session's figures, when it loaded anything. */
void module_cache_log_summary(void);
/* The session's loads on its driver, step by step (srv_module.c): at
 * its end, with the cache's summary. */
void module_load_log_summary(void);

/* Modules this session was served from the cache (memory or disk). */
uint64_t module_cache_hits(void);

#endif
