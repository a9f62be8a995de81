// Driver API: load a cubin by file and from bytes; launch with kernelParams,
// with the `extra` packed-buffer form, and with cuLaunchKernelEx + a cluster
// dimension attribute (checked from inside the kernel) and a priority attribute.
// BUILD: -lcuda
#include "drv_module_common.h"

int main(void) {
  test_init();
  drv_setup();
  const char *path = beside_exe("module_kernels.cubin");
  CUmodule m1, m2;
  CU(cuModuleLoad(&m1, path));
  exercise_module("cubin file", m1);
  size_t len;
  void *img = read_file(path, &len);
  CU(cuModuleLoadData(&m2, img));
  exercise_module("cubin data", m2);

  // `extra` form: arguments packed in one buffer at their natural offsets.
  CUfunction sb;
  CU(cuModuleGetFunction(&sb, m2, "scale_bias"));
  const int n = 256;
  float h[n];
  for (int i = 0; i < n; i++) h[i] = (float)i;
  CUdeviceptr x;
  CU(cuMemAlloc(&x, sizeof h));
  CU(cuMemcpyHtoD(x, h, sizeof h));
  struct { CUdeviceptr x; float a; int n; } pk = {x, 3.0f, n};
  size_t pksize = sizeof pk;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &pk, CU_LAUNCH_PARAM_BUFFER_SIZE, &pksize, CU_LAUNCH_PARAM_END};
  CU(cuLaunchKernel(sb, 2, 1, 1, 128, 1, 1, 0, NULL, NULL, extra));
  CU(cuMemcpyDtoH(h, x, sizeof h));
  int bad = 0;
  for (int i = 0; i < n; i++) bad += h[i] != i * 3.0f + 0.5f;  // g_bias = 0.5 from exercise()
  printf("extra-buffer launch: %s\n", bad ? "MISMATCH" : "ok");
  EXPECT(!bad, "extra launch %d wrong", bad);

  // cuLaunchKernelEx with a cluster of 2 blocks (sm_90) and a priority attribute.
  CUfunction ci;
  CU(cuModuleGetFunction(&ci, m2, "cluster_info"));
  const int blocks = 8;
  CUdeviceptr info;
  CU(cuMemAlloc(&info, blocks * 2 * sizeof(int)));
  CU(cuMemsetD32(info, 0, blocks * 2));
  CUlaunchAttribute attrs[2];
  memset(attrs, 0, sizeof attrs);
  attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attrs[0].value.clusterDim.x = 2;
  attrs[0].value.clusterDim.y = 1;
  attrs[0].value.clusterDim.z = 1;
  attrs[1].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  attrs[1].value.priority = 0;
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = blocks; cfg.gridDimY = 1; cfg.gridDimZ = 1;
  cfg.blockDimX = 32; cfg.blockDimY = 1; cfg.blockDimZ = 1;
  cfg.attrs = attrs;
  cfg.numAttrs = 2;
  void *args[] = {&info};
  CU(cuLaunchKernelEx(&cfg, ci, args, NULL));
  int hi[blocks * 2];
  CU(cuMemcpyDtoH(hi, info, sizeof hi));
  bad = 0;
  for (int b = 0; b < blocks; b++) bad += hi[2 * b] != 2 || hi[2 * b + 1] != b % 2;
  printf("cuLaunchKernelEx cluster 2: %s (block0 cluster=%d rank=%d, block1 rank=%d)\n", bad ? "MISMATCH" : "ok",
         hi[0], hi[1], hi[3]);
  EXPECT(!bad, "cluster attribute not applied");

  CU(cuMemFree(x)); CU(cuMemFree(info));
  CU(cuModuleUnload(m1)); CU(cuModuleUnload(m2));
  free(img);
  return test_finish();
}
