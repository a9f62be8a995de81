// cuProfilerInitialize, the legacy command-line profiler's set-up: what
// the driver answers with a real configuration file, and whether it wrote
// the output file. Output compared with native (CUDA 12.0 and later
// refuse it and write nothing).
// BUILD: -lcuda
#define CUDA_ENABLE_DEPRECATED  // the legacy profiler set-up is what this tests
#include <cuda.h>
#include <cudaProfiler.h>
#include <unistd.h>
#include "common.h"

int main(void) {
  test_init();
  drv_primary_context(NULL);
  char config[] = "/tmp/profiler_config_XXXXXX";
  int fd = mkstemp(config);
  EXPECT(fd >= 0, "mkstemp");
  const char line[] = "gpustarttimestamp\n";
  EXPECT(write(fd, line, sizeof line - 1) == (ssize_t)(sizeof line - 1), "write");
  close(fd);
  char output[64];
  snprintf(output, sizeof output, "%s.out", config);
  CUresult r = cuProfilerInitialize(config, output, CU_OUT_CSV);
  printf("cuProfilerInitialize: %s\n", cu_name(r));
  printf("output file written: %s\n", access(output, F_OK) == 0 ? "yes" : "no");
  unlink(output);
  unlink(config);
  CU(cuProfilerStart());
  CU(cuProfilerStop());
  return test_finish();
}
