/* mem_bw.c - the host's memcpy bandwidth, for reading copy figures.
 *
 * Over loopback both ends of a copy share one host's memory: a plain
 * copy costs the client's send and the session's receive (two memcpys of
 * every byte) and a TLS copy also reads and writes every byte to seal and
 * open it. So the host's aggregate memcpy rate bounds them, and
 * tls_ab.sh prints it beside its table.
 *
 *   mem_bw THREADS...   e.g. mem_bw 1 8 16
 *
 * Each thread copies its own 64 MiB buffer 20 times; the figure is bytes
 * copied (not read plus written) per second, GB/s (1e9). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUF_BYTES (64u << 20)
#define ROUNDS 20
#define MAX_THREADS 256

static volatile char sink; /* keeps each copy from being optimised away */

static void *copy_rounds(void *arg)
{
    (void)arg;
    char *src = malloc(BUF_BYTES), *dst = malloc(BUF_BYTES);
    if (!src || !dst) return (void *)1;
    memset(src, 1, BUF_BYTES);
    memset(dst, 2, BUF_BYTES);
    for (int i = 0; i < ROUNDS; i++) {
        src[i] = (char)i;
        memcpy(dst, src, BUF_BYTES);
        sink += dst[i * 4099];
    }
    free(src);
    free(dst);
    return NULL;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mem_bw THREADS...\n");
        return 2;
    }
    for (int a = 1; a < argc; a++) {
        int n = atoi(argv[a]);
        if (n < 1 || n > MAX_THREADS) return 2;
        pthread_t t[MAX_THREADS];
        double start = now_s();
        for (int i = 0; i < n; i++)
            if (pthread_create(&t[i], NULL, copy_rounds, NULL) != 0) return 1;
        int failed = 0;
        for (int i = 0; i < n; i++) {
            void *rc;
            pthread_join(t[i], &rc);
            failed |= rc != NULL;
        }
        if (failed) return 1;
        printf("memcpy, %d thread(s) (GB/s)\t%.1f\n", n, (double)n * ROUNDS * BUF_BYTES / (now_s() - start) / 1e9);
    }
    return 0;
}
