/* libload.c - see libload.h. */
#define _GNU_SOURCE
#include "libload.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* This file is linked into each shim, so its own address names the shim. */
static int same_file_as_caller(const char *path)
{
    Dl_info self;
    char a[PATH_MAX], b[PATH_MAX];
    if (!dladdr((void *)&same_file_as_caller, &self) || !self.dli_fname) return 0;
    if (!realpath(self.dli_fname, a) || !realpath(path, b)) return 0;
    return strcmp(a, b) == 0;
}

static void *try_open(const char *path, libload_accept_fn accept, void *arg)
{
    if (same_file_as_caller(path)) return NULL;
    /* RTLD_DEEPBIND: the real library's calls to its own exports must bind
     * to it, not to the shim's same-named functions loaded before it. The
     * sanitizers refuse DEEPBIND, so sanitized test builds go without. */
    int flags = RTLD_NOW | RTLD_LOCAL;
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    flags |= RTLD_DEEPBIND;
#endif
    void *h = dlopen(path, flags);
    if (h && !accept(h, arg)) {
        dlclose(h);
        h = NULL;
    }
    return h;
}

void *libload_open(const char *forced_env, const char *const *candidates, size_t n, libload_accept_fn accept,
                   void *arg, const char **chosen)
{
    const char *forced = forced_env ? getenv(forced_env) : NULL;
    if (forced && *forced) {
        if (chosen) *chosen = forced;
        return try_open(forced, accept, arg);
    }
    for (size_t i = 0; i < n; i++) {
        void *h = try_open(candidates[i], accept, arg);
        if (h) {
            if (chosen) *chosen = candidates[i];
            return h;
        }
    }
    return NULL;
}

const char *const libload_driver_paths[] = {
    "/usr/local/nvidia/lib64/libcuda.so.1",
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/lib/x86_64-linux-gnu/libcuda.so.1",
    "/usr/lib64/libcuda.so.1",
    "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
    "/usr/lib/wsl/lib/libcuda.so.1",
};
const size_t libload_driver_path_count = sizeof libload_driver_paths / sizeof libload_driver_paths[0];
