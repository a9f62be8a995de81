/* callback_table.c - see callback_table.h. */
#include <stdlib.h>

#include "callback_table.h"
#include "handles.h"

int callback_table_add(struct idmap *table, callback_fn fn, void *user, uint64_t *id_out)
{
    struct callback_entry *e = malloc(sizeof *e);
    if (!e) return -1;
    e->fn = fn, e->user = user;
    uint64_t id = handle_new_id();
    if (idmap_put(table, id, 0, e) != 0) {
        free(e);
        return -1;
    }
    *id_out = id;
    return 0;
}

CUresult callback_table_register(struct idmap *table, uint64_t id, rpc_call *c)
{
    CUresult r = rpc_sync(c);
    rpc_end(c);
    if (r != CUDA_SUCCESS) callback_table_remove(table, id);
    return r;
}

void callback_table_remove(struct idmap *table, uint64_t id) { free(idmap_del(table, id)); }

int callback_table_find(struct idmap *table, uint64_t id, struct callback_entry *out)
{
    void *v = NULL;
    if (!idmap_get(table, id, NULL, &v) || !v) return 0;
    *out = *(struct callback_entry *)v;
    return 1;
}
