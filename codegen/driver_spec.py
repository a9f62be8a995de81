"""driver_spec.py - what cuda.h cannot say about the CUDA driver API.

gen_driver.py reads cuda.h for every prototype and this file for the rest.
codegen/coverage.gen.txt lists the outcome for every export.

FUNCTIONS has one line per function:

    NAME  CLASS  [FLAG ...]  [PARAM=RULE ...]  [out_handle=P] [drops=P]   # comment

NAME is a base name (cuMemAlloc applies to cuMemAlloc, cuMemAlloc_v2, ...
and to their _ptds/_ptsz wrappers) or an exact export name
(cuMemHostRegister_v2), which wins over its base name's line.

CLASS
  local        hand-written client body (src/client/*.c) that sends no op
               (cuInit opens the connection; the rest answer from the
               client's own state)
  manual       hand-written client body that talks to the server with the
               ops of MESSAGES (below), named by sends=OP[,OP...] (a test
               checks that every MESSAGES op is sent); an export that sends
               an op of its own name has it defined there
  sync         generated: request and reply
  async        generated: one-way; errors surface at the next sync call
               (a NULL out_handle pointer turns it into a sync call, so the
               driver's own error comes back at once)
  memo         generated sync call answered from the client memo cache
               (src/client/memo.c) after its first success; the key is
               (op, current context, encoded arguments)
  unsupported  generated CUDA_ERROR_NOT_SUPPORTED stub (passthrough mode
               still forwards to the real driver)
  alias=EXPORT generated: calls EXPORT, which has the same parameters
A function without a line is `sync` when the default rules can encode
every parameter, else `unsupported` (the reason is in coverage.gen.txt).
Per-thread exports (_ptds/_ptsz) always become wrappers of their base
export; _ptsz ones map a NULL stream to CU_STREAM_PER_THREAD.

FLAGS
  blocking          the server runs it on a worker thread (it waits for the GPU)
  observes          (sync, and MESSAGES ops) waits for or observes earlier
                    work: synchronize, stream/event query, copy to the host.
                    Only such a call reports the pending error of an earlier
                    one-way call (when it succeeds itself: its outputs still
                    come back); every other call returns its own result and
                    leaves the error pending (docs/architecture.md, 3.4). Its
                    generated stub ends with rpc_report_deferred().
  invalidates_memo  the client clears the memo cache after the call
  invalidates_memo_of=P
                    (sync) the same, for an attribute set of the function or
                    kernel P: only what that set can change goes (memo.h,
                    memo_invalidate_about)
  legacy            (local/manual) the pre-3.2 32-bit export is hand-written
                    too; without it that export gets LEGACY_ABI_MANUAL
  capture_begin     (sync) a stream capture began when it succeeds: the
                    client counts captures in progress (capture_begun())
  capture_end       (sync) a stream capture may have ended: capture_ended(r)
  setting=P         (sync, invalidates_memo) an attribute set whose value is
                    parameter P: setting the value that the same call last
                    set successfully (same other arguments, same context)
                    is answered in the client, without invalidating the memo
                    (PyTorch sets the same attribute before every launch)
  waits_event=P     (sync, blocking) P, the first parameter, is the event it
                    waits for: the session runs it inline when the event
                    has completed (MESSAGES: waits=)
  kept              (memo; one CUfunction, otherwise scalars and outputs) a
                    miss asks the attribute cache before the session, and
                    an answer from the session is kept there for later
                    processes: the answer depends only on the function, its
                    arguments and the GPU (src/client/attr_store.h)
  func_config       a cache or shared memory configuration: before it goes
                    out, attr_store_config_changed() (src/client/attr_store.h)
                    stops the attribute cache for the process
  hook              (sync/async) the stub ends with `return hook_EXPORT(r, args...)`,
                    a hand-written function declared in src/client/hooks.h
  pre_hook          (sync/async) the stub first calls `hook_pre_EXPORT(args...)`
                    (src/client/hooks.h)
  guard             (sync/async) the stub first calls `hook_guard_EXPORT(&r, args...)`
                    (src/client/hooks.h); when it returns nonzero the call
                    was answered by hand and the stub returns r
  memo_miss         (memo) on a miss the stub calls
                    `hook_memo_miss_EXPORT(&r, &key, args...)` before asking the
                    server; nonzero: the hook answered (it memoized its own
                    guesses with the call's, scuda_memo_batch). The request
                    encoder is then a function of its own,
                    `memo_key_EXPORT(wire_buf *key, args...)`, for the hook's
                    keys of calls not yet made (src/client/hooks.h)
  one_way_when      (sync, no outputs) the stub asks `hook_one_way_EXPORT(args...)`
                    (src/client/hooks.h) after its other checks: nonzero when
                    the client knows the driver accepts the call, which then
                    goes one-way (its error, should it fail all the same, is
                    reported as a one-way call's)
  out_on_error      (sync) the outputs come back when the call fails too:
                    the driver's index of the element that failed

PARAMETER RULES. Defaults: `const T *` is in, `T *` is out (T a scalar,
enum or pointer-free struct, or one of NULLED_POINTER_FIELDS), `const char *`
a string, a handle by value travels as its id. A pointer next to a
count-like parameter (count, num*, n*, len) must be described here, and so
must a handle returned through a pointer (out_handle or existing).
  P=in | P=out | P=inout     one element
  P=in[EXPR] | P=out[EXPR]   EXPR elements (EXPR: C over the scalar
                             parameters, evaluated on both sides; the server
                             rejects a request where they disagree). For a
                             void * the elements are bytes; for a handle
                             array each id is translated (out: as for
                             `existing`). EXPR may read a scalar inout/in
                             pointer parameter as `*Q`: its value before the
                             call (`nodes=out[*numNodes] numNodes=inout`; a
                             NULL array is the driver's query of the count).
                             EXPR may call a size helper scuda_*() from
                             src/common/value_sizes.h; when it says 0 (a
                             value it does not know) both sides refuse the
                             call with CUDA_ERROR_INVALID_VALUE.
  P=null                     only NULL is supported (else NOT_SUPPORTED)
  P=value                    a void * holding a device address: sent as a
                             value, never dereferenced
  P=existing                 *P receives a handle the driver already has:
                             its id, or a new server-chosen one when the
                             client never created it (handle_export). A
                             context the client does not know is
                             NOT_SUPPORTED (contexts come from the client).
  P=launch_config            a const CUlaunchConfig * (stream and attributes
                             translated like the hand-written launch)
  out_handle=P               *P receives a new handle; the client picks its
                             id (handle_new_id), the server handle_put()s it
  drops=P                    after success the server forgets handle P

LEGACY_ABI_MANUAL: what the pre-CUDA-3.2 exports of hand-written functions
become (e.g. cuMemcpyHtoD, 32-bit sizes, next to cuMemcpyHtoD_v2). They are
found through cudaTypedefs.h's legacy PFN block and differ from their _v2.
"""

FUNCTIONS = r"""
# ---- initialisation, version, errors, entry points ------------------------
cuInit                        local
cuDriverGetVersion            local
cuGetErrorString              local
cuGetErrorName                local
cuGetProcAddress              local                  # both exports: procaddr_lookup()
cuGetExportTable              local

# ---- devices ----------------------------------------------------------------
# Session info carries every device's properties (docs/architecture.md, 3.3 Call classes: `local`).
cuDeviceGet                   local
cuDeviceGetCount              local
cuDeviceGetName               local
cuDeviceGetAttribute          local
cuDeviceTotalMem              local   legacy         # both exports are hand-written
cuDeviceGetByPCIBusId         local
cuDeviceGetUuid               local
cuDeviceGetPCIBusId           local
cuDeviceComputeCapability     local
cuDeviceGetProperties         local
cuDeviceGetLuid               sync    luid=out[8]
cuDeviceGetHostAtomicCapabilities  sync  capabilities=out[count] operations=in[count]
cuDeviceGetP2PAtomicCapabilities   sync  capabilities=out[count] operations=in[count]
cuDeviceGetTexture1DLinearMaxWidth  sync  maxWidthInElements=out
cuDeviceGetGraphMemAttribute  sync    value=out[8]           # every attribute is a cuuint64_t
cuDeviceSetGraphMemAttribute  sync    value=in[8]
cuDeviceGetDefaultMemPool     sync    pool_out=existing
cuDeviceGetMemPool            sync    pool=existing

# ---- contexts ------------------------------------------------------------------
# The client keeps the context stack; every request carries the caller's
# current context (frame header), so per-context queries can be forwarded.
cuCtxCreate                   manual  legacy sends=scuda_ctx_create  # the pre-3.2 export makes a legacy context
cuCtxDestroy                  manual  invalidates_memo sends=scuda_ctx_destroy
cuCtxAttach                   local
cuCtxDetach                   local
cuCtxGetCurrent               local
cuCtxSetCurrent               local
cuCtxPushCurrent              local
cuCtxPopCurrent               local
cuCtxGetDevice                local
cuCtxGetFlags                 local
cuCtxSynchronize              manual  sends=scuda_ctx_synchronize
cuDevicePrimaryCtxRetain      manual  sends=scuda_primary_ctx_retain
cuDevicePrimaryCtxRelease     manual  sends=scuda_primary_ctx_release
cuDevicePrimaryCtxReset       manual  invalidates_memo sends=scuda_primary_ctx_reset
cuDevicePrimaryCtxSetFlags    manual  sends=scuda_primary_ctx_set_flags
cuDevicePrimaryCtxGetState    local
cuCtxGetStreamPriorityRange   memo
cuCtxGetLimit                 memo
cuCtxSetLimit                 sync    invalidates_memo
cuCtxGetApiVersion            sync
cuCtxGetId                    local
cuCtxGetCacheConfig           sync
cuCtxSetCacheConfig           sync    invalidates_memo func_config
cuCtxGetSharedMemConfig       sync
cuCtxSetSharedMemConfig       sync    invalidates_memo func_config
cuCtxGetExecAffinity          sync
cuCtxGetDevResource           sync
cuCtxRecordEvent              async
cuCtxWaitEvent                async
cuCtxEnablePeerAccess         sync    guard          # a peer context of another server: CUDA_ERROR_PEER_ACCESS_UNSUPPORTED (cross_server.c)
cuDeviceCanAccessPeer         sync    guard          # devices of two servers: 0 (cross_server.c)
cuDeviceGetP2PAttribute       sync    guard          # devices of two servers: 0 (cross_server.c)
cuCtxDisablePeerAccess        sync
cuCtxResetPersistingL2Cache   sync
cuCtxSetFlags                 sync    hook           # the client keeps the flags it answers cuCtxGetFlags with (context.c)
# Green contexts: resource descriptors and green contexts are session
# handles with client ids; a CUdevResource holds no pointer and travels as bytes.
cuDevSmResourceSplitByCount   sync    result=out[*nbGroups] nbGroups=inout input=in remaining=out  # a NULL result asks for the group count
cuDevResourceGenerateDesc     sync    out_handle=phDesc resources=in[nbResources]
cuGreenCtxCreate              sync    out_handle=phCtx
cuGreenCtxStreamCreate        sync    out_handle=phStream
cuGreenCtxDestroy             sync    hook drops=hCtx  # the client forgets the context it made from it (green_ctx.c)
cuCtxFromGreenCtx             manual  sends=scuda_ctx_from_green  # the client keeps contexts: one record per green context (green_ctx.c)

# ---- device memory ----------------------------------------------------------
cuMemAlloc                    sync
cuMemAlloc_v2                 sync    guard          # src/client/alloc_ahead.c: over a slow link, a size asked before comes with spares (scuda_mem_alloc_ahead)
cuMemAllocPitch               sync
cuMemFree                     sync    pre_hook       # a bad pointer is reported by the call itself
cuMemGetInfo                  sync
cuMemGetInfo_v2               sync    hook           # src/client/alloc_ahead.c: the client's spares count as free
cuMemGetAddressRange          sync
cuMemAllocAsync               sync
cuMemAllocFromPoolAsync       sync
cuMemFreeAsync                async
cuMemAllocManaged             manual  sends=cuMemAllocManaged  # the client maps the same address (coherence.c)
cuMemPrefetchAsync            async   hook           # a prefetch to the host fetches eagerly
cuMemAdvise                   sync
cuMemRangeGetAttribute        sync    data=out[dataSize]
cuMemRangeGetAttributes       local                  # src/client/range_attrs.c: one cuMemRangeGetAttribute per attribute
cuMemSetAccess                sync    desc=in[count]
# VMM: CUmemGenericAllocationHandle is a driver value mapped through ids
# like any handle (HK_MEM_ALLOC, reference counted like the driver's).
# CUmemAllocationProp's win32HandleMetaData travels as NULL.
cuMemCreate                   sync    out_handle=handle
cuMemRelease                  sync    drops=handle
cuMemRetainAllocationHandle   sync    addr=value handle=existing
cuMemExportToShareableHandle  manual  sends=scuda_shareable_export    # src/client/shareable.c: a local memfd holding the server's token
cuMemImportFromShareableHandle  manual  sends=scuda_shareable_import
cuMulticastCreate             sync    out_handle=mcHandle
cuMemPrefetchBatchAsync       async   dptrs=in[count] sizes=in[count] prefetchLocs=in[numPrefetchLocs] prefetchLocIdxs=in[numPrefetchLocs]
cuMemDiscardBatchAsync        async   dptrs=in[count] sizes=in[count]
cuMemDiscardAndPrefetchBatchAsync  async  dptrs=in[count] sizes=in[count] prefetchLocs=in[numPrefetchLocs] prefetchLocIdxs=in[numPrefetchLocs]
cuMemPoolCreate               sync    out_handle=pool    # poolProps: win32SecurityAttributes travels as NULL
cuMemPoolDestroy              async   drops=pool
cuMemPoolTrimTo               sync
cuMemPoolGetAttribute         sync    value=out[scuda_mempool_attr_size(attr)]   # int or cuuint64_t by attribute
cuMemPoolSetAttribute         sync    value=in[scuda_mempool_attr_size(attr)]
cuMemPoolExportToShareableHandle    manual  sends=scuda_shareable_export
cuMemPoolImportFromShareableHandle  manual  sends=scuda_shareable_import
cuMemPoolSetAccess            sync    map=in[count]
cuMemPoolGetAccess            sync    location=in
cuMemPoolImportPointer        sync    shareData=in
cuMemSetMemPool               sync    location=in
cuMemGetMemPool               sync    pool=existing location=in
cuMemGetDefaultMemPool        sync    pool_out=existing location=in
cuStreamBatchMemOp            async   paramArray=in[count]
cuMemBatchDecompressAsync     sync    out_on_error  paramsArray=in[count]  errorIndex=inout  # the driver leaves errorIndex as it was when it refuses the whole call; device addresses in the params travel as they are (DEVICE_POINTER_FIELDS)
cuMemMapArrayAsync            unsupported            # not built yet: each CUarrayMapInfo holds an array or mipmapped array and a memory handle to translate, and the stand-in has no sparse arrays to test it on
cuDeviceRegisterAsyncNotification  manual  sends=scuda_async_register  # the session's driver notifies the session, which has the client run the callback (async_notify.c, srv_async_notify.c)
cuDeviceUnregisterAsyncNotification  sync  hook  drops=callback   # the client forgets its record (async_notify.c)

# ---- pinned host memory and pointers (hand-written) ------------------------
cuMemAllocHost                local   legacy         # src/client/legacy.c: the pre-3.2 export
cuMemHostAlloc                local
cuMemFreeHost                 manual  sends=scuda_host_mirror_free
cuMemHostGetDevicePointer     manual  legacy sends=scuda_host_mirror_create,scuda_host_mirror_free
cuMemHostRegister_v2          local
cuMemHostRegister             alias=cuMemHostRegister_v2
cuMemHostUnregister           local
cuMemHostGetFlags             local
cuPointerGetAttribute         manual  sends=scuda_host_mirror_create,scuda_host_mirror_free,scuda_pointer_get_attributes
cuPointerGetAttributes        manual  sends=scuda_pointer_get_attributes
cuPointerSetAttribute         sync    blocking  value=in[scuda_pointer_set_attr_size(attribute)]   # SYNC_MEMOPS waits for pending synchronous copies

# ---- copies (hand-written: bulk data paths) and memsets ----------------------
# The 32-bit legacy exports (cuMemcpyHtoD next to cuMemcpyHtoD_v2) are
# adapters onto the _v2 paths (`legacy`, src/client/legacy.c).
cuMemcpy                      manual  sends=cuStreamSynchronize,scuda_bulk_dtoh,scuda_bulk_end,scuda_bulk_htod,scuda_bulk_setup,scuda_capture_dtoh,scuda_ctx_synchronize,scuda_memcpy_dtod,scuda_memcpy_dtoh,scuda_memcpy_htod,scuda_peer_connect,scuda_peer_grant,scuda_peer_recv,scuda_peer_send,scuda_pointer_kind  # across servers: src/client/cross_server.c
cuMemcpyAsync                 manual  sends=cuStreamSynchronize,scuda_bulk_dtoh,scuda_bulk_end,scuda_bulk_htod,scuda_bulk_setup,scuda_capture_dtoh,scuda_ctx_synchronize,scuda_memcpy_dtod,scuda_memcpy_dtoh,scuda_memcpy_htod,scuda_peer_connect,scuda_peer_grant,scuda_peer_recv,scuda_peer_send,scuda_pointer_kind  # across servers: src/client/cross_server.c
cuMemcpyPeer                  manual  sends=cuStreamSynchronize,scuda_ctx_synchronize,scuda_memcpy_peer,scuda_peer_connect,scuda_peer_grant,scuda_peer_recv,scuda_peer_send  # across servers: src/client/cross_server.c
cuMemcpyPeerAsync             manual  sends=cuStreamSynchronize,scuda_ctx_synchronize,scuda_memcpy_peer,scuda_peer_connect,scuda_peer_grant,scuda_peer_recv,scuda_peer_send  # across servers: src/client/cross_server.c
cuMemcpyHtoD                  manual  legacy sends=scuda_bulk_end,scuda_bulk_htod,scuda_bulk_setup,scuda_memcpy_htod
cuMemcpyHtoDAsync             manual  legacy sends=scuda_bulk_end,scuda_bulk_htod,scuda_bulk_setup,scuda_memcpy_htod
cuMemcpyDtoH                  manual  legacy sends=scuda_bulk_dtoh,scuda_bulk_end,scuda_bulk_setup,scuda_capture_dtoh,scuda_memcpy_dtoh
cuMemcpyDtoHAsync             manual  legacy sends=scuda_bulk_dtoh,scuda_bulk_end,scuda_bulk_setup,scuda_capture_dtoh,scuda_memcpy_dtoh
cuMemcpyDtoD                  manual  legacy sends=cuStreamSynchronize,scuda_ctx_synchronize,scuda_memcpy_dtod,scuda_peer_connect,scuda_peer_grant,scuda_peer_recv,scuda_peer_send  # across servers: src/client/cross_server.c
cuMemcpyDtoDAsync             manual  legacy sends=cuStreamSynchronize,scuda_ctx_synchronize,scuda_memcpy_dtod,scuda_peer_connect,scuda_peer_grant,scuda_peer_recv,scuda_peer_send  # across servers: src/client/cross_server.c
cuMemcpy2D                    manual  legacy sends=cuStreamSynchronize,scuda_ctx_synchronize,scuda_memcpy_2d,scuda_memcpy_3d,scuda_peer_connect,scuda_peer_grant,scuda_peer_recv,scuda_peer_send,scuda_pointer_kind  # across servers: src/client/cross_server.c
cuMemcpy2DUnaligned           manual  legacy sends=cuStreamSynchronize,scuda_ctx_synchronize,scuda_memcpy_2d,scuda_memcpy_3d,scuda_peer_connect,scuda_peer_grant,scuda_peer_recv,scuda_peer_send,scuda_pointer_kind  # across servers: src/client/cross_server.c
cuMemcpy2DAsync               manual  legacy sends=cuStreamSynchronize,scuda_ctx_synchronize,scuda_memcpy_2d,scuda_memcpy_3d,scuda_peer_connect,scuda_peer_grant,scuda_peer_recv,scuda_peer_send,scuda_pointer_kind  # across servers: src/client/cross_server.c
cuMemcpy3D                    manual  legacy sends=cuStreamSynchronize,scuda_ctx_synchronize,scuda_memcpy_2d,scuda_memcpy_3d,scuda_peer_connect,scuda_peer_grant,scuda_peer_recv,scuda_peer_send,scuda_pointer_kind  # across servers: src/client/cross_server.c
cuMemcpy3DAsync               manual  legacy sends=cuStreamSynchronize,scuda_ctx_synchronize,scuda_memcpy_2d,scuda_memcpy_3d,scuda_peer_connect,scuda_peer_grant,scuda_peer_recv,scuda_peer_send,scuda_pointer_kind  # across servers: src/client/cross_server.c
cuMemcpy3DPeer                manual  sends=cuStreamSynchronize,scuda_ctx_synchronize,scuda_memcpy_2d,scuda_memcpy_3d,scuda_peer_connect,scuda_peer_grant,scuda_peer_recv,scuda_peer_send,scuda_pointer_kind  # across servers: src/client/cross_server.c
cuMemcpy3DPeerAsync           manual  sends=cuStreamSynchronize,scuda_ctx_synchronize,scuda_memcpy_2d,scuda_memcpy_3d,scuda_peer_connect,scuda_peer_grant,scuda_peer_recv,scuda_peer_send,scuda_pointer_kind  # across servers: src/client/cross_server.c
# CUDA-array copies: generated until they get a hand-written bulk path
# (host buffers travel inside one frame, so at most SCUDA_MAX_FRAME bytes).
cuMemcpyAtoA                  sync    blocking
cuMemcpyAtoD                  sync    blocking
cuMemcpyDtoA                  sync    blocking
cuMemcpyHtoA                  sync    blocking       srcHost=in[ByteCount]
cuMemcpyHtoAAsync             async                  srcHost=in[ByteCount]
cuMemcpyAtoH                  sync    blocking       observes  dstHost=out[ByteCount]
cuMemcpyAtoHAsync             sync    blocking       observes  dstHost=out[ByteCount]
cuMemcpyBatchAsync            local                  # src/client/memcpy_batch.c: each copy on the copy paths above, in order
cuMemcpy3DBatchAsync          local
cuMemsetD8                    async   pre_hook       # pinned host memory as a device pointer: host_pinned_touch
cuMemsetD16                   async   pre_hook
cuMemsetD32                   async   pre_hook
cuMemsetD2D8                  async   pre_hook
cuMemsetD2D16                 async   pre_hook
cuMemsetD2D32                 async   pre_hook
cuMemsetD8Async               async   pre_hook
cuMemsetD16Async              async   pre_hook
cuMemsetD32Async              async   pre_hook
cuMemsetD2D8Async             async   pre_hook
cuMemsetD2D16Async            async   pre_hook
cuMemsetD2D32Async            async   pre_hook
# ---- modules, libraries, kernels, functions ------------------------------------
# Module loads reply with every function and its parameter layout, so the
# client answers the name/parameter/ownership queries itself.
cuModuleLoad                  manual  sends=scuda_module_load,scuda_module_load_by_hash,scuda_module_load_known,scuda_module_load_new,scuda_module_held,scuda_module_load_held,scuda_packed
cuModuleLoadData              manual  sends=scuda_module_load,scuda_module_load_by_hash,scuda_module_load_known,scuda_module_load_new,scuda_module_held,scuda_module_load_held,scuda_packed
cuModuleLoadDataEx            manual  sends=scuda_module_load,scuda_module_load_by_hash,scuda_module_load_known,scuda_module_load_new,scuda_module_held,scuda_module_load_held,scuda_packed
cuModuleLoadFatBinary         manual  sends=scuda_module_load,scuda_module_load_by_hash,scuda_module_load_known,scuda_module_load_new,scuda_module_held,scuda_module_load_held,scuda_packed
cuModuleUnload                manual  invalidates_memo sends=scuda_module_unload
cuModuleGetFunction           manual  sends=scuda_kernel_get_function,scuda_module_get_function
cuModuleGetGlobal             manual  legacy sends=scuda_module_get_global
cuModuleGetLoadingMode        local
cuModuleGetFunctionCount      local
cuModuleEnumerateFunctions    manual  sends=scuda_kernel_get_function,scuda_library_get_kernel,scuda_module_get_function
cuModuleGetTexRef             sync    pTexRef=existing   # a module's texture reference: a session id (owned by the module)
cuModuleGetSurfRef            sync    pSurfRef=existing
cuLibraryLoadData             manual  sends=scuda_module_load,scuda_module_load_by_hash,scuda_module_load_known,scuda_module_load_new,scuda_module_held,scuda_module_load_held,scuda_packed
cuLibraryLoadFromFile         manual  sends=scuda_module_load,scuda_module_load_by_hash,scuda_module_load_known,scuda_module_load_new,scuda_module_held,scuda_module_load_held,scuda_packed
cuLibraryUnload               manual  invalidates_memo sends=scuda_module_unload
cuLibraryGetKernel            manual  sends=scuda_kernel_get_function,scuda_library_get_kernel
cuLibraryGetKernelCount       local
cuLibraryEnumerateKernels     manual  sends=scuda_kernel_get_function,scuda_library_get_kernel,scuda_module_get_function
cuLibraryGetGlobal            manual  sends=scuda_module_get_global
cuLibraryGetModule            manual  sends=scuda_library_get_module
cuLibraryGetManaged           manual  sends=scuda_library_get_managed  # a __managed__ variable: mirrored on the client as managed memory (module.c)
cuLibraryGetUnifiedFunction   unsupported            # returns a host-callable pointer to code the session's process loaded; no such function can exist in the client process
cuKernelGetFunction           manual  sends=scuda_kernel_get_function
cuKernelGetName               local
cuKernelGetLibrary            local
cuKernelGetParamInfo          local
cuFuncGetName                 local
cuFuncGetModule               local
cuFuncGetParamInfo            local
cuKernelGetAttribute          manual  sends=scuda_func_attributes,cuKernelGetAttribute   # src/client/func_attrs.c: the fixed ones from one scuda_func_attributes per kernel and device
cuKernelSetAttribute          sync    invalidates_memo_of=kernel  setting=val  one_way_when  # src/client/attr_set.c
cuKernelSetCacheConfig        sync    invalidates_memo func_config
cuFuncGetAttribute            manual  sends=scuda_func_attributes,cuFuncGetAttribute     # src/client/func_attrs.c: the fixed ones from one scuda_func_attributes per function
cuFuncSetAttribute            sync    invalidates_memo_of=hfunc  setting=value  one_way_when  # src/client/attr_set.c
cuFuncSetCacheConfig          sync    invalidates_memo func_config
cuFuncSetSharedMemConfig      sync    invalidates_memo func_config
cuFuncLoad                    sync    invalidates_memo

# ---- run-time linking (hand-written: src/client/link.c) -----------------------
# The session links; files are read on the client; the image is copied into
# a buffer of the client's, valid until cuLinkDestroy.
cuLinkCreate                  manual  sends=scuda_link_create
cuLinkAddData                 manual  sends=scuda_link_add
cuLinkAddFile                 manual  sends=scuda_link_add
cuLinkComplete                manual  sends=scuda_link_complete
cuLinkDestroy                 manual  sends=cuLinkDestroy

# ---- launches (hand-written) ------------------------------------------------
cuLaunchKernel                manual  sends=scuda_host_mirror_create,scuda_host_mirror_free,scuda_launch,scuda_param_info
cuLaunchKernelEx              manual  sends=scuda_host_mirror_create,scuda_host_mirror_free,scuda_launch,scuda_param_info
cuLaunchCooperativeKernel     manual  sends=scuda_host_mirror_create,scuda_host_mirror_free,scuda_launch,scuda_param_info
cuLaunchHostFunc              manual  sends=cuStreamSynchronize,scuda_capture_dtoh,scuda_capture_hostfn
cuStreamAddCallback           manual  sends=cuStreamSynchronize
# Pre-CUDA-4 execution control, emulated in the client (src/client/legacy_launch.c):
# per-function block shape, shared size and parameter buffer, launched
# through cuLaunchKernel with the buffer as `extra`.
cuLaunch                      manual  sends=scuda_host_mirror_create,scuda_host_mirror_free,scuda_launch,scuda_param_info
cuLaunchGrid                  manual  sends=scuda_host_mirror_create,scuda_host_mirror_free,scuda_launch,scuda_param_info
cuLaunchGridAsync             manual  sends=scuda_host_mirror_create,scuda_host_mirror_free,scuda_launch,scuda_param_info
cuFuncSetBlockShape           local
cuFuncSetSharedSize           local
cuParamSetSize                local
cuParamSeti                   local
cuParamSetf                   local
cuParamSetv                   local
cuParamSetTexRef              sync                   # the driver checks and keeps the binding of the session's function and texture reference; a texture reference reads what its module binds, however the kernel is launched
cuLaunchCooperativeKernelMultiDevice  unsupported    # deprecated since CUDA 11.3: one launch over several GPUs' contexts of one process

# ---- occupancy --------------------------------------------------------------
cuOccupancyAvailableDynamicSMemPerBlock               memo  dynamicSmemSize=out  kept
cuOccupancyMaxActiveBlocksPerMultiprocessor           memo  kept
cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags  memo  kept
cuOccupancyMaxPotentialBlockSize            memo  blockSizeToDynamicSMemSize=null
cuOccupancyMaxPotentialBlockSizeWithFlags   memo  blockSizeToDynamicSMemSize=null
cuOccupancyMaxActiveClusters                memo  config=launch_config  memo_miss  # src/client/occupancy.c: a function that misses twice gets every cluster width at once (scuda_memo_batch)
cuOccupancyMaxPotentialClusterSize          memo  config=launch_config

# ---- streams ----------------------------------------------------------------
cuStreamCreate                async   out_handle=phStream
cuStreamCreateWithPriority    async   out_handle=phStream
cuStreamDestroy               async   drops=hStream
cuStreamQuery                 sync    observes       hook
cuStreamSynchronize           manual  sends=cuStreamSynchronize  # src/client/stream_sync.c: answered locally when provably idle
cuStreamWaitEvent             async   guard  # an event of another server: waited for in the client (servers.c)
cuStreamAttachMemAsync        async   hook
cuStreamGetPriority           sync
cuStreamGetFlags              sync
cuStreamGetId                 sync
cuStreamGetDevice             sync
cuStreamIsCapturing           manual  sends=cuStreamIsCapturing  # src/client/graph.c: NONE locally while no capture is active
cuStreamGetCaptureInfo        sync
cuStreamGetCaptureInfo_v2     manual  sends=cuStreamGetCaptureInfo_v2  # driver-owned dependency arrays (src/client/graph.c)
cuStreamGetCaptureInfo_v3     manual  sends=cuStreamGetCaptureInfo_v3
cuStreamBeginCapture          sync    capture_begin
cuStreamEndCapture            sync    out_handle=phGraph capture_end
cuStreamCopyAttributes        sync
# The value is a union: only the member the attribute id names travels
# (scuda_stream_attr_size, src/common/value_sizes.h); src/client/stream_attr.c.
cuStreamGetAttribute          manual  sends=cuStreamGetAttribute
cuStreamSetAttribute          manual  sends=cuStreamSetAttribute
cuStreamBeginCaptureToGraph   sync    capture_begin  dependencies=in[numDependencies] dependencyData=in[numDependencies]
cuStreamUpdateCaptureDependencies  sync  dependencies=in[numDependencies] dependencyData=in[numDependencies]
cuStreamWaitValue32           async
cuStreamWaitValue64           async
cuStreamWriteValue32          async
cuStreamWriteValue64          async
cuStreamGetCtx                sync    pctx=existing pCtx=existing pGreenCtx=existing
cuStreamGetGreenCtx           sync    phCtx=existing
cuThreadExchangeStreamCaptureMode  sync  mode=inout

# ---- events -----------------------------------------------------------------
cuEventCreate                 async   out_handle=phEvent
cuEventDestroy                async   drops=hEvent
cuEventRecord                 async
cuEventRecordWithFlags        async
cuEventQuery                  sync    observes       hook
cuEventSynchronize            sync    blocking       observes  hook  waits_event=hEvent
cuEventElapsedTime            sync
cuIpcOpenEventHandle          sync    out_handle=phEvent

# ---- graphs -------------------------------------------------------------------
# Node handles of captured graphs get server ids (handle_export). Kernel
# and memcpy node parameters hold functions, parameter pointers and host
# pointers: hand-written (src/client/graph.c, src/server/srv_graph.c).
# Host-side data (memcpy nodes with a host side, captured copies from and
# to client memory) lives in session staging records: see MESSAGES, graphs.
# A host node runs client code: its function and data are a record of the
# client's (like captured cuLaunchHostFunc, scuda_capture_hostfn) and the
# session's node has the client run it at each replay (graph_host.c).
cuGraphCreate                 sync    out_handle=phGraph
cuGraphDestroy                async   drops=hGraph
cuGraphClone                  sync    out_handle=phGraphClone
cuGraphInstantiateWithFlags   sync    out_handle=phGraphExec
cuGraphInstantiate            sync    out_handle=phGraphExec phErrorNode=existing logBuffer=out[bufferSize]
cuGraphInstantiateWithParams  manual  sends=cuGraphInstantiateWithParams  # CUDA_GRAPH_INSTANTIATE_PARAMS holds handles
cuGraphGetNodes               sync    nodes=out[*numNodes] numNodes=inout
cuGraphGetRootNodes           sync    rootNodes=out[*numRootNodes] numRootNodes=inout
cuGraphGetEdges               sync    from=out[*numEdges] to=out[*numEdges] edgeData=out[*numEdges] numEdges=inout
cuGraphNodeGetDependencies    sync    dependencies=out[*numDependencies] edgeData=out[*numDependencies] numDependencies=inout
cuGraphNodeGetDependentNodes  sync    dependentNodes=out[*numDependentNodes] edgeData=out[*numDependentNodes] numDependentNodes=inout
cuGraphNodeFindInClone        sync    phNode=existing
cuGraphAddKernelNode          manual  sends=cuGraphAddKernelNode_v2,scuda_host_mirror_create,scuda_host_mirror_free,scuda_param_info
cuGraphKernelNodeGetParams    manual  sends=cuGraphKernelNodeGetParams_v2
cuGraphKernelNodeSetParams    manual  sends=cuGraphKernelNodeSetParams_v2,scuda_host_mirror_create,scuda_host_mirror_free,scuda_param_info
cuGraphExecKernelNodeSetParams  manual  sends=cuGraphExecKernelNodeSetParams_v2,scuda_host_mirror_create,scuda_host_mirror_free,scuda_param_info
cuGraphAddMemcpyNode          manual  sends=cuGraphAddMemcpyNode  # a host side becomes staging records (graph_host.c)
cuGraphMemcpyNodeGetParams    manual  sends=cuGraphMemcpyNodeGetParams
cuGraphMemcpyNodeSetParams    manual  sends=cuGraphMemcpyNodeSetParams
cuGraphExecMemcpyNodeSetParams  manual  sends=cuGraphExecMemcpyNodeSetParams
cuGraphAddHostNode            manual  sends=scuda_graph_add_host_node  # src/client/graph_host_node.c
cuGraphHostNodeGetParams      manual  sends=scuda_graph_host_node_get
cuGraphHostNodeSetParams      manual  sends=scuda_graph_host_node_set
cuGraphExecHostNodeSetParams  manual  sends=scuda_graph_host_node_set
cuGraphKernelNodeGetAttribute manual  sends=cuGraphKernelNodeGetAttribute  # the union member the id names (graph_attr.c)
cuGraphKernelNodeSetAttribute manual  sends=cuGraphKernelNodeSetAttribute
cuGraphExecUpdate             manual  sends=cuGraphExecUpdate_v2  # both exports; node handles map back to ids (graph_update.c)
cuGraphAddMemAllocNode        manual  sends=cuGraphAddMemAllocNode  # access descriptors travel as an array (graph_mem.c)
cuGraphMemAllocNodeGetParams  manual  sends=cuGraphMemAllocNodeGetParams
cuGraphAddBatchMemOpNode      manual  sends=cuGraphAddBatchMemOpNode  # the operations travel as cuStreamBatchMemOp's (graph_mem_op.c)
cuGraphBatchMemOpNodeGetParams  manual  sends=cuGraphBatchMemOpNodeGetParams
cuGraphBatchMemOpNodeSetParams  manual  sends=cuGraphBatchMemOpNodeSetParams
cuGraphExecBatchMemOpNodeSetParams  manual  sends=cuGraphBatchMemOpNodeSetParams
cuGraphDebugDotPrint          manual  sends=cuGraphDebugDotPrint  # the session's text, written by the client at the application's path (graph_dot.c)
cuUserObjectCreate            manual  sends=scuda_user_object_create  # the destructor is a run record of the client's (graph_user_object.c)
cuGraphExecDestroy            async   drops=hGraphExec
cuGraphLaunch                 manual  sends=cuGraphLaunch,scuda_graph_stage,scuda_graph_uploads  # src/client/graph_launch.c: host-to-device nodes' bytes go first
cuGraphUpload                 async
cuGraphAddEmptyNode           sync    out_handle=phGraphNode dependencies=in[numDependencies]
cuGraphAddChildGraphNode      sync    out_handle=phGraphNode dependencies=in[numDependencies]
cuGraphAddEventRecordNode     sync    out_handle=phGraphNode dependencies=in[numDependencies]
cuGraphAddEventWaitNode       sync    out_handle=phGraphNode dependencies=in[numDependencies]
cuGraphAddMemFreeNode         sync    out_handle=phGraphNode dependencies=in[numDependencies]
cuGraphAddMemsetNode          sync    out_handle=phGraphNode dependencies=in[numDependencies]
cuGraphAddDependencies        sync    from=in[numDependencies] to=in[numDependencies] edgeData=in[numDependencies]
cuGraphRemoveDependencies     sync    from=in[numDependencies] to=in[numDependencies] edgeData=in[numDependencies]
cuGraphDestroyNode            sync    drops=hNode
cuGraphChildGraphNodeGetGraph sync    phGraph=existing
cuGraphEventRecordNodeGetEvent  sync  event_out=existing
cuGraphEventWaitNodeGetEvent  sync    event_out=existing

# ---- arrays -------------------------------------------------------------------
cuArrayCreate                 sync    out_handle=pHandle
cuArray3DCreate               sync    out_handle=pHandle
cuArrayDestroy                sync    drops=hArray
cuMipmappedArrayCreate        sync    out_handle=pHandle pMipmappedArrayDesc=in
cuMipmappedArrayDestroy       sync    drops=hMipmappedArray
# Levels and planes are arrays the driver owns: session ids (handle_export),
# the same id each time; they die with their mipmapped array or array.
cuMipmappedArrayGetLevel      sync    pLevelArray=existing
cuArrayGetPlane               sync    pPlaneArray=existing

# ---- texture and surface objects (src/client/texture.c, src/server/srv_texture.c)
# A CUtexObject/CUsurfObject is the server driver's 64-bit value, passed
# through unchanged: kernels read it. CUDA_RESOURCE_DESC holds an array
# handle or a device pointer, so it travels as the res_desc message record.
cuTexObjectCreate             manual  sends=cuTexObjectCreate
cuTexObjectGetResourceDesc    manual  sends=cuTexObjectGetResourceDesc
cuSurfObjectCreate            manual  sends=cuSurfObjectCreate
cuSurfObjectGetResourceDesc   manual  sends=cuSurfObjectGetResourceDesc

# ---- tensor maps (TMA descriptors; globalAddress is a device address) ------
cuTensorMapEncodeTiled        sync    globalAddress=value globalDim=in[tensorRank] globalStrides=in[tensorRank > 1 ? tensorRank - 1 : 0] boxDim=in[tensorRank] elementStrides=in[tensorRank]
cuTensorMapEncodeIm2col       sync    globalAddress=value globalDim=in[tensorRank] globalStrides=in[tensorRank > 1 ? tensorRank - 1 : 0] pixelBoxLowerCorner=in[tensorRank > 2 ? tensorRank - 2 : 0] pixelBoxUpperCorner=in[tensorRank > 2 ? tensorRank - 2 : 0] elementStrides=in[tensorRank]
cuTensorMapEncodeIm2colWide   sync    globalAddress=value globalDim=in[tensorRank] globalStrides=in[tensorRank > 1 ? tensorRank - 1 : 0] elementStrides=in[tensorRank]
cuTensorMapReplaceAddress     sync    tensorMap=inout globalAddress=value

# ---- not meaningful remotely -------------------------------------------------
# Each comment is the reason the application's log line gives (and
# coverage.gen.txt); docs/operate.md lists them.
cuCheckpointProcessCheckpoint unsupported            # acts on the GPU state of a local process, named by pid; the client's processes have none, and the session's moves with scuda_migrate
cuCheckpointProcessGetRestoreThreadId unsupported
cuCheckpointProcessGetState   unsupported
cuCheckpointProcessLock       unsupported
cuCheckpointProcessRestore    unsupported
cuCheckpointProcessUnlock     unsupported
cuProfilerInitialize          local                  # profiler.c: every driver since CUDA 12.0 answers NOT_SUPPORTED, reading no file
cuGraphAddNode                manual  sends=scuda_graph_add_node  # src/client/graph_node.c: unpacks the union, calls each type's own call; conditional nodes and child graphs moved in have their own op
cuGraphNodeSetParams          local
cuGraphExecNodeSetParams      local
cuLogsDumpToFile              local                  # the session's log buffer, written to the client's path (logs.c)
cuLogsRegisterCallback        manual  sends=scuda_logs_register  # the session's driver calls the session, which has the client run the callback (logs.c, srv_logs.c)
cuLogsUnregisterCallback      sync    hook  drops=callback   # the client forgets its record (logs.c)
cuLogsDumpToMemory            sync    buffer=out[*size] size=inout iterator=inout   # the session's driver log buffer
cuDeviceGetNvSciSyncAttributes  unsupported          # NvSci objects belong to the client machine's NvSci stack, which the server's GPU cannot join
cuCoredumpGetAttribute        unsupported            # a GPU core dump is written by the session's process on the server; its file and pipe are server paths the client cannot reach
cuCoredumpGetAttributeGlobal  unsupported
cuCoredumpSetAttribute        unsupported
cuCoredumpSetAttributeGlobal  unsupported
cuImportExternalMemory        unsupported            # imports a file descriptor or handle of another GPU API (Vulkan, D3D, NvSci) of the client process; the server's GPU cannot reach it
cuImportExternalSemaphore     unsupported
cuExternalMemoryGetMappedMipmappedArray  unsupported
cuSignalExternalSemaphoresAsync  unsupported
cuWaitExternalSemaphoresAsync unsupported
cuGraphicsMapResources        unsupported            # graphics interop: the resource is an OpenGL, EGL or VDPAU object of the client's display stack, which the server's GPU cannot see
cuGraphicsUnmapResources      unsupported
cuGraphicsSubResourceGetMappedArray  unsupported
cuGraphicsResourceGetMappedMipmappedArray  unsupported
cuMemGetHandleForAddressRange unsupported            # returns a dma-buf file descriptor of the server's GPU memory, which cannot be a file descriptor of the client process
cuFlushGPUDirectRDMAWrites    sync

# ---- legacy texture and surface references ----------------------------------------
# A CUtexref/CUsurfref is a driver object: a virtual handle like a function.
# Arrays bound to one come back as the ids the client gave them.
cuTexRefCreate                sync    out_handle=pTexRef
cuTexRefDestroy               sync    drops=hTexRef
cuTexRefGetArray              sync    phArray=existing
cuTexRefGetMipmappedArray     sync    phMipmappedArray=existing
cuSurfRefGetArray             sync    phArray=existing
cuTexRefGetBorderColor        sync    pBorderColor=out[4]
cuTexRefSetBorderColor        sync    pBorderColor=in[4]
"""

# The protocol's messages: a typed request (`in`) and reply (`out`) for
# every op the hand-written code sends. codegen/messages.py writes one
# encoder and one decoder for each into src/common/messages.gen.[ch]; the
# client and the server both use them, so no hand-written file encodes or
# decodes an argument of its own.
#
#   const NAME VALUE           a wire constant (#define in messages.gen.h)
#   record NAME                a struct used by several messages
#       TYPE NAME [OPTIONS]
#   op NAME [FLAGS]            an op: OP_NAME, handled by srv_NAME
#       in TYPE NAME [OPTIONS]     a request field, in wire order
#       out TYPE NAME [OPTIONS]    a reply field (after the CUresult)
#
# An op named after an export (cuStreamSynchronize) is the one that
# export's hand-written body sends; every other op is scuda_*.
#
# TYPE: u8 u16 u32 u64 i32 i64 f32 f64 (little-endian); handle (a virtual
# handle's u64 id); dptr (a u64 device address); str (a C string or NULL);
# bytes (u64 length and the bytes); raw:CTYPE (sizeof(CTYPE) bytes, copied
# as they are: structs without pointers); or a record's name.
# NAME[N] is N elements (N a number or a const); NAME[] max=N is a u32
# count and at most N elements.
# OPTIONS: max=N (for NAME[]); bulk (bytes only: a request's last field,
# whose bytes follow the frame from the caller's own buffer and may be
# received straight into staging memory; a reply's first field, whose
# bytes may land straight in the caller's buffer).
#
# FLAGS (what the dispatch loop needs to know, so that it knows no layout):
#   blocking        the session runs it on a worker thread (it waits for the GPU)
#   observes        waits for or observes earlier work (see FLAGS above)
#   any_context     manages contexts or needs none: the session runs it in
#                   whatever context the caller's thread has current, which
#                   may be the very one it releases or destroys
#   waits=FIELD     (with blocking) the handle of the stream it waits for;
#                   the session runs it inline when that stream is idle
#   waits_event=FIELD   the same for an event
#   when=FIELD==CONST   ... only when the field has that value
MESSAGES = r"""
const LAUNCH_MAX_PARAMS   4096
const LAUNCH_MAX_ATTRS    32

# ---- launches -------------------------------------------------------------------
record launch_attr                     # a CUlaunchAttribute: its event handles are ids
    u32 id
    raw:CUlaunchAttributeValue value

record launch_params                   # a kernel's parameters, packed (src/client/launch.h)
    u8 raw                             # 1: data is the caller's `extra` buffer as it came
    bytes data                         # else each parameter at the offset cuFuncGetParamInfo gives

op scuda_launch
    in handle func
    in u32 grid[3]
    in u32 block[3]
    in u32 shared_bytes
    in handle stream
    in launch_attr attrs[] max=LAUNCH_MAX_ATTRS
    in launch_params params

# ---- graph kernel nodes -----------------------------------------------------------
# The _v1 exports convert to and from CUDA_KERNEL_NODE_PARAMS in the client
# and send these.
const GRAPH_MAX_DEPS      8388608      # a frame's worth of node ids

record param_slot                      # where a kernel reads one parameter
    u32 offset
    u32 size

record kernel_node                     # CUDA_KERNEL_NODE_PARAMS
    handle func
    handle kern                        # kern and ctx count only without func, as in the driver
    handle ctx
    u32 grid[3]
    u32 block[3]
    u32 shared_bytes
    launch_params params

op cuGraphAddKernelNode_v2
    in handle node                     # the new node's id (the client picks it)
    in handle graph
    in handle deps[] max=GRAPH_MAX_DEPS
    in kernel_node params

op cuGraphKernelNodeSetParams_v2
    in handle node
    in kernel_node params

op cuGraphExecKernelNodeSetParams_v2
    in handle exec
    in handle node
    in kernel_node params

op cuGraphKernelNodeGetParams_v2
    in handle node
    out kernel_node params             # packed with the driver's layout, which follows
    out param_slot layout[] max=LAUNCH_MAX_PARAMS   # that layout (none for a raw buffer)
    out str name                       # the function's name: the client may never have looked it up

# ---- copies (fields to come) -------------------------------------------------------
# (group: copies)
# A copy's `mode` is enum copy_mode (protocol.h): COPY_SYNC copies with the
# semantics of cuMemcpy*, COPY_ASYNC with those of cuMemcpy*Async on
# `stream`. Host memory is the client's: its bytes travel in the request
# (to the device) or the reply (to the host), at most a frame's worth per
# call (the client splits larger copies, src/client/memcpy.c).
op scuda_memcpy_htod             blocking
    in dptr dst
    in handle stream
    in u8 mode
    in bytes data bulk                 # a large one lands in staging memory (srv_call.staging)

# With COPY_ASYNC the session synchronizes the stream before it replies,
# so the reply proves the stream idle (src/client/stream_sync.c).
op scuda_memcpy_dtoh             blocking  observes  waits=stream  when=mode==COPY_ASYNC
    in dptr src
    in u64 n
    in handle stream
    in u8 mode
    out bytes data bulk                # n bytes

op scuda_memcpy_dtod             blocking
    in dptr dst
    in dptr src
    in u64 n
    in handle stream
    in u8 mode

# 2D and 3D copies. A host side travels packed, its rows (and slices) back
# to back: the server hands the driver its buffer with pitch = width, and
# x, y, z, pitch and height of that side are the client's alone.
record copy_side                       # one side of a CUDA_MEMCPY3D (copies and graph memcpy nodes)
    u32 type                           # copies: HOST, DEVICE or ARRAY (the client resolves UNIFIED); nodes: DEVICE, UNIFIED or ARRAY
    u64 x                              # in bytes
    u64 y
    u64 z                              # 3D only, like lod and height
    u64 lod
    dptr ptr                           # DEVICE
    handle array                       # ARRAY
    u64 pitch
    u64 height

record copy_nd
    u8 mode
    handle stream
    copy_side src
    copy_side dst
    u64 width                          # in bytes
    u64 height
    u64 depth                          # 3D only

op scuda_memcpy_2d               blocking  observes
    in copy_nd copy
    in bytes data bulk                 # the packed source when it is host memory, else empty (staged when large)
    out bytes data bulk                # the packed destination when it is host memory (else the call is one-way)

op scuda_memcpy_3d               blocking  observes
    in copy_nd copy
    in bytes data bulk                 # as for scuda_memcpy_2d
    out bytes data bulk

op scuda_memcpy_peer             blocking
    in dptr dst
    in handle dst_ctx
    in dptr src
    in handle src_ctx
    in u64 n
    in handle stream
    in u8 mode

op cuStreamSynchronize           blocking  observes  waits=stream
    in handle stream
# (end of group: copies)

# ---- host memory, managed memory, pointers, bulk (fields to come) -----------------
# (group: memory)
const POINTER_KIND_MAX    64           # pointers one scuda_pointer_kind asks about
const POINTER_ATTR_MAX    64           # bytes the driver writes for one pointer attribute

op scuda_pointer_get_attributes        # cuPointerGetAttribute of memory the client does not hold
    in u32 attr                        # a CUpointer_attribute
    in dptr ptr
    out bytes value                    # exactly the bytes the driver wrote (a context as its id)

op scuda_pointer_kind                  # which sides of a unified-address copy are device memory
    in dptr ptrs[] max=POINTER_KIND_MAX
    out u32 types[] max=POINTER_KIND_MAX   # CU_MEMORYTYPE_*, 0 for memory the driver does not know

op scuda_host_mirror_create      blocking  # pinned memory of the session for zero-copy host memory
    in u64 addr                        # the client's address, where the session maps it if it can
    in u64 size
    out dptr dev

op scuda_host_mirror_free
    in dptr dev                        # from scuda_host_mirror_create

op cuMemAllocManaged
    in u64 bytesize
    in u32 flags
    out dptr dptr

# Striping (src/client/bulk.h, src/server/bulk.h). A striped copy's chunks
# travel on the bulk connections in their own framing (protocol.h, "Bulk
# connections"); the main connection carries only these ops.
op scuda_bulk_setup
    in u32 want                        # bulk connections wanted
    out u32 k                          # granted
    out u32 pid                        # the session's, for the joins
    out u32 chunk_max                  # the largest chunk the session takes
    out u8 secret[32]                  # the join secret: BULK_SECRET_LEN (protocol.h) bytes

record bulk_copy                       # a striped copy, announced on the main connection
    dptr dev                           # htod: the destination; dtoh: the source
    handle stream
    u8 mode                            # bit 0: enum copy_mode; bits 1-7: the compression policy (protocol.h, "Compressed chunks")
    u64 n
    u32 chunk                          # every chunk's length but the last
    u64 id                             # the copy's id, above the last one's

op scuda_bulk_htod                     # one-way, like scuda_memcpy_htod
    in bulk_copy copy

op scuda_bulk_dtoh               blocking  observes   # replies after every chunk went out
    in bulk_copy copy

op scuda_bulk_end                      # one-way: a copy failed on bulk connection `index` on the client's side,
    in u32 index                       # which closed them all; the session ends striping too (it may not have
                                       # seen the failure: its chunks can all be in the sockets already)

# Server-to-server copies (src/client/peer.c, src/server/peer_link.h): the
# client asks the source session for a one-time grant, hands it to the
# destination session, which dials the source's server and joins the
# source session with it (a peer link). A copy is then announced to both
# ends at once; its bytes go over the link, never through the client.
op scuda_peer_grant
    out u32 pid                        # the session's, for the join
    out u32 link                       # the link slot the grant is for
    out u8 secret[32]                  # the one-time secret: PEER_SECRET_LEN (protocol.h) bytes
    out str fingerprint                # the server's TLS certificate ("sha256:HEX"), or empty: plain TCP

op scuda_peer_connect            blocking  # dials the granting server and joins its session
    in str addr                        # HOST:PORT of the granting server, as the client reaches it
    in u32 pid
    in u32 link                        # from scuda_peer_grant
    in u8 secret[32]
    in str fingerprint                 # pinned when not empty (TLS)
    out u32 local                      # this session's slot for the link

op scuda_peer_send               blocking  observes   # replies after the last byte went on the link
    in dptr src
    in u64 n
    in u32 link
    in handle stream

op scuda_peer_recv               blocking  observes   # replies after the last byte landed
    in dptr dst
    in u64 n
    in u32 link
    in handle stream
# (end of group: memory)

# ---- modules and libraries (fields to come) ---------------------------------------
# (group: modules)
# A load names the image by its SHA-256 (scuda_module_load_by_hash) and
# sends the bytes (scuda_module_load) only when the session lacks them.
# Both reply with the JIT logs, also when the load fails, and then every
# function's name; a function's parameter layout is asked for at its first
# launch (scuda_param_info).
const JIT_MAX_OPTIONS     32
const IMAGE_DIGEST_LEN    32           # SHA-256
const MODULE_MAX_FUNCS    1000000
const MODULE_PIN_MAX      1073741824   # bytes of distinct images a session keeps for scuda_module_load_known; both ends count to it: a larger value is safe only in a build that also appends an op (a client never reaches a server of a shorter op set, and an older client counts less)
const FUNC_ATTR_FIXED     8            # CUfunction_attribute 0..7 (max threads per block .. cache mode) never change
const FUNC_ATTR_COUNT     16           # CUfunction_attribute 0..15: what scuda_func_attributes answers

record jit_option                      # a CUjit_option forwarded: a scalar's value, or a log buffer's size
    u32 option
    u64 value

record load_head                       # what both loads send first
    handle id                          # the new module's or library's id (the client picks it)
    u8 is_library
    jit_option jit[] max=JIT_MAX_OPTIONS

record layout_info                     # a function's parameter layout
    u8 known                           # 0: the session could not tell it (no context current)
    param_slot slots[] max=LAUNCH_MAX_PARAMS

record func_desc                       # a function or kernel of a loaded image
    str name
    layout_info layout

record load_result                     # a load's reply, also on failure (logs only then)
    str info_log                       # NULL unless the client asked for that log
    str error_log
    func_desc funcs[] max=MODULE_MAX_FUNCS

record bind_by_name                    # a function of a module or a kernel of a library, by name
    handle parent
    handle id                          # the new handle's id (the client picks it)
    str name

op scuda_module_load             blocking
    in load_head head
    in bytes image bulk
    out load_result result

op scuda_module_load_by_hash     blocking
    in load_head head
    in u8 digest[IMAGE_DIGEST_LEN]     # of exactly the bytes scuda_module_load would send
    in u64 image_len
    out u8 found                       # 0: the session lacks the image: send it with scuda_module_load
    out load_result result             # empty when not found

# One-way: a load of an image this client loaded on this session before.
# The session keeps the distinct images it loaded for its client, the
# first MODULE_PIN_MAX bytes of them, and the client counts the same bytes,
# so it sends this only for images the session kept; an error (a digest
# the session does not hold for this client) is deferred (architecture.md,
# 3.4). The client already knows the function names from the first load.
op scuda_module_load_known
    in load_head head                  # no log buffers among its options: nothing comes back
    in u8 digest[IMAGE_DIGEST_LEN]
    in u64 image_len

# One-way: a load of an image new to the session whose kernels the client
# read itself (src/common/image_kernels.h): a cubin, its kernels' names in
# the order the driver lists them and their parameter layouts. The session
# loads it, keeps it as scuda_module_load does, and checks its driver's
# list of names against the client's, and each kernel's layout against
# its driver's when the kernel is bound; a load that fails, a list that
# differs or a layout that differs is an error at the client's next
# observing call (deferred, architecture.md 3.4), and the session's log
# says which.
op scuda_module_load_new
    in load_head head                  # no log buffers among its options: nothing comes back
    in u32 funcs_count                 # the kernels the client read
    in u8 names_digest[IMAGE_DIGEST_LEN] # image_kernels_digest of their names, in order
    in layout_info layouts[] max=MODULE_MAX_FUNCS # each one's, in the same order
    in bytes image bulk

# The images the server's module cache holds for this client's user, most
# recently used first, at most max of them: the session keeps each one
# readable for its life (mapped, so that eviction cannot take it), so that
# the client may load any of them one-way by digest
# (scuda_module_load_held). Asked once per process and server, at the
# first load. A second ask answers the same list.
const MODULE_HELD_MAX     4096

record held_image                      # an image the session holds for its client
    u8 digest[32]                      # SHA-256 of the image's bytes
    u64 image_len

op scuda_module_held             blocking
    in u32 max                         # at most this many (MODULE_HELD_MAX at most)
    out held_image images[] max=MODULE_HELD_MAX

# One-way: scuda_module_load_new for an image scuda_module_held listed,
# named by its digest instead of carried: the session loads it from the
# module cache, and checks the client's kernels and layouts as for
# scuda_module_load_new.
op scuda_module_load_held
    in load_head head                  # no log buffers among its options: nothing comes back
    in u8 digest[IMAGE_DIGEST_LEN]
    in u64 image_len
    in u32 funcs_count
    in u8 names_digest[IMAGE_DIGEST_LEN]
    in layout_info layouts[] max=MODULE_MAX_FUNCS

op scuda_module_get_function
    in bind_by_name bind

op scuda_library_get_kernel
    in bind_by_name bind

op scuda_module_get_global
    in handle id                       # the module or library
    in u8 is_library
    in str name
    out dptr ptr
    out u64 size

op scuda_kernel_get_function
    in handle kernel
    in handle func                     # the new function's id (one per kernel and context)

op scuda_module_unload
    in handle id
    in u8 is_library

op scuda_library_get_module
    in handle library
    in handle module                   # the new module's id

op scuda_param_info
    in handle func                     # a function or a kernel
    out layout_info layout

# Every attribute of a function or kernel at once (src/client/func_attrs.c):
# the client keeps the fixed ones (below FUNC_ATTR_FIXED) for the process,
# and puts the settable ones in its memo, which a set clears. values[a] is
# attribute a's value where bit a of `known` is set; where the driver
# refused one, the client asks for it alone, and hears the driver's error.
op scuda_func_attributes
    in handle func                     # a function (or a kernel used as one), or a kernel
    in u8 is_kernel                    # 1: as cuKernelGetAttribute asks, of a kernel on dev
    in i32 dev
    out i32 values[] max=FUNC_ATTR_COUNT
    out u32 known

# Several calls of one query (call class memo) in one round trip
# (src/client/occupancy.c): each request encoded as the call's own, each
# answer its result and the outputs its own reply would carry. The
# session runs only the ops it takes in batches (srv_memo_batch.c).
const MEMO_BATCH_MAX      64

record memo_request
    bytes args

record memo_answer
    i32 result
    bytes outs

op scuda_memo_batch
    in u16 op
    in memo_request calls[] max=MEMO_BATCH_MAX
    out memo_answer answers[] max=MEMO_BATCH_MAX

# One attribute, for those that may change (cuFuncSetAttribute): the
# encoding of the generated call these replace, answered from the client's
# memo (memo.h) after its first success.
op cuFuncGetAttribute
    in u8 has_value                    # the application's pointer was not NULL
    in u32 attrib
    in handle func
    out i32 value

op cuKernelGetAttribute
    in u8 has_value
    in u32 attrib
    in handle kernel
    in i32 dev
    out i32 value
# (end of group: modules)

# ---- stream attributes, old launches, run-time linking (group: legacy) ----------
# A stream attribute's value is the one member of CUstreamAttrValue its id
# names, scuda_stream_attr_size(attr) bytes (src/common/value_sizes.h); an
# id SCUDA does not know travels with no bytes, and the session asks its
# driver whether it means anything (src/server/srv_stream.c).
op cuStreamGetAttribute
    in handle stream
    in u32 attr
    out bytes value

op cuStreamSetAttribute
    in handle stream
    in u32 attr
    in bytes value

# Run-time linking (src/client/link.c, src/server/srv_link.c). The link's
# log buffers are the session's, of the sizes the client asked for at
# cuLinkCreate; every add and the completion reply with both logs as they
# stand (also on failure), which the client copies into the application's
# buffers. A file is read by the client and travels as data.
const LINK_IMAGE_MAX      67108864     # a linked image comes back in one reply

op scuda_link_create             blocking
    in handle link                     # the new link's id (the client picks it)
    in jit_option jit[] max=JIT_MAX_OPTIONS

op scuda_link_add                blocking
    in handle link
    in u32 type                        # CUjitInputType
    in str name
    in jit_option jit[] max=JIT_MAX_OPTIONS   # scalar options of this input
    in bytes data bulk                 # the input (staged when large)
    out str info_log
    out str error_log

op scuda_link_complete           blocking
    in handle link
    out str info_log
    out str error_log
    out bytes image                    # the linked image, the client's until cuLinkDestroy

op cuLinkDestroy
    in handle link
# (end of group: legacy)

# ---- contexts and the session (fields to come) -------------------------------------
# (group: contexts)
# The client keeps the context stack and picks every context's id; the
# session binds the real contexts to those ids.
op scuda_ping                                  # an empty round trip (scuda info, bench)

op scuda_error_string            any_context   # the real driver's texts for a CUresult
    in u32 code
    out str name
    out str text

op scuda_ctx_create              blocking  any_context
    in handle ctx                      # the new context's id
    in u32 flags
    in i32 dev
    in u8 legacy                       # 1: cuCtxCreate's pre-3.2 export, whose context takes the 32-bit entry points

op scuda_primary_ctx_retain      blocking  any_context
    in i32 dev
    in handle ctx                      # the primary context's id, the same for the process's life

op scuda_primary_ctx_release     blocking  any_context
    in i32 dev

op scuda_primary_ctx_reset       blocking  any_context
    in i32 dev

op scuda_primary_ctx_set_flags   any_context
    in i32 dev
    in u32 flags

op scuda_ctx_destroy             blocking  any_context
    in handle ctx

op scuda_ctx_synchronize         blocking  observes  any_context
    in handle ctx
# (end of group: contexts)

# ---- graphs and stream capture (fields to come) ---------------------------------------
# (group: graphs)
# Host work in captures (src/server/graph_host.c): a device-to-host copy
# into client memory, or a host function, on a capturing stream becomes a
# record the client picks an id for; the session captures a copy into a
# staging buffer, or a host node.
op scuda_capture_dtoh
    in handle record                   # the client's record id (a chunk of at most SCUDA_CHUNK bytes)
    in dptr src
    in u64 n
    in handle stream

op scuda_capture_hostfn
    in handle record
    in handle stream

# At each replay the session sends the records' work to the client in
# FRAME_HOST_WORK frames (protocol.h): this head, then for HOST_WORK_DATA
# the bytes, read straight into the client's buffer.
const HOST_WORK_HEAD_LEN  9            # the wire size of host_work
record host_work
    u8 kind                            # enum host_work_kind (protocol.h)
    handle record

# A host-to-device copy from client memory on a capturing stream, and a
# memcpy node with a host side, read client memory when the graph runs:
# the session captures a copy from a pinned staging buffer (an upload
# record), and the client sends the bytes of every upload record of an
# executable graph, read from its memory at cuGraphLaunch, before the
# launch (src/client/graph_launch.c).
op scuda_capture_htod
    in handle record                   # the client's record id (a chunk of at most SCUDA_CHUNK bytes)
    in dptr dst
    in u64 n
    in handle stream

const GRAPH_MAX_UPLOADS   1048576      # upload records of one executable graph
op scuda_graph_uploads
    in handle exec
    out handle records[] max=GRAPH_MAX_UPLOADS   # in the order the client sends their bytes

op scuda_graph_stage
    in handle record
    in bytes data bulk                 # the record's n bytes, read from client memory at launch

op cuGraphLaunch
    in handle exec
    in handle stream

op cuStreamIsCapturing
    in handle stream
    out u32 status

# The driver sees a NULL output where the application's call has one (it
# checks them): `want` says which are wanted (CAPTURE_WANT_* bits).
const CAPTURE_WANT_STATUS 1
const CAPTURE_WANT_ID     2
const CAPTURE_WANT_GRAPH  4
const CAPTURE_WANT_DEPS   8
const CAPTURE_WANT_EDGES  16           # _v3 only
const CAPTURE_WANT_NUM    32
const CAPTURE_MAX_DEPS    4194304      # a frame's worth of node ids and edge data

op cuStreamGetCaptureInfo_v2
    in handle stream
    in u8 want
    out u32 status
    out u64 id
    out handle graph
    out u64 num
    out handle deps[] max=CAPTURE_MAX_DEPS   # num ids when wanted, else none

op cuStreamGetCaptureInfo_v3
    in handle stream
    in u8 want
    out u32 status
    out u64 id
    out handle graph
    out u64 num
    out handle deps[] max=CAPTURE_MAX_DEPS   # num ids when wanted, else none
    out raw:CUgraphEdgeData edges[] max=CAPTURE_MAX_DEPS   # num when wanted and the driver has them, else none

# Memcpy nodes: device, unified (device memory only) and array sides; a
# host side (one at most) is a staging buffer of the session, split into
# records of at most SCUDA_CHUNK bytes whose ids the client picks
# (`records`, none without a host side). Its x, y, z and ptr are the
# client's alone: the session copies from or into its staging, which holds
# the host side's extent from its first byte.
record graph_copy                      # CUDA_MEMCPY3D
    copy_side src
    copy_side dst
    u64 width                          # in bytes
    u64 height
    u64 depth

op cuGraphAddMemcpyNode
    in handle node                     # the new node's id (the client picks it)
    in handle graph
    in handle deps[] max=GRAPH_MAX_DEPS
    in graph_copy copy
    in handle records[] max=GRAPH_MAX_UPLOADS   # the host side's staging records
    in handle ctx

op cuGraphMemcpyNodeGetParams
    in handle node
    out graph_copy copy

op cuGraphMemcpyNodeSetParams
    in handle node
    in graph_copy copy
    in handle records[] max=GRAPH_MAX_UPLOADS   # the host side's staging records

op cuGraphExecMemcpyNodeSetParams
    in handle exec
    in handle node
    in graph_copy copy
    in handle records[] max=GRAPH_MAX_UPLOADS   # the host side's staging records
    in handle ctx

# Host nodes (src/client/graph_host_node.c, src/server/graph_host.c): the
# function and its data are a run record of the client's (HOST_WORK_RUN),
# as for a captured host function; the session's node has the client run
# it at each replay. A query answers the node's record id.
op scuda_graph_add_host_node
    in handle node                     # the new node's id (the client picks it)
    in handle graph
    in handle deps[] max=GRAPH_MAX_DEPS
    in handle record

op scuda_graph_host_node_get
    in handle node
    out handle record

op scuda_graph_host_node_set
    in handle exec                     # 0: the graph's node itself
    in handle node
    in handle record

# Kernel node attributes: the one member of CUkernelNodeAttrValue the id
# names, scuda_kernel_node_attr_size(attr) bytes (value_sizes.h), as for a
# stream attribute; an id SCUDA does not know travels with no bytes.
op cuGraphKernelNodeGetAttribute
    in handle node
    in u32 attr
    out bytes value

op cuGraphKernelNodeSetAttribute
    in handle node
    in u32 attr
    in bytes value

# cuGraphExecUpdate: the result's nodes are the session's; each comes back
# as its id (a session id for a node the client never named).
op cuGraphExecUpdate_v2
    in handle exec
    in handle graph
    out u32 result                     # CUgraphExecUpdateResult
    out handle error_node
    out handle error_from_node

# Memory allocation nodes: the address is the session driver's, device
# memory the client learns of at the add (its pointer attributes, copies).
const GRAPH_MAX_ACCESS    64           # access descriptors: at most one per device
op cuGraphAddMemAllocNode
    in handle node                     # the new node's id (the client picks it)
    in handle graph
    in handle deps[] max=GRAPH_MAX_DEPS
    in raw:CUmemPoolProps pool         # its pointer (win32SecurityAttributes) is NULLed by the session
    in raw:CUmemAccessDesc access[] max=GRAPH_MAX_ACCESS
    in u64 bytesize
    out dptr dptr

op cuGraphMemAllocNodeGetParams
    in handle node
    out raw:CUmemPoolProps pool
    out raw:CUmemAccessDesc access[] max=GRAPH_MAX_ACCESS
    out u64 bytesize
    out dptr dptr

# Batch memory-operation nodes: the operations are raw
# CUstreamBatchMemOpParams, as cuStreamBatchMemOp sends them (device
# addresses, no host pointers); the context is the client's.
const GRAPH_MAX_MEM_OPS   65536        # operations of one node (48 bytes each)
op cuGraphAddBatchMemOpNode
    in handle node                     # the new node's id (the client picks it)
    in handle graph
    in handle deps[] max=GRAPH_MAX_DEPS
    in handle ctx
    in raw:CUstreamBatchMemOpParams ops[] max=GRAPH_MAX_MEM_OPS
    in u32 flags

op cuGraphBatchMemOpNodeGetParams
    in handle node
    out handle ctx
    out raw:CUstreamBatchMemOpParams ops[] max=GRAPH_MAX_MEM_OPS
    out u32 flags

op cuGraphBatchMemOpNodeSetParams
    in handle exec                     # 0: the graph's node itself
    in handle node
    in handle ctx
    in raw:CUstreamBatchMemOpParams ops[] max=GRAPH_MAX_MEM_OPS
    in u32 flags

# cuGraphDebugDotPrint: the session has the driver write a temporary file
# of its own and sends the text back; the client writes the application's
# path (src/client/graph_dot.c).
const GRAPH_MAX_DOT       33554432     # bytes of one graph's dot text
op cuGraphDebugDotPrint
    in handle graph
    in u32 flags
    out bytes text

# cuGraphAddNode of the node types without a call of their own: a
# conditional node (the driver makes its body graphs: their session ids
# come back, handle_export) or a child graph moved into its parent.
# Edges with data are added after the node (cuGraphAddDependencies_v2).
const GRAPH_MAX_BODIES    65536        # body graphs of one conditional node
op scuda_graph_add_node
    in handle node                     # the new node's id (the client picks it)
    in handle graph
    in handle deps[] max=GRAPH_MAX_DEPS
    in u32 type                        # CU_GRAPH_NODE_TYPE_CONDITIONAL or CU_GRAPH_NODE_TYPE_GRAPH
    in handle child                    # GRAPH: the graph moved in
    in u64 cond                        # CONDITIONAL: the CUgraphConditionalHandle (a value)
    in u32 cond_type                   # CUgraphConditionalNodeType
    in u32 size                        # body graphs
    in handle ctx
    out handle bodies[] max=GRAPH_MAX_BODIES

# User objects (src/client/graph_user_object.c): the destructor and its
# data are a run record of the client's; when the driver destroys the
# object the session queues "run record R" once and forgets it, and never
# waits for the client.
op scuda_user_object_create
    in handle object                   # the new object's id (the client picks it)
    in handle record
    in u32 refcount
    in u32 flags

# The reply comes also when instantiation fails: it says why.
op cuGraphInstantiateWithParams
    in handle exec                     # the new executable graph's id (the client picks it)
    in handle graph
    in u8 has_params                   # 0: the application passed no CUDA_GRAPH_INSTANTIATE_PARAMS
    in u64 flags
    in handle upload_stream
    out handle err_node
    out u32 result                     # CUgraphInstantiateResult
# (end of group: graphs)

# ---- texture and surface objects --------------------------------------------------
# (group: textures)
# CUDA_RESOURCE_DESC with its handle as an id (src/client/texture.c,
# src/server/srv_texture.c). Only the fields of `type` mean anything; the
# others travel as zero. Objects are the driver's own 64-bit values.
record res_desc
    u32 type                           # CUresourcetype
    handle array                       # ARRAY: a CUarray; MIPMAPPED_ARRAY: a CUmipmappedArray
    dptr ptr                           # LINEAR and PITCH2D
    u32 format                         # CUarray_format (LINEAR, PITCH2D)
    u32 channels
    u64 size                           # LINEAR: bytes
    u64 width                          # PITCH2D: elements
    u64 height
    u64 pitch                          # PITCH2D: bytes
    u32 flags

op cuTexObjectCreate
    in res_desc res
    in raw:CUDA_TEXTURE_DESC tex
    in u8 has_view                     # 0: no CUDA_RESOURCE_VIEW_DESC
    in raw:CUDA_RESOURCE_VIEW_DESC view
    out u64 obj

op cuTexObjectGetResourceDesc
    in u64 obj
    out res_desc res

op cuSurfObjectCreate
    in res_desc res
    out u64 obj

op cuSurfObjectGetResourceDesc
    in u64 obj
    out res_desc res
# (end of group: textures)

# ---- liveness (docs/architecture.md, 3.10 Liveness) ----------------------------
# A heartbeat on the session connection. Neither is a call: the session's
# reader takes a ping before the dispatch queue (it never waits for the
# driver), and the client's reader drops a pong without waking any caller.
op scuda_live_ping                     # client to session, one-way when the client has sent nothing for a while;
                                       # the first one, at connect, waits for its reply
    in u32 dead_after_ms               # the client's SCUDA_DEAD_AFTER: the session pongs at least 4 times as often
    in u64 ack                         # the session's frames the client has received whole (resume, protocol.h)
    in u8 leaving                      # 1: the client process exits: its session ends with the connection, no resume
    out u32 dead_after_ms              # the session's --dead-after: the client pings at least 4 times as often
    out u32 resume_within_ms           # the session's --resume-within: how long it waits for a resume; 0 = none
    out u8 resume_secret[32]           # the session's resume secret: RESUME_SECRET_LEN (protocol.h) bytes

op scuda_live_pong                     # session to client, while the client waits for it and nothing else went out
    in u32 dead_after_ms               # the session's --dead-after: the client pings at least 4 times as often
    in u64 ack                         # the client's frames the session has received whole (resume, protocol.h)

op scuda_resume_ack                    # client to session, one-way, every 128 of the session's frames the client
                                       # read whole, so the session forgets what it kept for a resume (protocol.h)
    in u64 ack                         # the session's frames the client has received whole

# ---- live migration (docs/architecture.md, 9.17 Live migration) ------------------
# scuda_migrate asks the session to move to another server. Between the two
# servers, the state travels as migrate_item records in frames of their own
# (src/server/migrate_out.c, migrate_in.c; protocol.h, "Migration"), and
# the importing session answers with one migrate_verdict.
const MIGRATE_CHUNK       4194304      # device bytes per migrate_item
const MIGRATE_WHY_MAX     512

op scuda_migrate                       # client to session; the session stops reading until it is done
    in str to                          # HOST:PORT of the server to move to
    out u32 moved                      # 1: the state is on the other server and checked
    out str why                        # the reason, when it did not move
    out u64 hold_ns                    # the pause, in parts: holding and synchronizing,
    out u64 replay_ns                  # replaying the objects on the other server,
    out u64 copy_ns                    # copying device memory
    out u64 bytes                      # device bytes copied

op scuda_moved                         # session to client, one-way and not numbered, the session's last frame on
                                       # this connection: the session now lives on another server; resume there
    in str to                          # HOST:PORT of the server it moved to
    in u32 pid                         # the session's process id there (the resume request names it)
    in u64 hold_ns                     # the pause, in parts, for the client's log
    in u64 replay_ns
    in u64 copy_ns
    in u64 bytes
    in u64 total_ns                    # from the hold to this notice

# scuda_snapshot: the first layout of the same request, before loading
# ahead and streamed copies. A session answers it CUDA_ERROR_NOT_SUPPORTED
# (logged once): the client that sends it is older than this server.
op scuda_snapshot                      # an older client's; answered NOT_SUPPORTED
    in str to                          # HOST:PORT of the standby server
    out u32 parked                     # 1: the standby holds a checked copy of the session as of this call
    out str why                        # the reason, when it does not
    out u32 pid                        # the parked session's process id on the standby (a resume names it)
    out u64 client_frames              # the client's frames the copy has run: the journal starts after them
    out u64 server_frames              # the session's frames numbered before this reply: the copy numbers on
    out u64 hold_ns                    # the pause, in parts, as scuda_migrate's
    out u64 replay_ns
    out u64 copy_ns
    out u64 bytes

# scuda_snapshot_ahead (docs/architecture.md 9.24 Failover to a standby): the
# export of scuda_migrate to a standby server, without the switch. The
# standby parks the imported state (one per session, replaced by the next)
# until the client resumes there after this server died.
op scuda_snapshot_ahead                # client to session; the session stops reading until the hold ends (the reply may come after)
    in str to                          # HOST:PORT of the standby server
    in u32 now                         # 1: copy now, whatever the standby holds (the journal's bound)
    out u32 parked                     # 1: the standby holds a checked copy of the session as of this call
    out u32 ahead                      # 1: not yet (the standby loads the images first, or a copy is under way); ask again
    out u32 images_ahead               # of the images the copy holds, how many it loaded before the hold
    out str why                        # the reason, when it does not
    out u32 pid                        # the parked session's process id on the standby (a resume names it)
    out u64 client_frames              # the client's frames the copy has run: the journal starts after them
    out u64 server_frames              # the session's frames numbered before this reply: the copy numbers on
    out u64 hold_ns                    # the pause, in parts, as scuda_migrate's
    out u64 replay_ns
    out u64 copy_ns
    out u64 bytes

record migrate_item                    # one object of a migrating session, or a piece of its memory
    u8 kind                            # enum migrate_kind (src/server/migrate_state.h)
    handle id                          # the client's id of the object (0 for memory)
    handle parent                      # its context's id, or its module's (functions, globals)
    u64 a                              # kind-specific: flags, device, address
    u64 b                              # kind-specific: priority, size
    u64 c                              # kind-specific: pitch
    str name                           # a function's or global's name
    bytes data                         # a module's image, or device bytes

record migrate_verdict                 # the importing session's answer
    u32 result                         # CUDA_SUCCESS when everything was replayed and checked
    str why                            # else the reason, for both logs
    u8 digest[32]                      # SHA-256 of the state as replayed (migrate_state.h)
    u64 replay_ns
    u64 copy_ns

# Shareable handles (src/client/shareable.c, src/server/srv_shareable.c):
# the file descriptor stays in the session; the client gets the token of
# the server's export registry (as IPC handles carry), which it keeps in a
# memfd of its own, a real local fd the application can pass on.
const SHAREABLE_TOKEN_LEN 64
const SHAREABLE_MEMORY    1            # a CUmemGenericAllocationHandle
const SHAREABLE_POOL      2            # a CUmemoryPool
op scuda_shareable_export
    in u8 kind                         # SHAREABLE_MEMORY or SHAREABLE_POOL
    in handle handle                   # the allocation handle or memory pool
    in u64 flags
    out u8 token[SHAREABLE_TOKEN_LEN]

op scuda_shareable_import
    in u8 kind
    in handle handle                   # the client's id for what is imported
    in u64 flags                       # pools only
    in u8 token[SHAREABLE_TOKEN_LEN]

op scuda_library_get_managed                # cuLibraryGetManaged: the address is the driver's managed memory
    in handle library
    in str name
    out dptr ptr
    out u64 size

op scuda_logs_register  any_context        # cuLogsRegisterCallback: each driver log line is host work (HOST_WORK_LOG) for the client's record
    in handle callback                 # the client's id for the registration, which names its record

# cuMemAlloc over a slow link (src/client/alloc_ahead.c): `count`
# allocations of one size in the current context, each exactly as
# cuMemAlloc makes it; the first is the application's, the rest the
# client keeps as spares for the next allocations of that size. The
# first one's failure is the call's; a later one's ends the list.
const ALLOC_AHEAD_MAX     4

op scuda_mem_alloc_ahead
    in u64 bytesize
    in u32 count                       # 1 .. ALLOC_AHEAD_MAX
    out dptr ptrs[] max=ALLOC_AHEAD_MAX

# A request sent compressed (zstd) over a slow link: a module image's
# load (src/client/request_pack.c). The session decompresses `frame`, the
# whole payload of a request of op `op`, and runs that request as if it
# had come plain; so this handler answers only a packed request the
# session could not unpack (a bad frame, a packed op inside, a size over
# SCUDA_MAX_FRAME).
op scuda_packed
    in u16 op
    in bytes frame bulk

op scuda_window_first  any_context         # cuInit, client of several servers: its devices' memory windows start at window `first` (device_window.c), so no two servers' pointers collide
    in u32 first
    out u64 base                       # the session's device 0's window: device d's is base + d * size
    out u64 size

op scuda_async_register  any_context       # cuDeviceRegisterAsyncNotification: each notification is host work (HOST_WORK_NOTIFY) for the client's record
    in i32 dev
    in handle callback                 # the client's id for the registration, which names its record

op scuda_ctx_from_green  any_context       # cuCtxFromGreenCtx
    in handle green
    in handle ctx                      # the client's id for the context (the same for every call on one green context)
    out i32 dev                        # the context's device, which cuCtxGetDevice answers in the client
"""

# Handle kinds by C type (enum handle_kind in src/server/dispatch.h). A
# pointer typedef that is not listed here cannot be forwarded.
HANDLE_KINDS = {
    "CUcontext": "HK_CONTEXT",
    "CUstream": "HK_STREAM",
    "CUevent": "HK_EVENT",
    "CUmodule": "HK_MODULE",
    "CUfunction": "HK_FUNCTION",
    "CUlibrary": "HK_LIBRARY",
    "CUkernel": "HK_KERNEL",
    "CUgraph": "HK_GRAPH",
    "CUgraphExec": "HK_GRAPH_EXEC",
    "CUgraphNode": "HK_GRAPH_NODE",
    "CUmemoryPool": "HK_MEMPOOL",
    "CUarray": "HK_ARRAY",
    "CUmipmappedArray": "HK_MIPMAPPED_ARRAY",
    "CUlinkState": "HK_LINK_STATE",
    "CUuserObject": "HK_USER_OBJECT",
    "CUgreenCtx": "HK_GREEN_CTX",
    "CUexternalMemory": "HK_EXTERNAL_MEMORY",
    "CUexternalSemaphore": "HK_EXTERNAL_SEMAPHORE",
    "CUgraphicsResource": "HK_GRAPHICS_RESOURCE",
    "CUtexref": "HK_TEXREF",
    "CUsurfref": "HK_SURFREF",
    "CUdevResourceDesc": "HK_DEV_RESOURCE_DESC",
    "CUasyncCallbackHandle": "HK_ASYNC_CALLBACK",
    "CUlogsCallbackHandle": "HK_LOGS_CALLBACK",
    "CUmemGenericAllocationHandle": "HK_MEM_ALLOC",   # an integer, not a pointer
}

# Structs that travel as raw bytes although they hold a pointer field the
# server must never see: the client sends a copy with the field NULL, and
# the server forces it to NULL again after decoding an input and before
# encoding an output. Only fields that must be NULL on Linux belong here.
NULLED_POINTER_FIELDS = {
    "CUmemPoolProps": ["win32SecurityAttributes"],
    "CUmemAllocationProp": ["win32HandleMetaData"],
}

# Structs that travel as raw bytes although they hold pointer fields,
# because those fields are device addresses (the driver requires memory
# the device reaches: cuMemAlloc, cuMemCreate, pools), which are the same
# numbers in the session. The session's driver checks them as natively;
# neither side dereferences them.
DEVICE_POINTER_FIELDS = {
    "CUmemDecompressParams": ["dstActBytes", "src", "dst"],
}

LEGACY_ABI_MANUAL = "unsupported"

# Reference hand-written server handlers weakly: a handler the lead has not
# written (yet) leaves its op_table slot NULL ("op unknown to this server")
# instead of failing the link. Set False to make every one a link error.
WEAK_HANDLERS = True
