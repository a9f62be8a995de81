/* migrate_links.c - see migrate_links.h. */
#define _GNU_SOURCE
#include "migrate_links.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "migrate_landing.h"
#include "migrate_switch.h"
#include "peer_link.h"
#include "session.h"
#include "../common/log.h"
#include "../common/messages.gen.h"
#include "../common/tls.h"
#include "../common/transport.h"

/* As an item of the main connection: a stalled peer ends the copy. */
#define LINK_TIMEOUT_MS 30000
#define GRANT_LEN (4 + PEER_SECRET_LEN)

/* ---- the exporter ------------------------------------------------------------ */

/* SCUDA_MIGRATE_LINKS of this server's environment, else the default. */
static int links_wanted(void)
{
    const char *v = getenv("SCUDA_MIGRATE_LINKS");
    if (!v || !*v) return MIGRATE_LINKS_DEFAULT;
    char *end;
    long n = strtol(v, &end, 10);
    if (*end || n < 0 || n > MIGRATE_LINKS_MAX) {
        static int said;
        if (!said++)
            LOG_WARN("SCUDA_MIGRATE_LINKS=%s is not a number from 0 to %d; using %d", v, MIGRATE_LINKS_MAX,
                     MIGRATE_LINKS_DEFAULT);
        return MIGRATE_LINKS_DEFAULT;
    }
    return (int)n;
}

/* Dial the grants in it (MIG_LINKS) and say which joined. */
static int dial_grants(int fd, uint32_t *seq, const char *to, uint32_t pid, const struct msg_migrate_item *it,
                       struct migrate_links *l)
{
    uint64_t used = 0;
    uint64_t n = it->a <= MIGRATE_LINKS_MAX && it->data_len == it->a * GRANT_LEN ? it->a : 0;
    const char *fp = it->name ? it->name : "";
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *g = (const uint8_t *)it->data + i * GRANT_LEN;
        uint32_t slot;
        memcpy(&slot, g, 4);
        char err[300];
        int lfd = slot < 64 ? peer_dial(to, pid, slot, g + 4, fp, err, sizeof err) : -1;
        if (lfd < 0) {
            LOG_WARN("session %d: a link for the memory to %s was not joined (%s); the others carry it", (int)getpid(),
                     to, slot < 64 ? err : "a bad slot");
            continue;
        }
        io_set_timeout(lfd, LINK_TIMEOUT_MS);
        l->fd[l->n++] = lfd;
        used |= 1ull << slot;
    }
    struct msg_migrate_item u = {.kind = MIG_LINKS_USED, .a = used};
    return migrate_send_item(fd, &u, (*seq)++);
}

int migrate_links_open(int fd, uint32_t *seq, const char *to, uint32_t pid, uint64_t bytes, struct migrate_links *l,
                       char *why, size_t whylen)
{
    l->n = 0;
    int want = links_wanted();
    if (want == 0 || bytes < MIGRATE_LINKS_MIN_BYTES || !to || !to[0]) return 0;
    struct msg_migrate_item q = {.kind = MIG_LINKS_QUERY, .a = (uint64_t)want};
    if (migrate_send_item(fd, &q, (*seq)++) != 0) {
        snprintf(why, whylen, "the connection to the other server failed");
        return -1;
    }
    void *payload = NULL;
    struct msg_arena a;
    msg_arena_init(&a);
    struct msg_migrate_item it;
    int rc = migrate_read_item(fd, LINK_TIMEOUT_MS, &payload, &a, &it, why, whylen);
    if (rc == 0 && it.kind != MIG_LINKS) {
        snprintf(why, whylen, "the other server answered the query for links with an item of kind %u", it.kind);
        rc = -1;
    }
    if (rc == 0 && dial_grants(fd, seq, to, pid, &it, l) != 0) {
        snprintf(why, whylen, "the connection to the other server failed");
        rc = -1;
    }
    free(payload);
    msg_arena_free(&a);
    if (rc != 0) migrate_links_close(l, 0, NULL);
    return rc;
}

void migrate_links_close(struct migrate_links *l, int ok, const uint64_t *bytes)
{
    for (int i = 0; i < l->n; i++) {
        struct msg_migrate_item end = {.kind = MIG_END, .b = bytes ? bytes[i] : 0};
        if (ok) migrate_send_item(l->fd[i], &end, 0);
        io_close(l->fd[i]);
    }
    l->n = 0;
}

/* ---- the importer ------------------------------------------------------------ */

struct reader {
    int fd;
    pthread_t t;
    int started;
    struct migrate_landing *landing;
    int main_fd;
    uint64_t bytes;
};

static struct {
    struct reader r[MIGRATE_LINKS_MAX];
    int n;
} readers;

CUresult migrate_links_grant(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl)
{
    uint8_t grants[MIGRATE_LINKS_MAX * GRANT_LEN];
    uint64_t n = 0;
    for (uint64_t want = it->a < MIGRATE_LINKS_MAX ? it->a : MIGRATE_LINKS_MAX; n < want; n++) {
        uint8_t *g = grants + n * GRANT_LEN;
        int slot = peer_grant(g + 4);
        if (slot < 0) break; /* the client's links hold the slots: fewer links */
        uint32_t u = (uint32_t)slot;
        memcpy(g, &u, 4);
    }
    struct msg_migrate_item ans = {.kind = MIG_LINKS, .a = n, .data = grants, .data_len = n * GRANT_LEN,
                                   .name = s->opt->tls ? tls_server_fingerprint(s->opt->tls) : ""};
    int rc = migrate_send_item(s->fd, &ans, 0);
    memset(grants, 0, sizeof grants);
    if (rc == 0) return CUDA_SUCCESS;
    snprintf(why, wl, "the exporting server went away");
    return CUDA_ERROR_INVALID_VALUE;
}

/* One item from the link into a slot of the landing: its bytes posted,
 * or the link's end. Returns 1 at a good end, 0 to go on, -1 (why). */
static int read_one(struct reader *r, char *why, size_t wl)
{
    int slot = migrate_landing_take(r->landing);
    size_t cap;
    uint8_t *buf = migrate_landing_slot_buf(r->landing, slot, &cap);
    void *payload = NULL;
    struct msg_arena a;
    msg_arena_init(&a);
    struct msg_migrate_item it;
    int rc = migrate_read_item_into(r->fd, LINK_TIMEOUT_MS, buf, cap, &payload, &a, &it, why, wl);
    if (rc == 0 && it.kind == MIG_BYTES && it.data && it.data_len) {
        rc = migrate_landing_bytes(r->landing, slot, it.id, it.a, it.data, it.data_len, why, wl) == CUDA_SUCCESS ? 0 : -1;
        if (rc == 0) r->bytes += it.data_len;
        slot = -1; /* posted or given up */
    } else if (rc == 0 && it.kind == MIG_END) {
        rc = it.b == r->bytes ? 1 : -1;
        if (rc < 0)
            snprintf(why, wl, "a link of the memory ended after %llu bytes, announcing %llu", (unsigned long long)r->bytes,
                     (unsigned long long)it.b);
    } else if (rc == 0) {
        snprintf(why, wl, "an item of kind %u on a link of the memory", it.kind);
        rc = -1;
    }
    if (slot >= 0) migrate_landing_give(r->landing, slot);
    free(payload);
    msg_arena_free(&a);
    return rc;
}

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    char why[200] = "";
    int rc;
    while ((rc = read_one(r, why, sizeof why)) == 0) {
    }
    if (rc < 0) {
        migrate_landing_fail(r->landing, why);
        shutdown(r->main_fd, SHUT_RD); /* the import stops reading, and answers */
    }
    return NULL;
}

CUresult migrate_links_read(const struct msg_migrate_item *it, struct migrate_landing *l, int main_fd, char *why,
                            size_t wl)
{
    for (uint32_t slot = 0; slot < 64; slot++) {
        if (!(it->a >> slot & 1)) continue;
        if (readers.n == MIGRATE_LINKS_MAX) {
            snprintf(why, wl, "the exporter named more than %d links (slot %u is one too many)", MIGRATE_LINKS_MAX, slot);
            return CUDA_ERROR_INVALID_VALUE;
        }
        int fd = peer_link_take(slot);
        if (fd < 0) {
            snprintf(why, wl, "the exporter named link slot %u, which holds no link of it", slot);
            return CUDA_ERROR_INVALID_VALUE;
        }
        io_set_timeout(fd, LINK_TIMEOUT_MS);
        struct reader *r = &readers.r[readers.n++];
        *r = (struct reader){.fd = fd, .landing = l, .main_fd = main_fd};
        r->started = pthread_create(&r->t, NULL, reader_main, r) == 0;
        if (!r->started) {
            snprintf(why, wl, "no thread to read a link of the memory");
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    return CUDA_SUCCESS;
}

void migrate_links_join(int stop, uint64_t *bytes)
{
    for (int i = 0; i < readers.n; i++) {
        struct reader *r = &readers.r[i];
        if (stop) shutdown(r->fd, SHUT_RDWR);
        if (r->started) pthread_join(r->t, NULL);
        io_close(r->fd);
        if (bytes) *bytes += r->bytes;
    }
    readers.n = 0;
}
