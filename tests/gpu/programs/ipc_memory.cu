// IPC between two processes: the parent cudaMalloc's, fills a pattern with a
// kernel, and passes cudaIpcGetMemHandle's 64 bytes (and an event's, made
// with cudaEventInterprocess | cudaEventDisableTiming) down a pipe to a
// child it execs before touching CUDA in it (CUDA forbids fork after
// cuInit: the child is a fresh exec of this program with "child"). The
// child opens both, checks and doubles the pattern with a kernel, records
// the event and answers; the parent waits on the event and checks.
#include "common.h"
#include <sys/wait.h>

__global__ void fill(int *p, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = 3 * i + k;
}
__global__ void check_and_double(int *p, int n, int k, int *bad) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    if (p[i] != 3 * i + k) atomicAdd(bad, 1);
    p[i] *= 2;
  }
}

static const int N = 1 << 20;

static void write_all(int fd, const void *p, size_t n) {
  if (write(fd, p, n) != (ssize_t)n) { printf("FAIL: short write on the pipe\n"); exit(1); }
}
static void read_all(int fd, void *p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, (char *)p + got, n - got);
    if (r <= 0) { printf("FAIL: short read on the pipe\n"); exit(1); }
    got += (size_t)r;
  }
}

// The child: stdin carries the handles, stdout (a pipe) the verdict.
static int child(void) {
  cudaIpcMemHandle_t mh;
  cudaIpcEventHandle_t eh;
  read_all(0, &mh, sizeof mh);
  read_all(0, &eh, sizeof eh);
  int *p = NULL, *bad = NULL, nbad = -1;
  cudaEvent_t ev;
  CK(cudaIpcOpenMemHandle((void **)&p, mh, cudaIpcMemLazyEnablePeerAccess));
  CK(cudaIpcOpenEventHandle(&ev, eh));
  CK(cudaMalloc(&bad, sizeof(int)));
  CK(cudaMemset(bad, 0, sizeof(int)));
  check_and_double<<<N / 256, 256>>>(p, N, 7, bad);
  CK(cudaEventRecord(ev, 0));
  CK(cudaMemcpy(&nbad, bad, sizeof nbad, cudaMemcpyDeviceToHost));
  CK(cudaIpcCloseMemHandle(p));
  CK(cudaEventDestroy(ev));
  CK(cudaFree(bad));
  write_all(1, &nbad, sizeof nbad);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "child") == 0) return child();
  test_init();
  int to_child[2], from_child[2];
  if (pipe(to_child) || pipe(from_child)) { printf("FAIL: pipe\n"); return 1; }
  fflush(stdout);
  pid_t pid = fork(); // before any CUDA call in this process
  if (pid < 0) { printf("FAIL: fork\n"); return 1; }
  if (pid == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    close(to_child[1]);
    close(from_child[0]);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) _exit(127);
    self[n] = 0;
    execl(self, self, "child", (char *)NULL);
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);

  int *d;
  CK(cudaMalloc(&d, N * sizeof(int)));
  fill<<<N / 256, 256>>>(d, N, 7);
  CK(cudaDeviceSynchronize());
  cudaIpcMemHandle_t mh;
  cudaIpcEventHandle_t eh;
  cudaEvent_t ev;
  CK(cudaIpcGetMemHandle(&mh, d));
  CK(cudaEventCreateWithFlags(&ev, cudaEventInterprocess | cudaEventDisableTiming));
  CK(cudaIpcGetEventHandle(&eh, ev));
  printf("handles: %zu + %zu bytes\n", sizeof mh, sizeof eh);
  write_all(to_child[1], &mh, sizeof mh);
  write_all(to_child[1], &eh, sizeof eh);

  int nbad = -1;
  read_all(from_child[0], &nbad, sizeof nbad);
  int status = 0;
  waitpid(pid, &status, 0);
  printf("child: exit %d, %d wrong before doubling\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1, nbad);
  EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed (status %d)", status);
  EXPECT(nbad == 0, "child saw %d wrong values", nbad);

  // The child's event was recorded after its kernel: waiting on it here
  // orders this process's work after the child's.
  CK(cudaStreamWaitEvent(0, ev, 0));
  CK(cudaEventSynchronize(ev));
  int *h = (int *)malloc(N * sizeof(int));
  CK(cudaMemcpy(h, d, N * sizeof(int), cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < N; i++) bad += h[i] != 2 * (3 * i + 7);
  printf("parent sees the child's writes: %s fnv=%016llx\n", bad ? "MISMATCH" : "ok",
         (unsigned long long)fnv1a(h, N * sizeof(int)));
  EXPECT(!bad, "%d values not doubled", bad);

  // A handle opened in the process that made it is refused, as by the driver.
  int *self_open = NULL;
  cudaError_t e = cudaIpcOpenMemHandle((void **)&self_open, mh, cudaIpcMemLazyEnablePeerAccess);
  printf("open in the exporting process: %s\n", cudaGetErrorName(e));
  cudaGetLastError();
  free(h);
  CK(cudaEventDestroy(ev));
  CK(cudaFree(d));
  return test_finish();
}
