/* SPDX-License-Identifier: Apache-2.0 */
/* A suspect ledger judged (cs_ring_condemn): proven bad against its own record, or left alone; a
 * proven-bad ledger moved to <data-dir>/quarantine for a person to look at, and the hole it leaves
 * in the bounds. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/futex.h"
#include "common/log.h"
#include "store/ledgerdir.h"
#include "store/ring_internal.h"

#define QUARANTINE_NAME "quarantine"

bool rng_in_hole_locked(const cs_ring *r, uint32_t seq, uint32_t *first, uint32_t *last)
{
    for (size_t i = 0; i < r->nholes && r->holes[i].first <= seq; i++)
        if (seq <= r->holes[i].last) {
            *first = r->holes[i].first;
            *last = r->holes[i].last;
            return true;
        }
    return false;
}

bool cs_ring_hole(cs_ring *r, uint32_t seq, uint32_t *first, uint32_t *last)
{
    pthread_rwlock_rdlock(&r->lock);
    bool in = r->filled && seq >= r->oldest && seq <= r->latest && rng_in_hole_locked(r, seq, first, last);
    pthread_rwlock_unlock(&r->lock);
    return in;
}

int rng_hole_add_bounds(cs_ring *r, uint32_t first, uint32_t last, bool filled, uint32_t oldest, uint32_t latest)
{
    pthread_rwlock_wrlock(&r->lock); /* readers may be reading the array realloc moves */
    if (r->nholes == r->holes_cap) {
        size_t cap = r->holes_cap ? r->holes_cap * 2 : 8;
        rng_hole *grown = realloc(r->holes, cap * sizeof *grown);
        if (!grown) {
            pthread_rwlock_unlock(&r->lock);
            return -1;
        }
        r->holes = grown;
        r->holes_cap = cap;
    }
    size_t i = 0;
    while (i < r->nholes && r->holes[i].first < first)
        i++;
    memmove(&r->holes[i + 1], &r->holes[i], (r->nholes - i) * sizeof *r->holes);
    r->holes[i] = (rng_hole){first, last};
    r->nholes++;
    /* Merge overlapping and adjacent ranges, so a range names the whole hole. */
    size_t out = 0;
    for (size_t k = 1; k < r->nholes; k++) {
        rng_hole *h = &r->holes[out];
        if ((uint64_t)r->holes[k].first <= (uint64_t)h->last + 1) {
            if (r->holes[k].last > h->last)
                h->last = r->holes[k].last;
        } else {
            r->holes[++out] = r->holes[k];
        }
    }
    r->nholes = out + 1;
    rng_set_bounds_wrlocked(r, filled, oldest, latest);
    pthread_rwlock_unlock(&r->lock);
    cs_bell_ring(&r->changes, INT_MAX);
    return 0;
}

int rng_hole_add(cs_ring *r, uint32_t first, uint32_t last)
{
    return rng_hole_add_bounds(r, first, last, r->filled, r->oldest, r->latest);
}

/* <data-dir>/quarantine (the ring's parent directory), created when missing. */
static int open_quarantine(cs_ring *r)
{
    int pfd = openat(r->dfd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0)
        return -1;
    if (mkdirat(pfd, QUARANTINE_NAME, 0750) != 0 && errno != EEXIST) {
        int e = errno;
        close(pfd);
        errno = e;
        return -1;
    }
    int qfd = openat(pfd, QUARANTINE_NAME, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(pfd);
    errno = e;
    return qfd;
}

/* A new directory ledger-S-<UTC time>[-N] under qfd; its name into name. */
static int make_entry_dir(int qfd, uint32_t seq, char *name, size_t len)
{
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", gmtime_r(&now, &tm));
    for (int n = 0; n < 100; n++) {
        if (n == 0)
            snprintf(name, len, "ledger-%" PRIu32 "-%s", seq, stamp);
        else
            snprintf(name, len, "ledger-%" PRIu32 "-%s-%d", seq, stamp, n);
        if (mkdirat(qfd, name, 0750) == 0)
            return 0;
        if (errno != EEXIST)
            return -1;
    }
    errno = EEXIST;
    return -1;
}

/* Creates name (it must not exist) in dirfd holding text. 0, or -1 with errno. */
static int write_new_file(int dirfd, const char *name, const char *text)
{
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
    if (fd < 0)
        return -1;
    size_t len = strlen(text);
    ssize_t w = write(fd, text, len);
    int e = w < 0 ? errno : ENOSPC;
    int rc = close(fd);
    if (w != (ssize_t)len || rc != 0) {
        errno = w != (ssize_t)len ? e : errno;
        return -1;
    }
    return 0;
}

/* A copy of seq's record line from its log, as `ledger-<seq>.rec` in the quarantine directory:
 * the line stays in the log, which is appended to, never rewritten. Absent or unreadable: none. */
static int copy_record(cs_ring *r, uint32_t seq, int qdir)
{
    uint32_t line = rng_record_line(r, seq);
    if (line == RNG_LINE_NONE || line == RNG_LINE_LEGACY)
        return 0;
    char name[CS_LEDGER_NAME_MAX], buf[RECORD_MAX + 1];
    rng_log_name(name, seq);
    int fd = openat(r->dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    ssize_t n = fd >= 0 ? pread(fd, buf, RECORD_MAX, (off_t)line - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *nl = strchr(buf, '\n');
    if (nl)
        nl[1] = '\0';
    rng_legacy_record_name(name, seq);
    return write_new_file(qdir, name, buf);
}

/* Moves the entries named (absent ones skipped) into a new quarantine directory for seq; with
 * record, a copy of its record line goes beside them and the log says the ledger is gone. */
static int quarantine_names(cs_ring *r, uint32_t seq, char names[][CS_LEDGER_NAME_MAX], int nnames, bool record,
                            const char *text, char *where, size_t wlen)
{
    snprintf(where, wlen, "-");
    int qfd = open_quarantine(r);
    if (qfd < 0)
        return -1;
    char dir[64];
    int rc = make_entry_dir(qfd, seq, dir, sizeof dir);
    int dfd = rc == 0 ? openat(qfd, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (rc == 0 && dfd < 0)
        rc = -1;
    if (rc == 0) {
        char parent[4096];
        snprintf(parent, sizeof parent, "%s", r->dir);
        char *slash = strrchr(parent, '/');
        if (slash)
            *slash = '\0';
        snprintf(where, wlen, "%s/%s/%s", slash ? parent : ".", QUARANTINE_NAME, dir);
        rc = write_new_file(dfd, "reason", text);
    }
    if (rc == 0 && record)
        rc = copy_record(r, seq, dfd);
    for (int i = 0; i < nnames && rc == 0; i++)
        if (renameat(r->dfd, names[i], dfd, names[i]) != 0 && errno != ENOENT)
            rc = -1;
    if (rc == 0 && record && rng_record_line(r, seq) != RNG_LINE_NONE && rng_append_gone(r, seq) != 0)
        rc = -1;
    int e = errno;
    if (dfd >= 0)
        close(dfd);
    close(qfd);
    errno = e;
    return rc;
}

int rng_quarantine(cs_ring *r, uint32_t seq, const char *text, char *where, size_t wlen)
{
    char names[3][CS_LEDGER_NAME_MAX];
    cs_ledger_name_format(names[0], sizeof names[0], seq);
    rng_legacy_record_name(names[1], seq);
    rng_legacy_frames_name(names[2], seq);
    return quarantine_names(r, seq, names, 3, true, text, where, wlen);
}

int rng_quarantine_file(cs_ring *r, uint32_t seq, const char *name, const char *text, char *where, size_t wlen)
{
    char names[1][CS_LEDGER_NAME_MAX];
    snprintf(names[0], sizeof names[0], "%s", name);
    return quarantine_names(r, seq, names, 1, false, text, where, wlen);
}

/* What the proof found: a verdict, the problem, and the two checksums when the bytes were hashed. */
typedef struct proof {
    int verdict;
    char problem[600];
    bool hashed;
    uint64_t want, got;
    bool have_file;
    dev_t dev;
    ino_t ino;
    uint32_t line; /* where the record was read: a record replaced meanwhile is another line */
    uint64_t size, frames_len;
} proof;

static int io_failed(proof *p, const char *what, int e)
{
    snprintf(p->problem, sizeof p->problem, "%.400s: %s", what, strerror(e));
    return p->verdict = CS_RING_VERDICT_IO;
}

static int bad(proof *p, const char *problem)
{
    snprintf(p->problem, sizeof p->problem, "%s", problem);
    return p->verdict = CS_RING_VERDICT_BAD;
}

/* Reads ledger seq and its record afresh and judges them: only a record that fails its own checks,
 * or a file that is not what the record says, is bad; a system call that fails proves nothing. */
static int prove(cs_ring *r, uint32_t seq, proof *p)
{
    memset(p, 0, sizeof *p);
    char name[CS_LEDGER_NAME_MAX], problem[600];
    cs_ledger_name_format(name, sizeof name, seq);
    cs_ledger_record rec;
    /* Where the record is read from is its identity, so a record replaced meanwhile (a reset
     * rewriting seq) is never held against the new ledger. */
    int rr = rng_read_record(r, seq, &rec, &p->line, problem, sizeof problem);
    if (rr == -3)
        return io_failed(p, problem, errno);
    /* What is in the ledger's place (a symlink itself, not what it names), so the quarantine can
     * tell it was not replaced meanwhile. */
    struct stat st;
    if (fstatat(r->dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        p->have_file = true;
        p->dev = st.st_dev;
        p->ino = st.st_ino;
        p->size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    } else if (errno != ENOENT) {
        return io_failed(p, name, errno);
    }
    int fd = openat(r->dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno != ENOENT && errno != ELOOP)
        return io_failed(p, name, errno);
    if (fd < 0)
        return bad(p, errno == ENOENT ? (rr == 0 ? "is missing (its record is there)" : "is missing")
                                      : "is a symbolic link");
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return io_failed(p, name, e);
    }
    if (!p->have_file || st.st_dev != p->dev || st.st_ino != p->ino) {
        close(fd); /* replaced between the two looks: nothing to judge */
        return io_failed(p, name, EAGAIN);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return bad(p, S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file");
    }
    if (rr != 0) {
        close(fd);
        return bad(p, problem);
    }
    p->frames_len = rec.frames_len;
    if (rec.len != (uint64_t)st.st_size) {
        close(fd);
        snprintf(problem, sizeof problem, "is %lld bytes, its record says %" PRIu64, (long long)st.st_size, rec.len);
        return bad(p, problem);
    }
    uint64_t sum;
    int hr = rng_hash_file(fd, rec.len, &sum);
    int e = errno;
    close(fd);
    if (hr != 0)
        return io_failed(p, name, e); /* a short read too: the file changed while it was read */
    p->hashed = true;
    p->want = rec.xxh64;
    p->got = sum;
    if (sum == rec.xxh64)
        return p->verdict = CS_RING_VERDICT_GOOD;
    snprintf(problem, sizeof problem, "its bytes hash to %016" PRIx64 ", its record says %016" PRIx64, sum, rec.xxh64);
    return bad(p, problem);
}

/* Whether name is still the entry the proof saw (have: it existed, with that identity), or is
 * still absent. */
static bool unchanged(cs_ring *r, const char *name, bool have, dev_t dev, ino_t ino)
{
    struct stat st;
    if (fstatat(r->dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return !have && errno == ENOENT;
    return have && st.st_dev == dev && st.st_ino == ino;
}

/* The ledger and the record proven are still the ones in the ring (neither replaced since). */
static bool same_file(cs_ring *r, uint32_t seq, const proof *p)
{
    char name[CS_LEDGER_NAME_MAX];
    cs_ledger_name_format(name, sizeof name, seq);
    return unchanged(r, name, p->have_file, p->dev, p->ino) && rng_record_line(r, seq) == p->line;
}

static void log_quarantined(const cs_ring *r, uint32_t seq, const proof *p, const char *where, int qerr,
                            const char *suspicion)
{
    char path[4200], want[17] = "-", got[17] = "-";
    snprintf(path, sizeof path, "%s/ledger-%" PRIu32 ".xdr", r->dir, seq);
    if (p->hashed) {
        snprintf(want, sizeof want, "%016" PRIx64, p->want);
        snprintf(got, sizeof got, "%016" PRIx64, p->got);
    }
    if (qerr)
        CS_LOG(CS_LOG_ERROR, "ring ledger is bad; it could not be quarantined, it is not served and stays in place",
               KV_S("file", path), KV_S("problem", p->problem), KV_S("record_xxh64", want), KV_S("actual_xxh64", got),
               KV_S("error", strerror(qerr)), KV_S("found_by", suspicion), KV_U("oldest", r->oldest),
               KV_U("latest", r->latest));
    else
        CS_LOG(CS_LOG_ERROR, "ring ledger is bad; quarantined, the ledgers around it stay", KV_S("file", path),
               KV_S("problem", p->problem), KV_S("record_xxh64", want), KV_S("actual_xxh64", got),
               KV_S("quarantine", where), KV_S("found_by", suspicion), KV_U("oldest", r->oldest),
               KV_U("latest", r->latest));
}

void rng_reason_text(char *buf, size_t len, uint32_t seq, const char *problem, const char *suspicion,
                     const char *want, const char *got)
{
    time_t now = time(NULL);
    struct tm tm;
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    snprintf(buf, len, "ledger=%" PRIu32 "\nproblem=%s\nfound_by=%s\nrecord_xxh64=%s\nactual_xxh64=%s\nat=%s\n", seq,
             problem, suspicion, want, got, stamp);
}

/* Moves a proven-bad ledger out and makes its sequence a hole; under wmu. */
static void quarantine_proven(cs_ring *r, uint32_t seq, const proof *p, const char *suspicion)
{
    char want[17] = "-", got[17] = "-", text[1600], where[4300];
    if (p->hashed) {
        snprintf(want, sizeof want, "%016" PRIx64, p->want);
        snprintf(got, sizeof got, "%016" PRIx64, p->got);
    }
    rng_reason_text(text, sizeof text, seq, p->problem, suspicion, want, got);
    int qerr = rng_quarantine(r, seq, text, where, sizeof where) == 0 ? 0 : errno;
    if (!qerr) {
        rng_bytes_adjust(r, -(int64_t)(p->have_file ? p->size : 0));
        rng_frames_bytes_adjust(r, -(int64_t)p->frames_len);
    }
    if (rng_hole_add(r, seq, seq) != 0)
        qerr = qerr ? qerr : ENOMEM;
    atomic_fetch_add(&r->dropped, 1);
    log_quarantined(r, seq, p, where, qerr, suspicion);
}

int cs_ring_condemn(cs_ring *r, uint32_t seq, const char *suspicion)
{
    uint32_t hf, hl;
    if (!rng_retained(r, seq) || cs_ring_hole(r, seq, &hf, &hl))
        return CS_RING_VERDICT_GONE;
    proof p;
    prove(r, seq, &p);
    if (p.verdict == CS_RING_VERDICT_IO) {
        atomic_fetch_add(&r->io_errors, 1);
        CS_LOG(CS_LOG_WARN, "ring ledger could not be checked; it stays", KV_U("ledger", seq),
               KV_S("error", p.problem), KV_S("suspicion", suspicion));
        return CS_RING_VERDICT_IO;
    }
    if (p.verdict == CS_RING_VERDICT_GOOD) {
        CS_LOG(CS_LOG_WARN, "ring ledger was suspected and hashes to its record; it stays", KV_U("ledger", seq),
               KV_S("suspicion", suspicion));
        return CS_RING_VERDICT_GOOD;
    }
    pthread_mutex_lock(&r->wmu);
    rng_settle_locked(r, NULL); /* a failure here is the next write's to report */
    int verdict = CS_RING_VERDICT_GONE;
    if (r->filled && seq >= r->oldest && seq <= r->latest && !rng_in_hole_locked(r, seq, &hf, &hl) &&
        same_file(r, seq, &p)) {
        quarantine_proven(r, seq, &p, suspicion);
        verdict = CS_RING_VERDICT_BAD;
    }
    pthread_mutex_unlock(&r->wmu);
    return verdict;
}
