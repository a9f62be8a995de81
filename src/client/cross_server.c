/* cross_server.c - calls that name objects of two servers, for a client
 * of several (servers.h; docs/architecture.md, 9.x). Nothing travels
 * between servers yet: a stream waits for another server's event by the
 * client waiting for the event, and devices of two servers are not peers.
 * With one server every guard lets the call through. */
#include "hooks.h"
#include "servers.h"

/* The driver orders the stream after the event; here the client waits
 * for the event on its server, and every later call on the stream is
 * sent after that. Correct, if not fast: the wait blocks the caller. */
int hook_guard_cuStreamWaitEvent(CUresult *r, CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    (void)Flags;
    if (!hEvent || server_of_handle(hEvent) == server_of_handle(hStream)) return 0;
    *r = cuEventSynchronize(hEvent);
    return 1;
}

int hook_guard_cuCtxEnablePeerAccess(CUresult *r, CUcontext peerContext, unsigned int Flags)
{
    (void)Flags;
    if (!peerContext || server_of_handle(peerContext) == server_current()) return 0;
    *r = CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    return 1;
}

int hook_guard_cuDeviceCanAccessPeer(CUresult *r, int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    if (!canAccessPeer || !devices_apart(dev, peerDev)) return 0;
    *canAccessPeer = 0;
    *r = CUDA_SUCCESS;
    return 1;
}

int hook_guard_cuDeviceGetP2PAttribute(CUresult *r, int *value, CUdevice_P2PAttribute attrib, CUdevice srcDevice,
                                       CUdevice dstDevice)
{
    (void)attrib;
    if (!value || !devices_apart(srcDevice, dstDevice)) return 0;
    *value = 0; /* no access, no atomics, no rank */
    *r = CUDA_SUCCESS;
    return 1;
}
