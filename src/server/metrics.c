/* metrics.c - the Prometheus page and the session list (metrics.h).
 *
 * Label values come from the parent's own records (a user name from the
 * token file, a peer address); they are escaped all the same, as the
 * format requires. Counters a session wrote are printed as numbers only. */
#include "metrics.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission.h"
#include "children.h"
#include "gpu_pool.h"
#include "session_stats.h"
#include "../common/protocol.h"

/* The most sessions listed in one answer: --max-sessions is 100000 at most. */
#define METRICS_MAX_SESSIONS 100000

void metrics_buf_free(struct metrics_buf *b)
{
    free(b->text);
    memset(b, 0, sizeof *b);
}

static void put(struct metrics_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct metrics_buf *b, const char *fmt, ...)
{
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->text ? b->text + b->len : NULL, b->text ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if (b->text && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 8192) + (size_t)n;
        char *t = realloc(b->text, cap);
        if (!t) {
            b->failed = 1;
            return;
        }
        b->text = t;
        b->cap = cap;
    }
}

/* s with `"`, `\` and control characters escaped (for a Prometheus label
 * value or a JSON string: the same escapes serve both, \u00XX aside). */
static void put_escaped(struct metrics_buf *b, const char *s, int json)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') put(b, "\\%c", c);
        else if (c == '\n') put(b, "\\n");
        else if (c < 0x20 || c == 0x7f) {
            if (json) put(b, "\\u%04x", c);
            else put(b, "?");
        } else put(b, "%c", c);
    }
}

static const char *gpu_label(int gpu, char *buf, size_t len)
{
    if (gpu >= 0) snprintf(buf, len, "%s", gpu_pool_name(gpu));
    else snprintf(buf, len, "%s", gpu_pool_size() ? "pool" : "all");
    return buf;
}

static struct session_record *list_sessions(int *n)
{
    int max = children_sessions() + 16;
    if (max > METRICS_MAX_SESSIONS) max = METRICS_MAX_SESSIONS;
    struct session_record *r = calloc((size_t)max, sizeof *r);
    *n = r ? session_stats_list(r, max) : 0;
    return r;
}

static void session_labels(struct metrics_buf *b, const struct session_record *r)
{
    char g[128];
    put(b, "{pid=\"%d\",user=\"", (int)r->pid);
    put_escaped(b, r->user, 0);
    put(b, "\",gpu=\"");
    put_escaped(b, gpu_label(r->gpu, g, sizeof g), 0);
    put(b, "\"}");
}

/* One metric family with a line per session: `field` picks the value. */
static void per_session(struct metrics_buf *b, const struct session_record *r, int n, const char *name,
                        const char *type, const char *help, size_t field)
{
    put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    for (int i = 0; i < n; i++) {
        uint64_t v;
        memcpy(&v, (const char *)&r[i].seen + field, sizeof v);
        put(b, "%s", name);
        session_labels(b, &r[i]);
        put(b, " %llu\n", (unsigned long long)v);
    }
}

static void per_gpu(struct metrics_buf *b, const struct session_record *r, int n)
{
    if (gpu_pool_size() == 0) return;
    put(b, "# HELP scuda_gpu_sessions Sessions placed on each GPU of --gpus (--max-sessions-per-gpu).\n"
           "# TYPE scuda_gpu_sessions gauge\n");
    for (int g = 0; g < gpu_pool_size(); g++) {
        put(b, "scuda_gpu_sessions{gpu=\"");
        put_escaped(b, gpu_pool_name(g), 0);
        put(b, "\"} %d\n", gpu_pool_sessions_on(g));
    }
    put(b, "# HELP scuda_gpu_device_memory_bytes Device memory held by the sessions placed on each GPU.\n"
           "# TYPE scuda_gpu_device_memory_bytes gauge\n");
    for (int g = 0; g < gpu_pool_size(); g++) {
        uint64_t sum = 0;
        for (int i = 0; i < n; i++)
            if (r[i].gpu == g) sum += r[i].seen.device_mem;
        put(b, "scuda_gpu_device_memory_bytes{gpu=\"");
        put_escaped(b, gpu_pool_name(g), 0);
        put(b, "\"} %llu\n", (unsigned long long)sum);
    }
}

static void refusals(struct metrics_buf *b)
{
    static const struct {
        unsigned status;
        const char *reason;
    } kinds[] = {{WELCOME_BAD_VERSION, "bad_version"}, {WELCOME_BAD_TOKEN, "bad_token"},
                 {WELCOME_SERVER_FULL, "server_full"}, {WELCOME_BAD_JOIN, "bad_join"}};
    put(b, "# HELP scuda_handshakes_refused_total Handshakes the server refused or cut, by reason.\n"
           "# TYPE scuda_handshakes_refused_total counter\n");
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        put(b, "scuda_handshakes_refused_total{reason=\"%s\"} %llu\n", kinds[i].reason,
            (unsigned long long)admission_refused(kinds[i].status));
    uint64_t evicted, timed_out = admission_dropped(&evicted);
    put(b, "scuda_handshakes_refused_total{reason=\"timeout\"} %llu\n", (unsigned long long)timed_out);
    put(b, "scuda_handshakes_refused_total{reason=\"evicted\"} %llu\n", (unsigned long long)evicted);
}

#define FIELD(f) offsetof(struct session_counters, f)

void metrics_render_prometheus(struct metrics_buf *b)
{
    int n;
    struct session_record *r = list_sessions(&n);
    put(b, "# HELP scuda_sessions Sessions running now (CUDA sessions and raw links).\n"
           "# TYPE scuda_sessions gauge\nscuda_sessions %d\n", children_sessions());
    per_session(b, r, n, "scuda_session_device_memory_bytes", "gauge", "Device memory a session holds.",
                FIELD(device_mem));
    per_session(b, r, n, "scuda_session_calls_total", "counter", "Calls a session ran.", FIELD(calls));
    per_session(b, r, n, "scuda_session_call_errors_total", "counter", "Calls of a session that failed.",
                FIELD(errors));
    per_session(b, r, n, "scuda_session_received_bytes_total", "counter",
                "Call frames a session read from its client, in bytes.", FIELD(bytes_in));
    per_session(b, r, n, "scuda_session_sent_bytes_total", "counter",
                "Replies a session wrote to its client, in bytes.", FIELD(bytes_out));
    per_session(b, r, n, "scuda_session_snapshot_bytes", "gauge",
                "Device bytes of a session's last snapshot on its standby (0: none).", FIELD(snapshot_bytes));
    per_session(b, r, n, "scuda_session_module_cache_hits_total", "counter",
                "Modules a session was served from the module cache.", FIELD(module_hits));
    per_gpu(b, r, n);
    refusals(b);
    free(r);
}

void metrics_render_sessions_json(struct metrics_buf *b)
{
    int n;
    struct session_record *r = list_sessions(&n);
    char g[128];
    put(b, "[");
    for (int i = 0; i < n; i++) {
        put(b, "%s\n{\"pid\":%d,\"peer\":\"", i ? "," : "", (int)r[i].pid);
        put_escaped(b, r[i].peer, 1);
        put(b, "\",\"user\":\"");
        put_escaped(b, r[i].user, 1);
        put(b, "\",\"gpu\":\"");
        put_escaped(b, gpu_label(r[i].gpu, g, sizeof g), 1);
        put(b, "\",\"device_memory\":%llu,\"age_ms\":%llu,\"bytes_in\":%llu,\"bytes_out\":%llu,\"calls\":%llu",
            (unsigned long long)r[i].seen.device_mem, (unsigned long long)session_stats_age_ms(r[i].start_ms),
            (unsigned long long)r[i].seen.bytes_in, (unsigned long long)r[i].seen.bytes_out,
            (unsigned long long)r[i].seen.calls);
        if (r[i].seen.snapshot_ms) /* a session with a standby (9.24) */
            put(b, ",\"snapshot_age_ms\":%llu,\"snapshot_bytes\":%llu",
                (unsigned long long)session_stats_age_ms(r[i].seen.snapshot_ms),
                (unsigned long long)r[i].seen.snapshot_bytes);
        put(b, "}");
    }
    put(b, "\n]\n");
    free(r);
}
