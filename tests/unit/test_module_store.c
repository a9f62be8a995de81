/* test_module_store.c - the on-disk module store (src/common/module_store.c):
 * the eviction rule alone, then a real directory: store and read back (by
 * content and keyed), damage found and deleted, least recently used
 * evicted, dead writers' temporary files removed, other files left alone. */
#define _GNU_SOURCE
#include "common/module_store.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../unit/check.h"
#include "common/auth.h"

static struct store_file file(const char *name, uint64_t size, long sec)
{
    struct store_file f;
    memset(&f, 0, sizeof f);
    snprintf(f.name, sizeof f.name, "%s", name);
    f.size = size;
    f.used.tv_sec = sec;
    return f;
}

static void test_pick(void)
{
    struct store_file f[4];
    CHECK(module_store_pick_victims(f, 0, 0) == 0);

    f[0] = file("c", 10, 300), f[1] = file("a", 10, 100), f[2] = file("b", 10, 200);
    CHECK(module_store_pick_victims(f, 3, 30) == 0); /* exactly at the limit */

    size_t k = module_store_pick_victims(f, 3, 29);
    CHECK(k == 1 && strcmp(f[0].name, "a") == 0); /* the oldest use goes */

    f[0] = file("c", 10, 300), f[1] = file("a", 10, 100), f[2] = file("b", 10, 200);
    k = module_store_pick_victims(f, 3, 10);
    CHECK(k == 2 && strcmp(f[0].name, "a") == 0 && strcmp(f[1].name, "b") == 0);

    f[0] = file("c", 10, 300), f[1] = file("a", 10, 100);
    CHECK(module_store_pick_victims(f, 2, 0) == 2); /* limit 0: everything */

    /* Equal times: by name, so every session picks the same files. */
    f[0] = file("y", 5, 7), f[1] = file("x", 5, 7), f[2] = file("z", 5, 7);
    k = module_store_pick_victims(f, 3, 5);
    CHECK(k == 2 && strcmp(f[0].name, "x") == 0 && strcmp(f[1].name, "y") == 0);

    /* A big new file evicts several old small ones, then stops. */
    f[0] = file("new", 100, 900), f[1] = file("o1", 10, 1), f[2] = file("o2", 10, 2), f[3] = file("o3", 10, 3);
    k = module_store_pick_victims(f, 4, 115);
    CHECK(k == 2 && strcmp(f[0].name, "o1") == 0 && strcmp(f[1].name, "o2") == 0);
}

/* ---- on disk -------------------------------------------------------------- */

static char dir[512];

static void path_of(const uint8_t key[MODULE_KEY_LEN], char *out, size_t n)
{
    char hex[2 * MODULE_KEY_LEN + 1];
    module_key_hex(key, hex);
    snprintf(out, n, "%s/%s", dir, hex);
}

static int exists(const char *p) { return access(p, F_OK) == 0; }

static void set_time(const char *p, long sec_ago)
{
    struct timespec t[2];
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= sec_ago;
    t[1] = t[0];
    CHECK(utimensat(AT_FDCWD, p, t, 0) == 0);
}

/* Store an image of n bytes of `fill`; its digest goes to key. */
static void store(uint8_t fill, size_t n, uint8_t key[MODULE_KEY_LEN])
{
    uint8_t *img = malloc(n);
    memset(img, fill, n);
    auth_sha256_digest(img, n, key);
    CHECK(module_store_write(dir, key, img, n) == 0);
    free(img);
}

static void damage(const char *p, off_t at, int cut)
{
    int fd = open(p, O_RDWR);
    CHECK(fd >= 0);
    if (cut) {
        CHECK(ftruncate(fd, at) == 0);
    } else {
        char c;
        CHECK(pread(fd, &c, 1, at) == 1);
        c ^= 1;
        CHECK(pwrite(fd, &c, 1, at) == 1);
    }
    close(fd);
}

static void test_read_write(void)
{
    uint8_t key[MODULE_KEY_LEN];
    char p[700];
    void *img;
    const char *why;
    store('a', 1000, key);
    path_of(key, p, sizeof p);
    struct stat st;
    CHECK(stat(p, &st) == 0 && st.st_size == MODULE_STORE_HEADER + 1000 && (st.st_mode & 0777) == 0600);

    CHECK(module_store_read(dir, key, 1000, &img, &why) == STORE_HIT);
    CHECK(img && ((char *)img)[0] == 'a' && ((char *)img)[999] == 'a' && ((char *)img)[1000] == '\0');
    free(img);

    /* Another length under the same digest: the asker's mistake, file kept. */
    CHECK(module_store_read(dir, key, 999, &img, &why) == STORE_MISS && img == NULL);
    CHECK(exists(p));

    uint8_t none[MODULE_KEY_LEN] = {0};
    CHECK(module_store_read(dir, none, 1000, &img, &why) == STORE_MISS);

    damage(p, MODULE_STORE_HEADER + 500, 0);
    CHECK(module_store_read(dir, key, 1000, &img, &why) == STORE_CORRUPT && img == NULL);
    CHECK(why && strstr(why, "content") != NULL);
    CHECK(!exists(p));
    CHECK(module_store_read(dir, key, 1000, &img, &why) == STORE_MISS);

    store('a', 1000, key);
    damage(p, MODULE_STORE_HEADER + 10, 1);
    CHECK(module_store_read(dir, key, 1000, &img, &why) == STORE_CORRUPT && !exists(p));
    CHECK(why && strstr(why, "size") != NULL);

    store('a', 1000, key);
    damage(p, 0, 0);
    CHECK(module_store_read(dir, key, 1000, &img, &why) == STORE_CORRUPT && !exists(p));

    /* Writing twice is harmless, and the second time writes nothing: the
     * file (its inode) stays, marked used now. */
    store('b', 64, key);
    path_of(key, p, sizeof p);
    struct stat first, second;
    set_time(p, 1000);
    CHECK(stat(p, &first) == 0);
    store('b', 64, key);
    CHECK(stat(p, &second) == 0 && second.st_ino == first.st_ino);
    CHECK(second.st_mtime >= first.st_mtime + 900); /* used now */
    CHECK(module_store_read(dir, key, 64, &img, &why) == STORE_HIT);
    free(img);
    /* One of another size under that name is written over. */
    damage(p, MODULE_STORE_HEADER + 10, 1);
    store('b', 64, key);
    CHECK(stat(p, &second) == 0 && second.st_size == MODULE_STORE_HEADER + 64);
    CHECK(module_store_read(dir, key, 64, &img, &why) == STORE_HIT);
    free(img);
}

/* Keyed entries (the client's compile cache): any key, the bytes checked
 * against the digest stored with them. */
static void test_keyed(void)
{
    uint8_t key[MODULE_KEY_LEN], other[MODULE_KEY_LEN];
    memset(key, 0x11, sizeof key);
    memset(other, 0x22, sizeof other);
    static const char out[] = "// PTX a compile made";
    char p[700];
    void *data;
    uint64_t len;
    const char *why;
    CHECK(module_store_write_keyed(dir, key, out, sizeof out) == 0);
    path_of(key, p, sizeof p);
    CHECK(module_store_read_keyed(dir, key, 1 << 20, &data, &len, &why) == STORE_HIT && len == sizeof out &&
          memcmp(data, out, sizeof out) == 0);
    free(data);
    CHECK(module_store_read_keyed(dir, other, 1 << 20, &data, &len, &why) == STORE_MISS && data == NULL);
    /* Larger than this reader takes: a miss, the entry kept. */
    CHECK(module_store_read_keyed(dir, key, sizeof out - 1, &data, &len, &why) == STORE_MISS && exists(p));
    /* An image's file is not a keyed entry, nor the other way round. */
    uint8_t ikey[MODULE_KEY_LEN];
    store('k', 100, ikey);
    char ip[700];
    path_of(ikey, ip, sizeof ip);
    CHECK(module_store_read_keyed(dir, ikey, 1 << 20, &data, &len, &why) == STORE_CORRUPT && !exists(ip));
    CHECK(module_store_read(dir, key, sizeof out + MODULE_KEY_LEN, &data, &why) == STORE_CORRUPT && !exists(p));

    /* A flipped byte in the output, in the stored digest, or a file cut short. */
    off_t at[] = {MODULE_STORE_HEADER + MODULE_KEY_LEN + 3, MODULE_STORE_HEADER + 5, MODULE_STORE_HEADER + 20};
    for (int i = 0; i < 3; i++) {
        CHECK(module_store_write_keyed(dir, key, out, sizeof out) == 0);
        damage(p, at[i], i == 2);
        CHECK(module_store_read_keyed(dir, key, 1 << 20, &data, &len, &why) == STORE_CORRUPT && data == NULL &&
              !exists(p));
        printf("     damaged keyed entry: %s\n", why);
    }
    CHECK(module_store_write_keyed(dir, key, out, 0) == 0 &&
          module_store_read_keyed(dir, key, 1 << 20, &data, &len, &why) == STORE_HIT && len == 0);
    free(data);
    unlink(p);
}

static void test_evict(void)
{
    uint8_t k1[MODULE_KEY_LEN], k2[MODULE_KEY_LEN], k3[MODULE_KEY_LEN];
    char p1[700], p2[700], p3[700], other[700], stale[700], fresh[700];
    CHECK(module_store_evict(dir, 0) == 1); /* what test_read_write left */
    store('1', 100, k1);
    store('2', 100, k2);
    store('3', 100, k3);
    path_of(k1, p1, sizeof p1);
    path_of(k2, p2, sizeof p2);
    path_of(k3, p3, sizeof p3);
    set_time(p1, 300);
    set_time(p2, 200);
    set_time(p3, 100);
    module_store_touch(dir, k1); /* now k2 is the least recently used */

    snprintf(other, sizeof other, "%s/README", dir);
    snprintf(stale, sizeof stale, "%s/.tmp-1-1", dir);
    snprintf(fresh, sizeof fresh, "%s/.tmp-1-2", dir);
    FILE *f = fopen(other, "w");
    fputs("not an image", f);
    fclose(f);
    fclose(fopen(stale, "w"));
    fclose(fopen(fresh, "w"));
    set_time(stale, MODULE_STORE_STALE_TMP_S + 60);

    uint64_t one = MODULE_STORE_HEADER + 100;
    CHECK(module_store_evict(dir, 3 * one) == 0);
    CHECK(exists(p1) && exists(p2) && exists(p3));
    CHECK(module_store_evict(dir, 2 * one) == 1);
    CHECK(exists(p1) && !exists(p2) && exists(p3));
    CHECK(exists(other) && !exists(stale) && exists(fresh));
    CHECK(module_store_evict(dir, 0) == 2);
    CHECK(!exists(p1) && !exists(p3) && exists(other));
    unlink(other);
    unlink(fresh);
}

/* The paced scan: at the first store, then only once 1/16 of the limit
 * was stored since the last scan. */
static void test_evict_paced(void)
{
    uint8_t k[4][MODULE_KEY_LEN];
    char p[4][700];
    uint64_t one = MODULE_STORE_HEADER + 100, limit = 2 * one;
    CHECK(limit / MODULE_STORE_SCAN_SHARE < one); /* else each store below is due a scan on its own */
    struct store_evict_pace pace = {0};
    for (int i = 0; i < 3; i++) {
        store((uint8_t)('a' + i), 100, k[i]);
        path_of(k[i], p[i], sizeof p[i]);
        set_time(p[i], 300 - 10 * i);
    }
    /* The first store scans: three images over a limit of two. */
    CHECK(module_store_evict_paced(dir, limit, &pace, 1) == 1); /* the first store scans */
    CHECK(!exists(p[0]) && exists(p[1]) && exists(p[2]));
    store('d', 100, k[3]);
    path_of(k[3], p[3], sizeof p[3]);
    /* Stores of a byte each: not due until 1/16 of the limit is reached. */
    uint64_t due = limit / MODULE_STORE_SCAN_SHARE;
    for (uint64_t n = 1; n < due; n++)
        CHECK(module_store_evict_paced(dir, limit, &pace, 1) == 0);
    CHECK(exists(p[1]) && exists(p[2]) && exists(p[3])); /* nothing went between scans */
    CHECK(module_store_evict_paced(dir, limit, &pace, 1) == 1); /* 1/16 of the limit stored: a scan */
    CHECK(!exists(p[1]) && exists(p[2]) && exists(p[3]));
    CHECK(module_store_evict(dir, 0) == 2);
}

/* A user's images, most recently used first, and a mapped image that
 * outlives its file's deletion, its digest checked. */
static void test_user_images(void)
{
    const uint8_t alice[MODULE_USER_TAG_LEN] = {1, 2, 3, 4, 5, 6, 7, 8}, bob[MODULE_USER_TAG_LEN] = {9};
    uint8_t k[3][MODULE_KEY_LEN], got[4][MODULE_KEY_LEN];
    char p[700], hex[2 * MODULE_KEY_LEN + 1], thex[2 * MODULE_KEY_LEN + 1], marker[900];
    uint8_t t[MODULE_KEY_LEN] = {0};
    memcpy(t, alice, sizeof alice);
    module_key_hex(t, thex);
    thex[2 * MODULE_USER_TAG_LEN] = '\0';
    for (int i = 0; i < 3; i++) {
        store((uint8_t)('p' + i), 200 + (size_t)i, k[i]);
        CHECK(module_store_user_mark(dir, k[i], i == 2 ? bob : alice) == 0);
        module_key_hex(k[i], hex);
        snprintf(marker, sizeof marker, "%s/%s.%s", dir, hex, thex);
        if (i < 2) set_time(marker, i == 0 ? 50 : 10); /* image 1 used last */
    }
    CHECK(module_store_user_images(dir, alice, got, 4) == 2);
    CHECK(memcmp(got[0], k[1], MODULE_KEY_LEN) == 0 && memcmp(got[1], k[0], MODULE_KEY_LEN) == 0);
    CHECK(module_store_user_images(dir, alice, got, 1) == 1 && memcmp(got[0], k[1], MODULE_KEY_LEN) == 0);
    CHECK(module_store_user_images(dir, bob, got, 4) == 1 && memcmp(got[0], k[2], MODULE_KEY_LEN) == 0);

    struct store_mapping m;
    CHECK(module_store_map(dir, k[0], &m) == 0 && m.len == 200 && m.image[0] == 'p' && m.image[199] == 'p');
    path_of(k[0], p, sizeof p);
    CHECK(unlink(p) == 0); /* evicted: the mapping still reads */
    CHECK(module_store_mapping_check(&m, k[0]) && m.image[100] == 'p');
    CHECK(!module_store_mapping_check(&m, k[1]));
    module_store_unmap(&m);
    CHECK(module_store_map(dir, k[0], &m) == -1 && m.base == NULL); /* gone */
    path_of(k[1], p, sizeof p);
    damage(p, 0, 0); /* a bad header is not mapped */
    CHECK(module_store_map(dir, k[1], &m) == -1);
    CHECK(module_store_evict(dir, 0) >= 1);
}

static void test_prepare(const char *base)
{
    char err[1024], p[700];
    snprintf(dir, sizeof dir, "%s/a/b/modules", base);
    CHECK(module_store_prepare(dir, err, sizeof err) == 0);
    struct stat st;
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
    snprintf(p, sizeof p, "%s/a", base);
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0700);
    CHECK(module_store_prepare(dir, err, sizeof err) == 0); /* again: it exists */

    snprintf(p, sizeof p, "%s/file", base);
    fclose(fopen(p, "w"));
    char bad[800];
    snprintf(bad, sizeof bad, "%s/sub", p);
    CHECK(module_store_prepare(bad, err, sizeof err) == -1 && strstr(err, bad) != NULL);
    printf("     message: %s\n", err);
    unlink(p);
}

int main(void)
{
    char base[] = "/tmp/scuda-test-module-store-XXXXXX";
    if (!mkdtemp(base)) {
        perror("mkdtemp");
        return 2;
    }
    test_pick();
    test_prepare(base);
    test_read_write();
    test_keyed();
    test_evict();
    test_evict_paced();
    test_user_images();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    CHECK(system(cmd) == 0);
    printf("%d checks, %d failures\n", checks, failures);
    return failures != 0;
}
