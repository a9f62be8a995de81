/* module_store.c - module images on disk, by digest. See module_store.h. */
#define _GNU_SOURCE
#include "module_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "auth.h"

static const char MAGIC[8] = {'S', 'C', 'U', 'D', 'A', 'M', 'I', '1'};
static const char KEYED_MAGIC[8] = {'S', 'C', 'U', 'D', 'A', 'K', 'V', '1'};
static const char TMP_PREFIX[] = ".tmp-";

void module_key_hex(const uint8_t key[MODULE_KEY_LEN], char out[2 * MODULE_KEY_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < MODULE_KEY_LEN; i++) {
        out[2 * i] = digits[key[i] >> 4];
        out[2 * i + 1] = digits[key[i] & 15];
    }
    out[2 * MODULE_KEY_LEN] = '\0';
}

static int is_key_name(const char *name)
{
    size_t n = 0;
    for (; name[n]; n++)
        if (!((name[n] >= '0' && name[n] <= '9') || (name[n] >= 'a' && name[n] <= 'f'))) return 0;
    return n == 2 * MODULE_KEY_LEN;
}

static int is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

/* "<image hex>.<tag hex>" */
static int is_marker_name(const char *name)
{
    return strlen(name) == 2 * MODULE_KEY_LEN + 1 + 2 * MODULE_USER_TAG_LEN && name[2 * MODULE_KEY_LEN] == '.' &&
           is_hex(name, 2 * MODULE_KEY_LEN) && is_hex(name + 2 * MODULE_KEY_LEN + 1, 2 * MODULE_USER_TAG_LEN);
}

static int marker_path(const char *dir, const uint8_t key[MODULE_KEY_LEN], const uint8_t tag[MODULE_USER_TAG_LEN],
                       char *out, size_t outlen)
{
    char hex[2 * MODULE_KEY_LEN + 1], thex[2 * MODULE_KEY_LEN + 1];
    module_key_hex(key, hex);
    uint8_t t[MODULE_KEY_LEN] = {0};
    memcpy(t, tag, MODULE_USER_TAG_LEN);
    module_key_hex(t, thex);
    thex[2 * MODULE_USER_TAG_LEN] = '\0';
    int n = snprintf(out, outlen, "%s/%s.%s", dir, hex, thex);
    return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

static int key_path(const char *dir, const uint8_t key[MODULE_KEY_LEN], char *out, size_t outlen)
{
    char hex[2 * MODULE_KEY_LEN + 1];
    module_key_hex(key, hex);
    int n = snprintf(out, outlen, "%s/%s", dir, hex);
    return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

/* ---- preparing the directory ----------------------------------------- */

/* mkdir -p, each new directory 0700: module images can be a user's
 * private code. */
static int make_dirs(const char *dir)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST) return -1;
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int module_store_prepare(const char *dir, char *err, size_t errlen)
{
    const char *step = "cannot create";
    if (make_dirs(dir) == 0) {
        /* Writing is what a store needs; searching alone would pass access(). */
        step = "cannot write to";
        char probe[PATH_MAX];
        snprintf(probe, sizeof probe, "%s/%sprobe-%d", dir, TMP_PREFIX, (int)getpid());
        int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0) {
            int ok = write(fd, MAGIC, sizeof MAGIC) == (ssize_t)sizeof MAGIC;
            int saved = errno;
            close(fd);
            unlink(probe);
            if (ok) return 0;
            errno = saved ? saved : EIO;
        }
    }
    snprintf(err, errlen, "%s %s: %s", step, dir, strerror(errno));
    return -1;
}

/* ---- reading ------------------------------------------------------------ */

static int read_at(int fd, void *buf, size_t n, off_t off)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
        off += r;
    }
    return 0;
}

/* Delete a damaged file, unless another session has just renamed a good
 * one into its place: only the file we read goes. */
static void drop_damaged(const char *path, const struct stat *was)
{
    struct stat now;
    if (lstat(path, &now) == 0 && now.st_dev == was->st_dev && now.st_ino == was->st_ino) unlink(path);
}

/* Checks what can be checked without reading the image. Returns NULL when
 * the file is well-formed, or why not. *stored gets the length it holds. */
static const char *check_header(int fd, const struct stat *st, const char magic[8], uint64_t *stored)
{
    uint8_t head[MODULE_STORE_HEADER];
    if (!S_ISREG(st->st_mode)) return "not a regular file";
    if (st->st_size < MODULE_STORE_HEADER || read_at(fd, head, sizeof head, 0) != 0) return "too short";
    if (memcmp(head, magic, sizeof MAGIC) != 0) return "bad header";
    memcpy(stored, head + 8, 8);
    if (*stored > MODULE_IMAGE_MAX || (uint64_t)st->st_size != MODULE_STORE_HEADER + *stored)
        return "size does not match its header";
    return NULL;
}

/* Read key's file: an image's (keyed 0: want bytes, checked against
 * key) or a keyed entry's (at most max_len bytes, checked against the
 * digest stored before them). */
static enum store_result read_entry(const char *dir, const uint8_t key[MODULE_KEY_LEN], int keyed, uint64_t want,
                                    uint64_t max_len, void **data, uint64_t *len, const char **why)
{
    char path[PATH_MAX];
    *data = NULL;
    *len = 0;
    *why = NULL;
    if (want > MODULE_IMAGE_MAX || key_path(dir, key, path, sizeof path) != 0) return STORE_MISS;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return STORE_MISS;
    struct stat st;
    uint64_t stored = 0, skip = keyed ? MODULE_KEY_LEN : 0, n;
    uint8_t *buf = NULL, expect[MODULE_KEY_LEN], got[MODULE_KEY_LEN];
    if (fstat(fd, &st) != 0) {
        close(fd);
        return STORE_MISS;
    }
    if ((*why = check_header(fd, &st, keyed ? KEYED_MAGIC : MAGIC, &stored)) != NULL) goto damaged;
    if (stored < skip) {
        *why = "too short";
        goto damaged;
    }
    n = stored - skip;
    /* Whole and well-formed, but not what the asker takes (an image's
     * other length under the same digest: the asker is wrong, not the file). */
    if (keyed ? n > max_len : n != want) {
        close(fd);
        return STORE_MISS;
    }
    if (!(buf = malloc(n + 1))) {
        close(fd);
        return STORE_MISS;
    }
    if (keyed && read_at(fd, expect, sizeof expect, MODULE_STORE_HEADER) != 0) {
        *why = "cannot be read";
        goto damaged;
    }
    if (!keyed) memcpy(expect, key, sizeof expect);
    if (read_at(fd, buf, n, MODULE_STORE_HEADER + skip) != 0) {
        *why = "cannot be read";
        goto damaged;
    }
    auth_sha256_digest(buf, n, got);
    if (memcmp(got, expect, sizeof got) != 0) {
        *why = keyed ? "content does not match its digest" : "content does not match its name";
        goto damaged;
    }
    buf[n] = '\0'; /* PTX is text */
    futimens(fd, NULL); /* used now: the last to be evicted */
    close(fd);
    *data = buf;
    *len = n;
    return STORE_HIT;
damaged:
    free(buf);
    close(fd);
    drop_damaged(path, &st);
    return STORE_CORRUPT;
}

enum store_result module_store_read(const char *dir, const uint8_t key[MODULE_KEY_LEN], uint64_t len,
                                    void **image, const char **why)
{
    uint64_t got;
    return read_entry(dir, key, 0, len, len, image, &got, why);
}

enum store_result module_store_read_keyed(const char *dir, const uint8_t key[MODULE_KEY_LEN], uint64_t max_len,
                                          void **data, uint64_t *len, const char **why)
{
    return read_entry(dir, key, 1, 0, max_len, data, len, why);
}

void module_store_touch(const char *dir, const uint8_t key[MODULE_KEY_LEN])
{
    char path[PATH_MAX];
    if (key_path(dir, key, path, sizeof path) == 0) utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW);
}

/* ---- images kept readable (mapped) --------------------------------------- */

int module_store_map(const char *dir, const uint8_t key[MODULE_KEY_LEN], struct store_mapping *m)
{
    char path[PATH_MAX];
    *m = (struct store_mapping){0};
    if (key_path(dir, key, path, sizeof path) != 0) return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return -1;
    struct stat st;
    uint64_t stored = 0;
    void *base = MAP_FAILED;
    if (fstat(fd, &st) == 0 && !check_header(fd, &st, MAGIC, &stored))
        base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd); /* the mapping keeps the file */
    if (base == MAP_FAILED) return -1;
    *m = (struct store_mapping){.image = (const uint8_t *)base + MODULE_STORE_HEADER, .len = stored, .base = base,
                                .size = (size_t)st.st_size};
    return 0;
}

int module_store_mapping_check(const struct store_mapping *m, const uint8_t key[MODULE_KEY_LEN])
{
    uint8_t got[MODULE_KEY_LEN];
    auth_sha256_digest(m->image, (size_t)m->len, got);
    return memcmp(got, key, sizeof got) == 0;
}

void module_store_unmap(struct store_mapping *m)
{
    if (m->base) munmap(m->base, m->size);
    *m = (struct store_mapping){0};
}

/* ---- users' markers ------------------------------------------------------- */

struct listed_image {
    uint8_t key[MODULE_KEY_LEN];
    struct timespec used;
};

static int newer_first(const void *a, const void *b)
{
    const struct timespec *x = &((const struct listed_image *)a)->used, *y = &((const struct listed_image *)b)->used;
    if (x->tv_sec != y->tv_sec) return x->tv_sec > y->tv_sec ? -1 : 1;
    return x->tv_nsec > y->tv_nsec ? -1 : x->tv_nsec < y->tv_nsec;
}

/* The image digest a marker of this user (tag in hex) names, into key. */
static int marker_of(const char *name, const char *thex, uint8_t key[MODULE_KEY_LEN])
{
    if (!is_marker_name(name) || memcmp(name + 2 * MODULE_KEY_LEN + 1, thex, 2 * MODULE_USER_TAG_LEN) != 0) return 0;
    for (int i = 0; i < MODULE_KEY_LEN; i++) {
        unsigned v;
        if (sscanf(name + 2 * i, "%2x", &v) != 1) return 0;
        key[i] = (uint8_t)v;
    }
    return 1;
}

int module_store_user_images(const char *dir, const uint8_t tag[MODULE_USER_TAG_LEN], uint8_t (*keys)[MODULE_KEY_LEN],
                             int max)
{
    uint8_t t[MODULE_KEY_LEN] = {0};
    char thex[2 * MODULE_KEY_LEN + 1];
    memcpy(t, tag, MODULE_USER_TAG_LEN);
    module_key_hex(t, thex);
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct listed_image *found = NULL;
    size_t n = 0, cap = 0;
    int ok = 1;
    for (struct dirent *e; ok && (e = readdir(d)) != NULL;) {
        struct listed_image li;
        struct stat st;
        if (!marker_of(e->d_name, thex, li.key) || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode))
            continue;
        li.used = st.st_mtim;
        if (n == cap) {
            size_t c = cap ? cap * 2 : 256;
            struct listed_image *f = realloc(found, c * sizeof *f);
            if (!(ok = f != NULL)) break;
            found = f;
            cap = c;
        }
        found[n++] = li;
    }
    closedir(d);
    if (ok && n > 0) qsort(found, n, sizeof *found, newer_first);
    int count = 0;
    for (size_t i = 0; ok && i < n && count < max; i++) memcpy(keys[count++], found[i].key, MODULE_KEY_LEN);
    free(found);
    return ok ? count : -1;
}

int module_store_user_has(const char *dir, const uint8_t key[MODULE_KEY_LEN], const uint8_t tag[MODULE_USER_TAG_LEN])
{
    char path[PATH_MAX];
    struct stat st;
    if (marker_path(dir, key, tag, path, sizeof path) != 0 || lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW); /* used now: the last to be evicted */
    return 1;
}

int module_store_user_mark(const char *dir, const uint8_t key[MODULE_KEY_LEN], const uint8_t tag[MODULE_USER_TAG_LEN])
{
    char path[PATH_MAX];
    if (marker_path(dir, key, tag, path, sizeof path) != 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    futimens(fd, NULL); /* an existing marker: used now */
    close(fd);
    return 0;
}

/* ---- writing ------------------------------------------------------------ */

static int write_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* Write a header (magic, the length of what follows) and the iov's bytes
 * to a new file under a temporary name, then rename it to key's name. */
static int write_entry(const char *dir, const uint8_t key[MODULE_KEY_LEN], const char magic[8], struct iovec *iov,
                       int n)
{
    static _Atomic unsigned counter;
    char path[PATH_MAX], tmp[PATH_MAX];
    uint64_t body = 0;
    for (int i = 1; i < n; i++) body += iov[i].iov_len;
    if (body > MODULE_IMAGE_MAX || key_path(dir, key, path, sizeof path) != 0) {
        errno = EINVAL;
        return -1;
    }
    /* A name no other writer uses: sessions are processes, threads share a pid. */
    snprintf(tmp, sizeof tmp, "%s/%s%d-%u", dir, TMP_PREFIX, (int)getpid(), atomic_fetch_add(&counter, 1));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    uint8_t *head = iov[0].iov_base;
    memcpy(head, magic, sizeof MAGIC);
    memcpy(head + 8, &body, 8);
    /* No fsync: a file cut short by a crash fails its check on read and is
     * deleted, which costs one more transfer, not a wrong module. */
    int rc = write_all(fd, iov, n);
    int saved = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        saved = errno;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = -1;
        saved = errno;
    }
    if (rc != 0) {
        unlink(tmp);
        errno = saved;
    }
    return rc;
}

/* An image entry of this key and size is there already: the name is the
 * image's SHA-256, so its bytes are these (a damaged copy fails its check
 * when read, and is deleted then). Marked used now, as a write would. */
static int image_entry_there(const char *dir, const uint8_t key[MODULE_KEY_LEN], size_t len)
{
    char path[PATH_MAX];
    struct stat st;
    if (key_path(dir, key, path, sizeof path) != 0 || lstat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
        (uint64_t)st.st_size != (uint64_t)len + MODULE_STORE_HEADER)
        return 0;
    return utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW) == 0;
}

int module_store_write(const char *dir, const uint8_t key[MODULE_KEY_LEN], const void *image, size_t len)
{
    uint8_t head[MODULE_STORE_HEADER];
    if (len > MODULE_IMAGE_MAX) {
        errno = EINVAL;
        return -1;
    }
    /* Clients send the bytes of images new to their session, which the
     * cache often holds from an earlier one: no second write. */
    if (image_entry_there(dir, key, len)) return 0;
    struct iovec iov[2] = {{head, sizeof head}, {(void *)image, len}};
    return write_entry(dir, key, MAGIC, iov, 2);
}

int module_store_write_keyed(const char *dir, const uint8_t key[MODULE_KEY_LEN], const void *data, size_t len)
{
    uint8_t head[MODULE_STORE_HEADER], digest[MODULE_KEY_LEN];
    if (len > MODULE_IMAGE_MAX - MODULE_KEY_LEN) {
        errno = EINVAL;
        return -1;
    }
    auth_sha256_digest(data, len, digest);
    struct iovec iov[3] = {{head, sizeof head}, {digest, sizeof digest}, {(void *)data, len}};
    return write_entry(dir, key, KEYED_MAGIC, iov, 3);
}

/* ---- eviction ----------------------------------------------------------- */

static int older(const void *a, const void *b)
{
    const struct store_file *x = a, *y = b;
    if (x->used.tv_sec != y->used.tv_sec) return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
    if (x->used.tv_nsec != y->used.tv_nsec) return x->used.tv_nsec < y->used.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name); /* a stable order for equal times */
}

size_t module_store_pick_victims(struct store_file *files, size_t n, uint64_t limit)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) total += files[i].size;
    if (total <= limit) return 0;
    qsort(files, n, sizeof *files, older);
    size_t k = 0;
    while (k < n && total > limit) total -= files[k++].size;
    return k;
}

/* Add one entry of the directory to the list, or delete it when it is a
 * dead writer's temporary file. Returns -1 only when out of memory. */
static int consider(int dfd, const char *name, struct store_file **files, size_t *n, size_t *cap)
{
    struct stat st;
    int tmp = strncmp(name, TMP_PREFIX, sizeof TMP_PREFIX - 1) == 0, marker = is_marker_name(name);
    if ((!tmp && !marker && !is_key_name(name)) || fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode))
        return 0;
    if (tmp) {
        if (time(NULL) - st.st_mtime > MODULE_STORE_STALE_TMP_S) unlinkat(dfd, name, 0);
        return 0;
    }
    if (marker) {
        /* A marker whose image is gone says nothing any more. Markers are
         * written after their image, so a live one always has it. */
        char image[2 * MODULE_KEY_LEN + 1];
        struct stat ist;
        memcpy(image, name, 2 * MODULE_KEY_LEN);
        image[2 * MODULE_KEY_LEN] = '\0';
        if (fstatat(dfd, image, &ist, AT_SYMLINK_NOFOLLOW) != 0) {
            unlinkat(dfd, name, 0);
            return 0;
        }
    }
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        struct store_file *f = realloc(*files, c * sizeof *f);
        if (!f) return -1;
        *files = f;
        *cap = c;
    }
    struct store_file *f = &(*files)[(*n)++];
    snprintf(f->name, sizeof f->name, "%s", name);
    f->size = marker ? MODULE_STORE_MARKER_COST : (uint64_t)st.st_size;
    f->used = st.st_mtim;
    return 0;
}

int module_store_evict_paced(const char *dir, uint64_t limit, struct store_evict_pace *pace, uint64_t stored)
{
    uint64_t since = atomic_fetch_add(&pace->unscanned, stored) + stored;
    int first = !atomic_exchange(&pace->scanned, 1);
    if (!first && since < limit / MODULE_STORE_SCAN_SHARE) return 0;
    atomic_store(&pace->unscanned, 0);
    return module_store_evict(dir, limit);
}

int module_store_evict(const char *dir, uint64_t limit)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int dfd = dirfd(d);
    struct store_file *files = NULL;
    size_t n = 0, cap = 0;
    int ok = 1;
    for (struct dirent *e; ok && (e = readdir(d)) != NULL;) ok = consider(dfd, e->d_name, &files, &n, &cap) == 0;
    int evicted = 0;
    if (ok) {
        size_t k = module_store_pick_victims(files, n, limit);
        for (size_t i = 0; i < k; i++)
            if (unlinkat(dfd, files[i].name, 0) == 0 && !is_marker_name(files[i].name)) evicted++; /* ENOENT: another session was first */
    }
    free(files);
    closedir(d);
    return evicted;
}
