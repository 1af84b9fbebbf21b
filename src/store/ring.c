#include "store/ring.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "store/ledgerdir.h"

struct cs_ring {
    char *dir;
    int dfd; /* every file operation is relative to this, so no paths are built per ledger */
    uint64_t retention;
    /* Bounds: written only by the put thread under the write lock, read by anyone under the read
     * lock. oldest and latest are 0 while the ring is empty. */
    pthread_rwlock_t lock;
    bool filled;
    uint32_t oldest, latest;
    /* Health, for /healthz: written by the put thread, read by anyone. */
    atomic_uint_fast64_t write_failures;
    atomic_bool degraded;
};

/* The public ref is embedded so that release can find the mapping and the count. */
typedef struct ledger_map {
    cs_ledger_ref ref;
    atomic_uint refs;
} ledger_map;

static ledger_map *map_of(cs_ledger_ref *ref)
{
    return (ledger_map *)((char *)ref - offsetof(ledger_map, ref));
}

static void unlink_ledger(int dfd, uint32_t seq)
{
    char name[CS_LEDGER_NAME_MAX];
    cs_ledger_name_format(name, sizeof name, seq);
    /* ENOENT is expected (a zero-padded dump name, a file removed by hand); nothing else can be
     * done about other failures either, and a leftover file only costs disk space. */
    unlinkat(dfd, name, 0);
}

/* Unlinks [from, to], both inclusive; the 64-bit counter ends the loop at 4294967295. */
static void unlink_range(int dfd, uint32_t from, uint32_t to)
{
    for (uint64_t s = from; s <= to; s++)
        unlink_ledger(dfd, (uint32_t)s);
}

static void set_bounds(cs_ring *r, bool filled, uint32_t oldest, uint32_t latest)
{
    pthread_rwlock_wrlock(&r->lock);
    r->filled = filled;
    r->oldest = oldest;
    r->latest = latest;
    pthread_rwlock_unlock(&r->lock);
}

/* The oldest sequence that keeps [oldest, latest] within the retention count. */
static uint32_t pruned_oldest(const cs_ring *r, uint32_t oldest, uint32_t latest)
{
    uint64_t span = (uint64_t)latest - oldest + 1;
    return span > r->retention ? (uint32_t)((uint64_t)latest + 1 - r->retention) : oldest;
}

/* mkdir -p with mode 0755; a component that already exists must be a directory. */
static int ensure_dir(const char *path)
{
    if (mkdir(path, 0755) == 0)
        return 0;
    int e = errno;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    errno = e == EEXIST ? ENOTDIR : e;
    return -1;
}

static int mkdir_all(const char *dir)
{
    char *p = strdup(dir);
    if (!p)
        return -1;
    int rc = 0;
    for (char *s = p + (*p == '/'); *s && rc == 0; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        rc = ensure_dir(p);
        *s = '/';
    }
    if (rc == 0)
        rc = ensure_dir(p);
    int e = errno;
    free(p);
    errno = e;
    return rc;
}

/* Loads the bounds from what is on disk and prunes to the retention count. */
static int rescan(cs_ring *r, cs_err *err)
{
    cs_ledger_entry *v;
    size_t n;
    if (cs_ledger_dir_scan(r->dir, "store", &v, &n, err) != 0)
        return -1;
    if (n > 0) {
        uint32_t oldest = v[0].seq, latest = v[n - 1].seq;
        uint32_t keep = pruned_oldest(r, oldest, latest);
        /* By the names found, so a zero-padded name is removed too rather than rescanned later. */
        for (size_t i = 0; i < n && v[i].seq < keep; i++)
            unlinkat(r->dfd, v[i].name, 0);
        r->filled = true;
        r->oldest = keep;
        r->latest = latest;
    }
    free(v);
    return 0;
}

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* A crash between creating a temporary file and renaming it leaves it behind; nothing else ever
 * names it again, so it would only take disk space. Every `*.tmp` non-directory goes. */
static void remove_leftover_tmps(cs_ring *r)
{
    int fd = openat(r->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return; /* the scan that follows reports an unreadable directory */
    }
    uint64_t removed = 0;
    for (struct dirent *de; (de = readdir(d));)
        if (has_suffix(de->d_name, ".tmp") && unlinkat(r->dfd, de->d_name, 0) == 0)
            removed++;
    closedir(d);
    if (removed)
        CS_LOG(CS_LOG_INFO, "ring: removed leftover temporary files", KV_S("dir", r->dir), KV_U("files", removed));
}

/* A data dir that cannot be written would otherwise be noticed only at the first ring write,
 * possibly hours later: create and remove a file now. */
static int probe_writable(cs_ring *r, cs_err *err)
{
    static const char probe[] = "write-probe.tmp";
    int fd = openat(r->dfd, probe, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return cs_err_set(err, 0, "store: \"%s\" cannot be written: create %s: %s", r->dir, probe, strerror(errno));
    close(fd);
    if (unlinkat(r->dfd, probe, 0) != 0)
        return cs_err_set(err, 0, "store: \"%s\" cannot be written: remove %s: %s", r->dir, probe, strerror(errno));
    return 0;
}

/* Open errors carry kind 0: they are fatal configuration problems that callers only print. */
int cs_ring_open(cs_ring **out, const char *dir, int64_t retention, cs_err *err)
{
    *out = NULL;
    if (retention <= 0)
        return cs_err_set(err, 0, "store: retention must be positive, got %" PRId64, retention);
    if (mkdir_all(dir) != 0)
        return cs_err_set(err, 0, "store: create \"%s\": %s", dir, strerror(errno));
    cs_ring *r = calloc(1, sizeof *r);
    char *copy = strdup(dir);
    if (!r || !copy) {
        free(r);
        free(copy);
        return cs_err_set(err, 0, "store: open \"%s\": %s", dir, strerror(ENOMEM));
    }
    r->dir = copy;
    r->retention = (uint64_t)retention;
    r->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (r->dfd < 0) {
        /* Worded like the scan that would otherwise fail the same way. */
        cs_err_set(err, 0, "store: scan \"%s\": %s", dir, strerror(errno));
        free(r->dir);
        free(r);
        return -1;
    }
    pthread_rwlock_init(&r->lock, NULL);
    atomic_init(&r->write_failures, 0);
    atomic_init(&r->degraded, false);
    remove_leftover_tmps(r);
    if (probe_writable(r, err) != 0 || rescan(r, err) != 0) {
        if (err)
            err->kind = 0;
        cs_ring_close(r);
        return -1;
    }
    *out = r;
    return 0;
}

void cs_ring_close(cs_ring *r)
{
    if (!r)
        return;
    close(r->dfd);
    pthread_rwlock_destroy(&r->lock);
    free(r->dir);
    free(r);
}

/* Writes all parts with writev, resuming after partial writes and EINTR. The iovec window only
 * copies descriptors; the ledger bytes are never joined. */
static int write_parts(int fd, const struct iovec *parts, size_t nparts)
{
    size_t i = 0, off = 0; /* next byte to write: parts[i].iov_base + off */
    for (;;) {
        while (i < nparts && off == parts[i].iov_len) {
            i++;
            off = 0;
        }
        if (i == nparts)
            return 0;
        struct iovec win[64];
        int cnt = 0;
        for (size_t j = i; j < nparts && cnt < (int)(sizeof win / sizeof win[0]); j++) {
            size_t skip = j == i ? off : 0;
            win[cnt].iov_base = (char *)parts[j].iov_base + skip;
            win[cnt].iov_len = parts[j].iov_len - skip;
            cnt++;
        }
        ssize_t w = writev(fd, win, cnt);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        if (w == 0) {
            /* Cannot happen for a regular file with bytes pending; guard against spinning. */
            errno = EIO;
            return -1;
        }
        for (size_t left = (size_t)w; left > 0;) {
            size_t room = parts[i].iov_len - off;
            size_t step = left < room ? left : room;
            off += step;
            left -= step;
            if (off == parts[i].iov_len) {
                i++;
                off = 0;
            }
        }
    }
}

static void tmp_name(char tmp[CS_LEDGER_NAME_MAX], uint32_t seq)
{
    cs_ledger_name_format(tmp, CS_LEDGER_NAME_MAX, seq);
    strcat(tmp, ".tmp"); /* CS_LEDGER_NAME_MAX leaves room for it */
}

/* Writes `<final>.tmp`; the rename into place is a separate step, so a failed write changes
 * nothing the ring serves. */
static int write_tmp(cs_ring *r, uint32_t seq, const struct iovec *parts, size_t nparts, cs_err *err)
{
    char tmp[CS_LEDGER_NAME_MAX];
    tmp_name(tmp, seq);
    int fd = openat(r->dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return cs_err_set(err, CS_RING_ERR_IO, "store: write ledger %" PRIu32 ": %s", seq, strerror(errno));
    int rc = write_parts(fd, parts, nparts);
    int e = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    if (rc != 0) {
        unlinkat(r->dfd, tmp, 0);
        return cs_err_set(err, CS_RING_ERR_IO, "store: write ledger %" PRIu32 ": %s", seq, strerror(e));
    }
    return 0;
}

/* Renames the written `<final>.tmp` over the final name, so a reader never sees a partial file
 * and a mapping of an older file of the same name is never modified in place. */
static int publish_tmp(cs_ring *r, uint32_t seq, cs_err *err)
{
    char name[CS_LEDGER_NAME_MAX], tmp[CS_LEDGER_NAME_MAX];
    cs_ledger_name_format(name, sizeof name, seq);
    tmp_name(tmp, seq);
    if (renameat(r->dfd, tmp, r->dfd, name) != 0) {
        int e = errno;
        unlinkat(r->dfd, tmp, 0);
        return cs_err_set(err, CS_RING_ERR_IO, "store: publish ledger %" PRIu32 ": %s", seq, strerror(e));
    }
    return 0;
}

static void put_failed(cs_ring *r)
{
    atomic_fetch_add(&r->write_failures, 1);
    atomic_store(&r->degraded, true);
}

int cs_ring_put(cs_ring *r, uint32_t seq, const struct iovec *parts, size_t nparts, bool *reset,
                cs_err *err)
{
    if (reset)
        *reset = false;
    if (seq == 0)
        return cs_err_set(err, CS_RING_ERR_INVALID_SEQ,
                          "store: invalid ledger sequence: ledger sequences start at 1, so 0 means a "
                          "wrapped counter");
    /* The new ledger is written before anything is reset: a write that fails leaves the ring
     * serving what it held (the gap it leaves resets the ring at the next write that works). */
    if (write_tmp(r, seq, parts, nparts, err) != 0) {
        put_failed(r);
        return -1;
    }
    /* Only this thread writes the bounds, so it may read them without the lock. */
    if (r->filled && (r->latest == UINT32_MAX || seq != r->latest + 1)) {
        uint32_t oldest = r->oldest, latest = r->latest;
        /* Empty the bounds first so no reader is sent to a file about to disappear. */
        set_bounds(r, false, 0, 0);
        unlink_range(r->dfd, oldest, latest);
        if (reset)
            *reset = true;
    }
    if (publish_tmp(r, seq, err) != 0) {
        put_failed(r);
        return -1;
    }
    atomic_store(&r->degraded, false);
    uint32_t oldest = r->filled ? r->oldest : seq;
    uint32_t keep = pruned_oldest(r, oldest, seq);
    set_bounds(r, true, keep, seq);
    if (keep != oldest)
        unlink_range(r->dfd, oldest, keep - 1);
    return 0;
}

static int not_retained_outside(uint32_t seq, uint32_t oldest, uint32_t latest, cs_err *err)
{
    return cs_err_set(err, CS_RING_ERR_NOT_RETAINED,
                      "store: ledger not retained: ledger %" PRIu32 " outside [%" PRIu32 ",%" PRIu32 "]", seq,
                      oldest, latest);
}

/* Maps an open ledger file; a 0-byte file gets no mapping. On failure errno is set. */
static int map_file(int fd, cs_ledger_ref *ref)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -1;
    if (S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        return -1;
    }
    ref->len = (size_t)st.st_size;
    ref->data = NULL;
    if (ref->len == 0)
        return 0;
    void *p = mmap(NULL, ref->len, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return -1;
    ref->data = p;
    return 0;
}

int cs_ring_get(cs_ring *r, uint32_t seq, cs_ledger_ref **out, cs_err *err)
{
    *out = NULL;
    uint32_t oldest, latest;
    bool filled = cs_ring_bounds(r, &oldest, &latest);
    if (!filled || seq < oldest || seq > latest)
        return not_retained_outside(seq, oldest, latest, err);
    /* The file is opened outside the lock: a prune racing with us shows up as ENOENT, and once
     * open (or mapped) the unlink no longer matters. */
    char name[CS_LEDGER_NAME_MAX];
    cs_ledger_name_format(name, sizeof name, seq);
    int fd = openat(r->dfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return cs_err_set(err, CS_RING_ERR_NOT_RETAINED,
                          "store: ledger not retained: ledger %" PRIu32 " was pruned", seq);
    if (fd < 0)
        return cs_err_set(err, CS_RING_ERR_IO, "store: read ledger %" PRIu32 ": %s", seq, strerror(errno));
    ledger_map *m = malloc(sizeof *m);
    int rc = m ? map_file(fd, &m->ref) : -1; /* malloc sets errno */
    int e = errno;
    close(fd);
    if (rc != 0) {
        free(m);
        return cs_err_set(err, CS_RING_ERR_IO, "store: read ledger %" PRIu32 ": %s", seq, strerror(e));
    }
    m->ref.seq = seq;
    atomic_init(&m->refs, 1);
    *out = &m->ref;
    return 0;
}

void cs_ledger_ref_retain(cs_ledger_ref *ref)
{
    atomic_fetch_add_explicit(&map_of(ref)->refs, 1, memory_order_relaxed);
}

void cs_ledger_ref_release(cs_ledger_ref *ref)
{
    if (!ref)
        return;
    ledger_map *m = map_of(ref);
    /* acq_rel: every holder's reads of the mapping happen before the unmap. */
    if (atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (m->ref.data)
        munmap((void *)m->ref.data, m->ref.len);
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
}

const char *cs_ring_dir(const cs_ring *r)
{
    return r->dir;
}
