/* test_visible_devices.c - a client's CUDA_VISIBLE_DEVICES composed over
 * the server's list (common/visible_devices.c), and the visible request
 * as the parent decodes it from hostile bytes (common/hello.c). */
#include "common/visible_devices.h"
#include "common/hello.h"

#include <string.h>

#include "check.h"

/* compose(server, client) must give `want`. */
static int composes(const char *server, const char *client, const char *want, int n)
{
    char out[512];
    int got = visible_compose(server, client, out, sizeof out);
    if (got != n || strcmp(out, want) != 0) {
        printf("  '%s' over '%s': '%s' (%d), not '%s' (%d)\n", client, server ? server : "(all)", out, got, want, n);
        return 0;
    }
    return 1;
}

static void compose(void)
{
    const char *uuid2 = "GPU-53435544-412d-5354-414e-44494e000002";
    CHECK(composes("1,3", "1", "3", 1));
    CHECK(composes("1,3", "1,0", "3,1", 2));
    CHECK(composes("1,3", "", "", 0));
    CHECK(composes("1,3", "2", "", 0));         /* beyond the server's list */
    CHECK(composes("1,3", "0,2,1", "1", 1));    /* ends at the first it lacks */
    CHECK(composes("1,3", "0,0", "1", 1));      /* a repeat ends it too */
    CHECK(composes("1,3", "0,-1", "1", 1));     /* not an index */
    CHECK(composes("1,3", "0, 1", "1", 1));     /* nor is " 1" */
    CHECK(composes("1,3", "99999", "", 0));     /* five digits: no index */
    CHECK(composes("1,3", uuid2, "", 0));       /* a UUID it does not name */
    CHECK(composes("0,GPU-53435544-412d-5354-414e-44494e000002", "GPU-53435544-412D-5354-414E-44494E000002,0",
                   "GPU-53435544-412d-5354-414e-44494e000002,0", 2)); /* the server's spelling goes on */
    CHECK(composes(NULL, "2,0", "2,0", 2));     /* every GPU: the driver reads it */
    CHECK(composes(NULL, "2,x,0", "2", 1));
    CHECK(composes(NULL, "MIG-GPU-abc/1/0", "MIG-GPU-abc/1/0", 1));
    CHECK(composes("", "0", "", 0));            /* a server that exposes nothing */
    /* An output too small for an entry ends the list there. */
    char small[4];
    CHECK(visible_compose("10,11,12", "0,1", small, sizeof small) == 1 && strcmp(small, "10") == 0);
    char e[16];
    visible_entry_at("3,1", 1, e, sizeof e);
    CHECK(strcmp(e, "1") == 0);
    visible_entry_at("3,1", 2, e, sizeof e);
    CHECK(strcmp(e, "?") == 0);
}

/* visible_select: the same reading, as positions in the list (a client
 * of several servers picks from its device list so). */
static void select_positions(void)
{
    const char *list = "GPU-aa,GPU-bb,GPU-cc";
    int pick[4] = {-1, -1, -1, -1};
    CHECK(visible_select(list, "2,0", pick, 4) == 2 && pick[0] == 2 && pick[1] == 0);
    CHECK(visible_select(list, "GPU-BB,1", pick, 4) == 1 && pick[0] == 1); /* hex in any case; a repeat ends it */
    CHECK(visible_select(list, "", pick, 4) == 0);
    CHECK(visible_select(list, "3,0", pick, 4) == 0); /* beyond the list: ends at once */
    CHECK(visible_select(list, "0,1,2", pick, 2) == 2); /* at most max */
}

static void request(void)
{
    uint8_t req[VISIBLE_REQ_LEN];
    char out[VISIBLE_MAX + 1], err[256];
    CHECK(hello_visible_request(req, "2,0", err, sizeof err) == 0);
    CHECK(hello_decode_visible_request(req, out) == 0 && strcmp(out, "2,0") == 0);
    CHECK(hello_visible_request(req, "", err, sizeof err) == 0);
    CHECK(hello_decode_visible_request(req, out) == 0 && out[0] == '\0');
    /* The client refuses what it could not send. */
    char big[VISIBLE_MAX + 2];
    memset(big, '1', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK(hello_visible_request(req, big, err, sizeof err) == -1 && strstr(err, "CUDA_VISIBLE_DEVICES"));
    big[VISIBLE_MAX] = '\0';
    CHECK(hello_visible_request(req, big, err, sizeof err) == 0 && hello_decode_visible_request(req, out) == 0 &&
          strlen(out) == VISIBLE_MAX);
    CHECK(hello_visible_request(req, "0\n1", err, sizeof err) == -1);
    /* Hostile bytes: a length beyond the request, a control byte, a byte
     * above ASCII, something after the value. */
    hello_visible_request(req, "0,1", err, sizeof err);
    req[0] = 0xff, req[1] = 0x03;
    CHECK(hello_decode_visible_request(req, out) == -1 && out[0] == '\0');
    hello_visible_request(req, "0,1", err, sizeof err);
    req[3] = 0x01;
    CHECK(hello_decode_visible_request(req, out) == -1);
    hello_visible_request(req, "0,1", err, sizeof err);
    req[3] = 0xc3;
    CHECK(hello_decode_visible_request(req, out) == -1);
    hello_visible_request(req, "0,1", err, sizeof err);
    req[VISIBLE_REQ_LEN - 1] = 'x';
    CHECK(hello_decode_visible_request(req, out) == -1);
}

int main(void)
{
    compose();
    select_positions();
    request();
    printf("%s test_visible_devices: %d checks, %d failures\n", failures ? "FAIL" : "ok", checks, failures);
    return failures ? 1 : 0;
}
