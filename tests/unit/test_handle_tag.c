/* test_handle_tag.c - the server tag in the client's handle ids
 * (src/client/handle_tag.h): server 0's tag changes no id, a tag survives
 * the round trip and is stripped for the wire, the special stream ids are
 * never tagged, and the tag bits overlap neither the session's id range
 * (bit 62) nor bit 63. */
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "client/handle_tag.h"
#include "server/dispatch.h"

int main(void)
{
    /* the tag bits are free in both id ranges and below bit 63 */
    CHECK((HANDLE_TAG_MASK & HANDLE_SERVER_ID_BASE) == 0);
    CHECK((HANDLE_TAG_MASK & (1ull << 63)) == 0);
    CHECK(HANDLE_TAG_MASK == 0x3full << 56);

    /* server 0: ids are unchanged, client and session ids alike */
    const uint64_t ids[] = {0x10000, 0x10010, 0xfff0, HANDLE_SERVER_ID_BASE | 0x10, (1ull << 56) - 16};
    for (unsigned i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        CHECK(handle_tag(ids[i], 0) == ids[i]);
        CHECK(handle_untag(ids[i]) == ids[i]);
        CHECK(handle_tag_of(ids[i]) == 0);
    }

    /* another server: the tag is kept, the wire id is the untagged one */
    uint64_t t = handle_tag(0x10020, 3);
    CHECK(t == (0x10020 | 3ull << 56));
    CHECK(handle_tag_of(t) == 3 && handle_untag(t) == 0x10020);
    CHECK(t % 16 == 0); /* still looks like an aligned pointer */
    uint64_t st = handle_tag(HANDLE_SERVER_ID_BASE | 0x30, 7);
    CHECK(handle_tag_of(st) == 7 && handle_untag(st) == (HANDLE_SERVER_ID_BASE | 0x30));
    CHECK((st & HANDLE_SERVER_ID_BASE) != 0); /* still a session id */

    /* re-tagging replaces; "every server" is its own tag */
    CHECK(handle_tag(t, 5) == (0x10020 | 5ull << 56));
    CHECK(handle_tag(t, 0) == 0x10020);
    uint64_t all = handle_tag(0x10040, HANDLE_TAG_ALL);
    CHECK(handle_tag_of(all) == HANDLE_TAG_ALL && handle_untag(all) == 0x10040);
    CHECK(handle_tag(0x10040, 64) == 0x10040); /* out of range: the index wraps into 6 bits, no other bit */

    /* NULL and the special streams (legacy 1, per-thread 2) stay themselves */
    for (uint64_t id = 0; id <= HANDLE_TAG_SPECIAL_MAX; id++) {
        CHECK(handle_tag(id, 4) == id);
        CHECK(handle_tag_of(handle_tag(id, 4)) == 0);
    }

    printf("test_handle_tag: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
