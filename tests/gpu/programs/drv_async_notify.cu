// cuDeviceRegisterAsyncNotification: registering and unregistering a
// callback for the device's notifications (a GPU with no memory budget
// sends none), and the answers to bad arguments. Output compared with
// native: the answers' names.
// BUILD: -lcuda
#include <cuda.h>
#include "common.h"

static void on_notify(CUasyncNotificationInfo *info, void *data, CUasyncCallbackHandle h) {
  (void)info, (void)data, (void)h;
}

int main(void) {
  test_init();
  CUdevice dev;
  drv_primary_context(&dev);
  static int user_data;
  CUasyncCallbackHandle h = NULL;
  CUresult r = cuDeviceRegisterAsyncNotification(dev, on_notify, &user_data, &h);
  printf("register: %s\n", cu_name(r));
  if (r == CUDA_SUCCESS) {
    CUdeviceptr p;
    CU(cuMemAlloc(&p, 64u << 20));
    CU(cuMemFree(p));
    printf("unregister: %s\n", cu_name(cuDeviceUnregisterAsyncNotification(dev, h)));
  }
  printf("null callback: %s\n", cu_name(cuDeviceRegisterAsyncNotification(dev, NULL, NULL, &h)));
  printf("bad device: %s\n", cu_name(cuDeviceRegisterAsyncNotification(999, on_notify, NULL, &h)));
  return test_finish();
}
