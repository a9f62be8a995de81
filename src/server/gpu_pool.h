/* gpu_pool.h - which of the machine's GPUs this server serves, and which
 * GPU each session runs on (docs/architecture.md, 9.22 Pools).
 *
 * `--gpus 0,2` (indices or UUIDs, as CUDA_VISIBLE_DEVICES takes them)
 * names the GPUs; a session's driver is given exactly those through
 * CUDA_VISIBLE_DEVICES, so the driver itself renumbers them 0..n-1 and
 * refuses the others, for every call (device count, cuDeviceGet, by PCI
 * bus id, NVML through nvml_devices.c, which follows CUDA by UUID).
 *
 * `--max-sessions-per-gpu N` pins each CUDA session to one GPU of the
 * pool, chosen by the parent at admission (the one with the fewest
 * sessions, the first on ties): the session sees only that GPU, as its
 * device 0, so what it counts against is exactly what it can use. The
 * parent never loads CUDA, so this needs --gpus. */
#ifndef SCUDA_SERVER_GPU_POOL_H
#define SCUDA_SERVER_GPU_POOL_H

#include <stddef.h>
#include <sys/types.h>

#define GPU_POOL_MAX 64
/* gpu_pool_place's answers besides a GPU. */
#define GPU_POOL_ALL (-1)  /* no per-GPU limit: the session sees the whole pool */
#define GPU_POOL_FULL (-2) /* every GPU of the pool has its most sessions */

/* Check and keep --gpus (NULL: every GPU the driver shows) and
 * --max-sessions-per-gpu (0: none). Returns 0, or -1 with the cause and
 * the fix in err. Called once, before any fork. */
int gpu_pool_init(const char *list, int max_per_gpu, char *err, size_t errlen);
/* How many GPUs --gpus named (0: no --gpus), and the limit. */
int gpu_pool_size(void);
int gpu_pool_max_per_gpu(void);
/* --gpus entry i as given ("2", "GPU-..."). */
const char *gpu_pool_name(int i);

/* ---- in the parent ---- */
/* Where a new CUDA session goes: a GPU of the pool, GPU_POOL_ALL, or
 * GPU_POOL_FULL. Nothing is booked until gpu_pool_bind. */
int gpu_pool_place(void);
/* The session `pid` runs on `gpu` (a gpu_pool_place answer; GPU_POOL_ALL
 * books nothing). */
void gpu_pool_bind(pid_t pid, int gpu);
/* It ended: its place is free. */
void gpu_pool_release(pid_t pid);
/* Sessions now on GPU i of the pool; and the GPU session pid runs on
 * (GPU_POOL_ALL when none was booked for it). */
int gpu_pool_sessions_on(int i);
int gpu_pool_gpu_of(pid_t pid);

/* ---- in a forked session, before its driver loads ---- */
/* Show the driver only what the session may use: CUDA_VISIBLE_DEVICES,
 * the pool's GPUs (or GPU `gpu` of it), with the client's own
 * CUDA_VISIBLE_DEVICES composed over them when it sent one
 * (client_visible; NULL: none; visible_devices.h). */
void gpu_pool_enter(int gpu, const char *client_visible);
/* 1 with the reason in msg when the client's CUDA_VISIBLE_DEVICES left the
 * session no GPU (its driver then has none to show), else 0. */
int gpu_pool_explain_none(char *msg, size_t msglen);
/* After cuInit: 0 when the driver shows every GPU it was given, else -1
 * with the refusal for the client in msg (a --gpus entry that names no
 * GPU of this machine stops the driver's list there). */
int gpu_pool_check(unsigned device_count, char *msg, size_t msglen);

#endif
