/* procaddr_probe.c - record what a real driver's cuGetProcAddress_v2 returns,
 * in the format of codegen/testdata/procaddr-driver580.txt.
 *
 * Run it on a machine with the real driver (no SCUDA):
 *   gcc -O1 -o probe codegen/tools/procaddr_probe.c -ldl
 *   ./probe codegen/libcuda-580-exports.txt NAMES > procaddr-driverNNN.txt
 * NAMES lists the symbols to ask for, one a line: the PFN base names from
 * cudaTypedefs.h, the exports, the names cudart asks for and a made-up one;
 * the list behind the committed fixture is its first column:
 *   awk '!/^#/{print $1}' codegen/testdata/procaddr-driver580.txt | uniq
 *
 * For each name and flags 0, 1 and 2 (default, legacy stream, per-thread
 * default stream) it asks at every version 1000..MAXVER in steps of 10 and
 * prints a line whenever the answer changes: NAME FLAGS VERSION STATUS
 * SYMBOL, where SYMBOL is the export whose address came back (- for NULL). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXVER 13000

typedef int (*gpa_t)(const char *, void **, int, unsigned long long, int *);

static char *names[4096];
static void *addrs[4096];
static int nexp;

static const char *name_of(void *p)
{
    if (!p) return "-";
    for (int i = 0; i < nexp; i++)
        if (addrs[i] == p) return names[i];
    return "?unknown";
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s EXPORTS NAMES\n", argv[0]);
        return 2;
    }
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    char line[256];
    FILE *f = fopen(argv[1], "r");
    if (!f) return 1;
    while (nexp < 4096 && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        names[nexp] = strdup(line);
        addrs[nexp] = dlsym(h, line);
        if (!addrs[nexp]) fprintf(stderr, "missing export %s\n", line);
        nexp++;
    }
    fclose(f);
    int dv = 0;
    ((int (*)(int *))dlsym(h, "cuDriverGetVersion"))(&dv);
    ((int (*)(unsigned))dlsym(h, "cuInit"))(0);
    printf("# cuGetProcAddress_v2 of the real driver (cuDriverGetVersion %d), recorded by\n"
           "# codegen/tools/procaddr_probe.c: NAME FLAGS VERSION STATUS SYMBOL, one line per change.\n", dv);
    gpa_t gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
    f = fopen(argv[2], "r");
    if (!f) return 1;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || line[0] == '#') continue;
        for (unsigned long long flags = 0; flags < 3; flags++) {
            char prev[512] = "", cur[512];
            for (int v = 1000; v <= MAXVER; v += 10) {
                void *p = NULL;
                int st = -1;
                int r = gpa(line, &p, v, flags, &st);
                if (r != 0) st = 100 + r;
                snprintf(cur, sizeof cur, "%d %s", st, name_of(p));
                if (strcmp(cur, prev) != 0) {
                    printf("%s %llu %d %s\n", line, flags, v, cur);
                    strcpy(prev, cur);
                }
            }
        }
    }
    fclose(f);
    return 0;
}
