/* gcov_exit.c - linked into `scuda` only under -DSCUDA_COVERAGE=ON, with
 * -Wl,--wrap=_exit: a process that ends with _exit() (every session and
 * server child does) skips the exit handlers that write its gcov counters,
 * so the report would show no server-side code as run. Write them first. */
#include <stdnoreturn.h>

void __gcov_dump(void);
noreturn void __real__exit(int status);

noreturn void __wrap__exit(int status)
{
    __gcov_dump();
    __real__exit(status);
}
