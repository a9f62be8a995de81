// Shareable handles between two processes: the parent makes an exportable
// VMM allocation (driver API), fills it with a kernel, exports it as a
// POSIX file descriptor and sends the descriptor over a Unix socket
// (SCM_RIGHTS) to a child it execs before touching CUDA. The child
// imports, maps, checks and doubles the values with a kernel; the parent
// checks the doubled values. Natively the descriptor is the driver's;
// through SCUDA it is the shim's memfd (docs/architecture.md, 9.19).
#include <cuda.h>
#include "common.h"
// BUILD: -lcuda
#include <sys/socket.h>
#include <sys/wait.h>

__global__ void fill(int *p, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = 5 * i + k;
}
__global__ void check_and_double(int *p, int n, int k, int *bad) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    if (p[i] != 5 * i + k) atomicAdd(bad, 1);
    p[i] *= 2;
  }
}

static const int N = 1 << 20;

static void send_fd(int sock, int fd) {
  char byte = 'f', ctl[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {&byte, 1};
  struct msghdr msg = {};
  msg.msg_iov = &iov, msg.msg_iovlen = 1, msg.msg_control = ctl, msg.msg_controllen = sizeof ctl;
  struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET, cm->cmsg_type = SCM_RIGHTS, cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &fd, sizeof fd);
  if (sendmsg(sock, &msg, 0) != 1) { printf("FAIL: sendmsg\n"); exit(1); }
}
static int recv_fd(int sock) {
  char byte, ctl[CMSG_SPACE(sizeof(int))];
  struct iovec iov = {&byte, 1};
  struct msghdr msg = {};
  msg.msg_iov = &iov, msg.msg_iovlen = 1, msg.msg_control = ctl, msg.msg_controllen = sizeof ctl;
  if (recvmsg(sock, &msg, 0) != 1) return -1;
  struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
  if (!cm || cm->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(cm), sizeof fd);
  return fd;
}

static CUmemAllocationProp exportable(void) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

static size_t rounded(size_t n) {
  CUmemAllocationProp prop = exportable();
  size_t g = 0;
  CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  return (n + g - 1) / g * g;
}

static CUdeviceptr map(CUmemGenericAllocationHandle h, size_t size) {
  CUdeviceptr va = 0;
  CU(cuMemAddressReserve(&va, size, 0, 0, 0));
  CU(cuMemMap(va, size, 0, h, 0));
  CUmemAccessDesc acc = {};
  acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU(cuMemSetAccess(va, size, &acc, 1));
  return va;
}

// The child: descriptor 3 is the socket; its verdict goes back on it.
static int child(void) {
  int fd = recv_fd(3);
  if (fd < 0) { printf("FAIL: no descriptor\n"); return 1; }
  CK(cudaFree(0));
  size_t size = rounded(N * sizeof(int));
  CUmemGenericAllocationHandle h;
  CU(cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  close(fd);
  CUdeviceptr va = map(h, size);
  int *bad = NULL, nbad = -1;
  CK(cudaMalloc(&bad, sizeof(int)));
  CK(cudaMemset(bad, 0, sizeof(int)));
  check_and_double<<<N / 256, 256>>>((int *)va, N, 9, bad);
  CK(cudaMemcpy(&nbad, bad, sizeof nbad, cudaMemcpyDeviceToHost));
  CU(cuMemUnmap(va, size));
  CU(cuMemAddressFree(va, size));
  CU(cuMemRelease(h));
  CK(cudaFree(bad));
  if (write(3, &nbad, sizeof nbad) != (ssize_t)sizeof nbad) return 1;
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "child") == 0) return child();
  test_init();
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) { printf("FAIL: socketpair\n"); return 1; }
  fflush(stdout);
  pid_t pid = fork(); // before any CUDA call in this process
  if (pid < 0) { printf("FAIL: fork\n"); return 1; }
  if (pid == 0) {
    dup2(sv[1], 3);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) _exit(127);
    self[n] = 0;
    execl(self, self, "child", (char *)NULL);
    _exit(127);
  }
  close(sv[1]);
  CK(cudaFree(0));
  size_t size = rounded(N * sizeof(int));
  CUmemAllocationProp prop = exportable();
  CUmemGenericAllocationHandle h;
  CU(cuMemCreate(&h, size, &prop, 0));
  CUdeviceptr va = map(h, size);
  fill<<<N / 256, 256>>>((int *)va, N, 9);
  CK(cudaDeviceSynchronize());
  int fd = -1;
  CU(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  printf("exported a local descriptor: %s\n", fd >= 0 ? "yes" : "no");
  send_fd(sv[0], fd);
  close(fd);
  int nbad = -1;
  if (read(sv[0], &nbad, sizeof nbad) != (ssize_t)sizeof nbad) nbad = -2;
  int status = 0;
  waitpid(pid, &status, 0);
  printf("child: exit %d, %d wrong before doubling\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1, nbad);
  EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed (status %d)", status);
  EXPECT(nbad == 0, "child saw %d wrong values", nbad);
  int *hbuf = (int *)malloc(N * sizeof(int));
  CU(cuMemcpyDtoH(hbuf, va, N * sizeof(int)));
  int bad = 0;
  for (int i = 0; i < N; i++) bad += hbuf[i] != 2 * (5 * i + 9);
  printf("parent sees the child's writes: %s fnv=%016llx\n", bad ? "MISMATCH" : "ok",
         (unsigned long long)fnv1a(hbuf, N * sizeof(int)));
  EXPECT(!bad, "%d values not doubled", bad);
  free(hbuf);
  CU(cuMemUnmap(va, size));
  CU(cuMemAddressFree(va, size));
  CU(cuMemRelease(h));
  return test_finish();
}
