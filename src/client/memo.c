/* memo.c - see memo.h.
 *
 * A set-associative table: MEMO_SLOTS entries in sets of MEMO_WAYS, found by
 * a 64-bit hash of (op, ctx, key). Every entry records the generation it
 * was inserted in (its epoch); memo_invalidate_all() bumps the epoch, which
 * makes every entry stale at once (O(1)). memo_invalidate_about() drops
 * some entries, by a scan. Both bump `generation`, which a query takes
 * before it goes to the server: one that comes back after either does not
 * insert. One mutex guards the table: lookups are a hash, a short scan and
 * a copy of at most MEMO_MAX_VALUE bytes. */
#include "memo.h"

#include <pthread.h>
#include <string.h>

#include "../common/ops.gen.h"

#define MEMO_WAYS 4
#define MEMO_SETS (MEMO_SLOTS / MEMO_WAYS)

_Static_assert((MEMO_SETS & (MEMO_SETS - 1)) == 0, "MEMO_SETS must be a power of two");
_Static_assert(MEMO_MAX_KEY <= UINT16_MAX && MEMO_MAX_VALUE <= UINT8_MAX, "field widths");

struct memo_entry {
    uint64_t hash;
    uint64_t gen;     /* 0 = empty */
    uint8_t setting;  /* an attribute setting: valid in settings_generation */
    uint64_t subject; /* the function or kernel the value is about; 0: none known */
    uint32_t ctx;
    uint16_t op;
    uint16_t key_len;
    uint8_t value_len;
    uint8_t key[MEMO_MAX_KEY];
    uint8_t value[MEMO_MAX_VALUE];
};

static struct memo_entry table[MEMO_SETS][MEMO_WAYS];
static unsigned char next_way[MEMO_SETS];
static uint64_t epoch = 1, generation = 1, settings_generation = 1;
static struct memo_stats stats;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* A child of fork() may inherit the lock held by a thread that no longer
 * exists there; give it a fresh lock and an empty cache. */
static void after_fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    epoch++;
    generation++;
    settings_generation++;
}

static void init_once(void) { pthread_atfork(NULL, NULL, after_fork_child); }

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t hash_of(uint16_t op, uint32_t ctx, const void *key, size_t key_len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv1a(h, &op, sizeof op);
    h = fnv1a(h, &ctx, sizeof ctx);
    return fnv1a(h, key, key_len);
}

static int live(const struct memo_entry *e)
{
    return e->gen == (e->setting ? settings_generation : epoch);
}

static int same(const struct memo_entry *e, uint64_t h, uint16_t op, uint32_t ctx, const void *key, size_t key_len)
{
    return live(e) && e->hash == h && e->op == op && e->ctx == ctx && e->key_len == key_len &&
           memcmp(e->key, key, key_len) == 0;
}

int memo_lookup(uint16_t op, uint32_t ctx, const void *key, size_t key_len, void *value, size_t *value_len,
                uint64_t *gen)
{
    pthread_once(&once, init_once);
    uint64_t h = hash_of(op, ctx, key, key_len);
    int hit = 0;
    pthread_mutex_lock(&lock);
    *gen = generation;
    if (key_len <= MEMO_MAX_KEY) {
        struct memo_entry *set = table[h & (MEMO_SETS - 1)];
        for (int w = 0; w < MEMO_WAYS; w++) {
            if (same(&set[w], h, op, ctx, key, key_len)) {
                memcpy(value, set[w].value, set[w].value_len);
                *value_len = set[w].value_len;
                hit = 1;
                break;
            }
        }
    }
    if (hit) stats.hits++;
    else stats.misses++;
    pthread_mutex_unlock(&lock);
    return hit;
}

/* Store (op, ctx, key) -> value in its set (lock held): over the same key
 * or a dead entry, else over the next way in turn. */
static void put_locked(uint64_t h, uint16_t op, uint32_t ctx, const void *key, size_t key_len, const void *value,
                       size_t value_len, int setting, uint64_t subject)
{
    size_t si = h & (MEMO_SETS - 1);
    struct memo_entry *set = table[si];
    struct memo_entry *e = NULL;
    for (int w = 0; w < MEMO_WAYS && !e; w++)
        if (same(&set[w], h, op, ctx, key, key_len) || !live(&set[w])) e = &set[w];
    if (!e) {
        e = &set[next_way[si]];
        next_way[si] = (unsigned char)((next_way[si] + 1) % MEMO_WAYS);
    }
    e->hash = h;
    e->setting = (uint8_t)setting;
    e->gen = setting ? settings_generation : epoch;
    e->subject = subject;
    e->ctx = ctx;
    e->op = op;
    e->key_len = (uint16_t)key_len;
    e->value_len = (uint8_t)value_len;
    memcpy(e->key, key, key_len);
    if (value_len) memcpy(e->value, value, value_len);
    stats.inserts++;
}

void memo_insert_about(uint16_t op, uint32_t ctx, const void *key, size_t key_len, const void *value,
                       size_t value_len, uint64_t gen, uint64_t subject)
{
    if (key_len > MEMO_MAX_KEY || value_len > MEMO_MAX_VALUE) return;
    pthread_once(&once, init_once);
    uint64_t h = hash_of(op, ctx, key, key_len);
    pthread_mutex_lock(&lock);
    if (gen == generation) /* else an invalidation happened while the query was in flight */
        put_locked(h, op, ctx, key, key_len, value, value_len, 0, subject);
    pthread_mutex_unlock(&lock);
}

void memo_insert(uint16_t op, uint32_t ctx, const void *key, size_t key_len, const void *value, size_t value_len,
                 uint64_t gen)
{
    memo_insert_about(op, ctx, key, key_len, value, value_len, gen, 0);
}

int memo_setting_is(uint16_t op, uint32_t ctx, const void *key, size_t key_len, const void *value,
                    size_t value_len)
{
    uint8_t have[MEMO_MAX_VALUE];
    size_t have_len = 0;
    uint64_t gen;
    return memo_lookup(op, ctx, key, key_len, have, &have_len, &gen) && have_len == value_len &&
           memcmp(have, value, value_len) == 0;
}

void memo_setting_put(uint16_t op, uint32_t ctx, const void *key, size_t key_len, const void *value,
                      size_t value_len)
{
    if (key_len > MEMO_MAX_KEY || value_len > MEMO_MAX_VALUE) return;
    pthread_once(&once, init_once);
    uint64_t h = hash_of(op, ctx, key, key_len);
    pthread_mutex_lock(&lock);
    put_locked(h, op, ctx, key, key_len, value, value_len, 1, 0);
    pthread_mutex_unlock(&lock);
}

void memo_forget_settings(void)
{
    pthread_once(&once, init_once);
    pthread_mutex_lock(&lock);
    settings_generation++;
    epoch++;
    generation++;
    stats.invalidations++;
    pthread_mutex_unlock(&lock);
}

void memo_invalidate_all(void)
{
    pthread_once(&once, init_once);
    pthread_mutex_lock(&lock);
    epoch++;
    generation++;
    stats.invalidations++;
    pthread_mutex_unlock(&lock);
}

void memo_invalidate_about(uint16_t set_op, uint64_t subject)
{
    uint16_t other = set_op == OP_cuKernelSetAttribute ? OP_cuFuncGetAttribute : OP_cuKernelGetAttribute;
    pthread_once(&once, init_once);
    pthread_mutex_lock(&lock);
    generation++;
    for (size_t si = 0; si < MEMO_SETS; si++) {
        for (int w = 0; w < MEMO_WAYS; w++) {
            struct memo_entry *e = &table[si][w];
            if (live(e) && !e->setting && (e->subject == 0 || e->subject == subject || e->op == other)) e->gen = 0;
        }
    }
    stats.invalidations++;
    pthread_mutex_unlock(&lock);
}

uint64_t memo_generation(void)
{
    pthread_once(&once, init_once);
    pthread_mutex_lock(&lock);
    uint64_t g = generation;
    pthread_mutex_unlock(&lock);
    return g;
}

void memo_get_stats(struct memo_stats *st)
{
    pthread_mutex_lock(&lock);
    *st = stats;
    pthread_mutex_unlock(&lock);
}
