/* visible_devices.c - see visible_devices.h. In a session the client's
 * value came from the network: the parent checked it is printable and
 * bounded (hello_decode_visible_request); here nothing is trusted beyond
 * that. */
#include "visible_devices.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int visible_entry_ok(const char *e, size_t len)
{
    if (len == 0 || len > VISIBLE_ENTRY_MAX) return 0;
    int digits = 1;
    for (size_t i = 0; i < len; i++)
        if (!isdigit((unsigned char)e[i])) digits = 0;
    if (digits) return len <= 4;
    if (len < 5 || (strncmp(e, "GPU-", 4) != 0 && strncmp(e, "MIG-", 4) != 0)) return 0;
    for (size_t i = 4; i < len; i++)
        if (!isalnum((unsigned char)e[i]) && e[i] != '-' && e[i] != '/') return 0; /* MIG-GPU-.../1/0 too */
    return 1;
}

/* The server's list, split: at most VISIBLE_LIST_MAX entries, each as given. */
struct server_list {
    int n;
    const char *at[VISIBLE_LIST_MAX];
    size_t len[VISIBLE_LIST_MAX];
};

static void split_server(const char *list, struct server_list *s)
{
    s->n = 0;
    for (const char *p = list; *p && s->n < VISIBLE_LIST_MAX;) {
        size_t len = strcspn(p, ",");
        s->at[s->n] = p;
        s->len[s->n++] = len;
        p += len;
        if (*p == ',') p++;
    }
}

/* The server entry client entry e (len bytes) names: by index into the
 * server's list, or a UUID it names (letters in either case, as
 * nvidia-smi and the driver take them). -1: none. */
static int server_entry_named(const struct server_list *s, const char *e, size_t len)
{
    if (isdigit((unsigned char)e[0])) {
        int i = atoi(e); /* at most 4 digits (visible_entry_ok), followed by ',' or the end */
        return i < s->n ? i : -1;
    }
    for (int i = 0; i < s->n; i++)
        if (s->len[i] == len && strncasecmp(s->at[i], e, len) == 0) return i;
    return -1;
}

/* Whether list (comma-separated) holds e already. */
static int already_in(const char *list, const char *e, size_t len)
{
    for (const char *p = list; *p;) {
        size_t l = strcspn(p, ",");
        if (l == len && strncasecmp(p, e, len) == 0) return 1;
        p += l;
        if (*p == ',') p++;
    }
    return 0;
}

static int append(char *out, size_t outlen, size_t *at, const char *e, size_t len)
{
    size_t need = (*at ? 1 : 0) + len + 1;
    if (*at + need > outlen) return -1;
    if (*at) out[(*at)++] = ',';
    memcpy(out + *at, e, len);
    *at += len;
    out[*at] = '\0';
    return 0;
}

int visible_compose(const char *server, const char *client, char *out, size_t outlen)
{
    struct server_list s;
    if (server) split_server(server, &s);
    size_t at = 0;
    int n = 0;
    out[0] = '\0'; /* outlen > 0: the callers' buffers */
    for (const char *p = client; *p;) {
        size_t len = strcspn(p, ",");
        if (!visible_entry_ok(p, len)) break; /* as the driver: an invalid entry ends the list */
        const char *e = p;
        size_t elen = len;
        if (server) {
            int i = server_entry_named(&s, p, len);
            if (i < 0) break; /* not exposed by this server: the list ends here */
            e = s.at[i];
            elen = s.len[i];
        }
        /* A GPU listed twice ends the list too; composing it would read
         * as a --gpus entry the driver lacks (gpu_pool_check). */
        if (already_in(out, e, elen) || append(out, outlen, &at, e, elen) != 0) break;
        n++;
        p += len;
        if (*p == ',') p++;
    }
    return n;
}

int visible_select(const char *list, const char *client, int *pick, int max)
{
    struct server_list s;
    split_server(list, &s);
    int n = 0;
    for (const char *p = client; *p && n < max;) {
        size_t len = strcspn(p, ",");
        if (!visible_entry_ok(p, len)) break; /* as the driver: an invalid entry ends the list */
        int i = server_entry_named(&s, p, len);
        for (int k = 0; k < n && i >= 0; k++)
            if (pick[k] == i) i = -1; /* listed twice: the list ends here, as in visible_compose */
        if (i < 0) break;
        pick[n++] = i;
        p += len;
        if (*p == ',') p++;
    }
    return n;
}

void visible_entry_at(const char *list, int k, char *out, size_t outlen)
{
    const char *p = list;
    for (int i = 0; i < k && p; i++) {
        p = strchr(p, ',');
        if (p) p++;
    }
    size_t len = p ? strcspn(p, ",") : 0;
    if (len == 0) snprintf(out, outlen, "?");
    else snprintf(out, outlen, "%.*s", (int)len, p);
}
