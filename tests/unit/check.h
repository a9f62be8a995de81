/* check.h - the unit tests' one assertion macro: counts checks and
 * failures, prints each failure with its place, and keeps going. */
#ifndef SCUDA_TEST_CHECK_H
#define SCUDA_TEST_CHECK_H

#include <stdio.h>

static int failures, checks;

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        checks++;                                                                        \
        if (!(cond)) { failures++; printf("FAIL %s:%d %s\n", __FILE__, __LINE__, #cond); } \
    } while (0)

#endif
