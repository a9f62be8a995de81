/* metrics.h - what the server's HTTP endpoint answers (metrics_http.h):
 * the Prometheus text format at /metrics and the session list `scuda ps`
 * reads at /sessions (JSON). Built in the parent from its own records
 * and the sessions' counters pages (session_stats.h). */
#ifndef SCUDA_SERVER_METRICS_H
#define SCUDA_SERVER_METRICS_H

#include <stddef.h>

/* A growing text buffer; on out of memory it stops growing and says so
 * (failed), and the caller answers 500. */
struct metrics_buf {
    char *text;
    size_t len, cap;
    int failed;
};

void metrics_buf_free(struct metrics_buf *b);

/* The whole /metrics page into b. */
void metrics_render_prometheus(struct metrics_buf *b);
/* The sessions as a JSON array into b (`scuda ps`). */
void metrics_render_sessions_json(struct metrics_buf *b);

#endif
