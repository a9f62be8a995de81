/* test_module_known.c - the two ends' counts of kept module images
 * (docs/architecture.md, 3.8.1): the client's table (src/client/
 * module_known.c) takes for kept only what the session's
 * (src/server/module_pins.c) keeps, over a sequence of loads that reaches
 * MODULE_PIN_MAX; a session that moved keeps nothing, and the client
 * forgets; a parameter layout learnt at a launch comes with later loads
 * of the image; and an image's digest (src/client/image_digest.c) follows a
 * change of any byte of a buffer reused at the same address and length. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "client/image_digest.h"
#include "client/module_known.h"
#include "client/servers.h"
#include "server/host_quota.h"
#include "server/module_pins.h"

/* What module_known.c needs of the client: the servers, and their moves. */
struct server servers[SCUDA_MAX_SERVERS];
static unsigned moves;
unsigned resume_moves(struct server *s)
{
    (void)s;
    return moves;
}

static void key_of(int n, uint8_t key[AUTH_SHA256_LEN])
{
    memset(key, 0, AUTH_SHA256_LEN);
    key[0] = (uint8_t)n;
    key[9] = 0x5a;
}

static struct func_desc one_func = {.name = "fill_u32"};

/* A successful load of image n (len bytes) on both ends; what the
 * client's note said (1 kept now, 0 kept already, -1 not kept). */
static int loaded(int n, uint64_t len, const void *bytes)
{
    uint8_t key[AUTH_SHA256_LEN];
    key_of(n, key);
    int kept = module_known_note(0, key, len, 0, &one_func, 1);
    module_pin(key, bytes, (size_t)len);
    return kept;
}

static int client_knows(int n, uint64_t len)
{
    uint8_t key[AUTH_SHA256_LEN];
    key_of(n, key);
    struct func_desc *f = NULL;
    uint32_t count = 0;
    int known = module_known_get(0, key, len, 0, &f, &count);
    if (known) {
        CHECK(count == 1 && strcmp(f[0].name, "fill_u32") == 0);
        free(f[0].name);
        free(f);
    }
    return known;
}

static int session_keeps(int n, uint64_t len)
{
    uint8_t key[AUTH_SHA256_LEN];
    key_of(n, key);
    return module_pinned(key, len) != NULL;
}

static void budget(void)
{
    static char small[4096];
    memset(small, 7, sizeof small);
    /* Image 1 takes all but 1000 bytes of the budget; the session cannot
     * copy it (its quota is 1 MiB) but counts it, as the client does. */
    host_quota_init(1u << 20);
    CHECK(loaded(1, MODULE_PIN_MAX - 1000, small) == 1);
    CHECK(client_knows(1, MODULE_PIN_MAX - 1000) && !session_keeps(1, MODULE_PIN_MAX - 1000));
    CHECK(loaded(2, 2000, small) == -1); /* does not fit: neither end keeps it */
    CHECK(!client_knows(2, 2000) && !session_keeps(2, 2000));
    CHECK(loaded(3, 600, small) == 1); /* fits */
    CHECK(client_knows(3, 600) && session_keeps(3, 600));
    CHECK(memcmp(module_pinned((uint8_t[AUTH_SHA256_LEN]){3, [9] = 0x5a}, 600), small, 600) == 0);
    CHECK(loaded(3, 600, small) == 0); /* the same image again: counted once */
    loaded(4, 400, small); /* exactly the rest */
    CHECK(client_knows(4, 400) && session_keeps(4, 400));
    loaded(5, 1, small); /* nothing left */
    CHECK(!client_knows(5, 1) && !session_keeps(5, 1));
    CHECK(!client_knows(3, 601) && !client_knows(9, 600)); /* another length, another image */
    /* A move: the session there keeps nothing, and the client forgets. */
    moves++;
    CHECK(!client_knows(3, 600) && !client_knows(4, 400));
}

/* A layout learnt at one module's launch comes with later loads. */
static void layouts(void)
{
    uint8_t key[AUTH_SHA256_LEN];
    key_of(42, key);
    module_known_note(0, key, 100, 1, &one_func, 1);
    uint32_t offset[2] = {0, 8}, size[2] = {8, 4};
    struct func_desc learnt = {.name = "fill_u32", .nparams = 2, .offset = offset, .size = size, .param_bytes = 12,
                               .layout_known = 1};
    struct func_desc other = learnt;
    other.name = "not_fill";
    module_known_learn(0, key, 100, 1, 0, &other); /* names disagree: ignored */
    struct func_desc *f = NULL;
    uint32_t n = 0;
    CHECK(module_known_get(0, key, 100, 1, &f, &n) && n == 1 && !f[0].layout_known);
    free(f[0].name), free(f[0].offset), free(f[0].size), free(f);
    module_known_learn(0, key, 100, 1, 1, &learnt); /* no such function */
    module_known_learn(0, key, 100, 1, 0, &learnt);
    CHECK(module_known_get(0, key, 100, 1, &f, &n) && n == 1 && f[0].layout_known && f[0].nparams == 2 &&
          f[0].offset[1] == 8 && f[0].size[1] == 4 && f[0].param_bytes == 12 && f[0].offset != offset);
    free(f[0].name), free(f[0].offset), free(f[0].size), free(f);
    CHECK(!module_known_get(0, key, 100, 0, &f, &n)); /* as a module: another entry */
}

static void digests(void)
{
    size_t len = 256 << 10;
    unsigned char *buf = malloc(len);
    for (size_t i = 0; i < len; i++) buf[i] = (unsigned char)(i * 131 + 7);
    uint8_t d1[AUTH_SHA256_LEN], d2[AUTH_SHA256_LEN], want[AUTH_SHA256_LEN];
    CHECK(image_digest(buf, len, d1) == 0); /* hashed */
    CHECK(image_digest(buf, len, d2) == 1 && memcmp(d1, d2, sizeof d1) == 0); /* remembered */
    /* A kernel rebuilt into the same buffer, one constant apart, deep
     * inside (where sampled blocks would not look). */
    buf[len / 2 + 4093] ^= 1;
    CHECK(image_digest(buf, len, d2) == 0);
    auth_sha256_digest(buf, len, want);
    CHECK(memcmp(d2, want, sizeof want) == 0 && memcmp(d1, d2, sizeof d1) != 0);
    CHECK(image_digest(buf, len - 1, d2) == 0); /* another length is another image */
    free(buf);
}

int main(void)
{
    budget();
    layouts();
    digests();
    printf("%d checks, %d failures\n", checks, failures);
    return failures != 0;
}
