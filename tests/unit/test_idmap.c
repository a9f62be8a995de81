/* test_idmap.c - the id map behind virtual handles: insert, lookup, delete,
 * reserved ids, duplicates, growth past many deletions. */
#include <stdint.h>
#include <stdio.h>

#include "check.h"

#include "common/idmap.h"


int main(void)
{
    struct idmap m = IDMAP_INIT;
    uint32_t tag;
    void *v;
    CHECK(!idmap_get(&m, 5, &tag, &v));                 /* empty map */
    CHECK(idmap_put(&m, 0, 1, NULL) == -1);              /* 0 is reserved */
    CHECK(idmap_put(&m, UINT64_MAX, 1, NULL) == -1);     /* so is the tombstone */
    CHECK(idmap_put(&m, 0x10000, 3, (void *)0x1234) == 0);
    CHECK(idmap_put(&m, 0x10000, 3, (void *)0x9999) == -1); /* no silent overwrite */
    CHECK(idmap_get(&m, 0x10000, &tag, &v) && tag == 3 && v == (void *)0x1234);
    CHECK(idmap_find_value(&m, 3, (void *)0x1234) == 0x10000);
    CHECK(idmap_find_value(&m, 4, (void *)0x1234) == 0);
    CHECK(idmap_del(&m, 0x10000) == (void *)0x1234);
    CHECK(!idmap_get(&m, 0x10000, &tag, &v));
    CHECK(idmap_del(&m, 0x10000) == NULL);

    /* Churn: many inserts and deletes must keep every live id findable. */
    int ok = 1;
    for (uint64_t round = 0; round < 50; round++) {
        for (uint64_t i = 1; i <= 1000; i++)
            if (idmap_put(&m, round * 100000 + i * 16, 1, (void *)(uintptr_t)i) != 0) ok = 0;
        for (uint64_t i = 1; i <= 1000; i += 2) idmap_del(&m, round * 100000 + i * 16);
    }
    for (uint64_t round = 0; round < 50 && ok; round++)
        for (uint64_t i = 1; i <= 1000; i++) {
            int present = idmap_get(&m, round * 100000 + i * 16, &tag, &v);
            if (present != (int)(i % 2 == 0) || (present && v != (void *)(uintptr_t)i)) ok = 0;
        }
    CHECK(ok);
    CHECK(m.used * 4 <= m.cap * 3);
    idmap_clear(&m);
    CHECK(!idmap_get(&m, 2 * 16, &tag, &v));
    CHECK(idmap_put(&m, 16, 1, NULL) == 0); /* usable again after clearing */
    idmap_clear(&m);
    printf("test_idmap: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
