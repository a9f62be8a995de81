/* migrate_links.h - the extra connections a migration's device memory
 * travels on (docs/architecture.md, 9.17 "Device bytes").
 *
 * One TCP stream does not fill a fast link (on a GPU host's loopback a
 * migration's one stream moved memory at about 0.6-0.75x of what the
 * stream does with nothing else to do), so the memory goes over several,
 * as a client's striped copies do. They are peer links (peer_link.h):
 * before the memory the exporter asks for them (MIG_LINKS_QUERY); the
 * importing session grants up to MIGRATE_LINKS_MAX of its link slots and
 * answers with the grants and its certificate's fingerprint (MIG_LINKS);
 * the exporter dials each with peer_dial, as the client's peer copies
 * do, and says which it joined (MIG_LINKS_USED). Then the exporter sends
 * the MIG_BYTES chunks over the links, each on a thread of its own, and
 * the importer reads each link on a thread of its own into the landing
 * (migrate_landing.h), which takes chunks by their index in any order;
 * each link ends with its own MIG_END and byte count. The main
 * connection keeps everything else (kept ranges, the end, the verdict).
 * A link that cannot be dialed is only left out: with none, the memory
 * goes on the main connection, as before. */
#ifndef SCUDA_SERVER_MIGRATE_LINKS_H
#define SCUDA_SERVER_MIGRATE_LINKS_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "migrate_state.h"

/* Links one migration asks for (SCUDA_MIGRATE_LINKS, 0 to 4; 0: the
 * main connection only). */
#define MIGRATE_LINKS_MAX 4
#define MIGRATE_LINKS_DEFAULT 4
/* Less memory than this goes on the main connection: dialing and
 * pinning would cost more than they save. */
#define MIGRATE_LINKS_MIN_BYTES (16u << 20)

struct session;
struct migrate_landing;
struct msg_migrate_item;

/* ---- the exporter ---- */

struct migrate_links {
    int n;
    int fd[MIGRATE_LINKS_MAX];
};

/* For `bytes` of memory: ask the importer on fd (frames numbered from
 * *seq) for links, dial them at `to` (session pid there) and say which
 * joined. Returns 0 with l->n links (possibly none), or -1 with why when
 * the main connection failed. */
int migrate_links_open(int fd, uint32_t *seq, const char *to, uint32_t pid, uint64_t bytes, struct migrate_links *l,
                       char *why, size_t whylen);
/* Each link's MIG_END with its byte count (ok), then every link closed. */
void migrate_links_close(struct migrate_links *l, int ok, const uint64_t *bytes);

/* ---- the importer ---- */

/* MIG_LINKS_QUERY: grants, answered on the session's connection. */
CUresult migrate_links_grant(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl);
/* MIG_LINKS_USED: a reader on each joined link into landing l; a
 * reader's failure also shuts the main connection's reading (main_fd),
 * so that the import stops at once and answers. */
CUresult migrate_links_read(const struct msg_migrate_item *it, struct migrate_landing *l, int main_fd, char *why,
                            size_t wl);
/* Wait for every reader (stop: cut their links first) and close the
 * links; the bytes they landed are added to *bytes (unless NULL). A
 * reader's failure is the landing's (migrate_landing_error). */
void migrate_links_join(int stop, uint64_t *bytes);

#endif
