/* SPDX-License-Identifier: Apache-2.0 */
/* The ring write's CPU per ledger, by write strategy: what the cs-ring thread pays to put a ledger's
 * chunks into a file, measured on the writing thread itself (getrusage RUSAGE_THREAD: user + system
 * time, so robust to other load on the box, unlike wall time).
 *
 * It reproduces the ring's write pattern (src/store/ringput.c): per ledger a new file, one writev of
 * the chunk payloads (reused buffers, as the chunk pool gives them), close, and the ledger that
 * falls out of retention unlinked. Strategies:
 *   buffered   what the ring does: page-cache writev, the kernel's flusher writes back later
 *   sfr        buffered, then sync_file_range(SYNC_FILE_RANGE_WRITE): write-back starts at once, so
 *              dirty pages never pile up to the dirty ratio (the cost moves from the flusher to here)
 *   sfr-drop   sfr, and posix_fadvise(DONTNEED) on the ledger `keep` behind the newest (written
 *              back by then), so the ring keeps only its newest `keep` ledgers in the page cache
 *   direct     O_DIRECT from 4096-aligned buffers (no page-cache copy; the write waits for the disk)
 *
 * Usage: ring_write_cost DIR STRATEGY LEDGERS [LEDGER_BYTES [CHUNK [KEEP [RETAIN [PACE_MS]]]]]
 * Defaults: the gate shape, 14.5 MiB in 256 KiB chunks, keep 8, retain 64, unpaced (PACE_MS 0; the
 * live ring writes one ledger per 600 ms and sleeps between them). Prints one line:
 *   strategy=… ledgers=… bytes=… cpu_ms_per_ledger=… sys_ms_per_ledger=… p50_ms=… max_ms=… wall_ms_per_ledger=…
 * (getrusage has tick granularity on some kernels: trust the per-run mean over p50 and max.)
 * Wall time is printed for completeness only: it depends on the disk and on everyone else. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define ALIGN 4096

static double tv_ms(struct timeval t)
{
    return (double)t.tv_sec * 1e3 + (double)t.tv_usec / 1e3;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what)
{
    fprintf(stderr, "ring_write_cost: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void name_for(char *out, size_t cap, const char *dir, unsigned seq)
{
    snprintf(out, cap, "%s/ledger-%010u", dir, seq);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: ring_write_cost DIR buffered|sfr|sfr-drop|direct LEDGERS [LEDGER_BYTES [CHUNK [KEEP [RETAIN "
                        "[PACE_MS]]]]]\n");
        return 2;
    }
    const char *dir = argv[1], *mode = argv[2];
    long ledgers = strtol(argv[3], NULL, 10);
    size_t bytes = argc > 4 ? strtoul(argv[4], NULL, 10) : (size_t)(14.5 * (1 << 20));
    size_t chunk = argc > 5 ? strtoul(argv[5], NULL, 10) : 256 << 10;
    long keep = argc > 6 ? strtol(argv[6], NULL, 10) : 8;
    long retain = argc > 7 ? strtol(argv[7], NULL, 10) : 64;
    long pace_ms = argc > 8 ? strtol(argv[8], NULL, 10) : 0;
    int direct = strcmp(mode, "direct") == 0;
    int sfr = strncmp(mode, "sfr", 3) == 0;
    int drop = strcmp(mode, "sfr-drop") == 0;
    if (!direct && !sfr && strcmp(mode, "buffered") != 0) {
        fprintf(stderr, "ring_write_cost: unknown strategy %s\n", mode);
        return 2;
    }
    if (ledgers < 1 || chunk == 0 || chunk % ALIGN || keep < 1 || retain < keep) {
        fprintf(stderr, "ring_write_cost: bad shape (chunk must be a multiple of %d)\n", ALIGN);
        return 2;
    }
    size_t nchunks = (bytes + chunk - 1) / chunk;
    struct iovec *iov = calloc(nchunks, sizeof *iov);
    for (size_t i = 0; i < nchunks; i++) {
        void *p;
        if (posix_memalign(&p, ALIGN, chunk) != 0)
            die("alloc");
        memset(p, (int)(i * 37 + 1), chunk);
        size_t len = i + 1 < nchunks ? chunk : bytes - i * chunk;
        /* O_DIRECT writes whole blocks: the tail is padded and the file cut back afterwards. */
        iov[i].iov_base = p;
        iov[i].iov_len = direct ? (len + ALIGN - 1) / ALIGN * ALIGN : len;
    }
    struct rusage r0, r1, rl;
    double *per = calloc((size_t)ledgers, sizeof *per);
    double w0 = now_ms();
    getrusage(RUSAGE_THREAD, &r0);
    rl = r0;
    char name[4096];
    for (long s = 1; s <= ledgers; s++) {
        name_for(name, sizeof name, dir, (unsigned)s);
        int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (direct ? O_DIRECT : 0), 0644);
        if (fd < 0)
            die("open");
        for (size_t i = 0, off = 0; i < nchunks;) {
            int cnt = (int)(nchunks - i > 64 ? 64 : nchunks - i);
            ssize_t w = writev(fd, iov + i, cnt);
            if (w < 0)
                die("writev");
            size_t left = (size_t)w; /* partial writes are rare; resume per whole iovec */
            while (left && i < nchunks && left >= iov[i].iov_len - off) {
                left -= iov[i].iov_len - off;
                off = 0;
                i++;
            }
            if (left)
                die("partial writev mid-chunk");
        }
        if (direct && ftruncate(fd, (off_t)bytes) != 0)
            die("ftruncate");
        if (sfr && sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE) != 0)
            die("sync_file_range");
        close(fd);
        if (drop && s > keep) {
            name_for(name, sizeof name, dir, (unsigned)(s - keep));
            int old = open(name, O_RDONLY | O_CLOEXEC);
            if (old >= 0) {
                posix_fadvise(old, 0, 0, POSIX_FADV_DONTNEED);
                close(old);
            }
        }
        if (s > retain) {
            name_for(name, sizeof name, dir, (unsigned)(s - retain));
            unlink(name);
        }
        struct rusage rn;
        getrusage(RUSAGE_THREAD, &rn);
        if (pace_ms > 0) {
            struct timespec nap = {pace_ms / 1000, (pace_ms % 1000) * 1000000L};
            nanosleep(&nap, NULL);
        }
        per[s - 1] = tv_ms(rn.ru_utime) + tv_ms(rn.ru_stime) - tv_ms(rl.ru_utime) - tv_ms(rl.ru_stime);
        rl = rn;
    }
    qsort(per, (size_t)ledgers, sizeof *per, cmp_double);
    getrusage(RUSAGE_THREAD, &r1);
    double wall = now_ms() - w0;
    double user = tv_ms(r1.ru_utime) - tv_ms(r0.ru_utime), sys = tv_ms(r1.ru_stime) - tv_ms(r0.ru_stime);
    printf("strategy=%s ledgers=%ld bytes=%zu cpu_ms_per_ledger=%.2f sys_ms_per_ledger=%.2f p50_ms=%.2f max_ms=%.2f "
           "wall_ms_per_ledger=%.2f\n",
           mode, ledgers, bytes, (user + sys) / (double)ledgers, sys / (double)ledgers, per[ledgers / 2],
           per[ledgers - 1], wall / (double)ledgers);
    free(per);
    for (long s = ledgers > retain ? ledgers - retain + 1 : 1; s <= ledgers; s++) {
        name_for(name, sizeof name, dir, (unsigned)s);
        unlink(name);
    }
    for (size_t i = 0; i < nchunks; i++)
        free(iov[i].iov_base);
    free(iov);
    return 0;
}
