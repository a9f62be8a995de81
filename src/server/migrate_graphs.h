/* migrate_graphs.h - graphs and executable graphs in a live migration
 * (docs/architecture.md, 9.17 Live migration, "Graphs").
 *
 * A graph is described by the driver's own introspection when the session
 * moves (its nodes in the driver's order, each node's type, dependencies
 * and parameters, handles as ids) and rebuilt node by node on the other
 * server under the same graph and node ids. An executable graph cannot be
 * asked what it holds, so its graph is described when it is instantiated
 * (a snapshot) and the other server instantiates again, with the same
 * flags, from the rebuilt graph when that is unchanged, else from the
 * snapshot. The changes made to an executable graph after its
 * instantiation (kernel, memset and memcpy parameters, enabling, updates)
 * are noted as they happen and replayed there in order; any other change
 * (a host node's, a child graph's, an event's set) refuses the move. */
#ifndef SCUDA_SERVER_MIGRATE_GRAPHS_H
#define SCUDA_SERVER_MIGRATE_GRAPHS_H

#include <stddef.h>

#include "migrate_state.h"

struct session;
struct migrate_items;

/* Wrap t's instantiation, executable-graph changes and destruction to
 * keep each executable graph's snapshot and changes. Once, at session
 * start. */
void migrate_graphs_install(struct driver_table *t);
/* Append why the session's graphs cannot move (node kinds, executable
 * graphs changed by a call not carried), nothing when they can. */
void migrate_graphs_explain(char *why, size_t whylen);
/* MIG_GRAPH and MIG_GRAPH_EXEC items, after every object they name.
 * Returns 0, or -1 with why. Their data stays valid until the next call. */
int migrate_graphs_items(struct migrate_items *l, char *why, size_t whylen);
/* Feed every graph's shape (ids, node ids and types) to the digest. */
void migrate_graphs_digest(struct migrate_digest *d);
/* Replay one MIG_GRAPH or MIG_GRAPH_EXEC item. */
CUresult migrate_graphs_replay(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl);

#endif
