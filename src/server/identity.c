/* identity.c - the session's authenticated user name (identity.h). */
#include "identity.h"

#include <stdio.h>

static char identity[SCUDA_IDENTITY_MAX] = "anonymous";

void session_identity_set(const char *name)
{
    snprintf(identity, sizeof identity, "%s", name && *name ? name : "anonymous");
}

const char *session_identity(void) { return identity; }
