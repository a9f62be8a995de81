/* many_clients.c - 32 client processes at once on one server.
 *
 * Each connects and waits until all 32 sessions exist, then allocates,
 * copies, launches fill_u32 and vec_add, and checks every result
 * (workload_check, with a per-process value so that one session's memory
 * showing up in another would fail). All must pass, there must be 32
 * distinct session processes, and none may die from a signal. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "workload.h"

#define CLIENTS 32

static int go[2];

static int client(void *arg)
{
    (void)arg;
    close(go[1]); /* EOF on go[0] once the test closes its end */
    h_cuda_setup();
    char c;
    CHECK(read(go[0], &c, 1) == 0, "go pipe"); /* EOF = go */
    workload_check();
    return 0;
}

int main(void)
{
    h_begin("many_clients", 85);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    CHECK(pipe(go) == 0);
    pid_t pids[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) pids[i] = h_spawn(client, NULL, 75, -1, -1);
    close(go[0]);
    CHECK(h_wait_sessions(&srv, CLIENTS, 30000), "not all %d clients got a session", CLIENTS);
    uint64_t t0 = h_now_ms();
    close(go[1]);
    for (int i = 0; i < CLIENTS; i++) {
        char what[64];
        snprintf(what, sizeof what, "client %d of %d", i + 1, CLIENTS);
        h_wait_ok(pids[i], 60000, what);
    }
    printf("ok %d concurrent clients passed in %llu ms\n", CLIENTS, (unsigned long long)(h_now_ms() - t0));
    pid_t sessions[CLIENTS + 1];
    int n = h_server_sessions(&srv, sessions, CLIENTS + 1);
    CHECK(n == CLIENTS, "%d sessions for %d clients", n, CLIENTS);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) CHECK(sessions[i] != sessions[j], "two clients shared session %d", (int)sessions[i]);
    h_sleep_ms(500);
    h_server_stop(&srv);
    printf("PASS many_clients\n");
    return 0;
}
