/* visible_devices.h - a client's CUDA_VISIBLE_DEVICES composed with the
 * GPUs the server exposes (docs/architecture.md, 9.22 Pools), as the list
 * a session hands its driver before it loads.
 *
 * The client's entries are read as the real driver reads its own
 * variable, but against the server's list: an index picks that entry of
 * the server's list, a UUID ("GPU-...", "MIG-...") must be one the
 * server's list names, and the first entry that names nothing the server
 * exposes (or is no entry at all) ends the list. Empty: no devices. With
 * no server list (the server exposes every GPU its driver shows) the
 * client's entries go to the driver as they are, up to the first that is
 * not shaped like one. The driver then renumbers, and NVML follows it.
 *
 * A client of several servers composes its own variable over its device
 * list the same way (src/client/gdev_visible.c), with the devices' UUIDs
 * as the "server" list, so both read the variable with one parser. */
#ifndef SCUDA_COMMON_VISIBLE_DEVICES_H
#define SCUDA_COMMON_VISIBLE_DEVICES_H

#include <stddef.h>

/* The longest entry taken: a MIG name of the older form fits. */
#define VISIBLE_ENTRY_MAX 95
/* The most entries of a list taken as the "server" side (a pool's --gpus,
 * a client's device list); later ones are not seen. */
#define VISIBLE_LIST_MAX 64

/* Whether e (len bytes) is shaped like a CUDA_VISIBLE_DEVICES entry: an
 * index of at most 4 digits, or a "GPU-"/"MIG-" name of letters, digits,
 * '-' and '/'. Nothing more can be checked without the driver. */
int visible_entry_ok(const char *e, size_t len);

/* Compose `client` over `server` (NULL: every GPU) into out (outlen
 * bytes; an entry that does not fit ends the list). Returns how many
 * entries out holds. */
int visible_compose(const char *server, const char *client, char *out, size_t outlen);

/* The same reading of `client` over `list` (the "server" list, never
 * NULL), as positions in `list`: pick[0..n-1], in the client's order, at
 * most max of them. Returns n (0 for an empty value). */
int visible_select(const char *list, const char *client, int *pick, int max);

/* Entry k of the comma-separated `list` into out, or "?" when there is
 * none. */
void visible_entry_at(const char *list, int k, char *out, size_t outlen);

#endif
