// cuMemcpyBatchAsync and cuMemcpy3DBatchAsync (driver API, CUDA 13 _v2
// forms through cuda.h's names): host, device and array operands, two
// attribute sets, then the refusals (bad attribute list, legacy stream,
// zero extent with failIdx through the first export). Output: checksums
// and error names, compared with a native run.
// BUILD: -lcuda
#include <cuda.h>
#include "common.h"

static const size_t N = 1 << 20;

typedef CUresult (*batch_v1_fn)(size_t, CUDA_MEMCPY3D_BATCH_OP *, size_t *, unsigned long long, CUstream);

int main() {
  test_init();
  CK(cudaFree(0));
  CUstream st;
  CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  unsigned char *a = (unsigned char *)malloc(N), *b = (unsigned char *)malloc(N);
  unsigned char *back_a = (unsigned char *)malloc(N), *back_b = (unsigned char *)malloc(N);
  fill_pattern(a, N, 1);
  fill_pattern(b, N, 2);
  CUdeviceptr da, db, dc;
  CU(cuMemAlloc(&da, N));
  CU(cuMemAlloc(&db, N));
  CU(cuMemAlloc(&dc, N));
  CUdeviceptr dsts[3] = {da, db, dc}, srcs[3] = {(CUdeviceptr)a, (CUdeviceptr)b, da};
  size_t sizes[3] = {N, N, N}, idxs[2] = {0, 2};
  CUmemcpyAttributes attrs[2] = {};
  attrs[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
  attrs[1].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  CU(cuMemcpyBatchAsync(dsts, srcs, sizes, 3, attrs, idxs, 2, st));
  CUdeviceptr dsts2[2] = {(CUdeviceptr)back_a, (CUdeviceptr)back_b}, srcs2[2] = {dc, db};
  size_t idx0 = 0;
  CU(cuMemcpyBatchAsync(dsts2, srcs2, sizes, 2, &attrs[1], &idx0, 1, st));
  CU(cuStreamSynchronize(st));
  printf("1D batch: a %s b %s fnv=%016llx\n", memcmp(a, back_a, N) ? "MISMATCH" : "ok",
         memcmp(b, back_b, N) ? "MISMATCH" : "ok", (unsigned long long)fnv1a(back_a, N));
  EXPECT(!memcmp(a, back_a, N) && !memcmp(b, back_b, N), "1D batch bytes differ");

  size_t bad_idxs[2] = {1, 2};
  printf("bad attribute list: %d\n", (int)cuMemcpyBatchAsync(dsts, srcs, sizes, 3, attrs, bad_idxs, 2, st));
  printf("legacy stream: %d\n", (int)cuMemcpyBatchAsync(dsts, srcs, sizes, 3, attrs, idxs, 2, CU_STREAM_LEGACY));

  // 3D: padded host rows -> float array -> packed device memory
  enum { W = 64, H = 32, D = 4, ROW = 80 };
  CUDA_ARRAY3D_DESCRIPTOR ad = {};
  ad.Width = W, ad.Height = H, ad.Depth = D, ad.Format = CU_AD_FORMAT_FLOAT, ad.NumChannels = 1;
  CUarray arr;
  CU(cuArray3DCreate(&arr, &ad));
  float *in = (float *)malloc(sizeof(float) * D * H * ROW), *out = (float *)malloc(sizeof(float) * D * H * W);
  for (int i = 0; i < D * H * ROW; i++) in[i] = (float)i;
  CUdeviceptr dev;
  CU(cuMemAlloc(&dev, sizeof(float) * D * H * W));
  CUDA_MEMCPY3D_BATCH_OP ops[2] = {};
  ops[0].src.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  ops[0].src.op.ptr.ptr = (CUdeviceptr)in;
  ops[0].src.op.ptr.rowLength = ROW;
  ops[0].src.op.ptr.layerHeight = H;
  ops[0].dst.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
  ops[0].dst.op.array.array = arr;
  ops[0].extent = {W, H, D};
  ops[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  ops[1].src = ops[0].dst;
  ops[1].dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  ops[1].dst.op.ptr.ptr = dev;
  ops[1].extent = {W, H, D};
  ops[1].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  CU(cuMemcpy3DBatchAsync(1, &ops[0], 0, st));
  CU(cuMemcpy3DBatchAsync(1, &ops[1], 0, st));
  CU(cuStreamSynchronize(st));
  CU(cuMemcpyDtoH(out, dev, sizeof(float) * D * H * W));
  int bad = 0;
  for (int z = 0; z < D; z++)
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++) bad += out[(z * H + y) * W + x] != in[(z * H + y) * ROW + x];
  printf("3D batch: %s fnv=%016llx\n", bad ? "MISMATCH" : "ok",
         (unsigned long long)fnv1a(out, sizeof(float) * D * H * W));
  EXPECT(!bad, "%d 3D values differ", bad);

  // failIdx through the first export (found by its name and version)
  batch_v1_fn v1 = NULL;
  CUdriverProcAddressQueryResult q;
  CU(cuGetProcAddress("cuMemcpy3DBatchAsync", (void **)&v1, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &q));
  ops[1].extent.depth = 0;
  size_t fail = 99;
  CUresult r = v1 ? v1(2, ops, &fail, 0, st) : CUDA_ERROR_NOT_FOUND;
  printf("zero extent: %d failIdx %zu\n", (int)r, fail);
  CU(cuStreamSynchronize(st));
  CU(cuArrayDestroy(arr));
  CU(cuMemFree(dev));
  CU(cuMemFree(da));
  CU(cuMemFree(db));
  CU(cuMemFree(dc));
  CU(cuStreamDestroy(st));
  free(a), free(b), free(back_a), free(back_b), free(in), free(out);
  return test_finish();
}
