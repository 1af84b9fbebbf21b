/* SPDX-License-Identifier: Apache-2.0 */
/* The ring's files on disk and its bounds: names, the byte counters, unlinking, small files
 * written through a rename, the directory scan, and the log lines of a drop. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/futex.h"
#include "common/log.h"
#include "store/frames.h"
#include "store/ledgerdir.h"
#include "store/ring_internal.h"

void rng_legacy_record_name(char buf[CS_LEDGER_NAME_MAX], uint32_t seq)
{
    snprintf(buf, CS_LEDGER_NAME_MAX, "ledger-%" PRIu32 ".rec", seq);
}

void rng_legacy_frames_name(char buf[CS_LEDGER_NAME_MAX], uint32_t seq)
{
    snprintf(buf, CS_LEDGER_NAME_MAX, "ledger-%" PRIu32 ".frames", seq);
}

/* A segment file name, prefix<digits>suffix, whose base is a multiple of RNG_SEG_LEDGERS. */
static int seg_name_parse(const char *name, const char *prefix, const char *suffix, uint32_t *base)
{
    size_t p = strlen(prefix), n = strlen(name), m = strlen(suffix);
    if (n <= p + m || n - p - m > 10 || strncmp(name, prefix, p) != 0 || strcmp(name + n - m, suffix) != 0)
        return -1;
    uint64_t v = 0;
    for (size_t i = p; i < n - m; i++) {
        if (name[i] < '0' || name[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(name[i] - '0');
    }
    if (v > UINT32_MAX || v % RNG_SEG_LEDGERS)
        return -1;
    *base = (uint32_t)v;
    return 0;
}

/* A sidecar name (suffix ".rec" or ".frames") of a ledger name. */
static int sidecar_name_parse(const char *name, const char *suffix, uint32_t *seq)
{
    char copy[CS_LEDGER_NAME_MAX];
    size_t n = strlen(name), m = strlen(suffix);
    if (n < m || n - m + 4 >= sizeof copy || strcmp(name + n - m, suffix) != 0)
        return -1;
    memcpy(copy, name, n - m);
    strcpy(copy + n - m, ".xdr");
    return cs_ledger_name_parse(copy, seq);
}

static void counter_adjust(atomic_uint_fast64_t *c, int64_t delta)
{
    uint64_t v = atomic_load_explicit(c, memory_order_relaxed);
    v = delta < 0 && (uint64_t)-delta > v ? 0 : v + (uint64_t)delta;
    atomic_store_explicit(c, v, memory_order_relaxed);
}

void rng_bytes_adjust(cs_ring *r, int64_t delta)
{
    counter_adjust(&r->bytes, delta);
}

void rng_frames_bytes_adjust(cs_ring *r, int64_t delta)
{
    counter_adjust(&r->frames_bytes, delta);
}

void rng_unlink_range(cs_ring *r, uint32_t from, uint32_t to)
{
    uint64_t bytes = 0, frames = 0;
    char name[CS_LEDGER_NAME_MAX];
    for (uint64_t q = from; q <= to; q++) {
        uint32_t seq = (uint32_t)q;
        /* ENOENT is expected (a file removed by hand, a hole); nothing else can be done about other
         * failures either (a directory in the ledger's place stays), and a leftover only costs disk
         * space. */
        cs_ledger_name_format(name, sizeof name, seq);
        unlinkat(r->dfd, name, 0);
        pthread_rwlock_wrlock(&r->lock);
        rng_seg *s = rng_seg_find(r, seq);
        if (s) {
            bytes += s->len[seq - s->base];
            frames += s->flen[seq - s->base];
            s->len[seq - s->base] = s->flen[seq - s->base] = 0;
        }
        pthread_rwlock_unlock(&r->lock);
    }
    rng_bytes_adjust(r, -(int64_t)bytes);
    rng_frames_bytes_adjust(r, -(int64_t)frames);
    rng_seg_remove_below(r, (uint64_t)to + 1);
}

/* Holes below oldest go; a hole that starts at or before oldest moves oldest past it. */
static void trim_holes(cs_ring *r)
{
    size_t keep = 0;
    for (size_t i = 0; i < r->nholes; i++) {
        rng_hole h = r->holes[i];
        if (!r->filled || h.last < r->oldest || h.first > r->latest)
            continue;
        if (h.first <= r->oldest) {
            if (h.last >= r->latest) {
                r->filled = false;
                r->oldest = r->latest = 0;
                keep = 0;
                break;
            }
            r->oldest = h.last + 1;
            continue;
        }
        if (h.last > r->latest)
            h.last = r->latest;
        r->holes[keep++] = h;
    }
    r->nholes = keep;
}

void rng_set_bounds_wrlocked(cs_ring *r, bool filled, uint32_t oldest, uint32_t latest)
{
    r->filled = filled;
    r->oldest = oldest;
    r->latest = latest;
    trim_holes(r);
}

void rng_set_bounds(cs_ring *r, bool filled, uint32_t oldest, uint32_t latest)
{
    pthread_rwlock_wrlock(&r->lock);
    rng_set_bounds_wrlocked(r, filled, oldest, latest);
    pthread_rwlock_unlock(&r->lock);
    cs_bell_ring(&r->changes, INT_MAX); /* after the unlock: a woken reader finds the new bounds */
}

uint32_t rng_pruned_oldest(const cs_ring *r, uint32_t oldest, uint32_t latest)
{
    uint64_t span = (uint64_t)latest - oldest + 1;
    return span > r->retention ? (uint32_t)((uint64_t)latest + 1 - r->retention) : oldest;
}

int rng_write_small_file(int dfd, const char *name, const char *text)
{
    char tmp[CS_LEDGER_NAME_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", name);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    size_t len = strlen(text);
    ssize_t w = write(fd, text, len);
    int e = w < 0 ? errno : ENOSPC;
    if (close(fd) != 0 && w == (ssize_t)len) {
        w = -1;
        e = errno;
    }
    if (w != (ssize_t)len || renameat(dfd, tmp, dfd, name) != 0) {
        if (w == (ssize_t)len)
            e = errno;
        unlinkat(dfd, tmp, 0);
        errno = e;
        return -1;
    }
    return 0;
}

int rng_hash_file(int fd, uint64_t len, uint64_t *sum)
{
    enum { BUF = 1 << 20 };
    uint8_t *buf = malloc(BUF);
    XXH64_state_t *st = XXH64_createState();
    int rc = buf && st ? 0 : -1;
    if (rc == 0)
        XXH64_reset(st, 0);
    for (uint64_t off = 0; rc == 0 && off < len;) {
        size_t want = len - off < BUF ? (size_t)(len - off) : BUF;
        ssize_t n = pread(fd, buf, want, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            rc = -1;
            break;
        }
        XXH64_update(st, buf, (size_t)n);
        off += (uint64_t)n;
    }
    if (rc == 0)
        *sum = XXH64_digest(st);
    int e = errno;
    XXH64_freeState(st);
    free(buf);
    errno = e;
    return rc;
}

const char *rng_entry_name(const entry *e, char buf[CS_LEDGER_NAME_MAX])
{
    if (e->odd)
        return e->odd;
    switch (e->kind) {
    case E_RECORD:
        rng_legacy_record_name(buf, e->seq);
        break;
    case E_FRAMES:
        rng_legacy_frames_name(buf, e->seq);
        break;
    case E_LOG:
        rng_log_name(buf, e->seq);
        break;
    case E_SEG:
        rng_seg_name(buf, e->seq);
        break;
    default:
        cs_ledger_name_format(buf, CS_LEDGER_NAME_MAX, e->seq);
    }
    return buf;
}

void rng_free_entries(entry *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i].odd);
    free(v);
}

static int cmp_entry(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->seq != y->seq)
        return (x->seq > y->seq) - (x->seq < y->seq);
    return x->kind - y->kind;
}

int rng_scan_entries(cs_ring *r, entry **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int fd = openat(r->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        errno = e;
        return -1;
    }
    size_t cap = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de)
            break;
        uint32_t seq;
        int kind = E_LEDGER;
        if (cs_ledger_name_parse(de->d_name, &seq) != 0) {
            if (sidecar_name_parse(de->d_name, ".rec", &seq) == 0)
                kind = E_RECORD;
            else if (sidecar_name_parse(de->d_name, ".frames", &seq) == 0)
                kind = E_FRAMES;
            else if (seg_name_parse(de->d_name, "records-", ".log", &seq) == 0)
                kind = E_LOG;
            else if (seg_name_parse(de->d_name, "frames-", ".seg", &seq) == 0)
                kind = E_SEG;
            else
                continue;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            entry *grown = realloc(*out, cap * sizeof *grown);
            if (!grown) {
                closedir(d);
                rng_free_entries(*out, *n);
                *out = NULL;
                *n = 0;
                errno = ENOMEM;
                return -1;
            }
            *out = grown;
        }
        entry *e = &(*out)[(*n)++];
        e->seq = seq;
        e->kind = (uint8_t)kind;
        e->type = de->d_type;
        e->odd = NULL;
        char canon[CS_LEDGER_NAME_MAX];
        e->canonical = strcmp(rng_entry_name(e, canon), de->d_name) == 0;
        if (!e->canonical && !(e->odd = strdup(de->d_name))) {
            closedir(d);
            rng_free_entries(*out, *n - 1);
            *out = NULL;
            *n = 0;
            errno = ENOMEM;
            return -1;
        }
    }
    int e = errno;
    closedir(d);
    if (e) {
        rng_free_entries(*out, *n);
        *out = NULL;
        *n = 0;
        errno = e;
        return -1;
    }
    if (*n > 1)
        qsort(*out, *n, sizeof **out, cmp_entry);
    return 0;
}

void rng_log_frames_problem(const cs_ring *r, uint32_t seq, const char *problem)
{
    char name[CS_LEDGER_NAME_MAX], path[4200];
    rng_seg_name(name, seq);
    snprintf(path, sizeof path, "%s/%s", r->dir, name);
    CS_LOG(CS_LOG_ERROR, "ring frames failed their integrity check; the ledger is replayed by re-encoding it",
           KV_S("file", path), KV_S("problem", problem), KV_U("ledger", seq));
}

void rng_forget_frames(cs_ring *r, uint32_t seq, const cs_ledger_record *rec)
{
    cs_ledger_record plain = *rec;
    plain.frames_len = 0;
    plain.frames_off = 0;
    plain.frames_xxh3 = 0;
    plain.raw_xxh3 = 0;
    if (rng_append_record(r, seq, &plain) == 0)
        rng_frames_bytes_adjust(r, -(int64_t)rec->frames_len);
}

int rng_check_frames_stat(const struct stat *st, uint32_t seq, const cs_ledger_record *rec, char *problem,
                          size_t plen)
{
    if (!S_ISREG(st->st_mode)) {
        snprintf(problem, plen, "%s", S_ISLNK(st->st_mode) ? "is a symbolic link" : S_ISDIR(st->st_mode) ? "is a directory" : "is not a regular file");
        return -1;
    }
    if ((uint64_t)st->st_size < rec->frames_off + rec->frames_len) {
        snprintf(problem, plen, "is %lld bytes, its record says ledger %" PRIu32 "'s frames end at byte %" PRIu64,
                 (long long)st->st_size, seq, rec->frames_off + rec->frames_len);
        return -1;
    }
    return 0;
}

void rng_tmp_name(char tmp[CS_LEDGER_NAME_MAX], uint32_t seq)
{
    cs_ledger_name_format(tmp, CS_LEDGER_NAME_MAX, seq);
    strcat(tmp, ".tmp"); /* CS_LEDGER_NAME_MAX leaves room for it */
}
