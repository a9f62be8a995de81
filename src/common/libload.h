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

#endif
