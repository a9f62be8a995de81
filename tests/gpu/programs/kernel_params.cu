// Kernel parameters of awkward sizes and alignments: the launch path must
// copy each argument's bytes at the right offset (cudart builds the layout,
// the shim has to ship it verbatim).
#include "common.h"

struct S3 { char a, b, c; };                  // 3 bytes, alignment 1
struct Mixed { char c; double d; short s; int i; char c2; float f; };  // padded, alignment 8
struct WithPtr { int n; const int *p; float scale; };  // device pointer inside a struct
struct __align__(16) Vec { float x, y, z, w; };

struct Out {
  int c, s3a, s3b, s3c, ms, mi, mc2, wn, i2, c2, sh;
  double d, md;
  float mf, wsum, vx, vw, f2;
  long long ll;
};

__global__ void params(char c, short sh, double d, S3 s3, Mixed m, WithPtr w, char c2, Vec v,
                       long long ll, int i2, float f2, Out *o) {
  o->c = c; o->sh = sh; o->d = d;
  o->s3a = s3.a; o->s3b = s3.b; o->s3c = s3.c;
  o->ms = m.s; o->mi = m.i; o->mc2 = m.c2; o->md = m.d; o->mf = m.f;
  float sum = 0;
  for (int i = 0; i < w.n; i++) sum += w.p[i] * w.scale;
  o->wn = w.n; o->wsum = sum;
  o->c2 = c2; o->vx = v.x; o->vw = v.w; o->ll = ll; o->i2 = i2; o->f2 = f2;
}

// Many scalar parameters of one type.
__global__ void many(int a0, int a1, int a2, int a3, int a4, int a5, int a6, int a7, int a8, int a9,
                     int a10, int a11, int a12, int a13, int a14, int a15, long long *out) {
  *out = (long long)a0 + a1 * 2 + a2 * 3 + a3 * 4 + a4 * 5 + a5 * 6 + a6 * 7 + a7 * 8 + a8 * 9 + a9 * 10 +
         a10 * 11 + a11 * 12 + a12 * 13 + a13 * 14 + a14 * 15 + a15 * 16;
}

// A char-only kernel: 1-byte parameters back to back.
__global__ void chars(char a, char b, char c, char d, char e, int *out) {
  out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = e;
}

int main(void) {
  test_init();
  int hv[5] = {1, 2, 3, 4, 5};
  int *dv;
  CK(cudaMalloc(&dv, sizeof hv));
  CK(cudaMemcpy(dv, hv, sizeof hv, cudaMemcpyHostToDevice));
  Out *dout, o;
  CK(cudaMalloc(&dout, sizeof(Out)));
  CK(cudaMemset(dout, 0, sizeof(Out)));
  S3 s3 = {'x', -7, 127};
  Mixed m = {'q', -2.5e300, -12345, 0x7abcdef0, 'Z', 3.25f};
  WithPtr w = {5, dv, 0.5f};
  Vec v = {1.5f, 2.5f, 3.5f, -4.5f};
  params<<<1, 1>>>((char)-100, (short)-31000, 1.0 / 3.0, s3, m, w, (char)77, v, -(1LL << 60) + 3, 42, 6.5f, dout);
  CK(cudaGetLastError());
  CK(cudaMemcpy(&o, dout, sizeof o, cudaMemcpyDeviceToHost));
  printf("char=%d short=%d double=%.17g\n", o.c, o.sh, o.d);
  printf("S3={%d,%d,%d}\n", o.s3a, o.s3b, o.s3c);
  printf("Mixed={d=%.6g s=%d i=%#x c2=%c f=%g}\n", o.md, o.ms, o.mi, o.mc2, o.mf);
  printf("WithPtr={n=%d sum=%g}\n", o.wn, o.wsum);
  printf("char2=%d Vec={%g,..,%g} ll=%lld int=%d float=%g\n", o.c2, o.vx, o.vw, o.ll, o.i2, o.f2);
  EXPECT(o.c == -100 && o.sh == -31000 && o.d == 1.0 / 3.0, "scalars");
  EXPECT(o.s3a == 'x' && o.s3b == -7 && o.s3c == 127, "S3");
  EXPECT(o.md == -2.5e300 && o.ms == -12345 && o.mi == 0x7abcdef0 && o.mc2 == 'Z' && o.mf == 3.25f, "Mixed");
  EXPECT(o.wn == 5 && o.wsum == 7.5f, "WithPtr");
  EXPECT(o.c2 == 77 && o.vx == 1.5f && o.vw == -4.5f && o.ll == -(1LL << 60) + 3 && o.i2 == 42 && o.f2 == 6.5f,
         "tail params");

  long long *dll, ll = 0;
  CK(cudaMalloc(&dll, sizeof ll));
  many<<<1, 1>>>(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, dll);
  CK(cudaMemcpy(&ll, dll, sizeof ll, cudaMemcpyDeviceToHost));
  printf("16 ints -> %lld\n", ll);
  EXPECT(ll == 1496, "16 ints");

  int *dc, hc[5];
  CK(cudaMalloc(&dc, sizeof hc));
  chars<<<1, 1>>>(1, -2, 3, -4, 5, dc);
  CK(cudaMemcpy(hc, dc, sizeof hc, cudaMemcpyDeviceToHost));
  printf("chars -> %d %d %d %d %d\n", hc[0], hc[1], hc[2], hc[3], hc[4]);
  EXPECT(hc[0] == 1 && hc[1] == -2 && hc[2] == 3 && hc[3] == -4 && hc[4] == 5, "chars");
  CK(cudaFree(dv)); CK(cudaFree(dout)); CK(cudaFree(dll)); CK(cudaFree(dc));
  return test_finish();
}
