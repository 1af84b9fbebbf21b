/* SPDX-License-Identifier: Apache-2.0 */
/* Segments: the records logs (records-<base>.log) and frames files (frames-<base>.seg) that hold
 * the integrity records and stored frames of RNG_SEG_LEDGERS ledgers each, appended to, never
 * rewritten, and removed whole once the ring has moved past them (docs/RING.md, "Layout"). */
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
#include <sys/uio.h>
#include <unistd.h>

#include "common/fdio.h"
#include "common/log.h"
#include "store/ledgerdir.h"
#include "store/ring_internal.h"

/* A line that takes a sequence out of the ring (it was quarantined): "corestream-ring-gone seq=S \n". */
#define GONE_PREFIX "corestream-ring-gone "

/* Frames appends of at least this many bytes are handed to write-back as soon as they are written. */
#define WRITEBACK_MIN (64 * 1024)

static uint32_t base_of(uint32_t seq)
{
    return seq - seq % RNG_SEG_LEDGERS;
}

void rng_log_name(char buf[CS_LEDGER_NAME_MAX], uint32_t seq)
{
    snprintf(buf, CS_LEDGER_NAME_MAX, "records-%" PRIu32 ".log", base_of(seq));
}

void rng_seg_name(char buf[CS_LEDGER_NAME_MAX], uint32_t seq)
{
    snprintf(buf, CS_LEDGER_NAME_MAX, "frames-%" PRIu32 ".seg", base_of(seq));
}

/* Index of the first segment whose base is >= base. */
static size_t seg_index(const cs_ring *r, uint32_t base)
{
    size_t lo = 0, hi = r->nsegs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->segs[mid]->base < base)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

rng_seg *rng_seg_find(const cs_ring *r, uint32_t seq)
{
    uint32_t base = base_of(seq);
    size_t i = seg_index(r, base);
    return i < r->nsegs && r->segs[i]->base == base ? r->segs[i] : NULL;
}

rng_seg *rng_seg_add(cs_ring *r, uint32_t seq)
{
    rng_seg *s = rng_seg_find(r, seq);
    if (s)
        return s;
    s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->base = base_of(seq);
    pthread_rwlock_wrlock(&r->lock);
    if (r->nsegs == r->segs_cap) {
        size_t cap = r->segs_cap ? r->segs_cap * 2 : 16;
        rng_seg **grown = realloc(r->segs, cap * sizeof *grown);
        if (!grown) {
            pthread_rwlock_unlock(&r->lock);
            free(s);
            return NULL;
        }
        r->segs = grown;
        r->segs_cap = cap;
    }
    size_t i = seg_index(r, s->base);
    memmove(&r->segs[i + 1], &r->segs[i], (r->nsegs - i) * sizeof *r->segs);
    r->segs[i] = s;
    r->nsegs++;
    pthread_rwlock_unlock(&r->lock);
    return s;
}

uint32_t rng_record_line(cs_ring *r, uint32_t seq)
{
    pthread_rwlock_rdlock(&r->lock);
    const rng_seg *s = rng_seg_find(r, seq);
    uint32_t line = s ? s->line[seq - s->base] : RNG_LINE_NONE;
    pthread_rwlock_unlock(&r->lock);
    return line;
}

bool cs_ring_has_frames(cs_ring *r, uint32_t seq)
{
    pthread_rwlock_rdlock(&r->lock);
    const rng_seg *s = rng_seg_find(r, seq);
    bool has = s && s->line[seq - s->base] != RNG_LINE_NONE && s->flen[seq - s->base] != 0;
    pthread_rwlock_unlock(&r->lock);
    return has;
}

int rng_read_record(cs_ring *r, uint32_t seq, cs_ledger_record *rec, uint32_t *line_out, char *problem, size_t plen)
{
    uint32_t line = rng_record_line(r, seq);
    if (line_out)
        *line_out = line;
    if (line == RNG_LINE_LEGACY)
        return rng_read_legacy_record(r->dfd, seq, rec, problem, plen);
    if (line == RNG_LINE_NONE) {
        snprintf(problem, plen, "integrity record is missing");
        errno = ENOENT;
        return -2;
    }
    char name[CS_LEDGER_NAME_MAX], buf[RECORD_MAX + 1];
    rng_log_name(name, seq);
    int fd = openat(r->dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    ssize_t n = fd >= 0 ? pread(fd, buf, RECORD_MAX, (off_t)line - 1) : -1;
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (n < 0 && (e == ENOENT || e == ELOOP)) {
        /* The log the ring wrote is gone or replaced by a link: the record is, for this ledger. */
        snprintf(problem, plen, "integrity record is missing (%s %s)", name, e == ENOENT ? "is missing" : "is a symbolic link");
        return -1;
    }
    if (n < 0) {
        snprintf(problem, plen, "%s: %s", name, strerror(e));
        errno = e;
        return -3;
    }
    buf[n] = '\0';
    char *nl = memchr(buf, '\n', (size_t)n);
    if (!nl) {
        snprintf(problem, plen, "integrity record is unreadable");
        return -1;
    }
    nl[1] = '\0';
    return rng_parse_record(buf, seq, rec, problem, plen);
}

/* The descriptor appending to seq's log (log) or frames file, opened (created) when the segment
 * appended to changes. -1 with errno on failure. */
static int append_fd(cs_ring *r, uint32_t seq, bool log)
{
    uint32_t base = base_of(seq);
    if (r->app_base != base)
        rng_seg_close_append(r);
    r->app_base = base;
    int *fd = log ? &r->app_log_fd : &r->app_frames_fd;
    if (*fd < 0) {
        char name[CS_LEDGER_NAME_MAX];
        (log ? rng_log_name : rng_seg_name)(name, seq);
        *fd = openat(r->dfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    }
    return *fd;
}

void rng_seg_close_append(cs_ring *r)
{
    if (r->app_log_fd >= 0)
        close(r->app_log_fd);
    if (r->app_frames_fd >= 0)
        close(r->app_frames_fd);
    r->app_log_fd = r->app_frames_fd = -1;
    r->app_base = UINT32_MAX;
}

/* Writes iov at *end of fd whole, or cuts the file back to *end and fails. */
static int append(int fd, const struct iovec *iov, int cnt, uint64_t *end)
{
    size_t want = 0;
    for (int i = 0; i < cnt; i++)
        want += iov[i].iov_len;
    size_t done = 0;
    struct iovec win[66];
    while (done < want) {
        int n = 0;
        size_t skip = done;
        for (int i = 0; i < cnt && n < (int)(sizeof win / sizeof win[0]); i++) {
            if (skip >= iov[i].iov_len) {
                skip -= iov[i].iov_len;
                continue;
            }
            win[n++] = (struct iovec){(char *)iov[i].iov_base + skip, iov[i].iov_len - skip};
            skip = 0;
        }
        ssize_t w = pwritev(fd, win, n, (off_t)(*end + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : ENOSPC;
            (void)ftruncate(fd, (off_t)*end); /* best effort: a tail no line points at is ignored */
            errno = e;
            return -1;
        }
        done += (size_t)w;
    }
    *end += want;
    return 0;
}

int rng_append_record(cs_ring *r, uint32_t seq, const cs_ledger_record *rec)
{
    rng_seg *s = rng_seg_add(r, seq);
    if (!s) {
        errno = ENOMEM;
        return -1;
    }
    char text[RECORD_MAX + 1];
    text[0] = '\n'; /* used only after a log found cut short */
    int len = rng_format_record(text + 1, sizeof text - 1, seq, rec);
    int fd = append_fd(r, seq, true);
    if (fd < 0)
        return -1;
    uint64_t at = s->log_end + s->log_torn;
    if (at >= UINT32_MAX - RECORD_MAX) {
        errno = EFBIG; /* a log of four GiB: cannot happen in RNG_SEG_LEDGERS lines a ledger */
        return -1;
    }
    if (append(fd, &(struct iovec){text + !s->log_torn, (size_t)len + s->log_torn}, 1, &s->log_end) != 0)
        return -1;
    s->log_torn = false;
    pthread_rwlock_wrlock(&r->lock);
    s->line[seq - s->base] = (uint32_t)at + 1;
    s->len[seq - s->base] = rec->len;
    s->flen[seq - s->base] = rec->frames_len;
    pthread_rwlock_unlock(&r->lock);
    return 0;
}

int rng_append_frames(cs_ring *r, uint32_t seq, const struct iovec *iov, int cnt, uint64_t *off)
{
    rng_seg *s = rng_seg_add(r, seq);
    if (!s) {
        errno = ENOMEM;
        return -1;
    }
    int fd = append_fd(r, seq, false);
    if (fd < 0)
        return -1;
    *off = s->frames_end;
    if (append(fd, iov, cnt, &s->frames_end) != 0)
        return -1;
    /* Large frames go to write-back at once, as the ledger files do (ring.h, cs_ring_set_direct);
     * the few hundred bytes of a raw ledger's index wait for the next large one. */
    if (s->frames_end - *off >= WRITEBACK_MIN)
        (void)sync_file_range(fd, (off_t)*off, (off_t)(s->frames_end - *off), SYNC_FILE_RANGE_WRITE);
    return 0;
}

void rng_frames_append_failed(cs_ring *r, uint32_t seq, int e)
{
    rng_seg *s = rng_seg_find(r, seq);
    if (!s || s->frames_warned)
        return;
    s->frames_warned = true;
    char name[CS_LEDGER_NAME_MAX], path[4200];
    rng_seg_name(name, seq);
    snprintf(path, sizeof path, "%s/%s", r->dir, name);
    CS_LOG(CS_LOG_WARN, "ring: stored frames could not be written; the segment's ledgers are kept without them",
           KV_S("file", path), KV_S("error", strerror(e)), KV_U("ledger", seq));
}

void rng_seg_clear(cs_ring *r, uint32_t seq)
{
    pthread_rwlock_wrlock(&r->lock);
    rng_seg *s = rng_seg_find(r, seq);
    if (s) {
        s->line[seq - s->base] = RNG_LINE_NONE;
        s->len[seq - s->base] = s->flen[seq - s->base] = 0;
    }
    pthread_rwlock_unlock(&r->lock);
}

int rng_append_gone(cs_ring *r, uint32_t seq)
{
    rng_seg *s = rng_seg_add(r, seq);
    if (!s) {
        errno = ENOMEM;
        return -1;
    }
    char text[64];
    int len = snprintf(text, sizeof text, "%s" GONE_PREFIX "seq=%" PRIu32 " \n", s->log_torn ? "\n" : "", seq);
    int fd = append_fd(r, seq, true);
    if (fd < 0 || append(fd, &(struct iovec){text, (size_t)len}, 1, &s->log_end) != 0)
        return -1;
    s->log_torn = false;
    rng_seg_clear(r, seq);
    return 0;
}

void rng_unappend_record(cs_ring *r, uint32_t seq, uint64_t log_end)
{
    rng_seg *s = rng_seg_find(r, seq);
    if (!s)
        return;
    rng_seg_clear(r, seq);
    if (r->app_base == s->base && r->app_log_fd >= 0 && ftruncate(r->app_log_fd, (off_t)log_end) == 0) {
        s->log_end = log_end;
        /* What was there may have ended without its newline: the next line starts one (at worst
         * an empty line, which names nothing). */
        s->log_torn = log_end > 0;
    }
}

uint64_t rng_log_end(cs_ring *r, uint32_t seq)
{
    const rng_seg *s = rng_seg_find(r, seq);
    return s ? s->log_end : 0;
}

static void remove_seg_files(cs_ring *r, uint32_t base)
{
    char name[CS_LEDGER_NAME_MAX];
    rng_log_name(name, base);
    unlinkat(r->dfd, name, 0);
    rng_seg_name(name, base);
    unlinkat(r->dfd, name, 0);
}

void rng_seg_remove_below(cs_ring *r, uint64_t keep)
{
    size_t gone = 0;
    while (gone < r->nsegs && (uint64_t)r->segs[gone]->base + RNG_SEG_LEDGERS <= keep)
        gone++;
    if (!gone)
        return;
    pthread_rwlock_wrlock(&r->lock);
    for (size_t i = 0; i < gone; i++) {
        if (r->segs[i]->base == r->app_base)
            rng_seg_close_append(r);
        remove_seg_files(r, r->segs[i]->base);
        free(r->segs[i]);
    }
    memmove(r->segs, r->segs + gone, (r->nsegs - gone) * sizeof *r->segs);
    r->nsegs -= gone;
    pthread_rwlock_unlock(&r->lock);
}

void rng_seg_remove_above(cs_ring *r, uint32_t latest)
{
    size_t keep = r->nsegs;
    while (keep > 0 && r->segs[keep - 1]->base > latest)
        keep--;
    if (keep == r->nsegs)
        return;
    pthread_rwlock_wrlock(&r->lock);
    for (size_t i = keep; i < r->nsegs; i++) {
        if (r->segs[i]->base == r->app_base)
            rng_seg_close_append(r);
        remove_seg_files(r, r->segs[i]->base);
        free(r->segs[i]);
    }
    r->nsegs = keep;
    pthread_rwlock_unlock(&r->lock);
}

void rng_seg_remove_all(cs_ring *r)
{
    rng_seg_remove_below(r, UINT64_MAX);
}

/* The sequence a line names (its first " seq=S ", S in decimal as the writer writes it), when it
 * names one of the segment's: a line that does not parse still points the ledger at itself, so
 * the ledger's check fails on it. */
static bool line_seq(const char *line, uint32_t base, uint32_t *seq)
{
    const char *p = strstr(line, " seq=");
    unsigned long v;
    char *end;
    if (!p || p[5] < '1' || p[5] > '9') /* as the writer writes it: no sign, space or leading zero */
        return false;
    errno = 0;
    v = strtoul(p + 5, &end, 10);
    if (errno || end == p + 5 || *end != ' ' || v > UINT32_MAX || v < base || v - base >= RNG_SEG_LEDGERS)
        return false;
    *seq = (uint32_t)v;
    return true;
}

int rng_seg_load(cs_ring *r, uint32_t base, unsigned char frames_type, uint64_t frames_size)
{
    rng_seg *s = rng_seg_add(r, base);
    if (!s) {
        errno = ENOMEM;
        return -1;
    }
    s->frames_type = frames_type;
    s->frames_end = frames_type == DT_REG ? frames_size : 0;
    char name[CS_LEDGER_NAME_MAX];
    rng_log_name(name, base);
    int fd = openat(r->dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ELOOP ? 0 : -1; /* a link is not the ring's: no records */
    struct stat st;
    char *buf = NULL;
    int rc = fstat(fd, &st);
    if (rc == 0 && !S_ISREG(st.st_mode)) {
        close(fd);
        return 0;
    }
    size_t size = rc == 0 ? (size_t)st.st_size : 0, got = 0;
    if (rc == 0 && !(buf = malloc(size + 1))) {
        errno = ENOMEM;
        rc = -1;
    }
    if (rc == 0 && cs_pread_upto(fd, buf, size, 0, &got) != 0)
        rc = -1;
    size = got; /* cut meanwhile: what was read is what there is */
    int e = errno;
    close(fd);
    if (rc != 0) {
        free(buf);
        errno = e;
        return -1;
    }
    s->log_end = size;
    s->log_torn = cs_ring_log_scan(buf, size, base, s->line); /* lengths: set by the open's check */
    free(buf);
    return 0;
}

bool cs_ring_log_scan(char *buf, size_t size, uint32_t base, uint32_t line[CS_RING_SEG_LEDGERS])
{
    for (size_t at = 0; at < size;) {
        char *nl = memchr(buf + at, '\n', size - at);
        if (!nl)
            break; /* a last line without its newline: an append cut short, pointing nowhere */
        *nl = '\0';
        uint32_t seq;
        bool gone = strncmp(buf + at, GONE_PREFIX, strlen(GONE_PREFIX)) == 0;
        if (at < UINT32_MAX - 1 && line_seq(buf + at, base, &seq))
            line[seq - base] = gone ? RNG_LINE_NONE : (uint32_t)at + 1;
        *nl = '\n';
        at = (size_t)(nl - buf) + 1;
    }
    return size > 0 && buf[size - 1] != '\n';
}
