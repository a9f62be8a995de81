/* read_kernels_probe.c - the client's reading of kernels (image_kernels.c)
 * against a real driver, on every fatbin of real libraries.
 *
 *   read_kernels_probe [--max-images N] FILE...
 *
 * Each FILE is a fatbin, a cubin, or a shared library whose .nv_fatbin
 * section holds fatbins (libcublasLt, libcudnn_*, libtorch_cuda ...). For
 * each image the reader accepts for device 0's SM, the driver loads it as
 * a module and as a library, and the probe compares:
 *   - the module's functions (cuModuleEnumerateFunctions): the same names
 *     in the same order;
 *   - the library's kernels (cuLibraryEnumerateKernels): the reverse;
 *   - each function's parameters (cuFuncGetParamInfo): the same offsets
 *     and sizes.
 * Prints one line per disagreement (the first 20) and a summary; exits 1
 * when any image disagrees, 2 on a usage or driver error. The driver is
 * dlopen'ed (libcuda.so.1), so the probe runs wherever a driver is; it
 * needs no SCUDA server. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/image_kernels.h"

#define FATBIN_MAGIC 0xBA55ED50u

static struct {
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunctionCount)(unsigned *, CUmodule);
    CUresult (*ModuleEnumerateFunctions)(CUfunction *, unsigned, CUmodule);
    CUresult (*FuncGetName)(const char **, CUfunction);
    CUresult (*FuncGetParamInfo)(CUfunction, size_t, size_t *, size_t *);
    CUresult (*LibraryLoadData)(CUlibrary *, const void *, CUjit_option *, void **, unsigned, CUlibraryOption *,
                                void **, unsigned);
    CUresult (*LibraryUnload)(CUlibrary);
    CUresult (*LibraryGetKernelCount)(unsigned *, CUlibrary);
    CUresult (*LibraryEnumerateKernels)(CUkernel *, unsigned, CUlibrary);
    CUresult (*KernelGetName)(const char **, CUkernel);
} cu;

static struct {
    unsigned images, read, refused, load_failed, agreed, disagreed, kernels, params;
    long max_images;
} tally = {.max_images = -1};

static int load_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        fprintf(stderr, "read_kernels_probe: %s\n", dlerror());
        return -1;
    }
#define SYM(field, name) if (!(*(void **)&cu.field = dlsym(h, name))) { fprintf(stderr, "no %s\n", name); return -1; }
    SYM(Init, "cuInit");
    SYM(DeviceGetAttribute, "cuDeviceGetAttribute");
    SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SYM(CtxSetCurrent, "cuCtxSetCurrent");
    SYM(ModuleLoadData, "cuModuleLoadData");
    SYM(ModuleUnload, "cuModuleUnload");
    SYM(ModuleGetFunctionCount, "cuModuleGetFunctionCount");
    SYM(ModuleEnumerateFunctions, "cuModuleEnumerateFunctions");
    SYM(FuncGetName, "cuFuncGetName");
    SYM(FuncGetParamInfo, "cuFuncGetParamInfo");
    SYM(LibraryLoadData, "cuLibraryLoadData");
    SYM(LibraryUnload, "cuLibraryUnload");
    SYM(LibraryGetKernelCount, "cuLibraryGetKernelCount");
    SYM(LibraryEnumerateKernels, "cuLibraryEnumerateKernels");
    SYM(KernelGetName, "cuKernelGetName");
#undef SYM
    return 0;
}

/* Why the reader refused images, by the reason's first words (numbers,
 * which vary, written N), with counts: how much of a library goes
 * one-way. */
#define REASONS 16
static struct {
    char key[96];
    unsigned n;
} reasons[REASONS];

static void refused_because(const char *why)
{
    char key[96];
    size_t k = 0;
    for (const char *p = why; *p && k + 1 < sizeof key; p++) {
        int digit = *p >= '0' && *p <= '9';
        if (!digit) key[k++] = *p;
        else if (p == why || !(p[-1] >= '0' && p[-1] <= '9')) key[k++] = 'N';
    }
    key[k] = '\0';
    for (int i = 0; i < REASONS; i++) {
        if (!reasons[i].n) snprintf(reasons[i].key, sizeof reasons[i].key, "%s", key);
        if (strcmp(reasons[i].key, key) == 0) {
            reasons[i].n++;
            return;
        }
    }
}

static void disagree(const char *where, unsigned at, const char *what)
{
    if (++tally.disagreed <= 20) printf("DISAGREE %s image at %u: %s\n", where, at, what);
}

/* The module's functions against the reading: names, order, layouts. */
static int same_module(const struct image_kernels *k, CUmodule m, char *what, size_t wl)
{
    unsigned n = 0;
    cu.ModuleGetFunctionCount(&n, m);
    if (n != k->n) return snprintf(what, wl, "the driver lists %u functions, the reader %u", n, k->n), 0;
    CUfunction *fs = calloc(n ? n : 1, sizeof *fs);
    if (!fs || cu.ModuleEnumerateFunctions(fs, n, m) != CUDA_SUCCESS) return free(fs), snprintf(what, wl, "enumerate"), 0;
    int ok = 1;
    for (unsigned i = 0; ok && i < n; i++) {
        const char *name = "";
        cu.FuncGetName(&name, fs[i]);
        if (strcmp(name, k->k[i].name) != 0) {
            snprintf(what, wl, "function %u: the driver's %s, the reader's %s", i, name, k->k[i].name);
            ok = 0;
        }
        uint32_t p = 0;
        for (size_t off, size; ok && cu.FuncGetParamInfo(fs[i], p, &off, &size) == CUDA_SUCCESS; p++) {
            if (p >= k->k[i].nparams || off != k->k[i].offset[p] || size != k->k[i].size[p]) {
                snprintf(what, wl, "%s parameter %u: the driver's %zu bytes at %zu, the reader's %u at %u", name, p,
                         size, off, p < k->k[i].nparams ? k->k[i].size[p] : 0, p < k->k[i].nparams ? k->k[i].offset[p] : 0);
                ok = 0;
            }
        }
        if (ok && p != k->k[i].nparams) {
            snprintf(what, wl, "%s: the driver's %u parameters, the reader's %u", name, p, k->k[i].nparams);
            ok = 0;
        }
        tally.kernels++;
        tally.params += p;
    }
    free(fs);
    return ok;
}

/* The library's kernels: the reading's names in the reverse order. */
static int same_library(const struct image_kernels *k, CUlibrary l, char *what, size_t wl)
{
    unsigned n = 0;
    cu.LibraryGetKernelCount(&n, l);
    if (n != k->n) return snprintf(what, wl, "the library lists %u kernels, the reader %u", n, k->n), 0;
    CUkernel *ks = calloc(n ? n : 1, sizeof *ks);
    if (!ks || cu.LibraryEnumerateKernels(ks, n, l) != CUDA_SUCCESS) return free(ks), snprintf(what, wl, "enumerate"), 0;
    int ok = 1;
    for (unsigned i = 0; ok && i < n; i++) {
        const char *name = "";
        cu.KernelGetName(&name, ks[i]);
        if (strcmp(name, k->k[n - 1 - i].name) != 0) {
            snprintf(what, wl, "library kernel %u: the driver's %s, the reader's %s", i, name, k->k[n - 1 - i].name);
            ok = 0;
        }
    }
    free(ks);
    return ok;
}

static void probe_image(const char *where, unsigned at, const void *img, size_t len, unsigned arch)
{
    if (tally.max_images >= 0 && tally.images >= (unsigned long)tally.max_images) return;
    tally.images++;
    struct image_kernels k;
    char why[256], what[512];
    if (image_kernels(img, len, arch, 0, &k, why, sizeof why) != 0) {
        tally.refused++;
        refused_because(why);
        return;
    }
    tally.read++;
    /* The driver reads the image in place: give it an 8-byte aligned copy. */
    void *copy = aligned_alloc(8, (len + 7) & ~(size_t)7);
    memcpy(copy, img, len);
    CUmodule m;
    CUlibrary l;
    if (cu.ModuleLoadData(&m, copy) != CUDA_SUCCESS) {
        tally.load_failed++;
    } else {
        int ok = same_module(&k, m, what, sizeof what);
        cu.ModuleUnload(m);
        if (ok && cu.LibraryLoadData(&l, copy, NULL, NULL, 0, NULL, NULL, 0) == CUDA_SUCCESS) {
            ok = same_library(&k, l, what, sizeof what);
            cu.LibraryUnload(l);
        }
        if (ok) tally.agreed++;
        else disagree(where, at, what);
    }
    free(copy);
    image_kernels_free(&k);
}

/* Fatbins sit one after another in a .nv_fatbin section, each at an
 * 8-byte boundary. */
static void probe_fatbins(const char *where, const uint8_t *p, size_t len, unsigned arch)
{
    for (size_t at = 0; at + 16 <= len; at += 8) {
        uint32_t magic;
        uint16_t header;
        uint64_t size;
        memcpy(&magic, p + at, 4);
        if (magic != FATBIN_MAGIC) continue;
        memcpy(&header, p + at + 6, 2);
        memcpy(&size, p + at + 8, 8);
        if (header < 16 || size > len - at - header) continue;
        probe_image(where, (unsigned)at, p + at, header + size, arch);
        at += (header + size + 7) / 8 * 8 - 8;
    }
}

static void probe_file(const char *path, unsigned arch)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(b);
        return;
    }
    fclose(f);
    Elf64_Ehdr eh;
    uint32_t magic = 0;
    if (n >= 4) memcpy(&magic, b, 4);
    if (magic == FATBIN_MAGIC) {
        probe_fatbins(path, b, (size_t)n, arch);
    } else if ((size_t)n >= sizeof eh && memcmp(b, ELFMAG, SELFMAG) == 0 && (memcpy(&eh, b, sizeof eh), eh.e_machine == 190)) {
        probe_image(path, 0, b, (size_t)n, arch);
    } else if ((size_t)n >= sizeof eh && memcmp(b, ELFMAG, SELFMAG) == 0 && eh.e_shoff + (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) <= (uint64_t)n &&
               eh.e_shstrndx < eh.e_shnum) {
        Elf64_Shdr names;
        memcpy(&names, b + eh.e_shoff + (size_t)eh.e_shstrndx * sizeof names, sizeof names);
        for (unsigned i = 0; i < eh.e_shnum; i++) {
            Elf64_Shdr sh;
            memcpy(&sh, b + eh.e_shoff + (size_t)i * sizeof sh, sizeof sh);
            if (names.sh_offset + sh.sh_name >= (uint64_t)n || sh.sh_offset + sh.sh_size > (uint64_t)n) continue;
            if (strcmp((const char *)b + names.sh_offset + sh.sh_name, ".nv_fatbin") == 0)
                probe_fatbins(path, b + sh.sh_offset, sh.sh_size, arch);
        }
    }
    free(b);
}

int main(int argc, char **argv)
{
    int first = 1;
    if (argc > 2 && strcmp(argv[1], "--max-images") == 0) {
        tally.max_images = atol(argv[2]);
        first = 3;
    }
    if (first >= argc) {
        fprintf(stderr, "usage: read_kernels_probe [--max-images N] FILE...\n");
        return 2;
    }
    CUcontext ctx;
    int major = 0, minor = 0;
    if (load_driver() != 0 || cu.Init(0) != CUDA_SUCCESS ||
        cu.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0) != CUDA_SUCCESS ||
        cu.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0) != CUDA_SUCCESS ||
        cu.DevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS || cu.CtxSetCurrent(ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "read_kernels_probe: no driver or device\n");
        return 2;
    }
    unsigned arch = (unsigned)(major * 10 + minor);
    for (int i = first; i < argc; i++) probe_file(argv[i], arch);
    printf("sm_%u: %u images, %u read (%u refused by the reader), %u the driver would not load, %u agree, %u "
           "disagree; %u kernels and %u parameters compared\n",
           arch, tally.images, tally.read, tally.refused, tally.load_failed, tally.agreed, tally.disagreed,
           tally.kernels, tally.params);
    for (int i = 0; i < REASONS && reasons[i].n; i++) printf("  refused %u: %s\n", reasons[i].n, reasons[i].key);
    return tally.disagreed ? 1 : 0;
}
