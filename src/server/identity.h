/* identity.h - who a session's client proved to be.
 *
 * The parent learns the name during the handshake (the token's name in the
 * token file, or a client certificate's name) and the session process
 * keeps it, so that per-user state (the module cache's answers, quotas, log
 * lines) is scoped to that user. A server without named tokens has one
 * user, "anonymous". */
#ifndef SCUDA_IDENTITY_H
#define SCUDA_IDENTITY_H

#define SCUDA_IDENTITY_MAX 64 /* bytes of a name, with its NUL */

/* Sets the session's identity; a longer name is cut to fit. */
void session_identity_set(const char *name);
/* The session's identity; "anonymous" until set. Never NULL. */
const char *session_identity(void);

#endif
