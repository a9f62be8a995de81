/* welcome.c - see welcome.h. */
#include "welcome.h"

#include <string.h>
#include <sys/uio.h>

#include "../common/session_info.h"
#include "../common/transport.h"
#include "../common/wire.h"

int welcome_send(int fd, uint32_t status, const char *msg) { return welcome_send_session(fd, status, msg, NULL); }

int welcome_send_session(int fd, uint32_t status, const char *msg, const struct session_info *si)
{
    wire_buf b;
    wb_init(&b);
    wb_put_str(&b, msg);
    if (si) session_info_encode(&b, si);
    uint8_t hdr[8];
    uint32_t len = (uint32_t)b.len;
    memcpy(hdr, &status, 4);
    memcpy(hdr + 4, &len, 4);
    struct iovec iov[2] = {{hdr, 8}, {b.data, b.len}};
    int rc = io_writev_full(fd, iov, 2);
    wb_free(&b);
    return rc;
}
