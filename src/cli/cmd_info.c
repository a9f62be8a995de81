/* cmd_info.c - `scuda info [--server HOST:PORT]`.
 *
 * Loads SCUDA's own libcuda.so.1 by full path and asks it, through the
 * ordinary driver API, what a CUDA program would see: the driver version
 * and each device. This tests the whole path a real program takes (shim,
 * connection, handshake, session) rather than a side channel. The round
 * trip comes from the shim's private export scuda_client_ping. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cli.h"

#include <cuda.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const CMD = "scuda info";

#define PING_COUNT 200

/* Entry points, typed from cuda.h's own declarations so a mismatch with the
 * header cannot creep in. cuda.h is compiled with
 * __CUDA_API_VERSION_INTERNAL, so each name is the literal symbol. */
struct driver {
    __typeof__(cuInit) *cuInit;
    __typeof__(cuDriverGetVersion) *cuDriverGetVersion;
    __typeof__(cuDeviceGetCount) *cuDeviceGetCount;
    __typeof__(cuDeviceGet) *cuDeviceGet;
    __typeof__(cuDeviceGetName) *cuDeviceGetName;
    __typeof__(cuDeviceTotalMem_v2) *cuDeviceTotalMem_v2;
    __typeof__(cuDeviceGetAttribute) *cuDeviceGetAttribute;
    __typeof__(cuDeviceGetPCIBusId) *cuDeviceGetPCIBusId;
    __typeof__(cuGetErrorName) *cuGetErrorName;
    __typeof__(cuGetErrorString) *cuGetErrorString;
    /* Private to the shim: fills rtt_us[0..iterations) with one round trip
     * each, in microseconds. Returns 0 on success. NULL if not exported. */
    int (*scuda_client_ping)(double *rtt_us, int iterations);
};

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: scuda info [--server HOST:PORT]\n"
            "\n"
            "Show the server's GPUs, its driver version, and the round-trip time to it,\n"
            "as a CUDA program run with 'scuda run' would see them.\n"
            "\n"
            "Options:\n"
            "  --server HOST:PORT  server to ask (default: SCUDA_SERVER, then the address\n"
            "                      saved by 'scuda HOST:PORT' in ~/.config/scuda/host)\n"
            "  -h, --help          show this help\n"
            "\n"
            "Environment: SCUDA_SERVER, SCUDA_TOKEN, SCUDA_LOG, SCUDA_LIB_DIR.\n");
}

/* ---- loading the shim ---- */

static void *load_shim(const char *libdir, struct driver *d)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/libcuda.so.1", libdir);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "%s: cannot load the shim: %s.\n  Rebuild SCUDA, or point SCUDA_LIB_DIR at a working build.\n",
                CMD, dlerror());
        return NULL;
    }

#define LOAD(name)                                                                                     \
    if ((d->name = (__typeof__(d->name))dlsym(h, #name)) == NULL) {                                    \
        fprintf(stderr, "%s: %s does not export " #name ": it is not a SCUDA driver shim.\n"             \
                        "  Rebuild SCUDA, or fix SCUDA_LIB_DIR.\n", CMD, path);                        \
        return NULL;                                                                                   \
    }
    LOAD(cuInit)
    LOAD(cuDriverGetVersion)
    LOAD(cuDeviceGetCount)
    LOAD(cuDeviceGet)
    LOAD(cuDeviceGetName)
    LOAD(cuDeviceTotalMem_v2)
    LOAD(cuDeviceGetAttribute)
    LOAD(cuDeviceGetPCIBusId)
    LOAD(cuGetErrorName)
    LOAD(cuGetErrorString)
#undef LOAD
    d->scuda_client_ping = (__typeof__(d->scuda_client_ping))dlsym(h, "scuda_client_ping");
    /* The shim is never dlclosed: it may have started threads. */
    return h;
}

static const char *error_name(const struct driver *d, CUresult r)
{
    static char num[32];
    const char *s = NULL;
    if (d->cuGetErrorName(r, &s) == CUDA_SUCCESS && s != NULL) return s;
    snprintf(num, sizeof num, "CUresult %d", (int)r);
    return num;
}

static void init_failed(const struct driver *d, CUresult r, int have_server, const char *addr)
{
    const char *desc = NULL;
    if (d->cuGetErrorString(r, &desc) != CUDA_SUCCESS) desc = NULL;
    fprintf(stderr, "%s: cuInit failed: %s%s%s%s\n", CMD, error_name(d, r), desc ? " (" : "", desc ? desc : "",
            desc ? ")" : "");
    if (have_server)
        fprintf(stderr,
                "  Check that 'scuda server' is running at %s and reachable from here (its --listen\n"
                "  address, firewalls), and that SCUDA_TOKEN matches the server's token.\n"
                "  SCUDA_LOG=debug shows the connection attempt.\n",
                addr);
    else
        fprintf(stderr,
                "  No SCUDA server is configured, so the shim tried this machine's own driver.\n"
                "  Give a server with --server HOST:PORT or SCUDA_SERVER=HOST:PORT, or save one\n"
                "  with 'scuda HOST:PORT'.\n");
}

/* ---- devices ---- */

struct row {
    char name[256];
    char mem[32];
    char cc[16];
    char sms[16];
    char pci[32];
};

static void fill_row(const struct driver *d, int ordinal, struct row *w)
{
    CUdevice dev;
    size_t bytes;
    int major, minor, sms;

    strcpy(w->name, "?");
    strcpy(w->mem, "?");
    strcpy(w->cc, "?");
    strcpy(w->sms, "?");
    strcpy(w->pci, "?");
    if (d->cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS) return;

    if (d->cuDeviceGetName(w->name, (int)sizeof w->name, dev) != CUDA_SUCCESS) strcpy(w->name, "?");
    if (d->cuDeviceTotalMem_v2(&bytes, dev) == CUDA_SUCCESS)
        snprintf(w->mem, sizeof w->mem, "%.1f GiB", (double)bytes / (1024.0 * 1024.0 * 1024.0));
    if (d->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) == CUDA_SUCCESS &&
        d->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) == CUDA_SUCCESS)
        snprintf(w->cc, sizeof w->cc, "%d.%d", major, minor);
    if (d->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) == CUDA_SUCCESS)
        snprintf(w->sms, sizeof w->sms, "%d", sms);
    if (d->cuDeviceGetPCIBusId(w->pci, (int)sizeof w->pci, dev) != CUDA_SUCCESS) strcpy(w->pci, "?");
}

static int print_devices(const struct driver *d)
{
    int count = 0;
    CUresult r = d->cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "%s: cuDeviceGetCount failed: %s\n", CMD, error_name(d, r));
        return -1;
    }
    printf("Devices:    %d\n", count);
    if (count <= 0) return 0;

    struct row *rows = calloc((size_t)count, sizeof *rows);
    if (rows == NULL) return -1;
    int width = 4; /* "Name" */
    for (int i = 0; i < count; i++) {
        fill_row(d, i, &rows[i]);
        int n = (int)strlen(rows[i].name);
        if (n > width) width = n;
    }
    printf("\n  %-3s %-*s  %10s  %-4s  %4s  %s\n", "#", width, "Name", "Memory", "CC", "SMs", "PCI bus id");
    for (int i = 0; i < count; i++)
        printf("  %-3d %-*s  %10s  %-4s  %4s  %s\n", i, width, rows[i].name, rows[i].mem, rows[i].cc, rows[i].sms,
               rows[i].pci);
    printf("\n");
    free(rows);
    return 0;
}

/* ---- round trip ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void print_rtt(const struct driver *d, int have_server)
{
    if (d->scuda_client_ping == NULL) {
        printf("Round trip: not measured (this shim does not export scuda_client_ping)\n");
        return;
    }
    if (!have_server) {
        printf("Round trip: none (no server: the shim is using this machine's driver)\n");
        return;
    }
    double rtt[PING_COUNT];
    int rc = d->scuda_client_ping(rtt, PING_COUNT);
    if (rc != 0) {
        printf("Round trip: failed (scuda_client_ping returned %d; SCUDA_LOG=debug says why)\n", rc);
        return;
    }
    qsort(rtt, PING_COUNT, sizeof rtt[0], cmp_double);
    double median = (rtt[PING_COUNT / 2 - 1] + rtt[PING_COUNT / 2]) / 2.0;
    printf("Round trip: min %.1f us, median %.1f us (%d pings)\n", rtt[0], median, PING_COUNT);
}

/* ---- the command ---- */

static int parse(int argc, char **argv, const char **server)
{
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return 0;
        }
        int r = cli_option(argc, argv, &i, CMD, "--server", NULL, server);
        if (r < 0) return CLI_USAGE;
        if (r == 0) return cli_unknown_option(CMD, argv[i]);
    }
    return -1; /* go on */
}

int cmd_info(int argc, char **argv)
{
    const char *server = NULL, *source = NULL;
    int rc = parse(argc, argv, &server);
    if (rc >= 0) return rc;

    char libdir[PATH_MAX], addr[1024];
    if (cli_shim_dir(CMD, libdir, sizeof libdir) != 0) return 1;
    int have_server = cli_export_server(CMD, server, addr, sizeof addr, &source);
    if (have_server < 0) return 1;

    struct driver d;
    if (load_shim(libdir, &d) == NULL) return 1;

    if (have_server)
        printf("Server:     %s (from %s)\n", addr, source);
    else
        printf("Server:     none configured (the shim uses this machine's driver, if any)\n");

    CUresult r = d.cuInit(0);
    if (r != CUDA_SUCCESS) {
        init_failed(&d, r, have_server, addr);
        return 1;
    }
    int version = 0;
    if (d.cuDriverGetVersion(&version) == CUDA_SUCCESS)
        printf("Driver:     CUDA %d.%d\n", version / 1000, version % 1000 / 10);
    if (print_devices(&d) != 0) return 1;
    print_rtt(&d, have_server);
    return 0;
}
