/* tls_chunks.c - over TLS, copies are striped from BULK_MIN_COPY_TLS
 * (1 MiB) on, in chunks of whole records (src/client/bulk.h).
 *
 * Over TLS: a copy just below 1 MiB goes over the main connection and
 * opens no bulk connection; one of exactly 1 MiB opens the default 8 and
 * is striped; copies at and around the thresholds and the record size
 * (1 MiB +- 1, a record +- 1, odd sizes up to just below the plain
 * threshold, and one above it) are byte-exact
 * both ways, synchronous and on a stream, at odd host and device offsets.
 * Over plain TCP nothing changes: the same 1 MiB and 8 MiB - 1 copies go
 * over the main connection. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "copy_checks.h"
#include "harness.h"

#define KiB (1u << 10)
#define MiB (1u << 20)
/* Device bytes are put and checked in pieces below every striping
 * threshold: over the main connection, a path independent of the one
 * under test. The host source is at an odd address. */
static const struct cc_round_trip how = {.piece = 512u * KiB, .source_offset = 1, .label = ""};

/* Private to the shim (src/client/bulk.c). */
extern int scuda_client_bulk_streams(void);

static void round_trip(size_t n, size_t off, CUstream st, int async, uint32_t seed)
{
    cc_round_trip(&how, n, off, st, async, seed);
}

static int tls_client(void *arg)
{
    (void)arg;
    unsetenv("SCUDA_BULK_STREAMS"); /* the TLS default */
    h_cuda_setup();
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));

    round_trip(1 * MiB - 1, 3, st, 0, 1);
    CHECK(scuda_client_bulk_streams() == 0, "a copy below 1 MiB over TLS opened %d bulk connections",
          scuda_client_bulk_streams());
    round_trip(1 * MiB, 0, st, 0, 3);
    CHECK(scuda_client_bulk_streams() == SCUDA_BULK_STREAMS_TLS_DEFAULT,
          "a 1 MiB copy over TLS: %d bulk connections, expected %d (striped from 1 MiB on)",
          scuda_client_bulk_streams(), SCUDA_BULK_STREAMS_TLS_DEFAULT);
    static const size_t sizes[] = {
        1 * MiB + 1,            /* one byte in a chunk of its own */
        1 * MiB + 128 * KiB - 1, /* a record short of a whole one */
        1 * MiB + 128 * KiB + 1,
        2 * MiB + 12345,
        3 * MiB + 7,            /* chunks of two records */
        8 * MiB - 1,            /* just below the plain threshold */
        9 * MiB + 4097,         /* above it: chunks of several records */
    };
    static const size_t offs[] = {1, 4097, 3, 65536 + 5, 7, 1, 12345};
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        round_trip(sizes[i], offs[i], st, 0, 10 * i + 5);
        round_trip(sizes[i], offs[(i + 1) % 7], st, 1, 10 * i + 7);
    }
    CHECK(scuda_client_bulk_streams() == SCUDA_BULK_STREAMS_TLS_DEFAULT, "striping ended during the copies");
    CU(cuStreamDestroy_v2(st));
    return 0;
}

static int plain_client(void *arg)
{
    (void)arg;
    unsetenv("SCUDA_BULK_STREAMS");
    h_cuda_setup();
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    round_trip(1 * MiB, 1, st, 0, 21);
    round_trip(8 * MiB - 1, 3, st, 1, 23);
    CHECK(scuda_client_bulk_streams() == 0, "plain TCP: a copy below 8 MiB opened %d bulk connections",
          scuda_client_bulk_streams());
    round_trip(8 * MiB, 5, st, 0, 25);
    CHECK(scuda_client_bulk_streams() == SCUDA_BULK_STREAMS_DEFAULT, "plain TCP: an 8 MiB copy: %d bulk connections",
          scuda_client_bulk_streams());
    CU(cuStreamDestroy_v2(st));
    return 0;
}

int main(void)
{
    h_begin("tls_chunks", 170);
    struct h_server srv;
    struct h_server_opts tls = {.tls = 1};
    h_server_start(&srv, "tls", &tls);
    h_wait_ok(h_spawn(tls_client, NULL, 120, -1, -1), 120000, "copies over TLS");
    printf("ok over TLS: striped from 1 MiB on, byte-exact at the thresholds and odd sizes\n");
    CHECK(h_server_log_count(&srv, "striping ends") == 0, "striping ended in the session");
    h_server_stop(&srv);

    unsetenv("E2E_TLS"); /* the plain case is plain under E2E_TLS=1 too */
    unsetenv("SCUDA_TLS");
    unsetenv("SCUDA_TLS_FINGERPRINT");
    h_server_start(&srv, "plain", NULL);
    h_wait_ok(h_spawn(plain_client, NULL, 45, -1, -1), 45000, "copies over plain TCP");
    printf("ok over plain TCP: copies below 8 MiB over the main connection, as before\n");
    h_server_stop(&srv);
    printf("PASS tls_chunks\n");
    return 0;
}
