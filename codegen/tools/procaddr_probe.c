/* probe.c - record what the real driver's cuGetProcAddress_v2 returns. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

typedef int (*gpa_t)(const char *, void **, int, unsigned long long, int *);
typedef int (*init_t)(unsigned);

static char *names[4096]; static void *addrs[4096]; static int nexp;

static void lookup_names(void *p, char *buf, size_t n)
{
    buf[0] = 0;
    if (!p) { snprintf(buf, n, "NULL"); return; }
    for (int i = 0; i < nexp; i++) if (addrs[i] == p) {
        if (buf[0]) strncat(buf, "|", n - strlen(buf) - 1);
        strncat(buf, names[i], n - strlen(buf) - 1);
    }
    if (!buf[0]) {
        Dl_info di; if (dladdr(p, &di) && di.dli_sname) snprintf(buf, n, "?%s+%ld", di.dli_sname, (long)((char*)p-(char*)di.dli_saddr));
        else snprintf(buf, n, "?unknown");
    }
}

int main(int argc, char **argv)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
    FILE *f = fopen(argv[1], "r"); char line[256];
    while (fgets(line, sizeof line, f)) { line[strcspn(line, "\n")] = 0; names[nexp] = strdup(line); addrs[nexp] = dlsym(h, line); nexp++; }
    fclose(f);
    for (int i = 0; i < nexp; i++) if (!addrs[i]) printf("MISSING %s\n", names[i]);
    Dl_info di; dladdr(dlsym(h, "cuInit"), &di); printf("LIB %s\n", di.dli_fname);
    init_t init = (init_t)dlsym(h, "cuInit");
    int dv = 0; ((int(*)(int*))dlsym(h, "cuDriverGetVersion"))(&dv); printf("DRIVER %d\n", dv);
    printf("INIT %d\n", init(0));
    gpa_t gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
    f = fopen(argv[2], "r");
    static const unsigned long long flags[3] = {0, 1, 2};
    char prev[1024], cur[1024], nb[900];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        for (int fi = 0; fi < 3; fi++) {
            prev[0] = 0;
            for (int v = 1000; v <= 13200; v += 10) {
                void *p = NULL; int st = -1;
                int r = gpa(line, &p, v, flags[fi], &st);
                lookup_names(p, nb, sizeof nb);
                snprintf(cur, sizeof cur, "r=%d st=%d %s", r, st, nb);
                if (strcmp(cur, prev)) { printf("Q %s %llu %d %s\n", line, flags[fi], v, cur); strcpy(prev, cur); }
            }
        }
    }
    return 0;
}
