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
    /* Bytes of the ledger files in the bounds (for /metrics): changed under wmu, read by anyone. */
    atomic_uint_fast64_t bytes;
    /* Health, for /healthz: written by the put thread, read by anyone. */
    atomic_uint_fast64_t write_failures;
    atomic_bool degraded;
    atomic_uint_fast64_t dropped;
    /* Serializes the bound changes of put with those of cs_ring_reject (any thread). */
    pthread_mutex_t wmu;
};

#define FORMAT_NAME "ring-format"
#define FORMAT_TEXT "corestream-ring 2\n"
#define RECORD_MAX 160

/* The public ref is embedded so that release can find the descriptor and the count. */
typedef struct ledger_file {
    cs_ledger_ref ref;
    atomic_uint refs;
} ledger_file;

static ledger_file *file_of(cs_ledger_ref *ref)
{
    return (ledger_file *)((char *)ref - offsetof(ledger_file, ref));
}

/* "ledger-<seq>.rec": not a ledger name, so the file source (and the prototype) skip it. */
static void record_name(char buf[CS_LEDGER_NAME_MAX], uint32_t seq)
{
    snprintf(buf, CS_LEDGER_NAME_MAX, "ledger-%" PRIu32 ".rec", seq);
}

static int record_name_parse(const char *name, uint32_t *seq)
{
    char copy[CS_LEDGER_NAME_MAX];
    size_t n = strlen(name);
    if (n < 4 || n >= sizeof copy || strcmp(name + n - 4, ".rec") != 0)
        return -1;
    memcpy(copy, name, n - 4);
    strcpy(copy + n - 4, ".xdr");
    return cs_ledger_name_parse(copy, seq);
}

static void bytes_adjust(cs_ring *r, int64_t delta)
{
    uint64_t v = atomic_load_explicit(&r->bytes, memory_order_relaxed);
    v = delta < 0 && (uint64_t)-delta > v ? 0 : v + (uint64_t)delta;
    atomic_store_explicit(&r->bytes, v, memory_order_relaxed);
}

/* Size of a regular ledger file, 0 for anything else. */
static uint64_t ledger_size(int dfd, const char *name)
{
    struct stat st;
    return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
}

/* Returns the bytes of the ledger file removed. */
static uint64_t unlink_ledger(int dfd, uint32_t seq)
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
    record_name(name, seq);
    unlinkat(dfd, name, 0);
    return size;
}

/* Unlinks [from, to], both inclusive; the 64-bit counter ends the loop at 4294967295. Returns the
 * bytes of the ledger files removed. */
static uint64_t unlink_range(int dfd, uint32_t from, uint32_t to)
{
    uint64_t bytes = 0;
    for (uint64_t s = from; s <= to; s++)
        bytes += unlink_ledger(dfd, (uint32_t)s);
    return bytes;
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


static int format_record(char *buf, size_t len, uint32_t seq, const cs_ledger_record *rec)
{
    return snprintf(buf, len, "corestream-ring-record 1 seq=%" PRIu32 " len=%" PRIu64 " chunks=%" PRIu32
                    " chunk_size=%" PRIu32 " xxh64=%016" PRIx64 "\n",
                    seq, rec->len, rec->chunks, rec->chunk_size, rec->xxh64);
}

/* Parses a record strictly: it must be exactly what format_record writes, and consistent. On
 * failure problem says what is wrong. */
static int parse_record(const char *text, uint32_t want_seq, cs_ledger_record *rec, char *problem, size_t plen)
{
    uint32_t seq;
    cs_ledger_record r;
    if (sscanf(text, "corestream-ring-record 1 seq=%" SCNu32 " len=%" SCNu64 " chunks=%" SCNu32
                     " chunk_size=%" SCNu32 " xxh64=%" SCNx64,
               &seq, &r.len, &r.chunks, &r.chunk_size, &r.xxh64) != 5) {
        snprintf(problem, plen, "integrity record is unreadable");
        return -1;
    }
    char again[RECORD_MAX];
    format_record(again, sizeof again, seq, &r);
    bool consistent = r.chunk_size == 0
                          ? r.chunks == 0
                          : r.chunk_size >= 4096 && r.chunk_size <= 8388608 &&
                                r.chunks == (r.len + r.chunk_size - 1) / r.chunk_size;
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

/* One ledger-named or record-named entry of the directory. */
typedef struct entry {
    uint32_t seq;
    bool record;
    bool canonical; /* the name is ledger-<seq>.xdr / .rec exactly, no padding */
    char name[256];
} entry;

static int cmp_entry(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->seq != y->seq)
        return (x->seq > y->seq) - (x->seq < y->seq);
    return (int)x->record - (int)y->record;
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
        bool record = false;
        if (cs_ledger_name_parse(de->d_name, &seq) != 0) {
            if (record_name_parse(de->d_name, &seq) != 0)
                continue;
            record = true;
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
        e->record = record;
        snprintf(e->name, sizeof e->name, "%s", de->d_name);
        char canon[CS_LEDGER_NAME_MAX];
        if (record)
            record_name(canon, seq);
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

/* Checks ledger seq at open: a regular file of the recorded length. With records absent (a ring
 * from before them), makes the record by hashing. Returns 0, -1 with problem (drop from here
 * down), or -2 with err (the open fails). */
static int check_at_open(cs_ring *r, const entry *ledger, bool upgrade, uint64_t *size, char *problem, size_t plen,
                         cs_err *err)
{
    uint32_t seq = ledger->seq;
    if (!ledger->canonical) {
        snprintf(problem, plen, "unexpected file name %s", ledger->name);
        return -1;
    }
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
    if (upgrade) {
        int fd = openat(r->dfd, ledger->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        cs_ledger_record rec = {.len = (uint64_t)st.st_size};
        if (fd < 0 || hash_file(fd, rec.len, &rec.xxh64) != 0 || write_record(r->dfd, seq, &rec) != 0) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            return cs_err_set(err, 0, "store: upgrade \"%s\": ledger %" PRIu32 ": %s", r->dir, seq, strerror(e)), -2;
        }
        close(fd);
        return 0;
    }
    cs_ledger_record rec;
    if (read_record(r->dfd, seq, &rec, problem, plen) != 0)
        return -1;
    if (rec.len != (uint64_t)st.st_size) {
        snprintf(problem, plen, "is %lld bytes, its record says %" PRIu64, (long long)st.st_size, rec.len);
        return -1;
    }
    return 0;
}

/* Loads the bounds from what is on disk, newest first: the longest run of good ledgers ending at
 * the newest is kept, everything older is dropped, then the ring is pruned to retention. */
static int rescan(cs_ring *r, cs_err *err)
{
    entry *v;
    size_t n;
    if (scan_entries(r, &v, &n) != 0)
        return cs_err_set(err, 0, "store: scan \"%s\": %s", r->dir, strerror(errno));
    bool upgrade = faccessat(r->dfd, FORMAT_NAME, F_OK, AT_SYMLINK_NOFOLLOW) != 0;
    /* Ledger entries only, newest first; records are found by name. */
    size_t nledgers = 0, made = 0;
    for (size_t i = 0; i < n; i++)
        if (!v[i].record)
            v[nledgers++] = v[i];
    bool filled = false, failed = false;
    uint32_t oldest = 0, latest = 0, bad = 0;
    uint64_t bytes = 0; /* of the ledgers kept, as the checks found them */
    char problem[600] = "";
    for (size_t k = nledgers; k-- > 0;) {
        const entry *e = &v[k];
        if (filled && e->seq == oldest) { /* a second name for a ledger already kept (7, 007) */
            failed = true;
            bad = e->seq;
            snprintf(problem, sizeof problem, "two files for one ledger (%s and %s)", e->name, v[k + 1].name);
            break;
        }
        if (filled && e->seq != oldest - 1) {
            failed = true;
            bad = oldest - 1;
            snprintf(problem, sizeof problem, "is missing (the ring resumes at ledger %" PRIu32 ")", oldest);
            break;
        }
        uint64_t size = 0;
        int c = check_at_open(r, e, upgrade, &size, problem, sizeof problem, err);
        if (c == -2) {
            free(v);
            return -1;
        }
        if (c != 0) {
            failed = true;
            bad = e->seq;
            break;
        }
        made += upgrade;
        bytes += size;
        if (!filled)
            latest = e->seq;
        filled = true;
        oldest = e->seq;
    }
    uint64_t dropped = 0;
    if (failed) {
        /* Counted as sequences, so a missing ledger counts too. */
        if (nledgers > 0 && v[0].seq <= bad)
            dropped = (uint64_t)bad - v[0].seq + 1;
        for (size_t k = 0; k < nledgers && v[k].seq <= bad; k++)
            unlinkat(r->dfd, v[k].name, 0); /* a directory in a ledger's place stays */
    }
    /* Records without their ledger (a crash between the two renames, or dropped ledgers). */
    entry *recs;
    size_t nrecs;
    if (scan_entries(r, &recs, &nrecs) == 0) {
        for (size_t i = 0; i < nrecs; i++)
            if (recs[i].record && (!filled || recs[i].seq < oldest || recs[i].seq > latest || !recs[i].canonical))
                unlinkat(r->dfd, recs[i].name, 0);
        free(recs);
    }
    if (filled) {
        uint32_t keep = pruned_oldest(r, oldest, latest);
        if (keep != oldest) {
            uint64_t pruned = unlink_range(r->dfd, oldest, keep - 1);
            bytes = pruned > bytes ? 0 : bytes - pruned;
        }
        oldest = keep;
    }
    r->filled = filled;
    r->oldest = filled ? oldest : 0;
    r->latest = filled ? latest : 0;
    atomic_store(&r->bytes, filled ? bytes : 0);
    if (failed) {
        atomic_fetch_add(&r->dropped, dropped);
        log_reject(r, bad, problem, dropped, filled, oldest, latest);
    }
    free(v);
    if (upgrade) {
        if (write_small_file(r->dfd, FORMAT_NAME, FORMAT_TEXT) != 0)
            return cs_err_set(err, 0, "store: upgrade \"%s\": %s: %s", r->dir, FORMAT_NAME, strerror(errno));
        if (made)
            CS_LOG(CS_LOG_INFO, "ring: integrity records made from the ledgers on disk (a ring written before records)",
                   KV_S("dir", r->dir), KV_U("ledgers", made));
    }
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
    pthread_mutex_init(&r->wmu, NULL);
    atomic_init(&r->write_failures, 0);
    atomic_init(&r->degraded, false);
    atomic_init(&r->dropped, 0);
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

/* Writes `<final>.tmp` for the ledger and its record; the renames into place are a separate step,
 * so a failed write changes nothing the ring serves. */
static int write_tmp(cs_ring *r, uint32_t seq, const struct iovec *parts, size_t nparts,
                     const cs_ledger_record *rec, cs_err *err)
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
        unlinkat(r->dfd, tmp, 0);
        unlinkat(r->dfd, rtmp, 0);
        return cs_err_set(err, CS_RING_ERR_IO, "store: write ledger %" PRIu32 ": %s", seq, strerror(e));
    }
    return 0;
}

/* Renames the record, then the ledger, into place: a reader never sees a partial file, a ledger
 * never appears without its record, and an older file of the same name that a reader holds open
 * is never modified in place. */
static int publish_tmp(cs_ring *r, uint32_t seq, cs_err *err)
{
    char name[CS_LEDGER_NAME_MAX], tmp[CS_LEDGER_NAME_MAX], rname[CS_LEDGER_NAME_MAX], rtmp[CS_LEDGER_NAME_MAX];
    cs_ledger_name_format(name, sizeof name, seq);
    tmp_name(tmp, seq);
    record_name(rname, seq);
    record_tmp_name(rtmp, seq);
    bool rec_done = renameat(r->dfd, rtmp, r->dfd, rname) == 0;
    if (!rec_done || renameat(r->dfd, tmp, r->dfd, name) != 0) {
        int e = errno;
        unlinkat(r->dfd, tmp, 0);
        unlinkat(r->dfd, rtmp, 0);
        if (rec_done)
            unlinkat(r->dfd, rname, 0);
        return cs_err_set(err, CS_RING_ERR_IO, "store: publish ledger %" PRIu32 ": %s", seq, strerror(e));
    }
    return 0;
}

static void put_failed(cs_ring *r)
{
    atomic_fetch_add(&r->write_failures, 1);
    atomic_store(&r->degraded, true);
}

int cs_ring_put(cs_ring *r, uint32_t seq, const struct iovec *parts, size_t nparts,
                const cs_ledger_record *rec, bool *reset, cs_err *err)
{
    if (reset)
        *reset = false;
    if (seq == 0)
        return cs_err_set(err, CS_RING_ERR_INVALID_SEQ,
                          "store: invalid ledger sequence: ledger sequences start at 1, so 0 means a "
                          "wrapped counter");
    /* The new ledger is written before anything is reset: a write that fails leaves the ring
     * serving what it held (the gap it leaves resets the ring at the next write that works). */
    if (write_tmp(r, seq, parts, nparts, rec, err) != 0) {
        put_failed(r);
        return -1;
    }
    pthread_mutex_lock(&r->wmu);
    if (r->filled && (r->latest == UINT32_MAX || seq != r->latest + 1)) {
        uint32_t oldest = r->oldest, latest = r->latest;
        /* Empty the bounds first so no reader is sent to a file about to disappear. */
        set_bounds(r, false, 0, 0);
        bytes_adjust(r, -(int64_t)unlink_range(r->dfd, oldest, latest));
        if (reset)
            *reset = true;
    }
    if (publish_tmp(r, seq, err) != 0) {
        pthread_mutex_unlock(&r->wmu);
        put_failed(r);
        return -1;
    }
    atomic_store(&r->degraded, false);
    uint64_t written = 0;
    for (size_t i = 0; i < nparts; i++)
        written += parts[i].iov_len;
    bytes_adjust(r, (int64_t)written);
    uint32_t oldest = r->filled ? r->oldest : seq;
    uint32_t keep = pruned_oldest(r, oldest, seq);
    set_bounds(r, true, keep, seq);
    if (keep != oldest)
        bytes_adjust(r, -(int64_t)unlink_range(r->dfd, oldest, keep - 1));
    pthread_mutex_unlock(&r->wmu);
    return 0;
}

#define IDENTITY_NAME "ring-identity"
#define IDENTITY_MAX 4096

int cs_ring_claim(cs_ring *r, const char *identity, uint32_t first_seq, cs_err *err)
{
    char old[IDENTITY_MAX + 1] = "";
    bool known = false;
    int fd = openat(r->dfd, IDENTITY_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = pread(fd, old, IDENTITY_MAX, 0);
        close(fd);
        if (n > 0 && old[n - 1] == '\n') {
            old[n - 1] = '\0';
            known = true;
        }
    }
    pthread_mutex_lock(&r->wmu);
    char reason[160] = "";
    if (r->filled && known && strcmp(old, identity) != 0)
        snprintf(reason, sizeof reason, "written by another run");
    else if (r->filled && first_seq != 0 && (r->latest == UINT32_MAX || first_seq != r->latest + 1))
        snprintf(reason, sizeof reason, "this run starts at ledger %" PRIu32 ", not at %" PRIu64, first_seq,
                 (uint64_t)r->latest + 1);
    uint32_t oldest = r->oldest, latest = r->latest;
    if (*reason) {
        set_bounds(r, false, 0, 0);
        unlink_range(r->dfd, oldest, latest);
        atomic_store(&r->bytes, 0);
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

void cs_ring_reject(cs_ring *r, uint32_t seq, const char *problem)
{
    pthread_mutex_lock(&r->wmu);
    if (!r->filled || seq < r->oldest || seq > r->latest) {
        pthread_mutex_unlock(&r->wmu);
        return;
    }
    uint32_t oldest = r->oldest, latest = r->latest;
    bool filled = seq != latest;
    /* The bounds first, so no reader is sent to the files about to go. */
    set_bounds(r, filled, filled ? seq + 1 : 0, filled ? latest : 0);
    bytes_adjust(r, -(int64_t)unlink_range(r->dfd, oldest, seq));
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
    atomic_init(&m->refs, 1);
    *out = &m->ref;
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
