/* output.h - device printf for a remote client.
 *
 * The driver prints a kernel's printf output to the process's stdout at
 * synchronizing calls. In a session process, stdout and stderr are pipes
 * read by a capture thread; the session sends what was captured to the
 * client before the reply of each synchronizing call, so the text reaches
 * the client's stdout in order with its own output. */
#ifndef SCUDA_SERVER_OUTPUT_H
#define SCUDA_SERVER_OUTPUT_H

struct session;

/* Redirect fd 1 and 2 into capture pipes (fd 1 only in sanitizer builds,
 * output.c). Returns 0 or -1. */
int output_capture_start(void);
/* Send everything captured so far to the client (call with no lock held). */
void output_forward(struct session *s);

#endif
