/* ipc_registry.c - see ipc_registry.h. One robust process-shared mutex
 * guards the table: a session that dies holding it (a crash in a driver
 * call cannot happen under it, but a kill can) leaves it recoverable. */
#define _GNU_SOURCE
#include "ipc_registry.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

struct ipc_table {
    pthread_mutex_t lock;
    struct ipc_export exports[IPC_EXPORTS_MAX];
    bool used[IPC_EXPORTS_MAX];
    pid_t sessions[IPC_SESSIONS_MAX];
    char users[IPC_SESSIONS_MAX][SCUDA_IDENTITY_MAX];
};

static struct ipc_table *table;

int ipc_registry_create(void)
{
    void *m = mmap(NULL, sizeof *table, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return -1;
    table = m;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&table->lock, &a);
    pthread_mutexattr_destroy(&a);
    return 0;
}

bool ipc_registry_ready(void) { return table != NULL; }

static void lock(void)
{
    if (pthread_mutex_lock(&table->lock) == EOWNERDEAD) pthread_mutex_consistent(&table->lock);
}

static void unlock(void) { pthread_mutex_unlock(&table->lock); }

/* A session that exited leaves its entries behind; they are free again. */
static bool gone(pid_t pid) { return pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH); }

int ipc_registry_join(const char *user)
{
    if (!table) return -1;
    int rc = -1;
    lock();
    for (size_t i = 0; i < IPC_SESSIONS_MAX && rc != 0; i++)
        if (table->sessions[i] == getpid() || gone(table->sessions[i])) {
            table->sessions[i] = getpid();
            snprintf(table->users[i], SCUDA_IDENTITY_MAX, "%s", user);
            rc = 0;
        }
    unlock();
    return rc;
}

int ipc_registry_add(struct ipc_export *e, uint32_t *slot)
{
    if (!table) return -1;
    if (getrandom(e->nonce, sizeof e->nonce, 0) != (ssize_t)sizeof e->nonce) return -1;
    e->pid = getpid();
    int rc = -1;
    lock();
    for (uint32_t i = 0; i < IPC_EXPORTS_MAX && rc != 0; i++)
        if (!table->used[i] || gone(table->exports[i].pid)) {
            table->exports[i] = *e;
            table->used[i] = true;
            *slot = i;
            rc = 0;
        }
    unlock();
    return rc;
}

/* In constant time: a client could otherwise guess a nonce byte by byte. */
static bool same_nonce(const uint8_t *a, const uint8_t *b)
{
    uint8_t d = 0;
    for (size_t i = 0; i < IPC_NONCE_BYTES; i++) d |= (uint8_t)(a[i] ^ b[i]);
    return d == 0;
}

bool ipc_registry_find(uint32_t slot, const uint8_t nonce[IPC_NONCE_BYTES], struct ipc_export *e)
{
    if (!table || slot >= IPC_EXPORTS_MAX) return false;
    lock();
    bool ok = table->used[slot] && same_nonce(table->exports[slot].nonce, nonce) &&
              !gone(table->exports[slot].pid);
    if (ok) *e = table->exports[slot];
    unlock();
    return ok;
}

bool ipc_registry_user_of(pid_t pid, char user[SCUDA_IDENTITY_MAX])
{
    if (!table || pid <= 0) return false;
    bool ok = false;
    lock();
    for (size_t i = 0; i < IPC_SESSIONS_MAX && !ok; i++)
        if (table->sessions[i] == pid) {
            memcpy(user, table->users[i], SCUDA_IDENTITY_MAX);
            ok = true;
        }
    unlock();
    return ok;
}
