/* tls_chunks.c - over TLS, copies are striped from BULK_MIN_COPY_TLS
 * (1 MiB) on, in chunks of whole records (src/client/bulk.h).
 *
 * Over TLS: a copy just below 1 MiB goes over the main connection and
 * opens no bulk connection; one of exactly 1 MiB opens the default 8 and
 * is striped; copies at and around the thresholds and the record size
 * (1 MiB +- 1, a record +- 1, odd sizes up to just below the plain
 * threshold, and one above it) are byte-exact
 * both ways, synchronous and on a stream, at odd host and device offsets.
 * A copy too small to give every connection 512 KiB uses n / 512 KiB of
 * them (BULK_SHARE_MIN_TLS): 2 at 1 MiB, 3 just below 2 MiB, 7 just below
 * 4 MiB, all 8 from 4 MiB on, also with SCUDA_BULK_STREAMS=4 (2 at
 * 1 MiB, 4 from 2 MiB), each way, byte-exact.
 * Copies over TLS go between the device and the session's buffers in
 * pieces (src/server/bulk.c), as the session's debug lines show: 16 MiB
 * in 64 pieces of 256 KiB, 4 MiB chunks (2 connections) in 8 of 512 KiB
 * each, 3 MiB + 12345 in 15; to the host each piece is sent as one, the
 * first piece of every connection's chunk queued before any second
 * piece; both ways byte-exact; a copy whose DMA fails in the middle
 * fails alone, and striping goes on.
 * Over plain TCP nothing changes: the same 1 MiB and 8 MiB - 1 copies go
 * over the main connection, and an 8 MiB one is not copied in pieces,
 * unless the server's SCUDA_BULK_PIECE_KIB asks for them (128: 64 pieces
 * each way, byte-exact). */
#define _GNU_SOURCE
#include <dlfcn.h>
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

/* Connections the last striped copy used (src/client/bulk.c); looked up,
 * so a shim without it fails the test rather than its build. */
static int last_used(void)
{
    int (*f)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "scuda_client_bulk_last_used");
    CHECK(f != NULL, "the shim has no scuda_client_bulk_last_used: connections per copy cannot be checked");
    return f();
}

/* The connections each copy of the round trip under way must use. */
static int expect_used;

static void check_used(const char *what)
{
    CHECK(last_used() == expect_used, "%s used %d bulk connections, expected %d", what, last_used(), expect_used);
}

static const struct cc_round_trip how_counted = {.piece = 512u * KiB, .source_offset = 1, .label = "", .checked = check_used};

static void round_trip_using(size_t n, size_t off, CUstream st, int async, uint32_t seed, int used)
{
    expect_used = used;
    cc_round_trip(&how_counted, n, off, st, async, seed);
}

static void round_trip(size_t n, size_t off, CUstream st, int async, uint32_t seed)
{
    cc_round_trip(&how, n, off, st, async, seed);
}

/* Sizes around the connection-count steps, and the connections each
 * uses with k connections open. */
struct step {
    size_t n;
    int used4, used8;
};
static const struct step steps[] = {
    {1 * MiB, 2, 2},
    {1 * MiB + 1, 2, 2},
    {1 * MiB + 512 * KiB - 1, 2, 2},
    {1 * MiB + 512 * KiB, 3, 3},
    {2 * MiB - 1, 3, 3},
    {2 * MiB, 4, 4},
    {3 * MiB + 12345, 4, 5}, /* chunks of whole records: 5 of 640 KiB */
    {4 * MiB - 1, 4, 7},
    {4 * MiB, 4, 8},
};

static void check_steps(CUstream st, int k)
{
    for (unsigned i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        int used = k == 8 ? steps[i].used8 : steps[i].used4;
        round_trip_using(steps[i].n, 2 * i + 1, st, 0, 100 + 10 * i, used);
        round_trip_using(steps[i].n, 4096 * i + 5, st, 1, 105 + 10 * i, used);
    }
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
    check_steps(st, SCUDA_BULK_STREAMS_TLS_DEFAULT);
    CHECK(scuda_client_bulk_streams() == SCUDA_BULK_STREAMS_TLS_DEFAULT, "striping ended during the copies");
    CU(cuStreamDestroy_v2(st));
    return 0;
}

/* SCUDA_BULK_STREAMS=4: the same steps, capped at 4. */
static int tls4_client(void *arg)
{
    (void)arg;
    setenv("SCUDA_BULK_STREAMS", "4", 1);
    h_cuda_setup();
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    check_steps(st, 4);
    CHECK(scuda_client_bulk_streams() == 4, "striping ended during the copies (4 connections)");
    CU(cuStreamDestroy_v2(st));
    return 0;
}

/* Device-to-host copies in pieces, and one whose DMA fails midway. */
static int pieces_client(void *arg)
{
    (void)arg;
    unsetenv("SCUDA_BULK_STREAMS");
    h_cuda_setup();
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    round_trip_using(16 * MiB, 3, st, 0, 31, 8);
    round_trip_using(3 * MiB + 12345, 7, st, 0, 35, 5);

    /* 16 MiB from an allocation of 8 MiB + 300 KiB: a DMA runs past its
     * end after the first pieces went, and the chunks still open end
     * there (their connections send zeros for the rest). */
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 8 * MiB + 300 * KiB));
    uint8_t *out = malloc(16 * MiB);
    CHECK(out);
    CUresult r = cuMemcpyDtoH_v2(out, d, 16 * MiB);
    CHECK(r != CUDA_SUCCESS, "a 16 MiB copy from 8 MiB + 300 KiB of device memory succeeded");
    CU(cuMemFree_v2(d));
    free(out);
    round_trip_using(16 * MiB, 9, st, 1, 37, 8);
    CHECK(scuda_client_bulk_streams() == SCUDA_BULK_STREAMS_TLS_DEFAULT, "striping ended after the failed copy");
    CU(cuStreamDestroy_v2(st));
    return 0;
}

/* Two connections: 16 MiB goes in 4 MiB chunks, in 8 pieces each. */
static int pieces2_client(void *arg)
{
    (void)arg;
    setenv("SCUDA_BULK_STREAMS", "2", 1);
    h_cuda_setup();
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    round_trip_using(16 * MiB + 4097, 11, st, 1, 41, 2);
    CU(cuStreamDestroy_v2(st));
    return 0;
}

/* The session's debug line for the host-to-device copy of n bytes says
 * its DMAs went in `pieces` pieces of `kib` KiB. */
static void expect_landed(const char *log, size_t n, unsigned chunks, unsigned pieces, unsigned kib)
{
    char want[256];
    snprintf(want, sizeof want, "to the device: %zu bytes in %u chunks, %u pieces of %u KiB landed\n", n, chunks,
             pieces, kib);
    CHECK(strstr(log, want) != NULL, "no session line \"%s\" for the copy of %zu bytes to the device", want, n);
}

/* The session's debug line for the device-to-host copy of n bytes says
 * it went in `pieces` pieces of `kib` KiB, each sent, the first of every
 * connection's chunk first (`first`). */
static void expect_pieces(const char *log, size_t n, unsigned chunks, unsigned pieces, unsigned kib, const char *first)
{
    char want[256];
    snprintf(want, sizeof want, ": %zu bytes in %u chunks, %u pieces of %u KiB queued, %u sent; first pieces from "
             "chunks %s\n", n, chunks, pieces, kib, pieces, first);
    CHECK(strstr(log, want) != NULL, "no session line \"%s\" for the copy of %zu bytes from the device", want, n);
}

static void check_pieces(void)
{
    struct h_server srv;
    struct h_server_opts tls = {.tls = 1};
    setenv("E2E_SERVER_LOG", "debug", 1);
    h_server_start(&srv, "pieces", &tls);
    unsetenv("E2E_SERVER_LOG");
    h_wait_ok(h_spawn(pieces_client, NULL, 90, -1, -1), 90000, "copies in pieces");
    h_wait_ok(h_spawn(pieces2_client, NULL, 60, -1, -1), 60000, "copies in pieces, 2 connections");
    char *log = h_server_log(&srv);
    const char *all8 = "0 1 2 3 4 5 6 7";
    /* Each size twice (there and back is a D2H, the check reads back
     * below the threshold). */
    expect_pieces(log, 16 * MiB, 16, 64, 256, all8);
    /* 4 chunks of 4 MiB (the largest) in 8 pieces of 512 KiB, and one of
     * 4097 bytes. */
    expect_pieces(log, 16 * MiB + 4097, 5, 33, 512, "0 1");
    expect_pieces(log, 3 * MiB + 12345, 5, 15, 256, "0 1 2 3 4");
    expect_landed(log, 16 * MiB, 16, 64, 256);
    expect_landed(log, 16 * MiB + 4097, 5, 33, 512);
    expect_landed(log, 3 * MiB + 12345, 5, 15, 256);
    CHECK(h_server_log_count(&srv, "striping ends") == 0, "striping ended in the session");
    free(log);
    h_server_stop(&srv);
    printf("ok over TLS: copies in pieces both ways, to the host the first of every chunk first; a failed one "
           "fails alone\n");
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
    /* The pieces are what this checks: a compressed chunk goes whole, and
     * auto would compress whenever a slow build measures loopback below
     * its bound (e2e/compress checks compression over TLS). */
    setenv("SCUDA_COMPRESS", "off", 1);
    struct h_server srv;
    struct h_server_opts tls = {.tls = 1};
    h_server_start(&srv, "tls", &tls);
    h_wait_ok(h_spawn(tls_client, NULL, 120, -1, -1), 120000, "copies over TLS");
    printf("ok over TLS: striped from 1 MiB on, byte-exact at the thresholds and odd sizes\n");
    h_wait_ok(h_spawn(tls4_client, NULL, 60, -1, -1), 60000, "copies over TLS, 4 connections");
    printf("ok over TLS with 4 connections: n / 512 KiB of them per copy, at most 4\n");
    CHECK(h_server_log_count(&srv, "striping ends") == 0, "striping ended in the session");
    h_server_stop(&srv);
    check_pieces();

    unsetenv("E2E_TLS"); /* the plain case is plain under E2E_TLS=1 too */
    unsetenv("SCUDA_TLS");
    unsetenv("SCUDA_TLS_FINGERPRINT");
    setenv("E2E_SERVER_LOG", "debug", 1);
    h_server_start(&srv, "plain", NULL);
    unsetenv("E2E_SERVER_LOG");
    h_wait_ok(h_spawn(plain_client, NULL, 45, -1, -1), 45000, "copies over plain TCP");
    CHECK(h_server_log_count(&srv, " pieces of ") == 0, "plain TCP: a copy went in pieces");
    printf("ok over plain TCP: copies below 8 MiB over the main connection, as before\n");
    h_server_stop(&srv);

    setenv("E2E_SERVER_LOG", "debug", 1);
    setenv("SCUDA_BULK_PIECE_KIB", "128", 1); /* the server's */
    h_server_start(&srv, "plain_pieces", NULL);
    unsetenv("E2E_SERVER_LOG");
    unsetenv("SCUDA_BULK_PIECE_KIB");
    h_wait_ok(h_spawn(plain_client, NULL, 45, -1, -1), 45000, "copies over plain TCP in pieces of 128 KiB");
    char *log = h_server_log(&srv);
    expect_pieces(log, 8 * MiB, 8, 64, 128, "0 1 2 3");
    expect_landed(log, 8 * MiB, 8, 64, 128);
    free(log);
    printf("ok over plain TCP with SCUDA_BULK_PIECE_KIB=128: in pieces of 128 KiB both ways\n");
    h_server_stop(&srv);
    printf("PASS tls_chunks\n");
    return 0;
}
