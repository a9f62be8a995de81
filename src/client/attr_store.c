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

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
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

void attr_store_configure(const char *dir)
{
    pthread_once(&config_once, configure_from_env);
    pthread_mutex_lock(&mu);
    use_dir(dir);
    pthread_mutex_unlock(&mu);
}

void attr_store_config_changed(void) { atomic_store(&config_changed, 1); }

/* The directory, when the store is on: 1 and its path in dir. */
static int dir_if_on(char dir[PATH_MAX])
{
    pthread_once(&config_once, configure_from_env);
    pthread_mutex_lock(&mu);
    int on = store_on;
    if (on) memcpy(dir, store_dir, PATH_MAX);
    pthread_mutex_unlock(&mu);
    return on;
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

/* An entry's bytes under key, at most max of them (a new buffer, *len
 * long); 0 on a miss. A damaged one is deleted and logged. */
static int read_entry(const uint8_t key[MODULE_KEY_LEN], uint64_t max, void **data, uint64_t *len)
{
    char dir[PATH_MAX];
    const char *why = NULL;
    if (!dir_if_on(dir)) return 0;
    enum store_result got = module_store_read_keyed(dir, key, max, data, len, &why);
    if (got == STORE_CORRUPT) LOG_WARN("attribute cache %s: an entry was damaged (%s); it is deleted", dir, why);
    return got == STORE_HIT;
}

static void write_entry(const uint8_t key[MODULE_KEY_LEN], const wire_buf *b)
{
    char dir[PATH_MAX];
    if (b->oom || !dir_if_on(dir)) return;
    if (module_store_write_keyed(dir, key, b->data, b->len) == 0)
        module_store_evict_paced(dir, ATTR_STORE_LIMIT, &pace, MODULE_STORE_HEADER + MODULE_KEY_LEN + b->len);
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
static const char KEPT_TAG[8] = "SCKEPT01";

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
    if (!kept_key(op, func, args, key) || !read_entry(key, sizeof KEPT_TAG + 4 + MEMO_MAX_VALUE, &data, &len))
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
