// Kernels loaded at run time by the drv_module_* and drv_library programs.
// run.sh compiles this file to module_kernels.ptx, .cubin and .fatbin.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__device__ int g_table[16];         // found with cuModuleGetGlobal / cuLibraryGetGlobal
__device__ float g_bias = 0.0f;

extern "C" __global__ void scale_bias(float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + g_bias;
}

extern "C" __global__ void table_sum(int *out) {
  int s = 0;
  for (int i = 0; i < 16; i++) s += g_table[i] * (i + 1);
  *out = s;
}

// Records the cluster shape each block saw (for cuLaunchKernelEx's cluster attribute).
extern "C" __global__ void cluster_info(int *out) {
  cg::cluster_group c = cg::this_cluster();
  if (threadIdx.x == 0) {
    out[blockIdx.x * 2 + 0] = (int)c.num_blocks();
    out[blockIdx.x * 2 + 1] = (int)c.block_rank();
  }
}

// Needs a cooperative launch: a grid-wide barrier between two phases.
extern "C" __global__ void coop_sum(int *buf, int *out) {
  cg::grid_group g = cg::this_grid();
  if (threadIdx.x == 0) buf[blockIdx.x] = blockIdx.x + 1;
  g.sync();
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    int s = 0;
    for (unsigned i = 0; i < gridDim.x; i++) s += buf[i];
    *out = s;
  }
}
