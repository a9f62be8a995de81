/* welcome.h - the welcome that carries no session info (protocol.h):
 * { u32 status, u32 length, message }. Refusals, raw link children and
 * bulk joins send it; a session's own welcome adds its session info
 * (session.c). */
#ifndef SCUDA_SERVER_WELCOME_H
#define SCUDA_SERVER_WELCOME_H

#include <stdint.h>

/* Returns 0, or -1 (errno set) when the client is gone. */
int welcome_send(int fd, uint32_t status, const char *msg);

#endif
