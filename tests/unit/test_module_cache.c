/* test_module_cache.c - the module cache answers per user
 * (src/server/module_cache.c): an image one user loaded is "not cached"
 * to another user, in the session's memory table and on disk, while its
 * own user still gets the hit; a second user's load marks that user too;
 * a marker whose image is gone is deleted by eviction. The session's
 * identity is switched in one process here; a real session has one. */
#define _GNU_SOURCE
#include "server/module_cache.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../unit/check.h"
#include "common/auth.h"
#include "server/host_quota.h"
#include "server/identity.h"

static int count_markers(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) n += strchr(e->d_name, '.') && e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

static int hit(const uint8_t key[MODULE_KEY_LEN], size_t len)
{
    void *p = module_cache_get(key, len);
    free(p);
    return p != NULL;
}

int main(void)
{
    char dir[] = "/tmp/scuda-test-module-cache-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    host_quota_init(0);
    module_cache_init(dir, 1u << 30);

    static const char image[] = "// a PTX image only alice has loaded\n.version 8.0\n";
    uint8_t key[MODULE_KEY_LEN];
    auth_sha256_digest(image, sizeof image, key);

    session_identity_set("alice");
    CHECK(!hit(key, sizeof image));
    module_cache_put(image, sizeof image);
    CHECK(hit(key, sizeof image)); /* alice: from memory */

    session_identity_set("bob");
    CHECK(!hit(key, sizeof image)); /* neither memory nor disk tells bob */
    CHECK(!hit(key, sizeof image));

    /* A fresh session of alice's (another process: an empty memory table)
     * finds it on disk; bob's does not. */
    uint8_t alice[MODULE_USER_TAG_LEN], bob[MODULE_USER_TAG_LEN];
    CHECK(count_markers(dir) == 1);
    session_identity_set("bob");
    {
        uint8_t d[MODULE_KEY_LEN];
        static const char domain[] = "scuda module cache user";
        char buf[sizeof domain + 8];
        memcpy(buf, domain, sizeof domain);
        memcpy(buf + sizeof domain, "alice", 5);
        auth_sha256_digest(buf, sizeof domain + 5, d);
        memcpy(alice, d, sizeof alice);
        memcpy(buf + sizeof domain, "bob", 3);
        auth_sha256_digest(buf, sizeof domain + 3, d);
        memcpy(bob, d, sizeof bob);
    }
    CHECK(module_store_user_has(dir, key, alice) == 1);
    CHECK(module_store_user_has(dir, key, bob) == 0);

    /* Bob sends the bytes: from then on he gets the hit too. */
    module_cache_put(image, sizeof image);
    CHECK(hit(key, sizeof image));
    CHECK(module_store_user_has(dir, key, bob) == 1);
    CHECK(count_markers(dir) == 2);

    /* The image gone (evicted, or deleted by hand): its markers go at the
     * next eviction, and nobody hits. */
    char hex[2 * MODULE_KEY_LEN + 1], path[512];
    module_key_hex(key, hex);
    snprintf(path, sizeof path, "%s/%s", dir, hex);
    CHECK(unlink(path) == 0);
    CHECK(module_store_evict(dir, 1u << 30) == 0);
    CHECK(count_markers(dir) == 0);

    /* Markers count against the limit: a store of one image and two
     * markers does not fit in the image's size alone. */
    session_identity_set("alice");
    module_cache_put(image, sizeof image);
    CHECK(count_markers(dir) == 1);
    module_store_user_mark(dir, key, bob);
    CHECK(module_store_evict(dir, MODULE_STORE_HEADER + sizeof image + MODULE_STORE_MARKER_COST) >= 0);
    CHECK(count_markers(dir) == 1); /* the least recently used marker went */

    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    CHECK(system(path) == 0);
    printf("test_module_cache: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
