/* cmd_info.c - `scuda info [--server HOST:PORT]`.
 *
 * Loads SCUDA's own libcuda.so.1 by full path and asks it, through the
 * ordinary driver API, what a CUDA program would see: the driver version
 * and each device. This tests the whole path a real program takes (shim,
 * connection, handshake, session) rather than a side channel. The round
 * trip comes from the shim's private export scuda_client_ping.
 *
 * SCUDA_SERVER (or --server) may list several servers: the program sees
 * every server's GPUs as one list, so info checks each server, then
 * shows the devices grouped by server with their index in that list
 * (the shim's private scuda_client_device_server says whose each is). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cli.h"
#include "../common/config.h"
#include "../common/why.h"

#include <cuda.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const CMD = "scuda info";

#define PING_COUNT 200
#define INFO_MAX_SERVERS 8 /* the shim's SCUDA_MAX_SERVERS */

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
    /* Private: the SCUDA_SERVER entry device `ordinal` is on, or -1. NULL
     * if not exported (an older shim: every device is the first's). */
    int (*scuda_client_device_server)(int ordinal);
};

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: scuda info [--server HOST:PORT[,HOST:PORT...]] [--json]\n"
            "\n"
            "Show the server's GPUs, its driver version, and the round-trip time to it,\n"
            "as a CUDA program run with 'scuda run' would see them. With several servers\n"
            "(a list, as SCUDA_SERVER takes), every server's GPUs, grouped by server, each\n"
            "with its index in the one list the program sees.\n"
            "\n"
            "Options:\n"
            "  --server HOST:PORT  server(s) to ask (default: SCUDA_SERVER, then the address\n"
            "                      saved by 'scuda HOST:PORT' in ~/.config/scuda/host)\n"
            "  --json              print one JSON object instead of the table\n"
            "  -h, --help          show this help\n"
            "\n"
            "The server is checked first (connection, TLS, versions, token); a failure\n"
            "prints its cause and exits 1.\n"
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
    d->scuda_client_device_server = (__typeof__(d->scuda_client_device_server))dlsym(h, "scuda_client_device_server");
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
    /* With a server, the check before (probe.c) passed: reach, TLS,
     * versions and token are fine, and the shim's own line above names
     * what failed after (a server without a GPU, a driver that failed). */
    if (have_server)
        fprintf(stderr, "  Server %s accepted this client; the shim's message above says what failed\n"
                        "  after that (SCUDA_LOG=debug shows more).\n", addr);
    else
        fprintf(stderr,
                "  No SCUDA server is configured, so the shim tried this machine's own driver.\n"
                "  Give a server with --server HOST:PORT or SCUDA_SERVER=HOST:PORT, or save one\n"
                "  with 'scuda HOST:PORT'.\n");
}

/* ---- devices ---- */

struct row {
    int server; /* its entry in the server list */
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
    w->server = d->scuda_client_device_server ? d->scuda_client_device_server(ordinal) : 0;
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

/* Every device's row, or NULL with *count -1 after printing why. */
static struct row *read_devices(const struct driver *d, int *count)
{
    *count = 0;
    CUresult r = d->cuDeviceGetCount(count);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "%s: cuDeviceGetCount failed: %s\n", CMD, error_name(d, r));
        *count = -1;
        return NULL;
    }
    struct row *rows = calloc(*count > 0 ? (size_t)*count : 1, sizeof *rows);
    if (rows == NULL) {
        fprintf(stderr, "%s: out of memory\n", CMD);
        *count = -1;
        return NULL;
    }
    for (int i = 0; i < *count; i++) fill_row(d, i, &rows[i]);
    return rows;
}

/* The servers the shim uses: SCUDA_SERVER's entries, or the one address. */
struct servers {
    int n;
    char addr[INFO_MAX_SERVERS][1024]; /* as long as cmd_info's addr */
};

static void print_rows(const struct row *rows, int count, int server, int width)
{
    for (int i = 0; i < count; i++)
        if (server < 0 || rows[i].server == server)
            printf("  %-3d %-*s  %10s  %-4s  %4s  %s\n", i, width, rows[i].name, rows[i].mem, rows[i].cc,
                   rows[i].sms, rows[i].pci);
}

static void print_devices(const struct row *rows, int count, const struct servers *sv)
{
    printf("Devices:    %d\n", count);
    if (count <= 0) return;
    int width = 4; /* "Name" */
    for (int i = 0; i < count; i++) {
        int n = (int)strlen(rows[i].name);
        if (n > width) width = n;
    }
    printf("\n  %-3s %-*s  %10s  %-4s  %4s  %s\n", "#", width, "Name", "Memory", "CC", "SMs", "PCI bus id");
    if (sv->n <= 1) print_rows(rows, count, -1, width);
    for (int k = 0; sv->n > 1 && k < sv->n; k++) {
        printf("  server %s:\n", sv->addr[k]);
        print_rows(rows, count, k, width);
    }
    printf("\n");
}

/* ---- round trip ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* min and median of PING_COUNT pings. Returns 0, or -1 with why. */
static int measure_rtt(const struct driver *d, int have_server, double *min, double *median, char *why,
                       size_t whylen)
{
    if (d->scuda_client_ping == NULL)
        return why_fail(why, whylen, "not measured (this shim does not export scuda_client_ping)");
    if (!have_server) return why_fail(why, whylen, "none (no server: the shim is using this machine's driver)");
    double rtt[PING_COUNT];
    int rc = d->scuda_client_ping(rtt, PING_COUNT);
    if (rc != 0) {
        snprintf(why, whylen, "failed (scuda_client_ping returned %d; SCUDA_LOG=debug says why)", rc);
        return -1;
    }
    qsort(rtt, PING_COUNT, sizeof rtt[0], cmp_double);
    *min = rtt[0];
    *median = (rtt[PING_COUNT / 2 - 1] + rtt[PING_COUNT / 2]) / 2.0;
    return 0;
}

/* ---- JSON ---- */

/* s as a JSON string: quotes, backslashes and control bytes escaped. */
static void json_str(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

static void json_server(const char *addr, const char *source)
{
    printf("{\"server\": ");
    if (addr) json_str(addr);
    else printf("null");
    printf(", \"source\": ");
    if (source) json_str(source);
    else printf("null");
}

/* {"server": ..., "ok": false, "error": why} */
static void json_error(const char *addr, const char *source, const char *why)
{
    json_server(addr, source);
    printf(", \"ok\": false, \"error\": ");
    json_str(why);
    printf("}\n");
}

static void json_report(const char *addr, const char *source, const struct servers *sv, int version,
                        const struct row *rows, int count, int have_rtt, double min, double median)
{
    json_server(addr, source);
    printf(", \"servers\": [");
    for (int k = 0; k < sv->n; k++) {
        printf("%s", k ? ", " : "");
        json_str(sv->addr[k]);
    }
    printf("], \"ok\": true, \"driver_version\": %d, \"devices\": [", version);
    for (int i = 0; i < count; i++) {
        printf("%s{\"index\": %d, \"server\": ", i ? ", " : "", i);
        if (rows[i].server >= 0 && rows[i].server < sv->n) json_str(sv->addr[rows[i].server]);
        else printf("null");
        printf(", \"name\": ");
        json_str(rows[i].name);
        printf(", \"memory\": ");
        json_str(rows[i].mem);
        printf(", \"compute_capability\": ");
        json_str(rows[i].cc);
        printf(", \"sms\": ");
        json_str(rows[i].sms);
        printf(", \"pci_bus_id\": ");
        json_str(rows[i].pci);
        printf("}");
    }
    printf("], \"rtt_us\": ");
    if (have_rtt) printf("{\"min\": %.1f, \"median\": %.1f, \"pings\": %d}}\n", min, median, PING_COUNT);
    else printf("null}\n");
}

/* ---- the command ---- */

static int parse(int argc, char **argv, const char **server, int *json)
{
    const struct cli_opt opts[] = {{"--json", NULL, NULL, json}, {"--server", NULL, server, NULL}, {NULL}};
    return cli_parse_options(argc, argv, CMD, opts, usage); /* -1: go on */
}

/* The servers the shim will use, from SCUDA_SERVER's list when that is
 * the source, else the one address. */
static void list_servers(const char *addr, const char *source, struct servers *sv)
{
    const char *list = getenv("SCUDA_SERVER");
    sv->n = 0;
    if (source && strcmp(source, "SCUDA_SERVER") == 0 && list) {
        int n = scuda_server_list_len(list);
        for (int k = 0; k < n && k < INFO_MAX_SERVERS; k++)
            if (scuda_server_list_entry(list, k, sv->addr[sv->n], sizeof sv->addr[0]) == 0) sv->n++;
    }
    if (sv->n == 0) {
        snprintf(sv->addr[0], sizeof sv->addr[0], "%s", addr);
        sv->n = 1;
    }
}

/* Each server first, without CUDA: a failure here has a known cause. */
static int probe_all(const struct servers *sv, char *why, size_t whylen)
{
    for (int k = 0; k < sv->n; k++)
        if (cli_probe_server(sv->addr[k], why, whylen) != 0) return -1;
    return 0;
}

int cmd_info(int argc, char **argv)
{
    const char *server = NULL, *source = NULL;
    int json = 0;
    int rc = parse(argc, argv, &server, &json);
    if (rc >= 0) return rc;

    char libdir[PATH_MAX], addr[1024];
    if (cli_shim_dir(CMD, libdir, sizeof libdir) != 0) return 1;
    /* --server a,b: the list the shim reads from SCUDA_SERVER. */
    int listed_here = server && strchr(server, ',') && setenv("SCUDA_SERVER", server, 1) == 0;
    int have_server = cli_export_server(CMD, listed_here ? NULL : server, addr, sizeof addr, &source);
    if (have_server < 0) return have_server == -CLI_USAGE ? CLI_USAGE : 1;
    struct servers sv;
    list_servers(addr, source, &sv);
    if (listed_here) source = "--server";

    /* The servers first, without CUDA: a failure here has a known cause,
     * printed as it is, with no guessed hint after it. */
    char why[2048];
    if (have_server && probe_all(&sv, why, sizeof why) != 0) {
        if (json) json_error(addr, source, why);
        fprintf(stderr, "%s: %s\n", CMD, why);
        return 1;
    }

    struct driver d;
    if (load_shim(libdir, &d) == NULL) return 1;

    if (!json) {
        if (have_server && sv.n > 1)
            printf("Servers:    %d (from %s): their GPUs are one list, in this order\n", sv.n, source);
        else if (have_server)
            printf("Server:     %s (from %s)\n", addr, source);
        else
            printf("Server:     none configured (the shim uses this machine's driver, if any)\n");
    }

    CUresult r = d.cuInit(0);
    if (r != CUDA_SUCCESS) {
        if (json) json_error(have_server ? addr : NULL, source, error_name(&d, r));
        init_failed(&d, r, have_server, addr);
        return 1;
    }
    int version = 0;
    if (d.cuDriverGetVersion(&version) != CUDA_SUCCESS) version = 0;
    int count;
    struct row *rows = read_devices(&d, &count);
    if (rows == NULL) return 1;
    double min = 0, median = 0;
    int have_rtt = measure_rtt(&d, have_server, &min, &median, why, sizeof why) == 0;
    if (json) {
        json_report(have_server ? addr : NULL, source, &sv, version, rows, count, have_rtt, min, median);
    } else {
        if (version) printf("Driver:     CUDA %d.%d\n", version / 1000, version % 1000 / 10);
        print_devices(rows, count, &sv);
        if (have_rtt)
            printf("Round trip: min %.1f us, median %.1f us (%d pings%s)\n", min, median, PING_COUNT,
                   sv.n > 1 ? ", to the first server" : "");
        else printf("Round trip: %s\n", why);
    }
    free(rows);
    return 0;
}
