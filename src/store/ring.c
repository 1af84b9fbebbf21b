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
#include <xxhash.h>
#include "wire/wire.h"
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "store/frames.h"
#include "store/ledgerdir.h"

/* A ledger the open found bad, with why. */
typedef struct open_drop {
    uint32_t seq;
    char name[256];
    char problem[600];
} open_drop;

/* What the open found and leaves for the first call that writes to carry out (settle): the open
 * itself changes nothing on disk, so a start that fails after it leaves the directory as it was. */
typedef struct open_repairs {
    bool upgrade;        /* no ring-format: a record is made for each kept ledger by hashing it */
    bool rewrite_format; /* ring-format is missing or of format 2 */
    open_drop *alone;    /* bad ledgers that cost only themselves */
    size_t nalone;
    bool broken;          /* brk ended the run of good ledgers: it and every older ledger go */
    open_drop brk;        /* seq and problem only */
    uint64_t brk_dropped; /* sequences at and below brk.seq that held a ledger or a gap */
    uint32_t *forget;     /* kept ledgers whose frames failed their check */
    size_t nforget;
} open_repairs;

struct cs_ring {
    char *dir;
    int dfd; /* every file operation is relative to this, so no paths are built per ledger */
    uint64_t retention;
    /* Bounds: written only by the put thread under the write lock, read by anyone under the read
     * lock. oldest and latest are 0 while the ring is empty. */
    pthread_rwlock_t lock;
    bool filled;
    uint32_t oldest, latest;
    /* Bytes of the ledger files in the bounds, and of their stored frames files (for /metrics):
     * changed under wmu (or by the open, alone), read by anyone. */
    atomic_uint_fast64_t bytes, frames_bytes;
    /* Health, for /healthz: written by the put thread, read by anyone. */
    atomic_uint_fast64_t write_failures;
    atomic_bool degraded;
    atomic_uint_fast64_t dropped;
    /* Serializes the bound changes of put with those of cs_ring_reject (any thread). */
    pthread_mutex_t wmu;
    /* The put thread's: write ledger files with O_DIRECT when the parts allow it (set before
     * puts begin); refused once the file system said no, so it is asked once. */
    bool direct;
    bool direct_refused;
    /* Set by the open, cleared under wmu once its repairs are carried out. */
    atomic_bool unsettled;
    open_repairs repairs;
};

#define FORMAT_NAME "ring-format"
#define FORMAT_TEXT "corestream-ring 3\n"
#define RECORD_MAX 256

/* The public ref is embedded so that release can find the descriptor and the count. */
typedef struct ledger_file {
    cs_ledger_ref ref;
    atomic_uint refs;
    cs_frame *frames;   /* rec.chunks entries when frames_fd >= 0 */
    uint8_t *tail;      /* the frames file's index and trailer, as read */
} ledger_file;

static ledger_file *file_of(cs_ledger_ref *ref)
{
    return (ledger_file *)((char *)ref - offsetof(ledger_file, ref));
}

/* "ledger-<seq>.rec" and "ledger-<seq>.frames": not ledger names, so the file source (and the
 * prototype) skip them. */
static void record_name(char buf[CS_LEDGER_NAME_MAX], uint32_t seq)
{
    snprintf(buf, CS_LEDGER_NAME_MAX, "ledger-%" PRIu32 ".rec", seq);
}

static void frames_name(char buf[CS_LEDGER_NAME_MAX], uint32_t seq)
{
    snprintf(buf, CS_LEDGER_NAME_MAX, "ledger-%" PRIu32 ".frames", seq);
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

static void bytes_adjust(cs_ring *r, int64_t delta)
{
    counter_adjust(&r->bytes, delta);
}

static void frames_bytes_adjust(cs_ring *r, int64_t delta)
{
    counter_adjust(&r->frames_bytes, delta);
}

/* Size of a regular ledger file, 0 for anything else. */
static uint64_t ledger_size(int dfd, const char *name)
{
    struct stat st;
    return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
}

/* Returns the bytes of the ledger file removed; adds those of its frames file to *frames. */
static uint64_t unlink_ledger(int dfd, uint32_t seq, uint64_t *frames)
{
    char name[CS_LEDGER_NAME_MAX];
    cs_ledger_name_format(name, sizeof name, seq);
    uint64_t size = ledger_size(dfd, name);
    /* ENOENT is expected (a file removed by hand); nothing else can be done about other failures
     * either (a directory in the ledger's place stays), and a leftover only costs disk space. The
     * ledger goes before its record, so a reader that opened the ledger and then misses the record
     * finds the ledger out of the bounds, not corrupt. */
    if (unlinkat(dfd, name, 0) != 0)
        size = 0;
    frames_name(name, seq);
    uint64_t fsize = ledger_size(dfd, name);
    if (unlinkat(dfd, name, 0) == 0)
        *frames += fsize;
    record_name(name, seq);
    unlinkat(dfd, name, 0);
    return size;
}

/* Unlinks [from, to], both inclusive; the 64-bit counter ends the loop at 4294967295. Returns the
 * bytes of the ledger files removed; adds those of their frames files to *frames. */
static uint64_t unlink_range(int dfd, uint32_t from, uint32_t to, uint64_t *frames)
{
    uint64_t bytes = 0;
    for (uint64_t s = from; s <= to; s++)
        bytes += unlink_ledger(dfd, (uint32_t)s, frames);
    return bytes;
}

/* unlink_range for a ring whose counters follow the files (not the open's scan). */
static void unlink_counted(cs_ring *r, uint32_t from, uint32_t to)
{
    uint64_t frames = 0;
    bytes_adjust(r, -(int64_t)unlink_range(r->dfd, from, to, &frames));
    frames_bytes_adjust(r, -(int64_t)frames);
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


/* Version 2 adds the stored frames; version 1 (a ring of format 2) is read as "no frames". */
static int format_record_v(char *buf, size_t len, int version, uint32_t seq, const cs_ledger_record *rec)
{
    int n = snprintf(buf, len, "corestream-ring-record %d seq=%" PRIu32 " len=%" PRIu64 " chunks=%" PRIu32
                     " chunk_size=%" PRIu32 " xxh64=%016" PRIx64, version, seq, rec->len, rec->chunks,
                     rec->chunk_size, rec->xxh64);
    if (version >= 2 && n > 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " frames_len=%" PRIu64 " frames_xxh3=%016" PRIx64
                      " raw_xxh3=%016" PRIx64, rec->frames_len, rec->frames_xxh3, rec->raw_xxh3);
    if (n > 0 && (size_t)n + 1 < len) {
        buf[n++] = '\n';
        buf[n] = '\0';
    }
    return n;
}

static int format_record(char *buf, size_t len, uint32_t seq, const cs_ledger_record *rec)
{
    return format_record_v(buf, len, 2, seq, rec);
}

/* Parses a record strictly: it must be exactly what format_record writes, and consistent. On
 * failure problem says what is wrong. */
static int parse_record(const char *text, uint32_t want_seq, cs_ledger_record *rec, char *problem, size_t plen)
{
    uint32_t seq;
    int version = 0;
    cs_ledger_record r = {0};
    int got = sscanf(text, "corestream-ring-record %d seq=%" SCNu32 " len=%" SCNu64 " chunks=%" SCNu32
                           " chunk_size=%" SCNu32 " xxh64=%" SCNx64 " frames_len=%" SCNu64 " frames_xxh3=%" SCNx64
                           " raw_xxh3=%" SCNx64,
                     &version, &seq, &r.len, &r.chunks, &r.chunk_size, &r.xxh64, &r.frames_len, &r.frames_xxh3,
                     &r.raw_xxh3);
    if (!((version == 1 && got == 6) || (version == 2 && got == 9))) {
        snprintf(problem, plen, "integrity record is unreadable");
        return -1;
    }
    char again[RECORD_MAX];
    format_record_v(again, sizeof again, version, seq, &r);
    bool consistent = r.chunk_size == 0
                          ? r.chunks == 0
                          : r.chunk_size >= 4096 && r.chunk_size <= 8388608 &&
                                r.chunks == (r.len + r.chunk_size - 1) / r.chunk_size;
    /* Frames need the live chunking, and hold at least their index. */
    if (r.frames_len != 0)
        consistent = consistent && r.chunk_size != 0 && r.frames_len >= cs_frames_tail_len(r.chunks);
    else
        consistent = consistent && r.frames_xxh3 == 0 && r.raw_xxh3 == 0;
    if (strcmp(again, text) != 0 || !consistent) {
        snprintf(problem, plen, "integrity record is unreadable");
        return -1;
    }
    if (seq != want_seq) {
        snprintf(problem, plen, "integrity record is for ledger %" PRIu32, seq);
        return -1;
    }
    *rec = r;
    return 0;
}

int cs_ring_record_parse(const char *text, uint32_t seq, cs_ledger_record *rec, char *problem, size_t plen)
{
    return parse_record(text, seq, rec, problem, plen);
}

size_t cs_ring_record_format(char *buf, size_t len, uint32_t seq, const cs_ledger_record *rec)
{
    int n = format_record(buf, len, seq, rec);
    return n < 0 ? 0 : (size_t)n;
}

/* Reads and parses the record of seq. Returns 0, -1 with problem, or -2 when it is missing
 * (ENOENT; errno kept). */
static int read_record(int dfd, uint32_t seq, cs_ledger_record *rec, char *problem, size_t plen)
{
    char name[CS_LEDGER_NAME_MAX];
    record_name(name, seq);
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(problem, plen, e == ENOENT ? "integrity record is missing" : "integrity record: %s", strerror(e));
        errno = e;
        return e == ENOENT ? -2 : -1;
    }
    char buf[RECORD_MAX + 1];
    ssize_t n = pread(fd, buf, RECORD_MAX, 0);
    close(fd);
    if (n < 0) {
        snprintf(problem, plen, "integrity record: %s", strerror(errno));
        return -1;
    }
    buf[n] = '\0';
    return parse_record(buf, seq, rec, problem, plen);
}

/* Writes name through name.tmp and a rename. On failure errno is set. */
static int write_small_file(int dfd, const char *name, const char *text)
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

static int write_record(int dfd, uint32_t seq, const cs_ledger_record *rec)
{
    char name[CS_LEDGER_NAME_MAX], text[RECORD_MAX];
    record_name(name, seq);
    format_record(text, sizeof text, seq, rec);
    return write_small_file(dfd, name, text);
}

/* Hashes an open ledger file with pread; on failure errno is set. */
static int hash_file(int fd, uint64_t len, uint64_t *sum)
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

enum { E_LEDGER, E_RECORD, E_FRAMES };

/* One ledger-, record- or frames-named entry of the directory. */
typedef struct entry {
    uint32_t seq;
    int kind;       /* E_* */
    bool record;    /* kind != E_LEDGER: a sidecar */
    bool canonical; /* the name is ledger-<seq>.xdr / .rec / .frames exactly, no padding */
    char name[256];
} entry;

static int cmp_entry(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->seq != y->seq)
        return (x->seq > y->seq) - (x->seq < y->seq);
    return x->kind - y->kind;
}

static int scan_entries(cs_ring *r, entry **out, size_t *n)
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
            else
                continue;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            entry *grown = realloc(*out, cap * sizeof *grown);
            if (!grown) {
                closedir(d);
                errno = ENOMEM;
                return -1;
            }
            *out = grown;
        }
        entry *e = &(*out)[(*n)++];
        e->seq = seq;
        e->kind = kind;
        e->record = kind != E_LEDGER;
        snprintf(e->name, sizeof e->name, "%s", de->d_name);
        char canon[CS_LEDGER_NAME_MAX];
        if (kind == E_RECORD)
            record_name(canon, seq);
        else if (kind == E_FRAMES)
            frames_name(canon, seq);
        else
            cs_ledger_name_format(canon, sizeof canon, seq);
        e->canonical = strcmp(canon, de->d_name) == 0;
    }
    int e = errno;
    closedir(d);
    if (e) {
        errno = e;
        return -1;
    }
    if (*n > 1)
        qsort(*out, *n, sizeof **out, cmp_entry);
    return 0;
}

static void ring_path(const cs_ring *r, uint32_t seq, char *buf, size_t len)
{
    char name[CS_LEDGER_NAME_MAX];
    cs_ledger_name_format(name, sizeof name, seq);
    snprintf(buf, len, "%s/%s", r->dir, name);
}

static void log_reject(const cs_ring *r, uint32_t seq, const char *problem, uint64_t dropped, bool filled,
                       uint32_t oldest, uint32_t latest)
{
    char path[4200];
    ring_path(r, seq, path, sizeof path);
    CS_LOG(CS_LOG_ERROR, "ring ledger failed its integrity check; dropping it and every older ledger",
           KV_S("file", path), KV_S("problem", problem), KV_U("dropped", dropped),
           KV_U("oldest", filled ? oldest : 0), KV_U("latest", filled ? latest : 0));
}

static void log_frames_problem(const cs_ring *r, uint32_t seq, const char *problem)
{
    char name[CS_LEDGER_NAME_MAX], path[4200];
    frames_name(name, seq);
    snprintf(path, sizeof path, "%s/%s", r->dir, name);
    CS_LOG(CS_LOG_ERROR, "ring frames failed their integrity check; the ledger is replayed by re-encoding it",
           KV_S("file", path), KV_S("problem", problem), KV_U("ledger", seq));
}

/* The ledger keeps its raw file and record but loses its frames: the record is rewritten without
 * them first, so no reader is sent to a file about to go. Under wmu, or at open. A failed rewrite
 * leaves the frames claimed; the next reader finds them bad again and falls back the same way. */
static void forget_frames(cs_ring *r, uint32_t seq, const cs_ledger_record *rec)
{
    cs_ledger_record plain = *rec;
    plain.frames_len = 0;
    plain.frames_xxh3 = 0;
    plain.raw_xxh3 = 0;
    if (write_record(r->dfd, seq, &plain) != 0)
        return;
    char name[CS_LEDGER_NAME_MAX];
    frames_name(name, seq);
    if (unlinkat(r->dfd, name, 0) == 0)
        frames_bytes_adjust(r, -(int64_t)rec->frames_len);
}

/* The frames file's type and size against the record. Returns 0 or -1 with problem. */
static int check_frames_stat(const struct stat *st, const cs_ledger_record *rec, char *problem, size_t plen)
{
    if (!S_ISREG(st->st_mode)) {
        snprintf(problem, plen, "%s", S_ISLNK(st->st_mode) ? "is a symbolic link" : S_ISDIR(st->st_mode) ? "is a directory" : "is not a regular file");
        return -1;
    }
    if ((uint64_t)st->st_size != rec->frames_len) {
        snprintf(problem, plen, "is %lld bytes, its record says %" PRIu64, (long long)st->st_size, rec->frames_len);
        return -1;
    }
    return 0;
}

static int check_frames_at_open(cs_ring *r, uint32_t seq, const cs_ledger_record *rec, char *problem, size_t plen)
{
    char name[CS_LEDGER_NAME_MAX];
    frames_name(name, seq);
    struct stat st;
    if (fstatat(r->dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        snprintf(problem, plen, "%s", errno == ENOENT ? "is missing" : strerror(errno));
        return -1;
    }
    return check_frames_stat(&st, rec, problem, plen);
}

/* Checks ledger seq at open, reading only: a regular file of the recorded length (of any length
 * in a ring from before records: its record is made when the repairs are carried out). Frames
 * that fail their check are noted in *bad_frames. Returns 0, or -1 with problem. */
static int check_at_open(cs_ring *r, const entry *ledger, bool upgrade, uint64_t *size, uint64_t *frames_size,
                         bool *bad_frames, char *problem, size_t plen)
{
    *frames_size = 0;
    *bad_frames = false;
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
    if (upgrade)
        return 0;
    cs_ledger_record rec;
    if (read_record(r->dfd, seq, &rec, problem, plen) != 0)
        return -1;
    if (rec.len != (uint64_t)st.st_size) {
        snprintf(problem, plen, "is %lld bytes, its record says %" PRIu64, (long long)st.st_size, rec.len);
        return -1;
    }
    /* Bad frames cost the frames, not the ledger: its raw bytes are still checked by their own
     * record when replayed by re-encoding. */
    char fproblem[300];
    if (rec.frames_len && check_frames_at_open(r, seq, &rec, fproblem, sizeof fproblem) != 0) {
        log_frames_problem(r, seq, fproblem);
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
    if (scan_entries(r, &v, &n) != 0)
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
        bool bad_frames;
        char problem[600];
        if (check_at_open(r, e, o->upgrade, &size, &fsize, &bad_frames, problem, sizeof problem) != 0) {
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
    if (scan_entries(r, &v, &n) != 0)
        return; /* leftovers only cost disk space; the next start tries again */
    for (size_t i = 0; i < n; i++) {
        const entry *e = &v[i];
        bool keep = r->filled && e->canonical && e->seq >= r->oldest && e->seq <= r->latest;
        if (keep && e->kind == E_FRAMES) {
            cs_ledger_record rec;
            char ignored[300];
            keep = read_record(r->dfd, e->seq, &rec, ignored, sizeof ignored) == 0 && rec.frames_len != 0;
        }
        if (!keep)
            remove_entry(r, e->name);
    }
    free(v);
}

/* A ring from before records: each kept ledger's record, made by hashing it. */
static int make_records(cs_ring *r, cs_err *err)
{
    for (uint64_t s = r->oldest; r->filled && s <= r->latest; s++) {
        char name[CS_LEDGER_NAME_MAX];
        cs_ledger_name_format(name, sizeof name, (uint32_t)s);
        int fd = openat(r->dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        cs_ledger_record rec = {0};
        int ok = fd >= 0 && fstat(fd, &st) == 0;
        if (ok) {
            rec.len = (uint64_t)st.st_size;
            ok = hash_file(fd, rec.len, &rec.xxh64) == 0 && write_record(r->dfd, (uint32_t)s, &rec) == 0;
        }
        int e = errno;
        if (fd >= 0)
            close(fd);
        if (!ok)
            return cs_err_set(err, 0, "store: upgrade \"%s\": ledger %" PRIu64 ": %s", r->dir, s, strerror(e));
    }
    if (r->filled)
        CS_LOG(CS_LOG_INFO, "ring: integrity records made from the ledgers on disk (a ring written before records)",
               KV_S("dir", r->dir), KV_U("ledgers", (uint64_t)r->latest - r->oldest + 1));
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
        log_reject(r, o->brk.seq, o->brk.problem, o->brk_dropped, r->filled, r->oldest, r->latest);
}

/* Carries out what the open found (open_repairs), under wmu, before anything is written: leftover
 * temporaries go, records are made for a ring from before them, bad frames are forgotten, every
 * entry outside the bounds goes, ring-format is brought to this format; then the drops are
 * logged and counted. Errors: `store: upgrade "<dir>": …` (kind 0). */
static int settle_locked(cs_ring *r, cs_err *err)
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
        if (read_record(r->dfd, o->forget[i], &rec, ignored, sizeof ignored) == 0 && rec.frames_len)
            forget_frames(r, o->forget[i], &rec);
    }
    remove_outside(r);
    if (o->rewrite_format && write_small_file(r->dfd, FORMAT_NAME, FORMAT_TEXT) != 0)
        return cs_err_set(err, 0, "store: upgrade \"%s\": %s: %s", r->dir, FORMAT_NAME, strerror(errno));
    log_drops(r, o);
    atomic_fetch_add(&r->dropped, o->nalone + o->brk_dropped);
    free(o->alone);
    free(o->forget);
    memset(o, 0, sizeof *o);
    atomic_store(&r->unsettled, false);
    return 0;
}

static int settle(cs_ring *r, cs_err *err)
{
    if (!atomic_load(&r->unsettled))
        return 0;
    pthread_mutex_lock(&r->wmu);
    int rc = settle_locked(r, err);
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

static void record_tmp_name(char tmp[CS_LEDGER_NAME_MAX], uint32_t seq)
{
    record_name(tmp, seq);
    strcat(tmp, ".tmp");
}

static void frames_tmp_name(char tmp[CS_LEDGER_NAME_MAX], uint32_t seq)
{
    frames_name(tmp, seq);
    strcat(tmp, ".tmp");
}

void cs_ring_set_direct(cs_ring *r, bool on)
{
    r->direct = on;
}

/* Hands a file just written to write-back without waiting for it, so the ring's dirty pages never
 * pile up to the kernel's dirty limits and are written while the disk is idle between ledgers.
 * Advisory: a failure loses nothing (the kernel writes the pages back anyway), so it is ignored. */
static void start_writeback(int fd)
{
    (void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

/* O_DIRECT wants the buffer, the length and the file offset on the device's block boundary; 4096
 * is a multiple of the block size of every file system the ring is meant for. */
#define DIRECT_ALIGN 4096

/* Every part starts on a block and all but the last are whole blocks: the ledger can go to the
 * disk straight from them. */
static bool direct_fits(const struct iovec *parts, size_t nparts)
{
    for (size_t i = 0; i < nparts; i++) {
        if ((uintptr_t)parts[i].iov_base % DIRECT_ALIGN != 0)
            return false;
        if (i + 1 < nparts && parts[i].iov_len % DIRECT_ALIGN != 0)
            return false;
    }
    return true;
}

static ssize_t writev_retry(int fd, const struct iovec *iov, int cnt)
{
    ssize_t w;
    do
        w = writev(fd, iov, cnt);
    while (w < 0 && errno == EINTR);
    return w;
}

/* Writes the ledger file with O_DIRECT: the whole blocks straight from the parts (no copy into
 * the page cache, whose cost per ledger was the ring thread's largest: docs/BENCHMARKS.md), the
 * last partial block through a zero-padded bounce block, then the file is cut to its length.
 * Returns 0 written, -1 failed (errno), 1 the file system refused O_DIRECT (EINVAL) or a write came
 * back short: the caller writes the file through the page cache instead. */
static int write_direct(cs_ring *r, const char *tmp, const struct iovec *parts, size_t nparts)
{
    int fd = openat(r->dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_DIRECT, 0644);
    if (fd < 0)
        return errno == EINVAL ? 1 : -1;
    size_t last = nparts ? parts[nparts - 1].iov_len : 0;
    size_t head = last - last % DIRECT_ALIGN, tail = last % DIRECT_ALIGN;
    uint64_t len = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < nparts;) {
        struct iovec win[64];
        int cnt = 0;
        size_t want = 0, next = i;
        for (; next < nparts && cnt < (int)(sizeof win / sizeof win[0]); next++) {
            size_t l = next + 1 == nparts ? head : parts[next].iov_len;
            if (l == 0)
                continue;
            win[cnt++] = (struct iovec){parts[next].iov_base, l};
            want += l;
        }
        i = next;
        if (cnt == 0)
            break;
        ssize_t w = writev_retry(fd, win, cnt);
        if (w < 0)
            rc = errno == EINVAL ? 1 : -1;
        else if ((size_t)w != want)
            rc = 1;
        else
            len += want;
    }
    if (rc == 0 && tail) {
        void *bounce = NULL;
        if (posix_memalign(&bounce, DIRECT_ALIGN, DIRECT_ALIGN) != 0) {
            errno = ENOMEM;
            rc = -1;
        } else {
            memset(bounce, 0, DIRECT_ALIGN);
            memcpy(bounce, (const uint8_t *)parts[nparts - 1].iov_base + head, tail);
            ssize_t w;
            do
                w = pwrite(fd, bounce, DIRECT_ALIGN, (off_t)len);
            while (w < 0 && errno == EINTR);
            rc = w == DIRECT_ALIGN ? 0 : w < 0 && errno != EINVAL ? -1 : 1;
            free(bounce);
            len += tail;
        }
    }
    if (rc == 0 && ftruncate(fd, (off_t)len) != 0)
        rc = -1;
    int e = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    if (rc == 1 && !r->direct_refused) {
        r->direct_refused = true;
        CS_LOG(CS_LOG_WARN, "ring: O_DIRECT write refused; ledger files are written through the page cache",
               KV_S("dir", r->dir));
    }
    errno = e;
    return rc;
}

static bool retained(cs_ring *r, uint32_t seq);
static int open_frames(cs_ring *r, ledger_file *m, char *problem, size_t plen);

struct cs_frames_writer {
    cs_ring *ring;
    uint32_t seq, chunk_size, chunks;
    int fd;
    int err; /* the first write error (errno), reported at finish */
    XXH3_state_t *hash;     /* of the frames file, as written */
    XXH3_state_t *raw_hash; /* of the raw chunks' bytes */
    uint8_t *tail; /* the index so far, then the trailer */
    size_t cap;
    uint64_t bytes;
};

int cs_ring_frames_begin(cs_ring *r, uint32_t seq, uint32_t chunk_size, cs_frames_writer **out, cs_err *err)
{
    *out = NULL;
    if (settle(r, err) != 0)
        return -1;
    cs_frames_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->hash = XXH3_createState()) || !(w->raw_hash = XXH3_createState())) {
        if (w)
            XXH3_freeState(w->hash);
        free(w);
        return cs_err_set(err, CS_RING_ERR_IO, "store: write ledger %" PRIu32 " frames: %s", seq, strerror(ENOMEM));
    }
    XXH3_64bits_reset(w->hash);
    XXH3_64bits_reset(w->raw_hash);
    w->ring = r;
    w->seq = seq;
    w->chunk_size = chunk_size;
    char tmp[CS_LEDGER_NAME_MAX];
    frames_tmp_name(tmp, seq);
    w->fd = openat(r->dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        int e = errno;
        XXH3_freeState(w->hash);
        XXH3_freeState(w->raw_hash);
        free(w);
        return cs_err_set(err, CS_RING_ERR_IO, "store: write ledger %" PRIu32 " frames: %s", seq, strerror(e));
    }
    *out = w;
    return 0;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = EIO;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

void cs_frames_writer_add(cs_frames_writer *w, uint8_t codec, const void *payload, size_t len)
{
    if (w->err)
        return;
    size_t need = cs_frames_tail_len(w->chunks + 1);
    if (need > w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64 * CS_FRAMES_ENTRY_LEN + CS_FRAMES_TRAILER_LEN;
        uint8_t *grown = cap >= need ? realloc(w->tail, cap) : NULL;
        if (!grown) {
            w->err = ENOMEM;
            return;
        }
        w->tail = grown;
        w->cap = cap;
    }
    cs_frames_put_entry(w->tail + (size_t)w->chunks * CS_FRAMES_ENTRY_LEN, codec, (uint32_t)len);
    w->chunks++;
    if (codec == 0) {
        XXH3_64bits_update(w->raw_hash, payload, len);
    } else {
        XXH3_64bits_update(w->hash, payload, len);
        if (write_all(w->fd, payload, len) != 0)
            w->err = errno;
        w->bytes += len;
    }
}

static void frames_writer_free(cs_frames_writer *w, bool remove_tmp)
{
    if (w->fd >= 0)
        close(w->fd);
    if (remove_tmp) {
        char tmp[CS_LEDGER_NAME_MAX];
        frames_tmp_name(tmp, w->seq);
        unlinkat(w->ring->dfd, tmp, 0);
    }
    XXH3_freeState(w->hash);
    XXH3_freeState(w->raw_hash);
    free(w->tail);
    free(w);
}

void cs_frames_writer_abort(cs_frames_writer *w)
{
    if (w)
        frames_writer_free(w, true);
}

/* Writes the tail, closes the file and fills rec's frames fields. On failure errno is set; the
 * writer is still the caller's to abort either way. */
static int frames_finish(cs_frames_writer *w, cs_ledger_record *rec)
{
    if (!w->err && w->chunks != rec->chunks)
        w->err = EINVAL;
    if (!w->err && !w->tail && !(w->tail = malloc(CS_FRAMES_TRAILER_LEN)))
        w->err = ENOMEM;
    if (w->err) {
        errno = w->err;
        return -1;
    }
    uint8_t *t = w->tail + (size_t)w->chunks * CS_FRAMES_ENTRY_LEN;
    cs_frames_put_trailer(t, w->seq, w->chunks, w->chunk_size);
    size_t tail_len = cs_frames_tail_len(w->chunks);
    XXH3_64bits_update(w->hash, w->tail, tail_len);
    int rc = write_all(w->fd, w->tail, tail_len);
    int e = errno;
    if (rc == 0)
        start_writeback(w->fd);
    if (close(w->fd) != 0 && rc == 0) {
        rc = -1;
        e = errno;
    }
    w->fd = -1;
    if (rc != 0) {
        errno = e;
        return -1;
    }
    rec->frames_len = w->bytes + tail_len;
    rec->frames_xxh3 = XXH3_64bits_digest(w->hash);
    rec->raw_xxh3 = XXH3_64bits_digest(w->raw_hash);
    return 0;
}

/* Writes `<final>.tmp` for the ledger, its frames (when chunks is given) and its record; the
 * renames into place are a separate step, so a failed write changes nothing the ring serves. */
static int write_tmp(cs_ring *r, uint32_t seq, const struct iovec *parts, size_t nparts,
                     const struct iovec *chunks, size_t nchunks, cs_ledger_record *rec, cs_err *err)
{
    char tmp[CS_LEDGER_NAME_MAX];
    tmp_name(tmp, seq);
    int rc = r->direct && !r->direct_refused && direct_fits(parts, nparts) ? write_direct(r, tmp, parts, nparts) : 1;
    int e = errno;
    if (rc == 1) {
        int fd = openat(r->dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
            return cs_err_set(err, CS_RING_ERR_IO, "store: write ledger %" PRIu32 ": %s", seq, strerror(errno));
        rc = write_parts(fd, parts, nparts);
        e = errno;
        if (rc == 0)
            start_writeback(fd);
        if (close(fd) != 0 && rc == 0) {
            rc = -1;
            e = errno;
        }
    }
    rec->frames_len = 0;
    rec->frames_xxh3 = 0;
    rec->raw_xxh3 = 0;
    if (rc == 0 && chunks && rec->chunk_size) {
        cs_frames_writer *w;
        cs_err ferr;
        if (cs_ring_frames_begin(r, seq, rec->chunk_size, &w, &ferr) != 0) {
            rc = -1;
            e = errno;
        } else {
            for (size_t i = 0; i < nchunks; i++) {
                const uint8_t *m = chunks[i].iov_base;
                cs_frames_writer_add(w, m[CS_WIRE_CHUNK_HEADER_LEN - 1], m + CS_WIRE_CHUNK_HEADER_LEN,
                                     chunks[i].iov_len - CS_WIRE_CHUNK_HEADER_LEN);
            }
            rc = frames_finish(w, rec);
            e = errno;
            frames_writer_free(w, rc != 0); /* a finished one stays for publish_tmp */
        }
    }
    char rtmp[CS_LEDGER_NAME_MAX], text[RECORD_MAX];
    record_tmp_name(rtmp, seq);
    if (rc == 0) {
        format_record(text, sizeof text, seq, rec);
        int rfd = openat(r->dfd, rtmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        size_t len = strlen(text);
        ssize_t w = rfd >= 0 ? write(rfd, text, len) : -1;
        e = rfd < 0 || w < 0 ? errno : ENOSPC;
        if (rfd >= 0 && close(rfd) != 0 && w == (ssize_t)len) {
            w = -1;
            e = errno;
        }
        rc = w == (ssize_t)len ? 0 : -1;
    }
    if (rc != 0) {
        char ftmp[CS_LEDGER_NAME_MAX];
        frames_tmp_name(ftmp, seq);
        unlinkat(r->dfd, tmp, 0);
        unlinkat(r->dfd, ftmp, 0);
        unlinkat(r->dfd, rtmp, 0);
        return cs_err_set(err, CS_RING_ERR_IO, "store: write ledger %" PRIu32 ": %s", seq, strerror(e));
    }
    return 0;
}

/* Renames the frames, the record, then the ledger into place: a reader never sees a partial
 * file, a ledger never appears without its record, a record never claims frames not yet in
 * place, and an older file of the same name that a reader holds open is never modified in place. */
static int publish_tmp(cs_ring *r, uint32_t seq, bool frames, cs_err *err)
{
    char name[CS_LEDGER_NAME_MAX], tmp[CS_LEDGER_NAME_MAX], rname[CS_LEDGER_NAME_MAX], rtmp[CS_LEDGER_NAME_MAX];
    char fname[CS_LEDGER_NAME_MAX], ftmp[CS_LEDGER_NAME_MAX];
    cs_ledger_name_format(name, sizeof name, seq);
    tmp_name(tmp, seq);
    record_name(rname, seq);
    record_tmp_name(rtmp, seq);
    frames_name(fname, seq);
    frames_tmp_name(ftmp, seq);
    bool frames_done = !frames || renameat(r->dfd, ftmp, r->dfd, fname) == 0;
    bool rec_done = frames_done && renameat(r->dfd, rtmp, r->dfd, rname) == 0;
    if (!rec_done || renameat(r->dfd, tmp, r->dfd, name) != 0) {
        int e = errno;
        unlinkat(r->dfd, tmp, 0);
        unlinkat(r->dfd, rtmp, 0);
        unlinkat(r->dfd, ftmp, 0);
        if (rec_done)
            unlinkat(r->dfd, rname, 0);
        if (frames && frames_done)
            unlinkat(r->dfd, fname, 0);
        return cs_err_set(err, CS_RING_ERR_IO, "store: publish ledger %" PRIu32 ": %s", seq, strerror(e));
    }
    return 0;
}

static void put_failed(cs_ring *r)
{
    atomic_fetch_add(&r->write_failures, 1);
    atomic_store(&r->degraded, true);
}

int cs_ring_put(cs_ring *r, uint32_t seq, const struct iovec *parts, size_t nparts, const struct iovec *chunks,
                size_t nchunks, const cs_ledger_record *rec_in, bool *reset, cs_err *err)
{
    if (reset)
        *reset = false;
    if (seq == 0)
        return cs_err_set(err, CS_RING_ERR_INVALID_SEQ,
                          "store: invalid ledger sequence: ledger sequences start at 1, so 0 means a "
                          "wrapped counter");
    if (settle(r, err) != 0) {
        put_failed(r);
        return -1;
    }
    /* The new ledger is written before anything is reset: a write that fails leaves the ring
     * serving what it held (the gap it leaves resets the ring at the next write that works). */
    cs_ledger_record rec = *rec_in;
    if (write_tmp(r, seq, parts, nparts, chunks, nchunks, &rec, err) != 0) {
        put_failed(r);
        return -1;
    }
    pthread_mutex_lock(&r->wmu);
    if (r->filled && (r->latest == UINT32_MAX || seq != r->latest + 1)) {
        uint32_t oldest = r->oldest, latest = r->latest;
        /* Empty the bounds first so no reader is sent to a file about to disappear. */
        set_bounds(r, false, 0, 0);
        unlink_counted(r, oldest, latest);
        if (reset)
            *reset = true;
    }
    if (publish_tmp(r, seq, rec.frames_len != 0, err) != 0) {
        pthread_mutex_unlock(&r->wmu);
        put_failed(r);
        return -1;
    }
    atomic_store(&r->degraded, false);
    uint64_t written = 0;
    for (size_t i = 0; i < nparts; i++)
        written += parts[i].iov_len;
    bytes_adjust(r, (int64_t)written);
    frames_bytes_adjust(r, (int64_t)rec.frames_len);
    uint32_t oldest = r->filled ? r->oldest : seq;
    uint32_t keep = pruned_oldest(r, oldest, seq);
    set_bounds(r, true, keep, seq);
    if (keep != oldest)
        unlink_counted(r, oldest, keep - 1);
    pthread_mutex_unlock(&r->wmu);
    return 0;
}

#define IDENTITY_NAME "ring-identity"
#define IDENTITY_MAX 4096

/* The identity recorded in `ring-identity` into old (IDENTITY_MAX + 1 bytes); false when there is
 * none, or it is not one whole line. */
static bool read_identity(const cs_ring *r, char *old)
{
    old[0] = '\0';
    int fd = openat(r->dfd, IDENTITY_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = pread(fd, old, IDENTITY_MAX, 0);
    close(fd);
    if (n <= 0 || old[n - 1] != '\n') {
        old[0] = '\0';
        return false;
    }
    old[n - 1] = '\0';
    return true;
}

bool cs_ring_continues(cs_ring *r, const char *identity, uint32_t *latest)
{
    char old[IDENTITY_MAX + 1];
    bool known = read_identity(r, old);
    pthread_mutex_lock(&r->wmu);
    bool yes = r->filled && known && strcmp(old, identity) == 0 && r->latest < UINT32_MAX - 1;
    *latest = yes ? r->latest : 0;
    pthread_mutex_unlock(&r->wmu);
    return yes;
}

int cs_ring_claim(cs_ring *r, const char *identity, uint32_t first_seq, cs_err *err)
{
    char old[IDENTITY_MAX + 1];
    bool known = read_identity(r, old);
    pthread_mutex_lock(&r->wmu);
    if (settle_locked(r, err) != 0) {
        pthread_mutex_unlock(&r->wmu);
        return -1;
    }
    char reason[160] = "";
    if (r->filled && known && strcmp(old, identity) != 0)
        snprintf(reason, sizeof reason, "written by another run");
    else if (r->filled && first_seq != 0 && (r->latest == UINT32_MAX || first_seq != r->latest + 1))
        snprintf(reason, sizeof reason, "this run starts at ledger %" PRIu32 ", not at %" PRIu64, first_seq,
                 (uint64_t)r->latest + 1);
    uint32_t oldest = r->oldest, latest = r->latest;
    if (*reason) {
        set_bounds(r, false, 0, 0);
        uint64_t ignored = 0;
        unlink_range(r->dfd, oldest, latest, &ignored);
        atomic_store(&r->bytes, 0);
        atomic_store(&r->frames_bytes, 0);
    }
    pthread_mutex_unlock(&r->wmu);
    if (*reason)
        CS_LOG(CS_LOG_WARN, "ring reset at start: its ledgers are not this run's", KV_S("reason", reason),
               KV_S("ring_identity", known ? old : ""), KV_S("identity", identity), KV_U("oldest", oldest),
               KV_U("latest", latest));
    else if (r->filled && !known)
        CS_LOG(CS_LOG_INFO, "ring: no run identity recorded; this run continues it", KV_S("identity", identity),
               KV_U("oldest", oldest), KV_U("latest", latest));
    char text[IDENTITY_MAX + 2];
    if (strlen(identity) > IDENTITY_MAX - 1 || strchr(identity, '\n'))
        return cs_err_set(err, 0, "store: run identity is not one line of at most %d bytes", IDENTITY_MAX - 1);
    snprintf(text, sizeof text, "%s\n", identity);
    if (!known || strcmp(old, identity) != 0) {
        if (write_small_file(r->dfd, IDENTITY_NAME, text) != 0)
            return cs_err_set(err, 0, "store: write \"%s/%s\": %s", r->dir, IDENTITY_NAME, strerror(errno));
    }
    return 0;
}

int cs_ring_frames_attach(cs_ring *r, const cs_ledger_ref *ref, cs_frames_writer *w, cs_err *err)
{
    uint32_t seq = ref->seq;
    cs_ledger_record rec = ref->rec;
    rec.chunk_size = w->chunk_size;
    rec.chunks = rec.len ? (uint32_t)((rec.len + w->chunk_size - 1) / w->chunk_size) : 0;
    if (frames_finish(w, &rec) != 0) {
        int e = errno;
        frames_writer_free(w, true);
        return cs_err_set(err, CS_RING_ERR_IO, "store: write ledger %" PRIu32 " frames: %s", seq, strerror(e));
    }
    pthread_mutex_lock(&r->wmu);
    /* Still the ledger the frames were made from: retained, the same file, the same record. */
    char name[CS_LEDGER_NAME_MAX], fname[CS_LEDGER_NAME_MAX], ftmp[CS_LEDGER_NAME_MAX], ignored[300];
    cs_ledger_name_format(name, sizeof name, seq);
    struct stat on_disk, held;
    cs_ledger_record now;
    bool same = retained(r, seq) && fstatat(r->dfd, name, &on_disk, AT_SYMLINK_NOFOLLOW) == 0 &&
                fstat(ref->fd, &held) == 0 && on_disk.st_ino == held.st_ino && on_disk.st_dev == held.st_dev &&
                read_record(r->dfd, seq, &now, ignored, sizeof ignored) == 0 && now.len == ref->rec.len &&
                now.xxh64 == ref->rec.xxh64 && now.frames_len == 0;
    int rc = 0;
    frames_name(fname, seq);
    frames_tmp_name(ftmp, seq);
    if (!same) {
        rc = cs_err_set(err, CS_RING_ERR_NOT_RETAINED, "store: ledger not retained: ledger %" PRIu32 " changed meanwhile",
                        seq);
    } else if (renameat(r->dfd, ftmp, r->dfd, fname) != 0 || write_record(r->dfd, seq, &rec) != 0) {
        rc = cs_err_set(err, CS_RING_ERR_IO, "store: publish ledger %" PRIu32 " frames: %s", seq, strerror(errno));
        unlinkat(r->dfd, fname, 0);
    } else {
        frames_bytes_adjust(r, (int64_t)rec.frames_len);
    }
    pthread_mutex_unlock(&r->wmu);
    frames_writer_free(w, rc != 0);
    return rc;
}

void cs_ring_drop_frames(cs_ring *r, uint32_t seq, uint64_t frames_xxh3, const char *problem)
{
    pthread_mutex_lock(&r->wmu);
    settle_locked(r, NULL); /* a failure here is the next write's to report */
    cs_ledger_record rec;
    char ignored[300];
    bool drop = retained(r, seq) && read_record(r->dfd, seq, &rec, ignored, sizeof ignored) == 0 &&
                rec.frames_len != 0 && rec.frames_xxh3 == frames_xxh3;
    if (drop)
        forget_frames(r, seq, &rec);
    pthread_mutex_unlock(&r->wmu);
    if (drop)
        log_frames_problem(r, seq, problem);
}

void cs_ring_reject(cs_ring *r, uint32_t seq, const char *problem)
{
    pthread_mutex_lock(&r->wmu);
    settle_locked(r, NULL); /* a failure here is the next write's to report */
    if (!r->filled || seq < r->oldest || seq > r->latest) {
        pthread_mutex_unlock(&r->wmu);
        return;
    }
    uint32_t oldest = r->oldest, latest = r->latest;
    bool filled = seq != latest;
    /* The bounds first, so no reader is sent to the files about to go. */
    set_bounds(r, filled, filled ? seq + 1 : 0, filled ? latest : 0);
    unlink_counted(r, oldest, seq);
    uint64_t dropped = (uint64_t)seq - oldest + 1;
    atomic_fetch_add(&r->dropped, dropped);
    pthread_mutex_unlock(&r->wmu);
    log_reject(r, seq, problem, dropped, filled, seq + 1, latest);
}

static int not_retained_outside(uint32_t seq, uint32_t oldest, uint32_t latest, cs_err *err)
{
    return cs_err_set(err, CS_RING_ERR_NOT_RETAINED,
                      "store: ledger not retained: ledger %" PRIu32 " outside [%" PRIu32 ",%" PRIu32 "]", seq,
                      oldest, latest);
}

static bool retained(cs_ring *r, uint32_t seq)
{
    uint32_t oldest, latest;
    return cs_ring_bounds(r, &oldest, &latest) && seq >= oldest && seq <= latest;
}

/* A check failed: a prune, reset or drop racing with us explains it when seq has left the bounds
 * meanwhile; otherwise the ledger is bad and is rejected. */
static int get_failed(cs_ring *r, uint32_t seq, const char *problem, cs_err *err)
{
    if (!retained(r, seq))
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
    } else if (read_record(r->dfd, seq, &rec, problem, sizeof problem) != 0) {
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
        if (retained(r, seq))
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
    frames_name(name, m->ref.seq);
    int fd = openat(r->dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(problem, plen, "%s", errno == ENOENT ? "is missing" : errno == ELOOP ? "is a symbolic link" : strerror(errno));
        return -1;
    }
    struct stat st;
    size_t tail_len = cs_frames_tail_len(rec->chunks), got = 0;
    int rc = fstat(fd, &st) != 0 ? (snprintf(problem, plen, "%s", strerror(errno)), -1)
                                 : check_frames_stat(&st, rec, problem, plen);
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

uint64_t cs_ring_frames_bytes(cs_ring *r)
{
    return atomic_load_explicit(&r->frames_bytes, memory_order_relaxed);
}
