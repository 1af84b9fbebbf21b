/* SPDX-License-Identifier: Apache-2.0 */
/* Reading: a retained ledger opened and checked against its record, its frames, and the
 * bounds, health and counters anyone may ask for. */
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

static int open_frames(cs_ring *r, ledger_file *m, char *problem, size_t plen);

static ledger_file *file_of(cs_ledger_ref *ref)
{
    return (ledger_file *)((char *)ref - offsetof(ledger_file, ref));
}

static int not_retained_outside(uint32_t seq, uint32_t oldest, uint32_t latest, cs_err *err)
{
    return cs_err_set(err, CS_RING_ERR_NOT_RETAINED,
                      "store: ledger not retained: ledger %" PRIu32 " outside [%" PRIu32 ",%" PRIu32 "]", seq,
                      oldest, latest);
}

bool rng_retained(cs_ring *r, uint32_t seq)
{
    uint32_t oldest, latest;
    return cs_ring_bounds(r, &oldest, &latest) && seq >= oldest && seq <= latest;
}

/* A check failed: a prune or reset racing with us explains it when seq has left the bounds
 * meanwhile; otherwise the ledger is suspect (the caller may ask cs_ring_condemn for a verdict). */
static int get_failed(cs_ring *r, uint32_t seq, const char *problem, cs_err *err)
{
    if (!rng_retained(r, seq))
        return cs_err_set(err, CS_RING_ERR_NOT_RETAINED, "store: ledger not retained: ledger %" PRIu32 " was pruned",
                          seq);
    return cs_err_set(err, CS_RING_ERR_CORRUPT, "store: ledger %" PRIu32 " failed its integrity check: %s", seq,
                      problem);
}

static int get_io_failed(cs_ring *r, uint32_t seq, const char *what, int e, cs_err *err)
{
    atomic_fetch_add(&r->io_errors, 1);
    return cs_err_set(err, CS_RING_ERR_IO, "store: read ledger %" PRIu32 ": %s: %s", seq, what, strerror(e));
}

/* Where seq stands: outside the bounds, in a hole, or retained (0). */
static int locate(cs_ring *r, uint32_t seq, cs_err *err)
{
    pthread_rwlock_rdlock(&r->lock);
    bool filled = r->filled;
    uint32_t oldest = r->oldest, latest = r->latest, first = 0, last = 0;
    bool hole = filled && seq >= oldest && seq <= latest && rng_in_hole_locked(r, seq, &first, &last);
    pthread_rwlock_unlock(&r->lock);
    if (!filled || seq < oldest || seq > latest)
        return not_retained_outside(seq, oldest, latest, err);
    if (hole)
        return cs_err_set(err, CS_RING_ERR_HOLE,
                          "store: ledger %" PRIu32 " is missing from the ring (ledgers %" PRIu32 " to %" PRIu32 ")",
                          seq, first, last);
    return 0;
}

static ledger_file *new_file(uint32_t seq, const cs_ledger_record *rec, int fd)
{
    ledger_file *m = malloc(sizeof *m);
    if (!m)
        return NULL;
    memset(&m->ref, 0, sizeof m->ref);
    m->ref.seq = seq;
    m->ref.rec = *rec;
    m->ref.fd = fd;
    m->ref.frames_fd = -1;
    m->frames = NULL;
    m->tail = NULL;
    atomic_init(&m->refs, 1);
    return m;
}

/* Opens and checks the frames the record claims; frames that fail are left out of the ref (a
 * finding is said in frames_problem, an I/O error is only counted). */
static void attach_frames(cs_ring *r, ledger_file *m)
{
    char problem[300];
    int rc = open_frames(r, m, problem, sizeof problem);
    if (rc == 0)
        return;
    if (rc == -3)
        atomic_fetch_add(&r->io_errors, 1);
    else
        snprintf(m->ref.frames_problem, sizeof m->ref.frames_problem, "%s", problem);
    m->ref.frames_claimed_xxh3 = m->ref.rec.frames_xxh3;
    m->ref.rec.frames_len = 0;
    m->ref.rec.frames_off = 0;
    m->ref.rec.frames_xxh3 = 0;
    m->ref.rec.raw_xxh3 = 0;
}

int cs_ring_get(cs_ring *r, uint32_t seq, cs_ledger_ref **out, cs_err *err)
{
    *out = NULL;
    if (locate(r, seq, err) != 0)
        return -1;
    /* Opened outside the lock: a prune racing with us shows up as a missing file, and once open
     * the unlink no longer matters. Never through a symlink; O_NONBLOCK so a FIFO put in the
     * ledger's place cannot hang the open (it then fails the regular-file check). */
    char name[CS_LEDGER_NAME_MAX], problem[600];
    cs_ledger_name_format(name, sizeof name, seq);
    int fd = openat(r->dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ELOOP)
            return get_failed(r, seq, e == ENOENT ? "is missing" : "is a symbolic link", err);
        return get_io_failed(r, seq, name, e, err);
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return get_io_failed(r, seq, name, e, err);
    }
    cs_ledger_record rec;
    int rc = 0;
    if (!S_ISREG(st.st_mode)) {
        snprintf(problem, sizeof problem, "%s", S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file");
        rc = -1;
    } else if ((rc = rng_read_record(r, seq, &rec, NULL, problem, sizeof problem)) != 0) {
        if (rc == -3) { /* problem names the record and the error */
            close(fd);
            atomic_fetch_add(&r->io_errors, 1);
            return cs_err_set(err, CS_RING_ERR_IO, "store: read ledger %" PRIu32 ": %s", seq, problem);
        }
    } else if (rec.len != (uint64_t)st.st_size) {
        snprintf(problem, sizeof problem, "is %lld bytes, its record says %" PRIu64, (long long)st.st_size, rec.len);
        rc = -1;
    }
    if (rc != 0) {
        close(fd);
        return get_failed(r, seq, problem, err);
    }
    ledger_file *m = new_file(seq, &rec, fd);
    if (!m) {
        close(fd);
        return get_io_failed(r, seq, name, ENOMEM, err);
    }
    if (rec.frames_len)
        attach_frames(r, m);
    *out = &m->ref;
    return 0;
}

static int pread_exact(int fd, void *buf, size_t n, uint64_t off, size_t *got)
{
    for (*got = 0; *got < n;) {
        ssize_t k = pread(fd, (uint8_t *)buf + *got, n - *got, (off_t)(off + *got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0)
            return 1;
        *got += (size_t)k;
    }
    return 0;
}

/* Opens and checks the frames of m's ledger: its segment's frames file (a regular file, never
 * through a symlink) long enough to hold them, whose index parses against the record. Returns 0,
 * -1 with problem (a finding), or -3 with problem (a system call failed). */
static int open_frames(cs_ring *r, ledger_file *m, char *problem, size_t plen)
{
    const cs_ledger_record *rec = &m->ref.rec;
    char name[CS_LEDGER_NAME_MAX];
    rng_seg_name(name, m->ref.seq);
    int fd = openat(r->dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(problem, plen, "%s", e == ENOENT ? "is missing" : e == ELOOP ? "is a symbolic link" : strerror(e));
        return e == ENOENT || e == ELOOP ? -1 : -3;
    }
    struct stat st;
    size_t tail_len = cs_frames_tail_len(rec->chunks), got = 0;
    int rc = fstat(fd, &st) != 0 ? (snprintf(problem, plen, "%s", strerror(errno)), -3)
                                 : rng_check_frames_stat(&st, m->ref.seq, rec, problem, plen);
    if (rc == 0) {
        m->tail = malloc(tail_len);
        m->frames = malloc((rec->chunks ? rec->chunks : 1) * sizeof *m->frames);
        if (!m->tail || !m->frames) {
            snprintf(problem, plen, "%s", strerror(ENOMEM));
            rc = -3;
        }
    }
    if (rc == 0) {
        int k = pread_exact(fd, m->tail, tail_len, rec->frames_off + rec->frames_len - tail_len, &got);
        if (k != 0) {
            snprintf(problem, plen, "%s", k < 0 ? strerror(errno) : "is shorter than its record");
            rc = k < 0 ? -3 : -1;
        }
    }
    if (rc == 0)
        rc = cs_frames_parse_tail(m->tail, tail_len, rec->frames_len, m->ref.seq, rec->len, rec->chunks,
                                  rec->chunk_size, m->frames, problem, plen);
    if (rc != 0) {
        close(fd);
        free(m->tail);
        free(m->frames);
        m->tail = NULL;
        m->frames = NULL;
        return rc;
    }
    /* The index's payload offsets count from the frames' start; the segment's from its own. */
    for (uint32_t k = 0; k < rec->chunks; k++)
        if (m->frames[k].codec == 1)
            m->frames[k].off += rec->frames_off;
    m->ref.frames_fd = fd;
    m->ref.frames = m->frames;
    m->ref.frames_tail = m->tail;
    m->ref.frames_tail_len = tail_len;
    return 0;
}

int cs_frame_read(const cs_ledger_ref *ref, uint32_t k, void *buf, cs_err *err)
{
    const cs_frame *f = &ref->frames[k];
    if (f->codec == 0)
        return cs_ledger_read(ref, f->off, buf, f->len, err);
    size_t got;
    int rc = pread_exact(ref->frames_fd, buf, f->len, f->off, &got);
    if (rc < 0)
        return cs_err_set(err, CS_RING_ERR_IO, "store: read ledger %" PRIu32 " frames: %s", ref->seq, strerror(errno));
    if (rc > 0)
        return cs_err_set(err, CS_RING_ERR_CORRUPT,
                          "frames-%" PRIu32 ".seg is shorter than ledger %" PRIu32 "'s record: ends before byte %" PRIu64
                          " of %" PRIu64,
                          ref->seq - ref->seq % RNG_SEG_LEDGERS, ref->seq, f->off + got + 1,
                          ref->rec.frames_off + ref->rec.frames_len);
    return 0;
}

int cs_ledger_read(const cs_ledger_ref *ref, uint64_t off, void *buf, size_t n, cs_err *err)
{
    for (size_t got = 0; got < n;) {
        ssize_t k = pread(ref->fd, (uint8_t *)buf + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return cs_err_set(err, CS_RING_ERR_IO, "store: read ledger %" PRIu32 ": %s", ref->seq, strerror(errno));
        if (k == 0)
            return cs_err_set(err, CS_RING_ERR_CORRUPT,
                              "ledger-%" PRIu32 ".xdr is shorter than its record: ends before byte %" PRIu64
                              " of %" PRIu64,
                              ref->seq, off + got + 1, ref->rec.len);
        got += (size_t)k;
    }
    return 0;
}

void cs_ledger_ref_retain(cs_ledger_ref *ref)
{
    atomic_fetch_add_explicit(&file_of(ref)->refs, 1, memory_order_relaxed);
}

void cs_ledger_ref_release(cs_ledger_ref *ref)
{
    if (!ref)
        return;
    ledger_file *m = file_of(ref);
    /* acq_rel: every holder's reads happen before the close. */
    if (atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1)
        return;
    close(m->ref.fd);
    if (m->ref.frames_fd >= 0)
        close(m->ref.frames_fd);
    free(m->frames);
    free(m->tail);
    free(m);
}

bool cs_ring_bounds(cs_ring *r, uint32_t *oldest, uint32_t *latest)
{
    pthread_rwlock_rdlock(&r->lock);
    bool filled = r->filled;
    *oldest = r->oldest;
    *latest = r->latest;
    pthread_rwlock_unlock(&r->lock);
    return filled;
}

uint32_t cs_ring_changes(cs_ring *r)
{
    return atomic_load(&r->changes.word);
}

void cs_ring_wait_change(cs_ring *r, uint32_t seen, int64_t timeout_ns)
{
    if (timeout_ns > 0)
        cs_bell_wait(&r->changes, seen, timeout_ns);
}

void cs_ring_wake(cs_ring *r)
{
    cs_bell_ring(&r->changes, INT_MAX);
}

void cs_ring_health(cs_ring *r, cs_ring_health_t *out)
{
    out->write_failures = atomic_load(&r->write_failures);
    out->degraded = atomic_load(&r->degraded);
    out->dropped = atomic_load(&r->dropped);
    out->io_errors = atomic_load(&r->io_errors);
    pthread_rwlock_rdlock(&r->lock);
    uint64_t holes = 0;
    for (size_t i = 0; i < r->nholes; i++)
        holes += (uint64_t)r->holes[i].last - r->holes[i].first + 1;
    pthread_rwlock_unlock(&r->lock);
    out->holes = holes;
}

const char *cs_ring_dir(const cs_ring *r)
{
    return r->dir;
}

uint64_t cs_ring_bytes(cs_ring *r)
{
    return atomic_load_explicit(&r->bytes, memory_order_relaxed);
}

uint32_t cs_ring_max_chunk_size(cs_ring *r)
{
    return atomic_load_explicit(&r->max_chunk, memory_order_relaxed);
}

void rng_note_chunk_size(cs_ring *r, uint32_t chunk_size)
{
    unsigned cur = atomic_load_explicit(&r->max_chunk, memory_order_relaxed);
    while (chunk_size > cur &&
           !atomic_compare_exchange_weak_explicit(&r->max_chunk, &cur, chunk_size, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

uint64_t cs_ring_frames_bytes(cs_ring *r)
{
    return atomic_load_explicit(&r->frames_bytes, memory_order_relaxed);
}
