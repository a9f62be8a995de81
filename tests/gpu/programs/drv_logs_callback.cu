// cuLogsRegisterCallback: a failed allocation makes the driver write a log
// line, which it also hands to the registered callback (with its data and
// a level); after cuLogsUnregisterCallback the callback sees nothing more.
// Through SCUDA the line is the session driver's, and the callback runs in
// this process. Output: facts that do not depend on the text.
// BUILD: -lcuda
#include <cuda.h>
#include <pthread.h>
#include "common.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int calls, level = -1, text_ok, data_ok;
static int user_data;

static void on_log(void *data, CUlogLevel lv, char *message, size_t length) {
  pthread_mutex_lock(&lock);
  calls++;
  level = (int)lv;
  data_ok = data == &user_data;
  text_ok = message != NULL && length > 0 && strlen(message) == length;
  pthread_mutex_unlock(&lock);
}

static int calls_now(void) {
  pthread_mutex_lock(&lock);
  int n = calls;
  pthread_mutex_unlock(&lock);
  return n;
}

int main(void) {
  test_init();
  drv_primary_context(NULL);
  CUlogsCallbackHandle h;
  CU(cuLogsRegisterCallback(on_log, &user_data, &h));
  CUdeviceptr p;
  CUresult r = cuMemAlloc(&p, (size_t)1 << 52);  // fails, and the driver logs why
  printf("huge allocation: %s\n", cu_name(r));
  CU(cuCtxSynchronize());
  int n = calls_now();
  pthread_mutex_lock(&lock);
  printf("callback ran: %s, level %d, its data: %s, NUL-terminated text of the given length: %s\n",
         n > 0 ? "yes" : "NO", level, data_ok ? "yes" : "NO", text_ok ? "yes" : "NO");
  pthread_mutex_unlock(&lock);
  EXPECT(n > 0, "the callback never ran");
  CU(cuLogsUnregisterCallback(h));
  r = cuMemAlloc(&p, (size_t)1 << 52);
  CU(cuCtxSynchronize());
  printf("after unregistering: %s\n", calls_now() == n ? "no more calls" : "CALLED AGAIN");
  printf("null callback: %d\n", (int)cuLogsRegisterCallback(NULL, NULL, &h));
  return test_finish();
}
