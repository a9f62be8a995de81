// Texture objects on every kind of memory (linear, pitched, 2D, 3D, layered,
// cubemap, mipmapped), with each address and filter mode, normalized
// coordinates, read modes and sRGB. Each case prints a checksum of what the
// kernel read, so the suite compares the hardware's own filtering (9-bit
// weights included) between the native run and the run through SCUDA.
#include "common.h"

#define N 64

// out[i] = tex(coords[i]) for the geometry `geom`
__global__ void sample(float4 *out, cudaTextureObject_t t, const float4 *c, int n, int geom) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 p = c[i], r;
  switch (geom) {
    case 0: r = tex1Dfetch<float4>(t, (int)p.x); break;
    case 1: r = tex1D<float4>(t, p.x); break;
    case 2: r = tex2D<float4>(t, p.x, p.y); break;
    case 3: r = tex3D<float4>(t, p.x, p.y, p.z); break;
    case 4: r = tex1DLayered<float4>(t, p.x, (int)p.y); break;
    case 5: r = tex2DLayered<float4>(t, p.x, p.y, (int)p.z); break;
    case 6: r = texCubemap<float4>(t, p.x, p.y, p.z); break;
    case 7: r = tex2DLod<float4>(t, p.x, p.y, p.w); break;
    default: r = texCubemapLayered<float4>(t, p.x, p.y, p.z, (int)p.w); break;
  }
  out[i] = r;
}

__global__ void sample_int(uint4 *out, cudaTextureObject_t t, const float4 *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2D<uint4>(t, c[i].x, c[i].y);
}

static float4 *d_coords, *d_out;
static float4 h_coords[N];

// Coordinates that cross every edge: below 0, inside, beyond the extent.
static void make_coords(float scale, int layers) {
  for (int i = 0; i < N; i++) {
    float u = (i - 8) * scale / 40.0f;
    h_coords[i] = make_float4(u, 1.0f - u * 0.5f, layers ? (float)(i % layers) : u * 0.25f, (i % 8) * 0.4f);
  }
  CK(cudaMemcpy(d_coords, h_coords, sizeof h_coords, cudaMemcpyHostToDevice));
}

static void run(const char *what, cudaTextureObject_t t, int geom) {
  float4 out[N];
  sample<<<1, N>>>(d_out, t, d_coords, N, geom);
  CK(cudaGetLastError());
  CK(cudaMemcpy(out, d_out, sizeof out, cudaMemcpyDeviceToHost));
  printf("%-40s fnv=%016llx first=%.6f\n", what, (unsigned long long)fnv1a(out, sizeof out), out[N / 2].x);
}

static cudaTextureDesc tdesc(cudaTextureAddressMode am, cudaTextureFilterMode fm, int normalized) {
  cudaTextureDesc td;
  memset(&td, 0, sizeof td);
  td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = am;
  td.filterMode = fm;
  td.readMode = cudaReadModeElementType;
  td.normalizedCoords = normalized;
  td.borderColor[0] = 0.25f, td.borderColor[1] = 0.5f, td.borderColor[2] = 0.75f, td.borderColor[3] = 1;
  return td;
}

static const char *am_name[] = {"wrap", "clamp", "mirror", "border"};
static const char *fm_name[] = {"point", "linear"};

// every address mode x filter mode x coordinate kind of one resource
static void all_modes(const char *kind, const cudaResourceDesc *rd, int geom, float extent) {
  for (int norm = 0; norm < 2; norm++) {
    make_coords(norm ? 1.0f : extent, 0);
    for (int am = 0; am < 4; am++)
      for (int fm = 0; fm < 2; fm++) {
        if (!norm && (am == cudaAddressModeWrap || am == cudaAddressModeMirror)) continue;  // need normalized
        cudaTextureDesc td = tdesc((cudaTextureAddressMode)am, (cudaTextureFilterMode)fm, norm);
        cudaTextureObject_t t;
        CK(cudaCreateTextureObject(&t, rd, &td, NULL));
        char what[96];
        snprintf(what, sizeof what, "%s %s %s %s", kind, am_name[am], fm_name[fm], norm ? "normalized" : "texels");
        run(what, t, geom);
        CK(cudaDestroyTextureObject(t));
      }
  }
}

int main(void) {
  test_init();
  CK(cudaMalloc(&d_coords, sizeof h_coords));
  CK(cudaMalloc(&d_out, N * sizeof(float4)));
  cudaChannelFormatDesc f4 = cudaCreateChannelDesc<float4>();

  // ---- linear memory (tex1Dfetch)
  float4 lin[256];
  for (int i = 0; i < 256; i++) lin[i] = make_float4(i, i * 0.5f, -i, 1);
  float4 *d_lin;
  CK(cudaMalloc(&d_lin, sizeof lin));
  CK(cudaMemcpy(d_lin, lin, sizeof lin, cudaMemcpyHostToDevice));
  cudaResourceDesc rd;
  memset(&rd, 0, sizeof rd);
  rd.resType = cudaResourceTypeLinear;
  rd.res.linear.devPtr = d_lin;
  rd.res.linear.desc = f4;
  rd.res.linear.sizeInBytes = sizeof lin;
  cudaTextureDesc td = tdesc(cudaAddressModeClamp, cudaFilterModePoint, 0);
  cudaTextureObject_t t;
  CK(cudaCreateTextureObject(&t, &rd, &td, NULL));
  make_coords(300, 0);
  run("linear fetch", t, 0);
  cudaResourceDesc back;
  CK(cudaGetTextureObjectResourceDesc(&back, t));
  EXPECT(back.res.linear.devPtr == d_lin && back.res.linear.sizeInBytes == sizeof lin, "linear resource desc");
  CK(cudaDestroyTextureObject(t));

  // ---- pitched 2D
  const int W = 33, H = 17;
  float4 img[H][W];
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) img[y][x] = make_float4(x, y, x * y * 0.125f, (x + y) & 1);
  size_t pitch;
  float4 *d_p;
  CK(cudaMallocPitch(&d_p, &pitch, W * sizeof(float4), H));
  CK(cudaMemcpy2D(d_p, pitch, img, W * sizeof(float4), W * sizeof(float4), H, cudaMemcpyHostToDevice));
  memset(&rd, 0, sizeof rd);
  rd.resType = cudaResourceTypePitch2D;
  rd.res.pitch2D.devPtr = d_p;
  rd.res.pitch2D.desc = f4;
  rd.res.pitch2D.width = W;
  rd.res.pitch2D.height = H;
  rd.res.pitch2D.pitchInBytes = pitch;
  all_modes("pitch2D", &rd, 2, W);

  // ---- 1D and 2D arrays
  cudaArray_t a1, a2;
  CK(cudaMallocArray(&a1, &f4, W));
  CK(cudaMemcpy2DToArray(a1, 0, 0, img[3], W * sizeof(float4), W * sizeof(float4), 1, cudaMemcpyHostToDevice));
  memset(&rd, 0, sizeof rd);
  rd.resType = cudaResourceTypeArray;
  rd.res.array.array = a1;
  all_modes("array1D", &rd, 1, W);
  CK(cudaMallocArray(&a2, &f4, W, H));
  CK(cudaMemcpy2DToArray(a2, 0, 0, img, W * sizeof(float4), W * sizeof(float4), H, cudaMemcpyHostToDevice));
  rd.res.array.array = a2;
  all_modes("array2D", &rd, 2, W);

  // ---- 3D
  const int D = 5;
  static float4 vol[D][H][W];
  for (int z = 0; z < D; z++)
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++) vol[z][y][x] = make_float4(x, y, z, x + y + z);
  cudaArray_t a3;
  CK(cudaMalloc3DArray(&a3, &f4, make_cudaExtent(W, H, D)));
  cudaMemcpy3DParms p = {0};
  p.srcPtr = make_cudaPitchedPtr(vol, W * sizeof(float4), W, H);
  p.dstArray = a3;
  p.extent = make_cudaExtent(W, H, D);
  p.kind = cudaMemcpyHostToDevice;
  CK(cudaMemcpy3D(&p));
  rd.res.array.array = a3;
  all_modes("array3D", &rd, 3, W);

  // ---- layered 1D and 2D
  cudaArray_t l1, l2;
  CK(cudaMalloc3DArray(&l1, &f4, make_cudaExtent(W, 0, D), cudaArrayLayered));
  p.dstArray = l1;
  p.srcPtr = make_cudaPitchedPtr(vol, W * sizeof(float4), W, 1);
  p.extent = make_cudaExtent(W, 1, D);
  CK(cudaMemcpy3D(&p));
  rd.res.array.array = l1;
  for (int fm = 0; fm < 2; fm++) {
    cudaTextureDesc tl = tdesc(cudaAddressModeClamp, (cudaTextureFilterMode)fm, 1);
    CK(cudaCreateTextureObject(&t, &rd, &tl, NULL));
    make_coords(1, D);
    for (int i = 0; i < N; i++) h_coords[i].y = (float)(i % D);
    CK(cudaMemcpy(d_coords, h_coords, sizeof h_coords, cudaMemcpyHostToDevice));
    run(fm ? "layered1D linear" : "layered1D point", t, 4);
    CK(cudaDestroyTextureObject(t));
  }
  CK(cudaMalloc3DArray(&l2, &f4, make_cudaExtent(W, H, D), cudaArrayLayered));
  p.dstArray = l2;
  p.srcPtr = make_cudaPitchedPtr(vol, W * sizeof(float4), W, H);
  p.extent = make_cudaExtent(W, H, D);
  CK(cudaMemcpy3D(&p));
  rd.res.array.array = l2;
  for (int am = 0; am < 4; am++) {
    cudaTextureDesc tl = tdesc((cudaTextureAddressMode)am, cudaFilterModeLinear, 1);
    CK(cudaCreateTextureObject(&t, &rd, &tl, NULL));
    make_coords(1, D);
    char what[64];
    snprintf(what, sizeof what, "layered2D %s linear", am_name[am]);
    run(what, t, 5);
    CK(cudaDestroyTextureObject(t));
  }

  // ---- cubemap and layered cubemap (faces of 16 x 16)
  const int C = 16;
  static float4 faces[12][C][C];
  for (int f = 0; f < 12; f++)
    for (int y = 0; y < C; y++)
      for (int x = 0; x < C; x++) faces[f][y][x] = make_float4(f, x, y, f * 100 + y * C + x);
  for (int layered = 0; layered < 2; layered++) {
    cudaArray_t cube;
    int nf = layered ? 12 : 6;
    CK(cudaMalloc3DArray(&cube, &f4, make_cudaExtent(C, C, nf), cudaArrayCubemap | (layered ? cudaArrayLayered : 0)));
    p.dstArray = cube;
    p.srcPtr = make_cudaPitchedPtr(faces, C * sizeof(float4), C, C);
    p.extent = make_cudaExtent(C, C, nf);
    CK(cudaMemcpy3D(&p));
    rd.res.array.array = cube;
    for (int fm = 0; fm < 2; fm++) {
      cudaTextureDesc tc = tdesc(cudaAddressModeClamp, (cudaTextureFilterMode)fm, 1);
      CK(cudaCreateTextureObject(&t, &rd, &tc, NULL));
      for (int i = 0; i < N; i++) {
        float a = i * 0.37f;
        h_coords[i] = make_float4(cosf(a), sinf(a * 1.3f), cosf(a * 0.7f) - 0.2f, (float)(i % 2));
      }
      CK(cudaMemcpy(d_coords, h_coords, sizeof h_coords, cudaMemcpyHostToDevice));
      char what[64];
      snprintf(what, sizeof what, "cubemap%s %s", layered ? " layered" : "", fm_name[fm]);
      run(what, t, layered ? 8 : 6);
      CK(cudaDestroyTextureObject(t));
    }
    CK(cudaFreeArray(cube));
  }

  // ---- mipmapped: 32 x 32, 6 levels, level l filled with l + x/100
  cudaMipmappedArray_t mm;
  CK(cudaMallocMipmappedArray(&mm, &f4, make_cudaExtent(32, 32, 0), 6));
  for (int l = 0; l < 6; l++) {
    cudaArray_t lv, lv2;
    CK(cudaGetMipmappedArrayLevel(&lv, mm, l));
    CK(cudaGetMipmappedArrayLevel(&lv2, mm, l));
    EXPECT(lv == lv2, "level %d handle", l);
    int w = 32 >> l;
    static float4 lvl[32 * 32];
    for (int i = 0; i < w * w; i++) lvl[i] = make_float4(l, (i % w) / 100.0f, (i / w) / 100.0f, 1);
    CK(cudaMemcpy2DToArray(lv, 0, 0, lvl, w * sizeof(float4), w * sizeof(float4), w, cudaMemcpyHostToDevice));
    cudaExtent e;
    cudaChannelFormatDesc cd;
    unsigned fl;
    CK(cudaArrayGetInfo(&cd, &e, &fl, lv));
    printf("mipmap level %d: %zux%zu\n", l, e.width, e.height);
  }
  memset(&rd, 0, sizeof rd);
  rd.resType = cudaResourceTypeMipmappedArray;
  rd.res.mipmap.mipmap = mm;
  for (int mf = 0; mf < 2; mf++)
    for (int fm = 0; fm < 2; fm++) {
      cudaTextureDesc tm = tdesc(cudaAddressModeWrap, (cudaTextureFilterMode)fm, 1);
      tm.mipmapFilterMode = (cudaTextureFilterMode)mf;
      tm.maxMipmapLevelClamp = 5;
      tm.mipmapLevelBias = 0.25f;
      CK(cudaCreateTextureObject(&t, &rd, &tm, NULL));
      make_coords(1, 0);
      char what[64];
      snprintf(what, sizeof what, "mipmap %s levels %s texels", fm_name[mf], fm_name[fm]);
      run(what, t, 7);
      cudaTextureDesc tb;
      CK(cudaGetTextureObjectTextureDesc(&tb, t));
      EXPECT(tb.mipmapFilterMode == mf && tb.maxMipmapLevelClamp == 5, "mipmap texture desc");
      CK(cudaGetTextureObjectResourceDesc(&back, t));
      EXPECT(back.res.mipmap.mipmap == mm, "mipmap resource desc");
      CK(cudaDestroyTextureObject(t));
    }

  // ---- 8-bit: normalized, sRGB, and integers
  uchar4 px[W * H];
  for (int i = 0; i < W * H; i++) px[i] = make_uchar4(i & 255, (i * 7) & 255, (i * 13) & 255, 255 - (i & 255));
  cudaChannelFormatDesc u4 = cudaCreateChannelDesc<uchar4>();
  cudaArray_t a8;
  CK(cudaMallocArray(&a8, &u4, W, H));
  CK(cudaMemcpy2DToArray(a8, 0, 0, px, W * 4, W * 4, H, cudaMemcpyHostToDevice));
  memset(&rd, 0, sizeof rd);
  rd.resType = cudaResourceTypeArray;
  rd.res.array.array = a8;
  for (int srgb = 0; srgb < 2; srgb++) {
    cudaTextureDesc t8 = tdesc(cudaAddressModeBorder, cudaFilterModeLinear, 0);
    t8.readMode = cudaReadModeNormalizedFloat;
    t8.sRGB = srgb;
    CK(cudaCreateTextureObject(&t, &rd, &t8, NULL));
    make_coords(W, 0);
    run(srgb ? "uchar4 sRGB linear" : "uchar4 normalized linear", t, 2);
    CK(cudaDestroyTextureObject(t));
  }
  cudaTextureDesc ti = tdesc(cudaAddressModeClamp, cudaFilterModePoint, 0);
  CK(cudaCreateTextureObject(&t, &rd, &ti, NULL));
  uint4 iout[N];
  sample_int<<<1, N>>>((uint4 *)d_out, t, d_coords, N);
  CK(cudaGetLastError());
  CK(cudaMemcpy(iout, d_out, sizeof iout, cudaMemcpyDeviceToHost));
  printf("%-40s fnv=%016llx\n", "uchar4 element type", (unsigned long long)fnv1a(iout, sizeof iout));
  CK(cudaDestroyTextureObject(t));

  // ---- a resource view: the float4 array read as its own format
  cudaResourceViewDesc vd;
  memset(&vd, 0, sizeof vd);
  vd.format = cudaResViewFormatFloat4;
  vd.width = W, vd.height = H;
  rd.res.array.array = a2;
  td = tdesc(cudaAddressModeClamp, cudaFilterModePoint, 0);
  CK(cudaCreateTextureObject(&t, &rd, &td, &vd));
  cudaResourceViewDesc vb;
  CK(cudaGetTextureObjectResourceViewDesc(&vb, t));
  printf("view: format %d %zux%zu\n", (int)vb.format, vb.width, vb.height);
  make_coords(W, 0);
  run("array2D through a view", t, 2);
  CK(cudaDestroyTextureObject(t));

  CK(cudaFreeArray(a8));
  CK(cudaFreeMipmappedArray(mm));
  CK(cudaFreeArray(l2));
  CK(cudaFreeArray(l1));
  CK(cudaFreeArray(a3));
  CK(cudaFreeArray(a2));
  CK(cudaFreeArray(a1));
  CK(cudaFree(d_p));
  CK(cudaFree(d_lin));
  return test_finish();
}
