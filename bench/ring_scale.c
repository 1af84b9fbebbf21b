/* SPDX-License-Identifier: Apache-2.0 */
/* The ring at the public network's history size (issue 41, item 3; bench/cell12-history.sh runs
 * it): a ring of N real-sized ledgers written through the ring's own put (the fast path: no
 * stream, no pacing), then what its size costs.
 *
 *   ring_scale fill DIR N        puts ledgers 1..N into a ring of retention N: sizes cycle through
 *                                64, 96, 128, 160, 192, 256, 320 and 384 KiB (200 KiB a ledger on
 *                                average), the synthetic source's compressible payload, cut in
 *                                256 KiB chunks stored as zstd (level 1) frames, as the live flow
 *                                stores them; the run identity is the daemon's for
 *                                `--source synthetic --synthetic-size 262144 --synthetic-compressible`
 *                                so the daemon continues the ring. Prints the put's CPU (the putting
 *                                thread's user + system time inside cs_ring_put, getrusage
 *                                RUSAGE_THREAD; making the bytes and compressing them is not counted)
 *                                per ledger over the 1,000 puts ending at 1k, 10k, 100k and N.
 *   ring_scale open DIR N        opens the ring (retention N) and carries out the open's findings
 *                                (the claim), then prints open_ms, claim_ms, the RSS the open added
 *                                and the descriptors it holds.
 *   ring_scale put DIR N COUNT   opens the full ring and puts COUNT more ledgers, each evicting the
 *                                oldest: put CPU per ledger with the ring at its size (eviction and
 *                                a segment's removal every 1,024 included).
 * Output: one line of key=value pairs per measurement. */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <time.h>
#include <xxhash.h>
#include <zstd.h>

#include "common/synthetic.h"
#include "store/ring.h"
#include "wire/wire.h"

#define CHUNK 262144u
#define IDENTITY "source=synthetic size=262144 compressible=true"

static const uint32_t k_sizes_kib[] = {64, 96, 128, 160, 192, 256, 320, 384};

static double thread_cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static long status_kib(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0)
            v = strtol(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = -1; /* the directory's own */
    while (d && readdir(d))
        n++;
    if (d)
        closedir(d);
    return n - 2; /* . and .. */
}

static cs_ring *open_ring(const char *dir, int64_t n)
{
    cs_ring *r;
    cs_err err = {0};
    if (cs_ring_open(&r, dir, n, &err) != 0) {
        fprintf(stderr, "ring_scale: %s\n", err.msg);
        exit(1);
    }
    return r;
}

static void claim(cs_ring *r, uint32_t first)
{
    cs_err err = {0};
    if (cs_ring_claim(r, IDENTITY, first, &err) != 0) {
        fprintf(stderr, "ring_scale: %s\n", err.msg);
        exit(1);
    }
}

/* One ledger's bytes, messages and record, reused from put to put. */
typedef struct putter {
    uint8_t *raw;
    uint8_t *msgs[8]; /* 384 KiB at most: two chunks */
    struct iovec parts[8], chunks[8];
    ZSTD_CCtx *z;
    double put_ms; /* the putting thread's CPU inside cs_ring_put, so far */
} putter;

static void put_one(cs_ring *r, putter *p, uint32_t seq)
{
    size_t len = (size_t)k_sizes_kib[seq % (sizeof k_sizes_kib / sizeof k_sizes_kib[0])] * 1024;
    cs_synthetic_fill(p->raw, len, seq, true);
    uint32_t n = (uint32_t)((len + CHUNK - 1) / CHUNK);
    for (uint32_t k = 0; k < n; k++) {
        size_t off = (size_t)k * CHUNK, l = len - off < CHUNK ? len - off : CHUNK;
        p->parts[k] = (struct iovec){p->raw + off, l};
        size_t z = ZSTD_compressCCtx(p->z, p->msgs[k] + CS_WIRE_CHUNK_HEADER_LEN, ZSTD_compressBound(CHUNK),
                                     p->raw + off, l, 1);
        bool zstd = !ZSTD_isError(z) && z < l;
        if (!zstd)
            memcpy(p->msgs[k] + CS_WIRE_CHUNK_HEADER_LEN, p->raw + off, z = l);
        cs_wire_put_chunk_header(p->msgs[k], seq, k, zstd ? 1 : 0);
        p->chunks[k] = (struct iovec){p->msgs[k], CS_WIRE_CHUNK_HEADER_LEN + z};
    }
    cs_ledger_record rec = {.len = len, .chunks = n, .chunk_size = CHUNK, .xxh64 = XXH64(p->raw, len, 0)};
    bool reset;
    cs_err err = {0};
    double t0 = thread_cpu_ms();
    int rc = cs_ring_put(r, seq, p->parts, n, p->chunks, n, &rec, &reset, &err);
    p->put_ms += thread_cpu_ms() - t0;
    if (rc != 0 || reset) {
        fprintf(stderr, "ring_scale: put %u: %s\n", seq, reset ? "the ring reset" : err.msg);
        exit(1);
    }
}

static void putter_init(putter *p)
{
    p->raw = aligned_alloc(4096, 8 * CHUNK);
    p->z = ZSTD_createCCtx();
    for (int k = 0; k < 8; k++)
        p->msgs[k] = malloc(CS_WIRE_CHUNK_HEADER_LEN + ZSTD_compressBound(CHUNK));
    if (!p->raw || !p->z) {
        fprintf(stderr, "ring_scale: out of memory\n");
        exit(1);
    }
}

/* Whether done (puts so far) ends a measured window: 1k, 10k, 100k, or the last. */
static bool is_mark(uint64_t done, uint64_t total)
{
    return done == 1000 || done == 10000 || done == 100000 || done == total;
}

/* Puts [from, to], printing the put CPU per ledger over the 1,000 puts that end at each mark. */
static void put_range(cs_ring *r, putter *p, uint32_t from, uint32_t to, const char *what)
{
    uint64_t total = (uint64_t)to - from + 1;
    double t0 = 0, w0 = now_ms();
    for (uint64_t done = 1; done <= total; done++) {
        if (done + 999 <= total && is_mark(done + 999, total))
            t0 = p->put_ms;
        put_one(r, p, (uint32_t)(from + done - 1));
        if (done >= 1000 && is_mark(done, total)) {
            printf("%s ledgers=%llu put_cpu_ms_per_ledger=%.3f elapsed_s=%.1f\n", what, (unsigned long long)done,
                   (p->put_ms - t0) / 1000, (now_ms() - w0) / 1e3);
            fflush(stdout);
        }
    }
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: ring_scale fill DIR N | open DIR N | put DIR N COUNT\n");
        return 2;
    }
    const char *cmd = argv[1], *dir = argv[2];
    int64_t n = strtoll(argv[3], NULL, 10);
    if (n < 1 || n > UINT32_MAX / 2) {
        fprintf(stderr, "ring_scale: N must be 1 to %u\n", UINT32_MAX / 2);
        return 2;
    }
    putter p = {0};
    if (strcmp(cmd, "fill") == 0) {
        putter_init(&p);
        cs_ring *r = open_ring(dir, n);
        claim(r, 1);
        cs_ring_take_put_thread(r);
        put_range(r, &p, 1, (uint32_t)n, "fill");
        printf("fill bytes=%llu frames_bytes=%llu\n", (unsigned long long)cs_ring_bytes(r),
               (unsigned long long)cs_ring_frames_bytes(r));
        cs_ring_close(r);
        return 0;
    }
    if (strcmp(cmd, "open") == 0) {
        long rss0 = status_kib("VmRSS:");
        int fd0 = open_fds();
        double t0 = now_ms();
        cs_ring *r = open_ring(dir, n);
        double t1 = now_ms();
        uint32_t oldest, latest;
        cs_ring_bounds(r, &oldest, &latest);
        claim(r, latest + 1);
        double t2 = now_ms();
        printf("open ledgers=%u open_ms=%.0f claim_ms=%.0f rss_added_kib=%ld fds_held=%d oldest=%u latest=%u\n",
               latest - oldest + 1, t1 - t0, t2 - t1, status_kib("VmRSS:") - rss0, open_fds() - fd0, oldest, latest);
        cs_ring_close(r);
        return 0;
    }
    if (strcmp(cmd, "put") == 0 && argc >= 5) {
        putter_init(&p);
        long count = strtol(argv[4], NULL, 10);
        cs_ring *r = open_ring(dir, n);
        uint32_t oldest, latest;
        cs_ring_bounds(r, &oldest, &latest);
        claim(r, latest + 1);
        cs_ring_take_put_thread(r);
        put_range(r, &p, latest + 1, latest + (uint32_t)count, "put_full");
        cs_ring_bounds(r, &oldest, &latest);
        printf("put_full oldest=%u latest=%u rss_kib=%ld\n", oldest, latest, status_kib("VmRSS:"));
        cs_ring_close(r);
        return 0;
    }
    fprintf(stderr, "ring_scale: unknown command %s\n", cmd);
    return 2;
}
