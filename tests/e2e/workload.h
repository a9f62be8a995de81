/* workload.h - client workloads shared by several tests.
 *
 * workload_check(): a normal client's work, every result checked:
 *   allocations, copies both ways, memsets, fill_u32 and vec_add launches,
 *   a module global. Used by many_clients and as the "a good client still
 *   works" probe after bad input.
 * workload_full(): workload_check() plus most of the API surface the shim
 *   forwards (streams, events, libraries, 2D/3D copies, every memset form,
 *   parameter-copy kernels through kernelParams, `extra` and
 *   cuLaunchKernelEx, device printf, pointer attributes, frees and
 *   unloads). The fuzzer records its frames as its corpus. */
#ifndef SCUDA_E2E_WORKLOAD_H
#define SCUDA_E2E_WORKLOAD_H

void workload_check(void);
void workload_full(int quiet_printf);

#endif
