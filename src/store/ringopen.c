/* Opening a ring: the survey that sets the bounds without changing anything, and the repairs
 * it leaves for the first write (settle). */
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


static int check_frames_at_open(cs_ring *r, uint32_t seq, const cs_ledger_record *rec, char *problem, size_t plen)
{
    char name[CS_LEDGER_NAME_MAX];
    rng_frames_name(name, seq);
    struct stat st;
    if (fstatat(r->dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        snprintf(problem, plen, "%s", errno == ENOENT ? "is missing" : strerror(errno));
        return -1;
    }
    return rng_check_frames_stat(&st, rec, problem, plen);
}

/* Checks ledger seq at open, reading only: a regular file of the recorded length (of any length
 * when it has no record in a ring from before records, which has no ring-format: its record is
 * made when the repairs are carried out; a record that exists is checked all the same). Frames
 * that fail their check are noted in *bad_frames, and those of the older format in *old_frames as
 * well. Returns 0, or -1 with problem. */
static int check_at_open(cs_ring *r, const entry *ledger, bool upgrade, uint64_t *size, uint64_t *frames_size,
                         bool *bad_frames, bool *old_frames, char *problem, size_t plen)
{
    *frames_size = 0;
    *bad_frames = *old_frames = false;
    uint32_t seq = ledger->seq;
    struct stat st;
    if (fstatat(r->dfd, ledger->name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        snprintf(problem, plen, "%s", strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(problem, plen, "%s", S_ISLNK(st.st_mode) ? "is a symbolic link" : S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file");
        return -1;
    }
    *size = (uint64_t)st.st_size;
    cs_ledger_record rec;
    int rr = rng_read_record(r->dfd, seq, &rec, problem, plen);
    if (rr == -2 && upgrade)
        return 0; /* a ring from before records: its record is made at the first write */
    if (rr != 0)
        return -1;
    if (rec.len != (uint64_t)st.st_size) {
        snprintf(problem, plen, "is %lld bytes, its record says %" PRIu64, (long long)st.st_size, rec.len);
        return -1;
    }
    rng_note_chunk_size(r, rec.chunk_size); /* a replay may cut it there */
    /* Bad frames cost the frames, not the ledger: its raw bytes are still checked by their own
     * record when replayed by re-encoding. Frames of the older format (a version-2 record's) have
     * no per-chunk hashes: forgotten too, quietly, and made again. */
    char fproblem[300];
    if (rec.frames_len && rec.version < 3) {
        *bad_frames = *old_frames = true;
    } else if (rec.frames_len && check_frames_at_open(r, seq, &rec, fproblem, sizeof fproblem) != 0) {
        rng_log_frames_problem(r, seq, fproblem);
        *bad_frames = true;
    } else {
        *frames_size = rec.frames_len;
    }
    return 0;
}

/* Whether ring-format says this build's format (3); a format-2 ring (records, no frames) is
 * upgraded by rewriting it: its records are read as records without frames. */
static bool format_current(cs_ring *r)
{
    char buf[64];
    int fd = openat(r->dfd, FORMAT_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    return n == (ssize_t)strlen(FORMAT_TEXT) && memcmp(buf, FORMAT_TEXT, (size_t)n) == 0;
}

static int note_drop(open_repairs *o, const entry *e, const char *problem)
{
    if (o->nalone % 16 == 0) {
        open_drop *grown = realloc(o->alone, (o->nalone + 16) * sizeof *grown);
        if (!grown)
            return -1;
        o->alone = grown;
    }
    open_drop *d = &o->alone[o->nalone++];
    d->seq = e->seq;
    snprintf(d->name, sizeof d->name, "%s", e->name);
    snprintf(d->problem, sizeof d->problem, "%s", problem);
    return 0;
}

static int note_forget(open_repairs *o, uint32_t seq)
{
    if (o->nforget % 64 == 0) {
        uint32_t *grown = realloc(o->forget, (o->nforget + 64) * sizeof *grown);
        if (!grown)
            return -1;
        o->forget = grown;
    }
    o->forget[o->nforget++] = seq;
    return 0;
}

/* Sets the bounds from what is on disk without changing it, and notes in r->repairs what the
 * first write carries out (settle): the ring keeps the longest contiguous run of good ledgers that
 * ends at the newest good one, up to the retention count (older ledgers are pruned unchecked). A
 * bad ledger newer than that run, or one under a name that is not its own (ledger-007.xdr), costs
 * only itself; the first bad or missing ledger below the newest good one costs itself and
 * everything older. */
static int survey(cs_ring *r, cs_err *err)
{
    entry *v;
    size_t n;
    if (rng_scan_entries(r, &v, &n) != 0)
        return cs_err_set(err, 0, "store: scan \"%s\": %s", r->dir, strerror(errno));
    open_repairs *o = &r->repairs;
    o->upgrade = faccessat(r->dfd, FORMAT_NAME, F_OK, AT_SYMLINK_NOFOLLOW) != 0;
    o->rewrite_format = o->upgrade || !format_current(r);
    bool nomem = false;
    /* Canonically named ledgers only, one per sequence, newest last; the rest cost themselves. */
    size_t nledgers = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].record)
            continue;
        if (!v[i].canonical) {
            char problem[300];
            snprintf(problem, sizeof problem, "unexpected file name %s", v[i].name);
            nomem |= note_drop(o, &v[i], problem) != 0;
            continue;
        }
        v[nledgers++] = v[i];
    }
    bool filled = false;
    uint32_t oldest = 0, latest = 0;
    uint64_t bytes = 0, fbytes = 0; /* of the ledgers kept and their frames, as the checks found them */
    for (size_t k = nledgers; k-- > 0 && !nomem;) {
        const entry *e = &v[k];
        if (filled && e->seq != oldest - 1) {
            o->broken = true;
            o->brk.seq = oldest - 1;
            snprintf(o->brk.problem, sizeof o->brk.problem, "is missing (the ring resumes at ledger %" PRIu32 ")",
                     oldest);
            break;
        }
        uint64_t size = 0, fsize = 0;
        bool bad_frames, old_frames;
        char problem[600];
        if (check_at_open(r, e, o->upgrade, &size, &fsize, &bad_frames, &old_frames, problem, sizeof problem) !=
            0) {
            if (!filled) {
                nomem |= note_drop(o, e, problem) != 0;
                continue;
            }
            o->broken = true;
            o->brk.seq = e->seq;
            snprintf(o->brk.problem, sizeof o->brk.problem, "%s", problem);
            break;
        }
        if (bad_frames)
            nomem |= note_forget(o, e->seq) != 0;
        o->old_frames += old_frames;
        bytes += size;
        fbytes += fsize;
        if (!filled)
            latest = e->seq;
        filled = true;
        oldest = e->seq;
        if ((uint64_t)latest - oldest + 1 >= r->retention)
            break; /* what is older is pruned, unchecked */
    }
    if (o->broken && nledgers > 0 && v[0].seq <= o->brk.seq)
        o->brk_dropped = (uint64_t)o->brk.seq - v[0].seq + 1; /* counted as sequences: a gap counts too */
    free(v);
    if (nomem)
        return cs_err_set(err, 0, "store: scan \"%s\": %s", r->dir, strerror(ENOMEM));
    r->filled = filled;
    r->oldest = filled ? oldest : 0;
    r->latest = filled ? latest : 0;
    atomic_store(&r->bytes, filled ? bytes : 0);
    atomic_store(&r->frames_bytes, filled ? fbytes : 0);
    atomic_store(&r->unsettled, true);
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


/* A bad entry in a ledger's place: a file goes, and so does an empty directory; a directory with
 * something in it stays (writing that ledger then fails, and says so). */
static void remove_entry(cs_ring *r, const char *name)
{
    if (unlinkat(r->dfd, name, 0) != 0 && errno == EISDIR)
        unlinkat(r->dfd, name, AT_REMOVEDIR);
}

/* Every ledger, record and frames entry but the bounds' own (frames only while their record
 * claims them) goes: bad and pruned ledgers, and the sidecars of a crash between two renames. */
static void remove_outside(cs_ring *r)
{
    entry *v;
    size_t n;
    if (rng_scan_entries(r, &v, &n) != 0)
        return; /* leftovers only cost disk space; the next start tries again */
    for (size_t i = 0; i < n; i++) {
        const entry *e = &v[i];
        bool keep = r->filled && e->canonical && e->seq >= r->oldest && e->seq <= r->latest;
        if (keep && e->kind == E_FRAMES) {
            cs_ledger_record rec;
            char ignored[300];
            keep = rng_read_record(r->dfd, e->seq, &rec, ignored, sizeof ignored) == 0 && rec.frames_len != 0;
        }
        if (!keep)
            remove_entry(r, e->name);
    }
    free(v);
}

/* A ring from before records (no ring-format): a record for each kept ledger that has none, made
 * by hashing it. A record that exists is never made again from the bytes on disk: that would
 * vouch for whatever the disk now holds. */
static int make_records(cs_ring *r, cs_err *err)
{
    uint64_t made = 0;
    for (uint64_t s = r->oldest; r->filled && s <= r->latest; s++) {
        char name[CS_LEDGER_NAME_MAX];
        rng_record_name(name, (uint32_t)s);
        if (faccessat(r->dfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
            continue;
        cs_ledger_name_format(name, sizeof name, (uint32_t)s);
        int fd = openat(r->dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        cs_ledger_record rec = {0};
        int ok = fd >= 0 && fstat(fd, &st) == 0;
        if (ok) {
            rec.len = (uint64_t)st.st_size;
            ok = rng_hash_file(fd, rec.len, &rec.xxh64) == 0 && rng_write_record(r->dfd, (uint32_t)s, &rec) == 0;
        }
        int e = errno;
        if (fd >= 0)
            close(fd);
        if (!ok)
            return cs_err_set(err, 0, "store: upgrade \"%s\": ledger %" PRIu64 ": %s", r->dir, s, strerror(e));
        made++;
    }
    if (made)
        CS_LOG(CS_LOG_INFO, "ring: integrity records made from the ledgers on disk (a ring written before records)",
               KV_S("dir", r->dir), KV_U("ledgers", made));
    return 0;
}

static void log_drops(const cs_ring *r, const open_repairs *o)
{
    for (size_t i = 0; i < o->nalone; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", r->dir, o->alone[i].name);
        CS_LOG(CS_LOG_ERROR, "ring ledger failed its integrity check; dropping it", KV_S("file", path),
               KV_S("problem", o->alone[i].problem), KV_U("oldest", r->oldest), KV_U("latest", r->latest));
    }
    if (o->broken)
        rng_log_reject(r, o->brk.seq, o->brk.problem, o->brk_dropped, r->filled, r->oldest, r->latest);
}

int rng_settle_locked(cs_ring *r, cs_err *err)
{
    if (!atomic_load(&r->unsettled))
        return 0;
    open_repairs *o = &r->repairs;
    remove_leftover_tmps(r);
    if (o->upgrade && make_records(r, err) != 0)
        return -1;
    for (size_t i = 0; i < o->nforget; i++) {
        cs_ledger_record rec;
        char ignored[300];
        if (rng_read_record(r->dfd, o->forget[i], &rec, ignored, sizeof ignored) == 0 && rec.frames_len)
            rng_forget_frames(r, o->forget[i], &rec);
    }
    if (o->old_frames)
        CS_LOG(CS_LOG_INFO, "ring: stored frames of an older format forgotten; they are made again",
               KV_S("dir", r->dir), KV_U("ledgers", o->old_frames));
    remove_outside(r);
    if (o->rewrite_format && rng_write_small_file(r->dfd, FORMAT_NAME, FORMAT_TEXT) != 0)
        return cs_err_set(err, 0, "store: upgrade \"%s\": %s: %s", r->dir, FORMAT_NAME, strerror(errno));
    log_drops(r, o);
    atomic_fetch_add(&r->dropped, o->nalone + o->brk_dropped);
    free(o->alone);
    free(o->forget);
    memset(o, 0, sizeof *o);
    atomic_store(&r->unsettled, false);
    return 0;
}

int rng_settle(cs_ring *r, cs_err *err)
{
    if (!atomic_load(&r->unsettled))
        return 0;
    pthread_mutex_lock(&r->wmu);
    int rc = rng_settle_locked(r, err);
    pthread_mutex_unlock(&r->wmu);
    return rc;
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
    r->direct = true;
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
    pthread_mutex_init(&r->wmu, NULL);
    atomic_init(&r->write_failures, 0);
    atomic_init(&r->degraded, false);
    atomic_init(&r->dropped, 0);
    atomic_init(&r->unsettled, false);
    if (probe_writable(r, err) != 0 || survey(r, err) != 0) {
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
    free(r->repairs.alone);
    free(r->repairs.forget);
    pthread_rwlock_destroy(&r->lock);
    pthread_mutex_destroy(&r->wmu);
    free(r->dir);
    free(r);
}
