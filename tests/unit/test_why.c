/* test_why.c - why_fail: formats the reason, cuts it to the buffer with a
 * NUL, returns -1, and writes nothing where the caller gave no buffer. */
#include <string.h>

#include "check.h"

#include "common/why.h"

int main(void)
{
    char why[32];
    memset(why, 'x', sizeof why);
    CHECK(why_fail(why, sizeof why, "image %u: %s", 7u, "no code") == -1);
    CHECK(strcmp(why, "image 7: no code") == 0);

    /* A reason longer than the buffer is cut, and still ends in a NUL. */
    char small[8];
    memset(small, 'x', sizeof small);
    CHECK(why_fail(small, sizeof small, "%s", "a reason much longer than eight bytes") == -1);
    CHECK(small[sizeof small - 1] == '\0' && strcmp(small, "a reaso") == 0);

    /* No buffer: nothing is written, and the call still says "failed". */
    CHECK(why_fail(NULL, 0, "%s", "ignored") == -1);
    CHECK(why_fail(NULL, 64, "%s", "ignored") == -1);
    char untouched[4] = "abc";
    CHECK(why_fail(untouched, 0, "%s", "ignored") == -1 && strcmp(untouched, "abc") == 0);

    printf("test_why: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
