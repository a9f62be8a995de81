/* welcome.h - the welcome (protocol.h): { u32 status, u32 length,
 * message }, and after it a session's session info. Refusals, raw link
 * children and bulk joins send it without; the client reads both kinds
 * with common/hello.c. */
#ifndef SCUDA_SERVER_WELCOME_H
#define SCUDA_SERVER_WELCOME_H

#include <stdint.h>

struct session_info;

/* Returns 0, or -1 (errno set) when the client is gone. */
int welcome_send(int fd, uint32_t status, const char *msg);
/* A session's welcome: the same, then its session info (si; NULL in a
 * refusal). */
int welcome_send_session(int fd, uint32_t status, const char *msg, const struct session_info *si);

#endif
