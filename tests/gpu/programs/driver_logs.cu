// The driver's log buffer (driver API): a failed call leaves an entry;
// cuLogsDumpToMemory returns it and advances the iterator, cuLogsDumpToFile
// writes the same to a file of this machine. Through SCUDA the buffer is
// the session's driver's and the file the client's. Output: facts that do
// not depend on the entries' text (timestamps), compared with native.
// BUILD: -lcuda
#include <cuda.h>
#include <unistd.h>
#include "common.h"

int main() {
  test_init();
  CK(cudaFree(0));
  CUlogIterator start = 0;
  CU(cuLogsCurrent(&start, 0));
  CUdeviceptr p;
  CUresult r = cuMemAlloc(&p, (size_t)1 << 52);  // fails, and the driver logs why
  const char *name = "?";
  cuGetErrorName(r, &name);
  printf("huge allocation: %s\n", name);
  static char buf[25601];
  size_t n = sizeof buf;
  CUlogIterator it = start;
  CU(cuLogsDumpToMemory(&it, buf, &n, 0));
  printf("log after the failure: %s, NUL-terminated: %s, iterator advanced: %s\n", n > 0 ? "not empty" : "EMPTY",
         buf[n] == 0 ? "yes" : "NO", it != start ? "yes" : "NO");
  EXPECT(n > 0 && buf[n] == 0 && it != start, "dump: %zu bytes", n);
  size_t again = sizeof buf;
  CU(cuLogsDumpToMemory(&it, buf, &again, 0));
  printf("nothing new since: %s\n", again == 0 ? "yes" : "NO");

  char path[] = "/tmp/driver_logs_XXXXXX";
  int fd = mkstemp(path);
  EXPECT(fd >= 0, "mkstemp");
  close(fd);
  CUlogIterator from = start;
  CU(cuLogsDumpToFile(&from, path, 0));
  size_t len = 0;
  void *file = read_file(path, &len);
  unlink(path);
  printf("file: %s, as long as the dump: %s\n", file && len > 0 ? "written" : "EMPTY", len == n ? "yes" : "NO");
  EXPECT(file && len == n, "file %zu bytes, dump %zu", len, n);
  free(file);
  return test_finish();
}
