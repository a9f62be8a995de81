/* test_gdev.c - the client's device list over several servers
 * (src/client/gdev.c): servers' devices in server order, each with its
 * server and local ordinal; one server's list is its own; a list that
 * would pass SCUDA_MAX_GLOBAL_DEVICES is refused whole. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "client/gdev.h"

/* Only compared by address here. */
struct server {
    int index;
};

static void infos(struct session_info *si, unsigned n, char tag)
{
    memset(si, 0, sizeof *si);
    si->device_count = n;
    for (unsigned i = 0; i < n; i++) snprintf(si->dev[i].name, sizeof si->dev[i].name, "%c%u", tag, i);
}

/* A list of servers a (2 devices) and b (1), each device's UUID ending
 * in a byte of its own. */
static void two_servers(struct gdev_table *t, struct session_info *a, struct session_info *b, struct server *sa,
                        struct server *sb)
{
    int g0;
    infos(a, 2, 'a');
    infos(b, 1, 'b');
    a->dev[0].uuid.bytes[15] = 0x10, a->dev[1].uuid.bytes[15] = 0x11, b->dev[0].uuid.bytes[15] = 0x20;
    t->count = 0;
    gdev_append(t, sa, a, &g0);
    gdev_append(t, sb, b, &g0);
}

/* CUDA_VISIBLE_DEVICES over the list of several servers: indices and
 * UUIDs pick and reorder, the first entry naming nothing ends it. */
static void visible(void)
{
    static struct session_info a, b;
    struct server sa = {0}, sb = {1};
    static struct gdev_table t;
    two_servers(&t, &a, &b, &sa, &sb);
    CHECK(gdev_apply_visible(&t, "2,0") == 2 && t.dev[0].s == &sb && t.dev[0].local == 0 && t.dev[1].s == &sa &&
          t.dev[1].local == 0);
    two_servers(&t, &a, &b, &sa, &sb);
    CHECK(gdev_apply_visible(&t, "") == 0 && t.count == 0);
    two_servers(&t, &a, &b, &sa, &sb);
    CHECK(gdev_apply_visible(&t, "1,3,0") == 1 && t.dev[0].local == 1); /* 3 names none: the list ends */
    two_servers(&t, &a, &b, &sa, &sb);
    CHECK(gdev_apply_visible(&t, "1,1,0") == 1); /* a repeat ends it too */
    two_servers(&t, &a, &b, &sa, &sb);
    CHECK(gdev_apply_visible(&t, "GPU-00000000-0000-0000-0000-000000000020,0") == 2 && t.dev[0].s == &sb &&
          t.dev[1].s == &sa && t.dev[1].local == 0);
    two_servers(&t, &a, &b, &sa, &sb);
    CHECK(gdev_apply_visible(&t, "GPU-00000000-0000-0000-0000-0000000000FF") == 0);
}

int main(void)
{
    static struct session_info a, b, big;
    struct server sa = {0}, sb = {1}, sc = {2};
    static struct gdev_table t;
    int g0 = -7;

    /* one server: ordinal = local ordinal */
    infos(&a, 2, 'a');
    CHECK(gdev_append(&t, &sa, &a, &g0) == 0 && g0 == 0 && t.count == 2);
    for (int g = 0; g < 2; g++) {
        const struct gdev *d = gdev_get(&t, g);
        CHECK(d && d->s == &sa && d->local == g && d->info == &a.dev[g]);
        CHECK(gdev_find(&t, &sa, g) == g);
    }
    CHECK(gdev_get(&t, 2) == NULL && gdev_get(&t, -1) == NULL);

    /* a second server's devices follow, numbered from 0 there */
    infos(&b, 3, 'b');
    CHECK(gdev_append(&t, &sb, &b, &g0) == 0 && g0 == 2 && t.count == 5);
    const struct gdev *d = gdev_get(&t, 4);
    CHECK(d && d->s == &sb && d->local == 2 && strcmp(d->info->name, "b2") == 0);
    CHECK(gdev_find(&t, &sb, 0) == 2 && gdev_find(&t, &sb, 3) == -1 && gdev_find(&t, &sc, 0) == -1);

    /* a server with no devices takes no ordinal */
    infos(&big, 0, 'c');
    CHECK(gdev_append(&t, &sc, &big, &g0) == 0 && g0 == 5 && t.count == 5);

    /* too many: refused whole, the table unchanged */
    infos(&big, SCUDA_MAX_DEVICES, 'c');
    CHECK(gdev_append(&t, &sc, &big, &g0) == 0 && t.count == 5 + SCUDA_MAX_DEVICES);
    int before = t.count;
    CHECK(gdev_append(&t, &sc, &big, &g0) == -1 && t.count == before);
    /* a malformed count is refused too */
    big.device_count = SCUDA_MAX_DEVICES + 1;
    static struct gdev_table empty;
    CHECK(gdev_append(&empty, &sc, &big, &g0) == -1 && empty.count == 0);

    visible();
    printf("test_gdev: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
