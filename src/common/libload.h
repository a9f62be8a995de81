/* libload.h - open the machine's real library by path, never the shim.
 *
 * Both shims (libcuda.so.1, libnvidia-ml.so.1) pass calls through to the
 * real library when no server is configured. They must find it by full
 * path: the name would resolve to the shim itself, which is loaded under
 * the same SONAME. */
#ifndef SCUDA_LIBLOAD_H
#define SCUDA_LIBLOAD_H

#include <stddef.h>

/* Decides whether an opened library is the one wanted (and fills the
 * caller's function table from it). Returns nonzero to keep it. */
typedef int (*libload_accept_fn)(void *handle, void *arg);

/* Tries the path in env `forced_env` if it is set, else each candidate in
 * order; skips the file the calling library was loaded from; returns the
 * first handle that `accept` keeps (its path in *chosen), or NULL. */
void *libload_open(const char *forced_env, const char *const *candidates, size_t n, libload_accept_fn accept,
                   void *arg, const char **chosen);

/* Where Linux systems keep the CUDA driver (NVIDIA's container toolkit,
 * Debian/Ubuntu, RHEL, aarch64, WSL), in the order both the client's
 * passthrough and the server's session look. */
extern const char *const libload_driver_paths[];
extern const size_t libload_driver_path_count;

#endif
