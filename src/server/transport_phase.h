/* transport_phase.h - the server's side of a connection's first bytes:
 * the client's preface, the plain answer, and the TLS handshake when the
 * client asked for TLS (preface.h, tls.h). A non-blocking step function:
 * the parent runs it for every pending connection in its poll loop
 * (admission.c, state TRANSPORT), under the handshake's one deadline, so
 * a client silent in its TLS handshake holds up no one. */
#ifndef SCUDA_TRANSPORT_PHASE_H
#define SCUDA_TRANSPORT_PHASE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/preface.h"
#include "../common/tls.h"

struct transport_phase {
    int fd;
    const struct tls_server *tls; /* NULL: this server serves plain TCP */
    int state;                    /* private */
    uint8_t preface[PREFACE_LEN], answer[PREFACE_LEN];
    size_t got, sent;
    int client_tls, kind;         /* from the preface */
    struct tls_link *link;
    char refusal[200];            /* why the preface was refused */
};

void transport_phase_init(struct transport_phase *tp, int fd, const struct tls_server *tls);

/* One step: TLS_STEP_WANT_READ or _WANT_WRITE (poll fd for that and step
 * again), TLS_STEP_DONE (TLS links are then attached to fd: the SCUDA
 * handshake may start), or TLS_STEP_ERROR (err says why, for the log; a
 * client refused at the preface has been told why in its answer). */
int transport_phase_step(struct transport_phase *tp, char *err, size_t errlen);

/* Give up a phase that did not finish (frees the link, if any). */
void transport_phase_abort(struct transport_phase *tp);

#endif
