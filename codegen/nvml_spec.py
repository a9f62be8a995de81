"""nvml_spec.py - what nvml.h cannot say about NVML.

gen_nvml.py reads nvml.h (from NVIDIA's nvidia-nvml-dev wheel, version
NVML_WHEEL) for every prototype and this file for the rest.
codegen/nvml_coverage.gen.txt lists the outcome for every export.

FUNCTIONS has one line per export that needs more than the default rules:

    NAME  [CLASS]  [FLAG ...]  [PARAM=RULE ...]   # comment

CLASS (default: forward)
  forward      generated: the client sends the arguments, the session calls
               the real function (or srv_NAME with `hook`), the outputs come
               back whatever the result (NVML writes counts on
               NVML_ERROR_INSUFFICIENT_SIZE, and callers rely on it)
  local        hand-written client body (src/client/nvml/*.c), no op
  unsupported  generated NVML_ERROR_NOT_SUPPORTED stub that logs its name
               once (passthrough mode still forwards to the local NVML)
  alias=EXPORT generated: calls EXPORT, which has the same parameters

FLAGS
  connects     the first call connects to the server (the nvmlInit family)
  blocking     the session runs it on a worker thread (it waits: events)
  hook         the session calls srv_NAME (same prototype as NAME, in
               src/server/nvml/) instead of the real function: used where
               the session must map devices to the ones it serves
  multi        with several servers (SCUDA_SERVER=a,b) the shim answers it
               from its device list over them, in nvml_multi_NAME
               (src/client/nvml/nvml_devices.c), which sends the call to
               each server it needs with nvml_on_NAME(server, ...); with
               one server it goes to that one as it is
  drops=P      after success the session forgets handle P

ROUTING: a forwarded call goes to the server of its first handle (the
handle's tag, src/client/handle_tag.h); one that names no handle is
system-wide and goes to the first server. A call whose handles belong to
two servers returns NVML_ERROR_NOT_SUPPORTED (logged once).

PARAMETER RULES. Defaults: a value or a handle by value travels as itself
(a handle as its virtual id); `const char *` is a string; `char *S`
followed by `unsigned int length|size` (or a pointer to one) is a string
buffer of that many bytes; `T *` is one element in and out (the caller's
bytes go to the server and whatever NVML left there comes back, so a field
NVML does not write stays as the caller had it); a pointer to a versioned
struct (NVML_STRUCT_VERSION) carries as many bytes as its `version` field
says; `H *` for a handle type H returns a handle. A pointer next to a
count-like parameter must be described here.
  P=in | P=out | P=inout          one element (out: handle fields inside
                                  the struct are not translated on the
                                  way in, since the caller has not set them)
  P=in[E] | P=out[E] | P=inout[E]  E elements; E is C over the parameters,
                                  where a pointer parameter stands for the
                                  value it points to (before the call). An
                                  out array comes back on success only,
                                  min(E before, E after) elements.
  P=outbytes[E]                   as out[E] with E counted in bytes
  P=outstr[E]                     a string buffer of E bytes
  P=struct_array(FIELD,COUNT)     a versioned struct whose FIELD points to
                                  an array of COUNT elements (COUNT a field
                                  of the struct: capacity in, count out)
  P=struct_array(FIELD,COUNT,inout)  the same, the array is also input
"""

# The header the generated code is made from and compiled against. Pinned:
# the generated files must not change under CI when NVIDIA publishes a new
# wheel. 13.5 declares every symbol that driver 580's libnvidia-ml exports
# except the three hand-written ones below.
NVML_WHEEL = ("nvidia-nvml-dev", "13.5.37")

# Opaque handle types and the session's handle kind for each.
HANDLE_KINDS = {
    "nvmlDevice_t": "NH_DEVICE",
    "nvmlUnit_t": "NH_UNIT",
    "nvmlEventSet_t": "NH_EVENT_SET",
    "nvmlGpuInstance_t": "NH_GPU_INSTANCE",
    "nvmlComputeInstance_t": "NH_COMPUTE_INSTANCE",
    "nvmlGpmSample_t": "NH_GPM_SAMPLE",
    "nvmlSystemEventSet_t": "NH_SYSTEM_EVENT_SET",
}

# Ops with hand-written code on both sides (src/client/nvml/,
# src/server/nvml/ srv_NAME handlers); appended to codegen/nvml_ops.txt.
# An op retired from here stays in nvml_ops.txt with no handler.
EXTRA_OPS = [
    "scuda_nvml_error_string",        # nvmlErrorString's text, from the real NVML
    "scuda_nvml_xt_open",             # nvmlInternalGetExportTable on the server
    "scuda_nvml_xt_bus_id",           # private slot: PCI bus id of device N
    "scuda_nvml_xt_processes",        # private slots: process lists
    "scuda_nvml_xt_device_call",      # other private slots called on a device
]

FUNCTIONS = r"""
# ---- init, errors, internal -----------------------------------------------
nvmlInit                          connects multi  # multi: every server's session
nvmlInit_v2                       connects multi
nvmlInitWithFlags                 connects multi
nvmlShutdown                      multi
nvmlErrorString                   local        # remote: the server's text, cached
nvmlInternalGetExportTable        local        # nvidia-smi's private table (not in nvml.h)
nvmlGetBlacklistDeviceCount       alias=nvmlGetExcludedDeviceCount        # old names,
nvmlGetBlacklistDeviceInfoByIndex alias=nvmlGetExcludedDeviceInfoByIndex  # macros in nvml.h

# ---- the devices this session serves (src/server/nvml/nvml_devices.c), and
# ---- over several servers the client's one list (src/client/nvml/nvml_devices.c)
nvmlDeviceGetCount                hook multi
nvmlDeviceGetCount_v2             hook multi
nvmlDeviceGetHandleByIndex        hook multi
nvmlDeviceGetHandleByIndex_v2     hook multi
nvmlDeviceGetIndex                hook multi
nvmlDeviceGetMinorNumber          multi
nvmlDeviceGetHandleByUUID         multi
nvmlDeviceGetHandleByUUIDV        multi
nvmlDeviceGetHandleByPciBusId     multi
nvmlDeviceGetHandleByPciBusId_v2  multi
nvmlDeviceGetHandleBySerial       multi

# ---- handles that end ------------------------------------------------------
nvmlEventSetFree                  drops=set
nvmlGpmSampleFree                 drops=gpmSample
nvmlGpuInstanceDestroy            drops=gpuInstance
nvmlComputeInstanceDestroy        drops=computeInstance
nvmlEventSetWait                  blocking data=out
nvmlEventSetWait_v2               blocking data=out
nvmlSystemEventSetCreate          request=out
nvmlSystemEventSetWait            unsupported  # request->data points to an array of events
nvmlGpmMetricsGet                 unsupported  # returns pointers to NVML's own metric names

# ---- arrays with a count -----------------------------------------------------
nvmlDeviceGetComputeRunningProcesses      infos=out[infoCount]
nvmlDeviceGetComputeRunningProcesses_v2   infos=out[infoCount]
nvmlDeviceGetComputeRunningProcesses_v3   infos=out[infoCount]
nvmlDeviceGetGraphicsRunningProcesses     infos=out[infoCount]
nvmlDeviceGetGraphicsRunningProcesses_v2  infos=out[infoCount]
nvmlDeviceGetGraphicsRunningProcesses_v3  infos=out[infoCount]
nvmlDeviceGetMPSComputeRunningProcesses   infos=out[infoCount]
nvmlDeviceGetMPSComputeRunningProcesses_v2 infos=out[infoCount]
nvmlDeviceGetMPSComputeRunningProcesses_v3 infos=out[infoCount]
nvmlDeviceGetAccountingPids               pids=out[count]
nvmlVgpuInstanceGetAccountingPids         pids=out[count]
nvmlDeviceGetActiveVgpus                  vgpuInstances=out[vgpuCount]
nvmlDeviceGetCreatableVgpus               vgpuTypeIds=out[vgpuCount]
nvmlDeviceGetSupportedVgpus               vgpuTypeIds=out[vgpuCount]
nvmlDeviceGetEncoderSessions              sessionInfos=out[sessionCount]
nvmlVgpuInstanceGetEncoderSessions        sessionInfo=out[sessionCount]
nvmlDeviceGetFBCSessions                  sessionInfo=out[sessionCount]
nvmlVgpuInstanceGetFBCSessions            sessionInfo=out[sessionCount]
nvmlDeviceGetEncoderStats                 sessionCount=out averageFps=out averageLatency=out
nvmlVgpuInstanceGetEncoderStats           sessionCount=out averageFps=out averageLatency=out
nvmlDeviceGetSupportedMemoryClocks        clocksMHz=out[count]
nvmlDeviceGetSupportedGraphicsClocks      clocksMHz=out[count]
nvmlDeviceGetSupportedPerformanceStates   pstates=outbytes[size]
nvmlDeviceGetRetiredPages                 addresses=out[pageCount]
nvmlDeviceGetRetiredPages_v2              addresses=out[pageCount] timestamps=out[pageCount]
nvmlDeviceGetSamples                      sampleValType=out samples=out[sampleCount]
nvmlDeviceGetProcessUtilization           utilization=out[processSamplesCount]
nvmlDeviceGetVgpuUtilization              sampleValType=out utilizationSamples=out[vgpuInstanceSamplesCount]
nvmlDeviceGetVgpuProcessUtilization       utilizationSamples=out[vgpuProcessSamplesCount]
nvmlDeviceGetFieldValues                  values=inout[valuesCount]
nvmlDeviceClearFieldValues                values=inout[valuesCount]
nvmlDeviceGetCpuAffinity                  cpuSet=out[cpuSetSize]
nvmlDeviceGetCpuAffinityWithinScope       cpuSet=out[cpuSetSize]
nvmlDeviceGetMemoryAffinity               nodeSet=out[nodeSetSize]
nvmlSystemGetHicVersion                   hwbcEntries=out[hwbcCount]
nvmlSystemGetTopologyGpuSet               count=inout deviceArray=out[count]
nvmlDeviceGetTopologyNearestGpus          deviceArray=out[count]
nvmlUnitGetDevices                        devices=out[deviceCount]
nvmlDeviceGetGpuInstances                 gpuInstances=out[count]
nvmlGpuInstanceGetComputeInstances        computeInstances=out[count]
nvmlDeviceGetGpuInstancePossiblePlacements     placements=out[count]
nvmlDeviceGetGpuInstancePossiblePlacements_v2  placements=out[count]
nvmlGpuInstanceGetComputeInstancePossiblePlacements placements=out[count]
nvmlDeviceGetVgpuMetadata                 pgpuMetadata=outbytes[bufferSize]
nvmlVgpuInstanceGetMetadata               vgpuMetadata=outbytes[bufferSize]
nvmlDeviceGetGspFirmwareVersion           version=outstr[NVML_GSP_FIRMWARE_VERSION_BUF_SIZE]
nvmlSystemGetDriverBranch                 branchInfo=inout
nvmlDeviceGetGpuInstanceRemainingCapacity count=out
nvmlGpuInstanceGetComputeInstanceRemainingCapacity count=out
nvmlDeviceGetMaxMigDeviceCount            count=out
nvmlDeviceGetMemoryErrorCounter           count=out
nvmlDeviceGetNvLinkErrorCounter           counterValue=out
# (one value each: the count-like neighbour is a counter type or number)
nvmlDeviceGetDetailedEccErrors            eccCounts=out
nvmlDeviceGetTotalEccErrors               eccCounts=out
nvmlDeviceGetNvLinkUtilizationControl     control=out
nvmlDeviceSetNvLinkUtilizationControl     control=in
nvmlDeviceGetNvLinkUtilizationCounter     rxcounter=out txcounter=out
nvmlDeviceGetPcieThroughput               value=out

# ---- structs that point to an array of the caller's ------------------------------
nvmlDeviceGetRunningProcessDetailList     plist=struct_array(procArray,numProcArrayEntries)
nvmlDeviceGetProcessesUtilizationInfo     procesesUtilInfo=struct_array(procUtilArray,processSamplesCount)
nvmlDeviceGetSramUniqueUncorrectedEccErrorCounts errorCounts=struct_array(entries,entryCount)
nvmlDeviceGetVgpuInstancesUtilizationInfo vgpuUtilInfo=struct_array(vgpuUtilArray,vgpuInstanceCount)
nvmlDeviceGetVgpuProcessesUtilizationInfo vgpuProcUtilInfo=struct_array(vgpuProcUtilArray,vgpuProcessCount)
nvmlDeviceGetVgpuTypeCreatablePlacements  pPlacementList=struct_array(placementIds,count)
nvmlDeviceGetVgpuTypeSupportedPlacements  pPlacementList=struct_array(placementIds,count)
nvmlGpuInstanceGetVgpuTypeCreatablePlacements pCreatablePlacementInfo=struct_array(placementIds,count)
nvmlDeviceReadPRMCounters_v1              counterList=struct_array(counters,numCounters,inout)
nvmlGpuInstanceGetActiveVgpus             pVgpuInstanceInfo=struct_array(vgpuInstances,vgpuCount)
nvmlGpuInstanceGetCreatableVgpus          pVgpus=struct_array(vgpuTypeIds,vgpuCount)
"""
