/* attr_store.c - function attributes kept across processes. See
 * attr_store.h. */
#define _GNU_SOURCE
#include "attr_store.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "memo.h"
#include "module.h"
#include "servers.h"
#include "stats.h"
#include "../common/auth.h"
#include "../common/config.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/wire.h"

static const char KEY_DOMAIN[] = "scuda function attributes 1";
/* An entry: this tag, the count of values, the known mask, the values. */
static const char ENTRY_TAG[8] = "SCATTR01";
#define ENTRY_LEN (sizeof ENTRY_TAG + 8 + 4 * FUNC_ATTR_COUNT)
/* A kept memo answer: this tag, its length, its bytes. */
static const char KEPT_TAG[8] = "SCKEPT01";
#define KEPT_LEN_MAX (sizeof KEPT_TAG + 4 + MEMO_MAX_VALUE)

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static char store_dir[PATH_MAX];
static int store_on;
static struct store_evict_pace pace;
static _Atomic int config_changed;

static void use_dir(const char *dir)
{
    char err[PATH_MAX + 128];
    store_on = 0;
    if (dir == NULL) return;
    snprintf(store_dir, sizeof store_dir, "%s", dir);
    if (module_store_prepare(store_dir, err, sizeof err) != 0) {
        LOG_WARN("attribute cache: %s; every new process asks the server for its functions' attributes again. "
                 "Set SCUDA_ATTR_CACHE to a directory this user can write, or to off",
                 err);
        return;
    }
    store_on = 1;
}

static void configure_from_env(void)
{
    char dir[PATH_MAX];
    int got = scuda_attr_cache_dir(dir, sizeof dir);
    if (got < 0)
        LOG_WARN("attribute cache: no home directory is known; functions' attributes are not kept. "
                 "Set SCUDA_ATTR_CACHE to a directory");
    use_dir(got == 1 ? dir : NULL);
}

void attr_store_config_changed(void) { atomic_store(&config_changed, 1); }

/* The directory, when the store is on: 1 and its path in dir (settled
 * once, from the environment, at the first use). */
static int dir_if_on(char dir[PATH_MAX])
{
    pthread_once(&config_once, configure_from_env);
    if (store_on) memcpy(dir, store_dir, PATH_MAX);
    return store_on;
}

static int same_model(const struct device_info *a, const struct device_info *b)
{
    return strcmp(a->name, b->name) == 0 &&
           a->attr_value[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR] ==
               b->attr_value[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR] &&
           a->attr_value[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR] ==
               b->attr_value[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR];
}

/* The device the answers are about: the kernel's, or for a function the
 * first of the server's, when every one is that model. NULL otherwise. */
static const struct device_info *model_of(const struct session_info *si, int32_t dev)
{
    uint32_t n = si->device_count < SCUDA_MAX_DEVICES ? si->device_count : SCUDA_MAX_DEVICES;
    if (n == 0) return NULL;
    if (dev >= 0) return (uint32_t)dev < n ? &si->dev[dev] : NULL;
    for (uint32_t i = 1; i < n; i++)
        if (!same_model(&si->dev[0], &si->dev[i])) return NULL;
    return &si->dev[0];
}

/* What h's answers on srv depend on, fed to c after the caller's domain:
 * 1, or 0 when they are not to be kept or used (attr_store_key). */
static int function_key(const void *h, const struct server *srv, int32_t dev, auth_sha256 *c)
{
    char dir[PATH_MAX];
    const struct func_desc *d = func_lookup(h);
    if (!srv || !d || __atomic_load_n(&d->attribute_set, __ATOMIC_ACQUIRE) || atomic_load(&config_changed) ||
        !dir_if_on(dir))
        return 0;
    const struct session_info *si = conn_info(srv);
    const struct device_info *model = model_of(si, dev);
    /* Without the driver's build (an older server) a driver update could
     * go unseen. */
    if (!model || !si->driver_build[0] || !func_identity(h, c)) return 0;
    uint8_t as_kernel = dev >= 0;
    int32_t cc[2] = {model->attr_value[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR],
                     model->attr_value[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR]};
    auth_sha256_update(c, &as_kernel, 1);
    auth_sha256_update(c, &si->driver_version, sizeof si->driver_version);
    auth_sha256_update(c, si->driver_build, strnlen(si->driver_build, sizeof si->driver_build) + 1);
    auth_sha256_update(c, cc, sizeof cc);
    auth_sha256_update(c, model->name, strnlen(model->name, sizeof model->name));
    return 1;
}

int attr_store_key(const void *h, const struct server *srv, int32_t dev, uint8_t key[MODULE_KEY_LEN])
{
    auth_sha256 c;
    auth_sha256_init(&c);
    auth_sha256_update(&c, KEY_DOMAIN, sizeof KEY_DOMAIN);
    if (!function_key(h, srv, dev, &c)) return 0;
    auth_sha256_final(&c, key);
    return 1;
}

/* ---- entries: a memory layer, and a writer off the caller's thread ------ */

/* The disk costs more than a loopback round trip (a file written, about
 * 35 us; one read, 6 us), and cuDNN builds new kernels for every token of a
 * generate. So what is kept goes into a table in memory at once (a
 * function's handles come and go with cuDNN's loads, and its answers are
 * found again there) and to the disk from a thread of its own; what that
 * thread has not written when the program exits is written then. */
#define ENTRY_MAX ENTRY_LEN
_Static_assert(KEPT_LEN_MAX <= ENTRY_MAX, "a kept answer fits an entry");
#define MEMORY_SLOTS 4096 /* direct-mapped: a slot lost is read from the disk again */
#define PENDING_MAX 1024  /* entries not yet written; past that they are only in memory */

struct entry {
    uint8_t key[MODULE_KEY_LEN];
    uint32_t len; /* 0: empty */
    uint8_t bytes[ENTRY_MAX];
};

static struct entry memory[MEMORY_SLOTS];
static struct entry pending[PENDING_MAX]; /* a ring: npending from pending_head */
static unsigned pending_head, npending;
static pthread_mutex_t entries_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pending_cv = PTHREAD_COND_INITIALIZER;
static int writer_started; /* under entries_lock; a forked child starts its own */

static struct entry *slot_for(const uint8_t key[MODULE_KEY_LEN])
{
    uint32_t h;
    memcpy(&h, key, sizeof h); /* a SHA-256: any four bytes spread */
    return &memory[h % MEMORY_SLOTS];
}

/* The oldest pending entry into *e (under entries_lock): 1, or 0 when none. */
static int take_pending(struct entry *e)
{
    if (npending == 0) return 0;
    *e = pending[pending_head];
    pending_head = (pending_head + 1) % PENDING_MAX;
    npending--;
    return 1;
}

static void write_one(const struct entry *e)
{
    char dir[PATH_MAX];
    if (!dir_if_on(dir)) return;
    if (module_store_write_keyed(dir, e->key, e->bytes, e->len) == 0)
        module_store_evict_paced(dir, ATTR_STORE_LIMIT, &pace, MODULE_STORE_HEADER + MODULE_KEY_LEN + e->len);
}

static void *writer_main(void *arg)
{
    (void)arg;
    static struct entry e; /* one writer per process */
    pthread_mutex_lock(&entries_lock);
    for (;;) {
        while (!take_pending(&e)) pthread_cond_wait(&pending_cv, &entries_lock);
        pthread_mutex_unlock(&entries_lock);
        write_one(&e);
        pthread_mutex_lock(&entries_lock);
    }
    return NULL;
}

/* At exit: what the writer has not reached, written here. */
static void write_pending_at_exit(void)
{
    static struct entry e;
    pthread_mutex_lock(&entries_lock);
    while (take_pending(&e)) {
        pthread_mutex_unlock(&entries_lock);
        write_one(&e);
        pthread_mutex_lock(&entries_lock);
    }
    pthread_mutex_unlock(&entries_lock);
}

/* Across a fork the lock is held, so the child's copy is consistent; the
 * child has no writer, and its parent writes what was pending. */
static void before_fork(void) { pthread_mutex_lock(&entries_lock); }
static void after_fork_parent(void) { pthread_mutex_unlock(&entries_lock); }
static void after_fork_child(void)
{
    writer_started = 0;
    npending = 0;
    pthread_mutex_unlock(&entries_lock);
}

static void register_once(void)
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    atexit(write_pending_at_exit);
}

/* An entry's bytes under key, at most max of them (a new buffer, *len
 * long): from memory, else from the disk (then remembered); 0 on a miss.
 * A damaged file is deleted and logged. */
static int read_entry(const uint8_t key[MODULE_KEY_LEN], uint64_t max, void **data, uint64_t *len)
{
    char dir[PATH_MAX];
    const char *why = NULL;
    if (!dir_if_on(dir)) return 0;
    pthread_mutex_lock(&entries_lock);
    const struct entry *m = slot_for(key);
    int hit = m->len && m->len <= max && memcmp(m->key, key, MODULE_KEY_LEN) == 0;
    if (hit && (*data = malloc(m->len)) != NULL) {
        memcpy(*data, m->bytes, m->len);
        *len = m->len;
    }
    pthread_mutex_unlock(&entries_lock);
    if (hit) return *data != NULL;
    enum store_result got = module_store_read_keyed(dir, key, max, data, len, &why);
    if (got == STORE_CORRUPT) LOG_WARN("attribute cache %s: an entry was damaged (%s); it is deleted", dir, why);
    if (got != STORE_HIT) return 0;
    if (*len <= ENTRY_MAX) {
        pthread_mutex_lock(&entries_lock);
        struct entry *slot = slot_for(key);
        memcpy(slot->key, key, MODULE_KEY_LEN);
        memcpy(slot->bytes, *data, *len);
        slot->len = (uint32_t)*len;
        pthread_mutex_unlock(&entries_lock);
    }
    return 1;
}

/* Keep b's bytes under key: in memory now, on the disk soon. */
static void write_entry(const uint8_t key[MODULE_KEY_LEN], const wire_buf *b)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    char dir[PATH_MAX];
    if (b->oom || b->len > ENTRY_MAX || !dir_if_on(dir)) return;
    pthread_once(&once, register_once);
    pthread_mutex_lock(&entries_lock);
    struct entry *slot = slot_for(key);
    memcpy(slot->key, key, MODULE_KEY_LEN);
    memcpy(slot->bytes, b->data, b->len);
    slot->len = (uint32_t)b->len;
    if (npending < PENDING_MAX) {
        pending[(pending_head + npending++) % PENDING_MAX] = *slot;
        if (!writer_started) {
            pthread_t t;
            writer_started = pthread_create(&t, NULL, writer_main, NULL) == 0;
            if (writer_started) pthread_detach(t);
        }
        pthread_cond_signal(&pending_cv);
    }
    pthread_mutex_unlock(&entries_lock);
}

int attr_store_recall(const uint8_t key[MODULE_KEY_LEN], struct attr_answers *a)
{
    void *data = NULL;
    uint64_t len = 0;
    if (!read_entry(key, ENTRY_LEN, &data, &len)) return 0;
    wire_reader r;
    wr_init(&r, data, len);
    uint8_t tag[sizeof ENTRY_TAG];
    wr_raw(&r, tag, sizeof tag);
    uint32_t count = wr_u32(&r);
    a->known = wr_u32(&r);
    for (unsigned i = 0; i < FUNC_ATTR_COUNT; i++) a->values[i] = wr_i32(&r);
    /* Another build's entry (another count, unknown bits) is a miss. */
    int ok = wr_ok_end(&r) && memcmp(tag, ENTRY_TAG, sizeof tag) == 0 && count == FUNC_ATTR_COUNT &&
             (a->known >> (FUNC_ATTR_COUNT - 1) >> 1) == 0;
    free(data);
    return ok;
}

void attr_store_keep(const uint8_t key[MODULE_KEY_LEN], const struct attr_answers *a)
{
    wire_buf b;
    wb_init(&b);
    wb_put_raw(&b, ENTRY_TAG, sizeof ENTRY_TAG);
    wb_put_u32(&b, FUNC_ATTR_COUNT);
    wb_put_u32(&b, a->known);
    for (unsigned i = 0; i < FUNC_ATTR_COUNT; i++) wb_put_i32(&b, a->values[i]);
    write_entry(key, &b);
    wb_free(&b);
}

/* ---- memo answers (spec flag `kept`) ------------------------------------ */

static const char KEPT_DOMAIN[] = "scuda kept answers 1";

/* The key of op's answer for func and the other arguments (args): the
 * op by name (numbers are a build's), the function as for its attributes. */
static int kept_key(uint16_t op, const void *func, const wire_buf *args, uint8_t key[MODULE_KEY_LEN])
{
    const char *name = scuda_op_name(op);
    auth_sha256 c;
    auth_sha256_init(&c);
    auth_sha256_update(&c, KEPT_DOMAIN, sizeof KEPT_DOMAIN);
    auth_sha256_update(&c, name, strlen(name) + 1);
    auth_sha256_update(&c, args->data, args->len);
    if (!function_key(func, server_of_handle(func), -1, &c)) return 0;
    auth_sha256_final(&c, key);
    return 1;
}

int memo_kept_recall(uint16_t op, const void *func, const wire_buf *args, void *value, size_t *value_len)
{
    uint8_t key[MODULE_KEY_LEN];
    void *data = NULL;
    uint64_t len = 0;
    if (!kept_key(op, func, args, key) || !read_entry(key, KEPT_LEN_MAX, &data, &len))
        return 0;
    wire_reader r;
    wr_init(&r, data, len);
    uint8_t tag[sizeof KEPT_TAG];
    wr_raw(&r, tag, sizeof tag);
    uint32_t n = wr_u32(&r);
    int ok = memcmp(tag, KEPT_TAG, sizeof tag) == 0 && n <= MEMO_MAX_VALUE && r.left == n;
    if (ok) {
        wr_raw(&r, value, n);
        *value_len = n;
        stats_add(STATS_KEPT_RECALLED);
    }
    free(data);
    return ok;
}

void memo_kept_keep(uint16_t op, const void *func, const wire_buf *args, const void *value, size_t value_len)
{
    uint8_t key[MODULE_KEY_LEN];
    if (value_len > MEMO_MAX_VALUE || !kept_key(op, func, args, key)) return;
    wire_buf b;
    wb_init(&b);
    wb_put_raw(&b, KEPT_TAG, sizeof KEPT_TAG);
    wb_put_u32(&b, (uint32_t)value_len);
    wb_put_raw(&b, value, value_len);
    write_entry(key, &b);
    wb_free(&b);
}
