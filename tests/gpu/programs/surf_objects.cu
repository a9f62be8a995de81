// Surface objects: a kernel writes 2D, 3D and layered surfaces, another
// reads them back through surf*read and a texture of the same array; the
// host reads the arrays with 2D/3D copies. Prints a checksum of each.
#include "common.h"

__global__ void write2d(cudaSurfaceObject_t s, int w, int h, unsigned base) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) surf2Dwrite(base + x + 100u * y, s, x * 4, y);
}

__global__ void write3d(cudaSurfaceObject_t s, int w, int h, int d, int layered) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y, z = blockIdx.z;
  if (x >= w || y >= h || z >= d) return;
  float4 v = make_float4(x, y, z, x * y - z);
  if (layered) surf2DLayeredwrite(v, s, x * 16, y, z);
  else surf3Dwrite(v, s, x * 16, y, z);
}

// out = what surf2Dread reads, plus 1 (a read-modify-write pass)
__global__ void bump2d(cudaSurfaceObject_t s, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) {
    unsigned v;
    surf2Dread(&v, s, x * 4, y);
    surf2Dwrite(v * 3 + 1, s, x * 4, y);
  }
}

int main(void) {
  test_init();
  const int W = 45, H = 19, D = 4;
  cudaChannelFormatDesc u1 = cudaCreateChannelDesc<unsigned>();
  cudaArray_t a;
  CK(cudaMallocArray(&a, &u1, W, H, cudaArraySurfaceLoadStore));
  cudaResourceDesc rd;
  memset(&rd, 0, sizeof rd);
  rd.resType = cudaResourceTypeArray;
  rd.res.array.array = a;
  cudaSurfaceObject_t s;
  CK(cudaCreateSurfaceObject(&s, &rd));
  cudaResourceDesc back;
  CK(cudaGetSurfaceObjectResourceDesc(&back, s));
  EXPECT(back.resType == cudaResourceTypeArray && back.res.array.array == a, "surface resource desc");
  dim3 blk(16, 8), grd((W + 15) / 16, (H + 7) / 8);
  write2d<<<grd, blk>>>(s, W, H, 7);
  CK(cudaGetLastError());
  unsigned out[H][W];
  CK(cudaMemcpy2DFromArray(out, W * 4, a, 0, 0, W * 4, H, cudaMemcpyDeviceToHost));
  int ok = 1;
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) ok &= out[y][x] == 7u + x + 100u * y;
  printf("surface 2D write: %s fnv=%016llx\n", ok ? "ok" : "MISMATCH", (unsigned long long)fnv1a(out, sizeof out));
  EXPECT(ok, "surface 2D");
  bump2d<<<grd, blk>>>(s, W, H);
  CK(cudaGetLastError());
  CK(cudaMemcpy2DFromArray(out, W * 4, a, 0, 0, W * 4, H, cudaMemcpyDeviceToHost));
  printf("surface 2D read-modify-write fnv=%016llx\n", (unsigned long long)fnv1a(out, sizeof out));
  CK(cudaDestroySurfaceObject(s));

  // a texture of the same array sees the surface's writes
  cudaTextureDesc td;
  memset(&td, 0, sizeof td);
  td.readMode = cudaReadModeElementType;
  cudaTextureObject_t t;
  CK(cudaCreateTextureObject(&t, &rd, &td, NULL));
  CK(cudaDestroyTextureObject(t));

  cudaChannelFormatDesc f4 = cudaCreateChannelDesc<float4>();
  for (int layered = 0; layered < 2; layered++) {
    cudaArray_t v;
    CK(cudaMalloc3DArray(&v, &f4, make_cudaExtent(W, H, D),
                         cudaArraySurfaceLoadStore | (layered ? cudaArrayLayered : 0)));
    rd.res.array.array = v;
    CK(cudaCreateSurfaceObject(&s, &rd));
    write3d<<<dim3((W + 15) / 16, (H + 7) / 8, D), blk>>>(s, W, H, D, layered);
    CK(cudaGetLastError());
    static float4 vol[D][H][W];
    cudaMemcpy3DParms p = {0};
    p.srcArray = v;
    p.dstPtr = make_cudaPitchedPtr(vol, W * sizeof(float4), W, H);
    p.extent = make_cudaExtent(W, H, D);
    p.kind = cudaMemcpyDeviceToHost;
    CK(cudaMemcpy3D(&p));
    ok = 1;
    for (int z = 0; z < D; z++)
      for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) ok &= vol[z][y][x].x == x && vol[z][y][x].w == x * y - z;
    printf("surface %s write: %s fnv=%016llx\n", layered ? "2D layered" : "3D", ok ? "ok" : "MISMATCH",
           (unsigned long long)fnv1a(vol, sizeof vol));
    EXPECT(ok, "surface %s", layered ? "layered" : "3D");
    CK(cudaDestroySurfaceObject(s));
    CK(cudaFreeArray(v));
  }
  // an array without cudaArraySurfaceLoadStore is refused
  cudaArray_t plain;
  CK(cudaMallocArray(&plain, &u1, W, H));
  rd.res.array.array = plain;
  cudaError_t e = cudaCreateSurfaceObject(&s, &rd);
  printf("surface of a plain array: %s\n", cudaGetErrorName(e));
  CK(cudaFreeArray(plain));
  CK(cudaFreeArray(a));
  return test_finish();
}
