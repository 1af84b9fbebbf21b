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

#include "common/log.h"
#include "store/frames.h"
#include "store/ledgerdir.h"
#include "store/ring_internal.h"

static int open_frames(cs_ring *r, ledger_file *m, char *problem, size_t plen);

static ledger_file *file_of(cs_ledger_ref *ref)
{
    return (ledger_file *)((char *)ref - offsetof(ledger_file, ref));
}

void cs_ring_reject(cs_ring *r, uint32_t seq, const char *problem)
{
    pthread_mutex_lock(&r->wmu);
    rng_settle_locked(r, NULL); /* a failure here is the next write's to report */
    if (!r->filled || seq < r->oldest || seq > r->latest) {
        pthread_mutex_unlock(&r->wmu);
        return;
    }
    uint32_t oldest = r->oldest, latest = r->latest;
    bool filled = seq != latest;
    /* The bounds first, so no reader is sent to the files about to go. */
    rng_set_bounds(r, filled, filled ? seq + 1 : 0, filled ? latest : 0);
    rng_unlink_counted(r, oldest, seq);
    uint64_t dropped = (uint64_t)seq - oldest + 1;
    atomic_fetch_add(&r->dropped, dropped);
    pthread_mutex_unlock(&r->wmu);
    rng_log_reject(r, seq, problem, dropped, filled, seq + 1, latest);
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

/* A check failed: a prune, reset or drop racing with us explains it when seq has left the bounds
 * meanwhile; otherwise the ledger is bad and is rejected. */
static int get_failed(cs_ring *r, uint32_t seq, const char *problem, cs_err *err)
{
    if (!rng_retained(r, seq))
        return cs_err_set(err, CS_RING_ERR_NOT_RETAINED, "store: ledger not retained: ledger %" PRIu32 " was pruned",
                          seq);
    cs_ring_reject(r, seq, problem);
    return cs_err_set(err, CS_RING_ERR_NOT_RETAINED,
                      "store: ledger not retained: ledger %" PRIu32 " failed its integrity check: %s", seq, problem);
}

int cs_ring_get(cs_ring *r, uint32_t seq, cs_ledger_ref **out, cs_err *err)
{
    *out = NULL;
    uint32_t oldest, latest;
    bool filled = cs_ring_bounds(r, &oldest, &latest);
    if (!filled || seq < oldest || seq > latest)
        return not_retained_outside(seq, oldest, latest, err);
    /* Opened outside the lock: a prune racing with us shows up as a missing file, and once open
     * the unlink no longer matters. Never through a symlink; O_NONBLOCK so a FIFO put in the
     * ledger's place cannot hang the open (it then fails the regular-file check). */
    char name[CS_LEDGER_NAME_MAX], problem[300];
    cs_ledger_name_format(name, sizeof name, seq);
    int fd = openat(r->dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ELOOP) {
            snprintf(problem, sizeof problem, "%s", e == ENOENT ? "is missing" : "is a symbolic link");
            return get_failed(r, seq, problem, err);
        }
        return cs_err_set(err, CS_RING_ERR_IO, "store: read ledger %" PRIu32 ": %s", seq, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return cs_err_set(err, CS_RING_ERR_IO, "store: read ledger %" PRIu32 ": %s", seq, strerror(e));
    }
    cs_ledger_record rec;
    int rc = 0;
    if (!S_ISREG(st.st_mode)) {
        snprintf(problem, sizeof problem, "%s", S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file");
        rc = -1;
    } else if (rng_read_record(r->dfd, seq, &rec, problem, sizeof problem) != 0) {
        rc = -1;
    } else if (rec.len != (uint64_t)st.st_size) {
        snprintf(problem, sizeof problem, "is %lld bytes, its record says %" PRIu64, (long long)st.st_size, rec.len);
        rc = -1;
    }
    if (rc != 0) {
        close(fd);
        return get_failed(r, seq, problem, err);
    }
    ledger_file *m = malloc(sizeof *m);
    if (!m) {
        close(fd);
        return cs_err_set(err, CS_RING_ERR_IO, "store: read ledger %" PRIu32 ": %s", seq, strerror(ENOMEM));
    }
    m->ref.seq = seq;
    m->ref.rec = rec;
    m->ref.fd = fd;
    m->ref.frames_fd = -1;
    m->ref.frames = NULL;
    m->ref.frames_tail = NULL;
    m->ref.frames_tail_len = 0;
    m->frames = NULL;
    m->tail = NULL;
    atomic_init(&m->refs, 1);
    if (rec.frames_len && open_frames(r, m, problem, sizeof problem) != 0) {
        /* Not the ledger's fault: this replay (and every later one) re-encodes it. */
        if (rng_retained(r, seq))
            cs_ring_drop_frames(r, seq, rec.frames_xxh3, problem);
        m->ref.rec.frames_len = 0;
        m->ref.rec.frames_xxh3 = 0;
        m->ref.rec.raw_xxh3 = 0;
    }
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

/* Opens and checks the frames of m's ledger: a regular file (never through a symlink) of the
 * recorded length whose index parses against the record. Returns 0, or -1 with problem. */
static int open_frames(cs_ring *r, ledger_file *m, char *problem, size_t plen)
{
    const cs_ledger_record *rec = &m->ref.rec;
    char name[CS_LEDGER_NAME_MAX];
    rng_frames_name(name, m->ref.seq);
    int fd = openat(r->dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(problem, plen, "%s", errno == ENOENT ? "is missing" : errno == ELOOP ? "is a symbolic link" : strerror(errno));
        return -1;
    }
    struct stat st;
    size_t tail_len = cs_frames_tail_len(rec->chunks), got = 0;
    int rc = fstat(fd, &st) != 0 ? (snprintf(problem, plen, "%s", strerror(errno)), -1)
                                 : rng_check_frames_stat(&st, rec, problem, plen);
    if (rc == 0) {
        m->tail = malloc(tail_len);
        m->frames = malloc((rec->chunks ? rec->chunks : 1) * sizeof *m->frames);
        if (!m->tail || !m->frames) {
            snprintf(problem, plen, "%s", strerror(ENOMEM));
            rc = -1;
        }
    }
    if (rc == 0) {
        int k = pread_exact(fd, m->tail, tail_len, rec->frames_len - tail_len, &got);
        if (k != 0) {
            snprintf(problem, plen, "%s", k < 0 ? strerror(errno) : "is shorter than its record");
            rc = -1;
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
        return -1;
    }
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
                          "ledger-%" PRIu32 ".frames is shorter than its record: ends before byte %" PRIu64
                          " of %" PRIu64,
                          ref->seq, f->off + got + 1, ref->rec.frames_len);
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

void cs_ring_health(cs_ring *r, cs_ring_health_t *out)
{
    out->write_failures = atomic_load(&r->write_failures);
    out->degraded = atomic_load(&r->degraded);
    out->dropped = atomic_load(&r->dropped);
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
