/* migrate_in.h - a session that imports another server's session instead
 * of serving a fresh client (migrate_in.c; docs/architecture.md, 9.17). */
#ifndef SCUDA_SERVER_MIGRATE_IN_H
#define SCUDA_SERVER_MIGRATE_IN_H

struct session;

/* In the forked child of a HELLO_MIGRATE_IN client, before session_main:
 * the session imports. */
void migrate_in_expect(void);
int migrate_in_expected(void);

/* After the welcome: read, replay and check the exporter's items, answer
 * with the verdict, and take the client's connection state (the switch).
 * Returns when the session waits for its client's resume
 * (migrate_switch_in_await); on any failure the process ends. */
void migrate_in_run(struct session *s);

#endif
