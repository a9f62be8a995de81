/* profiler.c - cuProfilerInitialize: the legacy command-line profiler's
 * set-up, answered in the client. Every driver since CUDA 12.0 refuses it
 * (CUDA_ERROR_NOT_SUPPORTED, its documented answer) without reading the
 * configuration file or writing the output file, so the session's driver
 * would give exactly that answer; forwarding would only send client paths
 * to a server that must not open them. An older session driver (one
 * that would read and write those files on the server) keeps it
 * unsupported, said once. */
#include "conn.h"
#include "servers.h"
#include "shim.h"
#include "../common/log.h"

/* The first driver version (cuDriverGetVersion) with no legacy profiler. */
#define DRIVER_WITHOUT_LEGACY_PROFILER 12000

EXPORT CUresult cuProfilerInitialize(const char *configFile, const char *outputFile, CUoutput_mode outputMode)
{
    SHIM_ENTER(cuProfilerInitialize, (configFile, outputFile, outputMode));
    if (conn_info(&servers[0])->driver_version >= DRIVER_WITHOUT_LEGACY_PROFILER) return CUDA_ERROR_NOT_SUPPORTED;
    static int once;
    scuda_log_unsupported_once(&once, "cuProfilerInitialize (the session's driver predates CUDA 12.0: its legacy "
                                      "profiler would read and write files on the server)");
    return CUDA_ERROR_NOT_SUPPORTED;
}
