/* compress.c - see compress.h. */
#define _GNU_SOURCE
#include "compress.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "log.h"

/* ---- settings ------------------------------------------------------------------ */

enum compress_mode compress_mode_setting(void)
{
    const char *v = getenv("SCUDA_COMPRESS");
    if (!v || !*v || strcmp(v, "auto") == 0) return COMPRESS_AUTO;
    if (strcmp(v, "on") == 0 || strcmp(v, "1") == 0) return COMPRESS_ON;
    if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0) return COMPRESS_OFF;
    LOG_WARN("SCUDA_COMPRESS=%s is not auto, on or off; using auto", v);
    return COMPRESS_AUTO;
}

double compress_link_setting(void)
{
    const char *v = getenv("SCUDA_LINK_MBPS");
    if (!v || !*v) return 0;
    char *end;
    double mbps = strtod(v, &end);
    if (*end || !(mbps > 0) || mbps > 1e6) {
        LOG_WARN("SCUDA_LINK_MBPS=%s is not a rate in Mbit/s; the link's rate is measured instead", v);
        return 0;
    }
    return mbps;
}

/* ---- the policy ------------------------------------------------------------------ */

unsigned compress_policy_of_rate(double mbps)
{
    double p = 1 + 8 * log2(mbps < 1 ? 1 : mbps);
    return p >= COMPRESS_POLICY_ALWAYS - 1 ? COMPRESS_POLICY_ALWAYS - 1 : (unsigned)lround(p);
}

double compress_policy_rate(unsigned policy) { return exp2((double)(policy - 1) / 8); }

unsigned compress_policy(enum compress_mode mode, double mbps)
{
    if (mode == COMPRESS_ON) return COMPRESS_POLICY_ALWAYS;
    if (mode == COMPRESS_OFF || !(mbps > 0) || mbps >= COMPRESS_AUTO_MAX_MBPS) return 0;
    return compress_policy_of_rate(mbps);
}

/* The connections' threads ask at once: atomic, and any of them may be
 * the one that asks the system. */
static int cores(void)
{
    static _Atomic int n;
    int c = atomic_load_explicit(&n, memory_order_relaxed);
    if (c == 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        c = online > 0 ? (int)online : 1;
        atomic_store_explicit(&n, c, memory_order_relaxed);
    }
    return c;
}

/* Per byte, per connection: the plain bytes take 1 / share of the link;
 * the compressed ones ratio / share, plus the CPU, which the connections
 * share too when there are more of them than cores. */
int compress_worth(unsigned policy, int streams, const struct compress_probe *p)
{
    if (policy == 0) return 0;
    if (policy >= COMPRESS_POLICY_ALWAYS) return p->ratio < 1;
    if (streams < 1) streams = 1;
    double share = compress_policy_rate(policy) * 1e6 / 8 / 1e9 / streams; /* bytes per ns */
    double cpu = p->ns_per_byte * (streams > cores() ? (double)streams / cores() : 1);
    return p->ratio / share + cpu <= COMPRESS_MARGIN / share;
}

/* ---- zstd ------------------------------------------------------------------------ */

/* One context of each kind per thread (the connections' threads compress
 * at once), and the probe's room, freed with the thread. On the heap: the
 * shim may be dlopen'ed, where static TLS is scarce. */
static pthread_key_t ctx_key;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;
struct contexts {
    ZSTD_CCtx *c;
    ZSTD_DCtx *d;
    unsigned char probe[COMPRESS_PROBE_PIECE + 1024], back[COMPRESS_PROBE_PIECE];
};
_Static_assert(COMPRESS_PROBE_PIECE + 1024 >= COMPRESS_PROBE_PIECE + COMPRESS_PROBE_PIECE / 128 + 512,
               "room for zstd's bound");

static void contexts_free(void *arg)
{
    struct contexts *x = arg;
    ZSTD_freeCCtx(x->c);
    ZSTD_freeDCtx(x->d);
    free(x);
}

static void make_key(void) { (void)pthread_key_create(&ctx_key, contexts_free); }

static struct contexts *contexts(void)
{
    pthread_once(&ctx_once, make_key);
    struct contexts *x = pthread_getspecific(ctx_key);
    if (x) return x;
    x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->c = ZSTD_createCCtx();
    x->d = ZSTD_createDCtx();
    if (!x->c || !x->d || ZSTD_isError(ZSTD_CCtx_setParameter(x->c, ZSTD_c_compressionLevel, COMPRESS_LEVEL)) ||
        pthread_setspecific(ctx_key, x) != 0) {
        contexts_free(x);
        return NULL;
    }
    return x;
}

size_t compress_chunk(void *dst, size_t cap, const void *src, size_t n)
{
    struct contexts *x = contexts();
    if (!x) return 0;
    size_t z = ZSTD_compress2(x->c, dst, cap, src, n);
    return ZSTD_isError(z) || z >= n ? 0 : z;
}

int decompress_chunk(void *dst, size_t n, const void *src, size_t zn)
{
    struct contexts *x = contexts();
    if (!x) return -1;
    /* dst's capacity is n: zstd stops with an error rather than write
     * more, and a frame that says another length is refused. */
    unsigned long long said = ZSTD_getFrameContentSize(src, zn);
    if (said != (unsigned long long)n) return -1;
    size_t got = ZSTD_decompressDCtx(x->d, dst, n, src, zn);
    return ZSTD_isError(got) || got != n ? -1 : 0;
}

size_t compress_parts(void *dst, size_t cap, const struct iovec *parts, int n)
{
    struct contexts *x = contexts();
    size_t total = 0;
    for (int i = 0; i < n; i++) total += parts[i].iov_len;
    if (!x || total == 0 || ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(x->c, total))) return 0;
    ZSTD_outBuffer out = {dst, cap, 0};
    size_t left = 1;
    for (int i = 0; i < n; i++) {
        ZSTD_inBuffer in = {parts[i].iov_base, parts[i].iov_len, 0};
        ZSTD_EndDirective end = i == n - 1 ? ZSTD_e_end : ZSTD_e_continue;
        do {
            left = ZSTD_compressStream2(x->c, &out, &in, end);
            if (ZSTD_isError(left) || (out.pos == out.size && (left || in.pos < in.size))) goto fail;
        } while (end == ZSTD_e_end ? left != 0 : in.pos < in.size);
    }
    return out.pos < total ? out.pos : 0;
fail:
    /* The context keeps the unfinished frame: the next user starts anew. */
    ZSTD_CCtx_reset(x->c, ZSTD_reset_session_only);
    return 0;
}

size_t decompress_size(const void *src, size_t zn, size_t max)
{
    unsigned long long said = ZSTD_getFrameContentSize(src, zn);
    if (said == ZSTD_CONTENTSIZE_UNKNOWN || said == ZSTD_CONTENTSIZE_ERROR || said == 0 || said > max) return 0;
    return (size_t)said;
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

void compress_probe(const void *src, size_t n, struct compress_probe *p)
{
    size_t piece = n / COMPRESS_PROBE_SPOTS < COMPRESS_PROBE_PIECE ? n / COMPRESS_PROBE_SPOTS : COMPRESS_PROBE_PIECE;
    *p = (struct compress_probe){.ratio = 1, .ns_per_byte = 1e9};
    struct contexts *x = contexts();
    if (!x || piece == 0) return;
    size_t plain = 0, packed = 0;
    double t0 = now_ns();
    for (int i = 0; i < COMPRESS_PROBE_SPOTS; i++) {
        const char *at = (const char *)src + (n - piece) / (COMPRESS_PROBE_SPOTS - 1) * (size_t)i;
        size_t zn = ZSTD_compress2(x->c, x->probe, sizeof x->probe, at, piece);
        if (ZSTD_isError(zn)) return;
        /* Decompressing is the receiver's cost; this CPU stands in for its. */
        if (zn < piece && ZSTD_isError(ZSTD_decompressDCtx(x->d, x->back, piece, x->probe, zn))) return;
        plain += piece;
        packed += zn < piece ? zn : piece;
    }
    p->ratio = (double)packed / (double)plain;
    p->ns_per_byte = (now_ns() - t0) / (double)plain;
}
