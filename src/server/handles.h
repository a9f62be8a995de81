/* handles.h - the session's limit on live virtual handles (--max-handles).
 * The handle API itself is in dispatch.h, next to the handlers that use it. */
#ifndef SCUDA_SERVER_HANDLES_H
#define SCUDA_SERVER_HANDLES_H

#include <stdint.h>

/* At most `max` ids at once (0: no limit). A new handle past it fails its
 * call with CUDA_ERROR_OUT_OF_MEMORY and a log line naming the option. */
void handles_set_limit(uint64_t max);

#endif
