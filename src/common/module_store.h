/* module_store.h - a store of module images on disk, bounded in size: the
 * server's content-addressed module cache (docs/architecture.md, 3.8
 * Modules) and the client's compile cache (compile_cache.h), whose entries
 * are keyed by what was compiled rather than by their own bytes.
 *
 * One file per image, named by the SHA-256 of the image in hex. The caller
 * computes that digest from the bytes themselves: a key is never taken
 * from a client. A file is a 16-byte header ("SCUDAMI1", then the image
 * length as u64 little-endian) followed by the image.
 *
 * Every session is a process of its own, and they all use the directory at
 * once, so:
 *   - a file is written under a temporary name in the same directory and
 *     renamed into place: a reader sees a whole file or none;
 *   - a reader checks the length and the digest before trusting a file,
 *     and deletes one that fails (a crash mid-write, a bad disk, a hand
 *     edit), which is then a miss;
 *   - a hit sets the file's mtime to now; after each write the files used
 *     least recently are deleted until the directory holds at most the
 *     limit. Deleting a file another session is reading is harmless: it
 *     keeps its open descriptor.
 *
 * Which users loaded an image is kept next to it, one empty marker file
 * per user, "<image hex>.<user tag hex>" (module_cache.c asks for an image
 * only on behalf of a user who loaded it: no cache oracle across users).
 * A marker is checked with one lstat, counts MODULE_STORE_MARKER_COST
 * bytes against the limit, is evicted by its own last use like an image,
 * and goes when its image is gone. */
#ifndef SCUDA_SERVER_MODULE_STORE_H
#define SCUDA_SERVER_MODULE_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "protocol.h"

#define MODULE_KEY_LEN 32
/* No image is larger than a frame: every one arrived in one. */
#define MODULE_IMAGE_MAX SCUDA_MAX_FRAME
#define MODULE_STORE_HEADER 16
/* A user's tag: the first bytes of a digest of the user's name. */
#define MODULE_USER_TAG_LEN 8
/* What a marker counts against the store's limit: an inode and a directory entry. */
#define MODULE_STORE_MARKER_COST 512
/* Temporary files older than this belong to a writer that died. */
#define MODULE_STORE_STALE_TMP_S 3600

/* Create dir and its missing parents (mode 0700) and check that a file can
 * be written there. Returns 0, or -1 with the cause in err. */
int module_store_prepare(const char *dir, char *err, size_t errlen);

enum store_result {
    STORE_HIT,     /* *image holds the image */
    STORE_MISS,    /* no file for this key and length */
    STORE_CORRUPT, /* there was one, damaged; it is deleted */
};

/* Read the image with this digest and length into a new buffer of len + 1
 * bytes, the last one NUL (PTX is text). On STORE_CORRUPT, why says what
 * was wrong. */
enum store_result module_store_read(const char *dir, const uint8_t key[MODULE_KEY_LEN], uint64_t len,
                                    void **image, const char **why);

/* Keyed entries: the key names the inputs that made the bytes (a compile's
 * source and options), so it cannot check them. The file is a 16-byte
 * header ("SCUDAKV1", then the length as u64 little-endian), the SHA-256
 * of the bytes, and the bytes; a reader checks all three and deletes a file
 * that fails. Read returns the bytes in a new buffer (*len of them, plus a
 * NUL) and marks the entry used now; at most max_len bytes are read. */
enum store_result module_store_read_keyed(const char *dir, const uint8_t key[MODULE_KEY_LEN], uint64_t max_len,
                                          void **data, uint64_t *len, const char **why);
/* Store len bytes under key. Returns 0, or -1 with errno set. */
int module_store_write_keyed(const char *dir, const uint8_t key[MODULE_KEY_LEN], const void *data, size_t len);

/* Mark the image with this digest used now, if the store has it (a hit
 * served from a session's memory still counts for eviction). */
void module_store_touch(const char *dir, const uint8_t key[MODULE_KEY_LEN]);

/* Store len bytes of image under key, which must be their SHA-256. An
 * entry of that key and size already there stays (marked used). Returns
 * 0, or -1 with errno set. */
int module_store_write(const char *dir, const uint8_t key[MODULE_KEY_LEN], const void *image, size_t len);

/* 1 when the user with this tag has loaded the image with this digest
 * here (its marker exists; its use is then set to now), else 0. */
int module_store_user_has(const char *dir, const uint8_t key[MODULE_KEY_LEN], const uint8_t tag[MODULE_USER_TAG_LEN]);
/* Record that this user loaded the image. Returns 0, or -1 with errno. */
int module_store_user_mark(const char *dir, const uint8_t key[MODULE_KEY_LEN], const uint8_t tag[MODULE_USER_TAG_LEN]);

/* The images the user with this tag loaded here (by their markers), most
 * recently used first: up to max digests into keys. Returns how many, or
 * -1 when the directory cannot be read or memory runs out. */
int module_store_user_images(const char *dir, const uint8_t tag[MODULE_USER_TAG_LEN], uint8_t (*keys)[MODULE_KEY_LEN],
                             int max);

/* An image's file mapped read-only: while it is mapped, its bytes stay
 * readable even if eviction deletes the file. image points at the len
 * bytes after the header; base and size are the mapping's. */
struct store_mapping {
    const uint8_t *image;
    uint64_t len;
    void *base;
    size_t size;
};
/* Map key's image file, its header checked (not yet its digest: see
 * module_store_mapping_check). Returns 0, or -1 when it is missing or
 * malformed. */
int module_store_map(const char *dir, const uint8_t key[MODULE_KEY_LEN], struct store_mapping *m);
/* 1 when the mapped bytes are the image the key names (their SHA-256). */
int module_store_mapping_check(const struct store_mapping *m, const uint8_t key[MODULE_KEY_LEN]);
void module_store_unmap(struct store_mapping *m);

/* Delete the least recently used files until the images in dir take at
 * most limit bytes (headers included), and temporary files left by dead
 * writers. Returns how many images were deleted. */
int module_store_evict(const char *dir, uint64_t limit);

/* The scan for eviction reads every file's size: after each store, it
 * made a framework that stores thousands of small entries (cuDNN's
 * runtime-built kernels, NVRTC's compiles) quadratic. So a process scans
 * at its first store and then after each 1/MODULE_STORE_SCAN_SHARE of the
 * limit it stored: the directory may pass its limit by that much per
 * process between scans. Zero-initialized; thread-safe. */
#define MODULE_STORE_SCAN_SHARE 16
struct store_evict_pace {
    _Atomic uint64_t unscanned; /* bytes stored since the last scan */
    _Atomic int scanned;        /* this process scanned once */
};
/* After a store of `stored` bytes (headers included): module_store_evict
 * when a scan is due, else nothing. Returns how many images went. */
int module_store_evict_paced(const char *dir, uint64_t limit, struct store_evict_pace *pace, uint64_t stored);

/* The eviction rule itself, apart from the directory: sorts files oldest
 * use first and returns how many from the front must go so that the rest
 * total at most limit. */
struct store_file {
    char name[2 * MODULE_KEY_LEN + 1 + 2 * MODULE_USER_TAG_LEN + 1]; /* an image's or a marker's */
    uint64_t size;
    struct timespec used;
};
size_t module_store_pick_victims(struct store_file *files, size_t n, uint64_t limit);

/* key as 64 lowercase hex digits. */
void module_key_hex(const uint8_t key[MODULE_KEY_LEN], char out[2 * MODULE_KEY_LEN + 1]);

#endif
