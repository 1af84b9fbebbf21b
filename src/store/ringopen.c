/* SPDX-License-Identifier: Apache-2.0 */
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

#include "common/datadir.h"
#include "common/fdio.h"
#include "common/log.h"
#include "store/frames.h"
#include "store/ledgerdir.h"
#include "store/ring_internal.h"

/* The newest ledgers the open checks against the file system (a stat each: type and length);
 * older ones are checked by the directory entry's type and their record, and their length when a
 * reader opens them (docs/RING.md, "How the checks are made"). */
#define OPEN_STAT_NEWEST RNG_SEG_LEDGERS

/* One segment's records log, read whole once while the open checks its ledgers. */
typedef struct log_text {
    uint32_t base; /* UINT32_MAX: none read */
    char *text;
    size_t len;
    int err; /* errno of a failed read, 0 */
} log_text;

static void log_text_free(log_text *t)
{
    free(t->text);
    *t = (log_text){.base = UINT32_MAX};
}

/* The log of seq's segment into t (kept while the survey stays in that segment). */
static int log_text_load(cs_ring *r, log_text *t, uint32_t seq)
{
    uint32_t base = seq - seq % RNG_SEG_LEDGERS;
    if (t->base == base)
        return t->err ? -1 : 0;
    log_text_free(t);
    t->base = base;
    char name[CS_LEDGER_NAME_MAX];
    rng_log_name(name, seq);
    int fd = openat(r->dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !(t->text = malloc((size_t)st.st_size + 1))) {
        t->err = fd >= 0 && !t->text && errno == 0 ? ENOMEM : errno;
        if (fd >= 0)
            close(fd);
        return -1;
    }
    size_t n = 0;
    t->err = cs_pread_upto(fd, t->text, (size_t)st.st_size, 0, &n) != 0 ? errno : 0;
    close(fd);
    t->len = n;
    t->text[t->len] = '\0';
    return t->err ? -1 : 0;
}

/* Reads seq's record at open: from its segment's log (read once per segment), or a format-3
 * ring's own file. Returns as rng_read_record. */
static int open_record(cs_ring *r, log_text *t, uint32_t seq, cs_ledger_record *rec, char *problem, size_t plen)
{
    uint32_t line = rng_record_line(r, seq);
    if (line == RNG_LINE_LEGACY)
        return rng_read_legacy_record(r->dfd, seq, rec, problem, plen);
    if (line == RNG_LINE_NONE) {
        snprintf(problem, plen, "integrity record is missing");
        return -2;
    }
    if (log_text_load(r, t, seq) != 0) {
        char name[CS_LEDGER_NAME_MAX];
        rng_log_name(name, seq);
        snprintf(problem, plen, "%s: %s", name, strerror(t->err));
        errno = t->err;
        return -3;
    }
    if (line - 1 >= t->len) {
        snprintf(problem, plen, "integrity record is missing");
        return -2;
    }
    const char *at = t->text + line - 1;
    const char *nl = strchr(at, '\n');
    char buf[RECORD_MAX + 1];
    size_t n = nl ? (size_t)(nl - at) + 1 : strlen(at);
    if (!nl || n > RECORD_MAX) {
        snprintf(problem, plen, "integrity record is unreadable");
        return -1;
    }
    memcpy(buf, at, n);
    buf[n] = '\0';
    return rng_parse_record(buf, seq, rec, problem, plen);
}

/* The entry's type, from the directory (stat only when the directory does not say, or stat is
 * asked for); size receives the length when it was stat'ed, else UINT64_MAX. Returns 0 (a regular
 * file), -1 with problem, or -3 with problem (the stat failed). */
static int entry_type(cs_ring *r, const entry *e, bool stat_it, uint64_t *size, char *problem, size_t plen)
{
    *size = UINT64_MAX;
    unsigned char type = e->type;
    if (stat_it || type == DT_UNKNOWN) {
        struct stat st;
        char buf[CS_LEDGER_NAME_MAX];
        const char *name = rng_entry_name(e, buf);
        if (fstatat(r->dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            snprintf(problem, plen, "%s: %s", name, strerror(errno));
            return -3;
        }
        type = S_ISREG(st.st_mode) ? DT_REG : S_ISLNK(st.st_mode) ? DT_LNK : S_ISDIR(st.st_mode) ? DT_DIR : DT_FIFO;
        *size = (uint64_t)st.st_size;
    }
    if (type == DT_REG)
        return 0;
    snprintf(problem, plen, "%s", type == DT_LNK ? "is a symbolic link" : type == DT_DIR ? "is a directory" : "is not a regular file");
    return -1;
}

/* Checks ledger seq at open, reading only: a regular file (its length too when stat_it) with a
 * record for it (of any length when it has no record in a ring from before records, which has no
 * ring-format: its record is made when the repairs are carried out). Frames the record claims must
 * lie inside their segment's file, else *bad_frames. *size receives the ledger's length (the
 * record's when not stat'ed). Returns 0, -1 with problem (the ledger is bad), or -3 with problem
 * naming the file and the system's error (nothing is proven: the open fails). */
static int check_at_open(cs_ring *r, log_text *t, const entry *ledger, bool upgrade, bool stat_it, uint64_t *size,
                         uint64_t *frames_size, bool *bad_frames, char *problem, size_t plen)
{
    *frames_size = 0;
    *bad_frames = false;
    uint32_t seq = ledger->seq;
    int rc = entry_type(r, ledger, stat_it, size, problem, plen);
    if (rc != 0)
        return rc;
    cs_ledger_record rec;
    int rr = open_record(r, t, seq, &rec, problem, plen);
    if (rr == -2 && upgrade) {
        if (*size == UINT64_MAX && entry_type(r, ledger, true, size, problem, plen) != 0)
            return -3;
        return 0; /* a ring from before records: its record is made at the first write */
    }
    if (rr == -3)
        return -3;
    if (rr != 0)
        return -1;
    if (*size != UINT64_MAX && rec.len != *size) {
        snprintf(problem, plen, "is %" PRIu64 " bytes, its record says %" PRIu64, *size, rec.len);
        return -1;
    }
    *size = rec.len;
    rng_note_chunk_size(r, rec.chunk_size); /* a replay may cut it there */
    /* Bad frames cost the frames, not the ledger: its raw bytes are still checked by their own
     * record when replayed by re-encoding. */
    rng_seg *s = rng_seg_find(r, seq);
    uint64_t end = rec.frames_off + rec.frames_len;
    if (rec.frames_len && (!s || s->frames_type != DT_REG || s->frames_end < end)) {
        char fproblem[200];
        unsigned char type = s ? s->frames_type : DT_UNKNOWN;
        if (type == DT_REG)
            snprintf(fproblem, sizeof fproblem, "is %" PRIu64 " bytes, its record says ledger %" PRIu32
                     "'s frames end at byte %" PRIu64, s->frames_end, seq, end);
        else
            snprintf(fproblem, sizeof fproblem, "%s", type == DT_LNK ? "is a symbolic link" : type == DT_DIR ? "is a directory"
                                                      : type == DT_FIFO ? "is not a regular file" : "is missing");
        rng_log_frames_problem(r, seq, fproblem);
        *bad_frames = true;
    } else {
        *frames_size = rec.frames_len;
    }
    if (s) { /* the byte counters follow the ledgers kept */
        s->len[seq - s->base] = rec.len;
        s->flen[seq - s->base] = *bad_frames ? 0 : rec.frames_len;
    }
    return 0;
}

/* The segments' logs read into the table, and the records of a format-3 ring noted where no log
 * line replaces them. Returns 0, or -1 with errno and name the file it met it on. */
static int load_segments(cs_ring *r, const entry *v, size_t n, char name[CS_LEDGER_NAME_MAX])
{
    snprintf(name, CS_LEDGER_NAME_MAX, "records logs");
    for (size_t i = 0; i < n; i++) {
        if (v[i].kind != E_LOG || !v[i].canonical)
            continue;
        unsigned char type = DT_UNKNOWN;
        rng_seg_name(name, v[i].seq);
        struct stat st;
        if (fstatat(r->dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            type = S_ISREG(st.st_mode) ? DT_REG : S_ISLNK(st.st_mode) ? DT_LNK : S_ISDIR(st.st_mode) ? DT_DIR : DT_FIFO;
        else if (errno != ENOENT)
            return -1;
        rng_log_name(name, v[i].seq);
        if (rng_seg_load(r, v[i].seq, type, type == DT_REG ? (uint64_t)st.st_size : 0) != 0)
            return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (v[i].kind != E_RECORD || !v[i].canonical || rng_record_line(r, v[i].seq) != RNG_LINE_NONE)
            continue;
        rng_seg *s = rng_seg_add(r, v[i].seq);
        if (!s) {
            errno = ENOMEM;
            return -1;
        }
        s->line[v[i].seq - s->base] = RNG_LINE_LEGACY;
    }
    return 0;
}

/* Whether ring-format says this build's format (4); an older ring (a record file per ledger) is
 * migrated by the settle and the marker rewritten. Returns 1 current, 0 missing or another
 * format, -1 when it cannot be read (errno). */
static int format_current(cs_ring *r)
{
    char buf[64];
    int fd = openat(r->dfd, FORMAT_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ELOOP ? 0 : -1;
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    int e = errno;
    close(fd);
    errno = e;
    if (n < 0)
        return e == EISDIR ? 0 : -1;
    return n == (ssize_t)strlen(FORMAT_TEXT) && memcmp(buf, FORMAT_TEXT, (size_t)n) == 0;
}

static int note_drop(open_repairs *o, uint32_t seq, const char *name, const char *problem)
{
    if (o->nbad % 16 == 0) {
        open_drop *grown = realloc(o->bad, (o->nbad + 16) * sizeof *grown);
        if (!grown)
            return -1;
        o->bad = grown;
    }
    open_drop *d = &o->bad[o->nbad++];
    d->seq = seq;
    snprintf(d->name, sizeof d->name, "%s", name);
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

/* The holes of the bounds: every sequence in [oldest, latest] that has no good ledger. good holds
 * the good ledgers' sequences, newest first. Returns the sequences missing, or UINT64_MAX when the
 * holes cannot be recorded. */
static uint64_t holes_between(cs_ring *r, const uint32_t *good, size_t ngood)
{
    uint64_t missing = 0;
    for (size_t i = 0; i + 1 < ngood; i++) {
        if (good[i] - good[i + 1] <= 1)
            continue;
        if (rng_hole_add(r, good[i + 1] + 1, good[i] - 1) != 0)
            return UINT64_MAX;
        missing += good[i] - good[i + 1] - 1;
    }
    return missing;
}

/* Whether the scan found ledger-<seq>.xdr (v sorted by sequence then kind). */
static bool has_ledger(const entry *v, size_t n, uint32_t seq)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].seq < seq) /* E_LEDGER sorts first within a sequence */
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < n && v[lo].seq == seq && v[lo].kind == E_LEDGER; lo++)
        if (v[lo].canonical)
            return true;
    return false;
}

/* A record whose ledger the scan did not find (newer than every ledger, or in a hole): the ledger
 * is missing, which is logged and counted (its record is copied to the quarantine for a person to
 * look at). A newer one beside its ledger's `.tmp` is what a crash between the record's append and
 * the ledger's rename leaves: the ledger was never in the ring. */
static int note_orphan_records(cs_ring *r, const entry *v, size_t n)
{
    for (size_t i = 0; i < r->nsegs; i++) {
        const rng_seg *s = r->segs[i];
        for (uint32_t k = 0; k < RNG_SEG_LEDGERS; k++) {
            uint32_t seq = s->base + k, first, last;
            if (s->line[k] == RNG_LINE_NONE || has_ledger(v, n, seq))
                continue;
            bool newer = !r->filled || seq > r->latest;
            char name[CS_LEDGER_NAME_MAX];
            rng_tmp_name(name, seq);
            if (newer && faccessat(r->dfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                continue; /* a crash between the record's append and the ledger's rename */
            if (s->line[k] == RNG_LINE_LEGACY)
                rng_legacy_record_name(name, seq);
            else
                cs_ledger_name_format(name, sizeof name, seq);
            if (newer || (seq >= r->oldest && rng_in_hole_locked(r, seq, &first, &last)))
                if (note_drop(&r->repairs, seq, name, "is missing (its record is there)") != 0)
                    return -1;
        }
    }
    return 0;
}

/* Sets the bounds and holes from what is on disk without changing it, and notes in r->repairs what
 * the first write carries out (settle). The newest good ledger is the latest; every ledger within
 * the retention count below it is checked (older ones are pruned unchecked): good ones are kept, a
 * bad one costs only itself (quarantined by the settle) and, like a missing sequence, leaves a hole
 * unless it is older than every good ledger kept. A system call that fails ends the open: nothing
 * is proven by it, and nothing is changed. */
static int survey(cs_ring *r, cs_err *err)
{
    entry *v;
    size_t n;
    if (rng_scan_entries(r, &v, &n) != 0)
        return cs_err_set(err, 0, "store: scan \"%s\": %s", r->dir, strerror(errno));
    open_repairs *o = &r->repairs;
    int fmt = format_current(r);
    if (fmt < 0) {
        int e = errno;
        rng_free_entries(v, n);
        return cs_err_set(err, 0, "store: read \"%s/%s\": %s", r->dir, FORMAT_NAME, strerror(e));
    }
    char what[CS_LEDGER_NAME_MAX];
    if (load_segments(r, v, n, what) != 0) {
        int e = errno;
        rng_free_entries(v, n);
        return cs_err_set(err, 0, "store: open \"%s\": %s: %s", r->dir, what, strerror(e));
    }
    o->upgrade = faccessat(r->dfd, FORMAT_NAME, F_OK, AT_SYMLINK_NOFOLLOW) != 0;
    o->rewrite_format = o->upgrade || fmt == 0;
    bool nomem = false;
    uint32_t *good = malloc((n ? n : 1) * sizeof *good);
    size_t ngood = 0, nstat = 0;
    nomem |= !good;
    bool filled = false;
    uint32_t oldest = 0, latest = 0, low = 0;
    uint64_t bytes = 0, fbytes = 0; /* of the ledgers kept and their frames, as the checks found them */
    log_text t = {.base = UINT32_MAX};
    for (size_t k = n; k-- > 0 && !nomem;) {
        const entry *e = &v[k];
        if (e->kind == E_FRAMES && e->canonical && (!filled || e->seq >= low))
            o->old_frames++; /* a format-3 ring's own frames file: forgotten, made again */
        if (e->kind != E_LEDGER)
            continue;
        if (filled && e->seq < low)
            break; /* what is older is pruned, unchecked */
        char problem[600], buf[CS_LEDGER_NAME_MAX];
        const char *name = rng_entry_name(e, buf);
        if (!e->canonical) {
            snprintf(problem, sizeof problem, "unexpected file name %s", name);
            nomem |= note_drop(o, e->seq, name, problem) != 0;
            continue;
        }
        uint64_t size = 0, fsize = 0;
        bool bad_frames;
        int rc = check_at_open(r, &t, e, o->upgrade, nstat++ < OPEN_STAT_NEWEST, &size, &fsize, &bad_frames, problem,
                               sizeof problem);
        if (rc == -3) {
            log_text_free(&t);
            rng_free_entries(v, n);
            free(good);
            return cs_err_set(err, 0, "store: open \"%s\": %s", r->dir, problem);
        }
        if (rc != 0) {
            nomem |= note_drop(o, e->seq, name, problem) != 0;
            continue;
        }
        if (bad_frames)
            nomem |= note_forget(o, e->seq) != 0;
        bytes += size;
        fbytes += fsize;
        if (!filled) {
            latest = e->seq;
            low = (uint64_t)latest + 1 > r->retention ? (uint32_t)((uint64_t)latest + 1 - r->retention) : 1;
        }
        filled = true;
        oldest = e->seq;
        good[ngood++] = e->seq;
    }
    log_text_free(&t);
    r->filled = filled;
    r->oldest = filled ? oldest : 0;
    r->latest = filled ? latest : 0;
    uint64_t missing = nomem ? 0 : holes_between(r, good, ngood);
    nomem |= missing == UINT64_MAX || note_orphan_records(r, v, n) != 0;
    rng_free_entries(v, n);
    free(good);
    if (nomem)
        return cs_err_set(err, 0, "store: scan \"%s\": %s", r->dir, strerror(ENOMEM));
    o->missing = missing;
    /* A quarantined ledger's sequence is a hole, not a missing one: counted once, as bad. */
    for (size_t i = 0; i < o->nbad; i++) {
        uint32_t f, l;
        if (filled && o->bad[i].seq >= oldest && rng_in_hole_locked(r, o->bad[i].seq, &f, &l) && o->missing)
            o->missing--;
    }
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

/* Every ledger entry outside the bounds goes (pruned ledgers), and so does every segment that
 * holds no sequence of the bounds, and every sidecar of a format-3 ring (its records were moved
 * into the logs, its frames are made again). Bad ledgers were quarantined before this runs. */
static void remove_outside(cs_ring *r)
{
    entry *v;
    size_t n;
    if (rng_scan_entries(r, &v, &n) != 0)
        return; /* leftovers only cost disk space; the next start tries again */
    for (size_t i = 0; i < n; i++) {
        const entry *e = &v[i];
        uint32_t first, last;
        char buf[CS_LEDGER_NAME_MAX];
        bool seg = e->kind == E_LOG || e->kind == E_SEG;
        uint64_t top = seg ? (uint64_t)e->seq + RNG_SEG_LEDGERS - 1 : e->seq;
        bool inside = r->filled && top >= r->oldest && e->seq <= r->latest;
        if (seg) {
            if (!inside || !e->canonical)
                remove_entry(r, rng_entry_name(e, buf));
            continue;
        }
        /* What is left in a hole, a ledger newer than the latest, or a stray ledger name inside
         * the bounds is a quarantine that could not be made: it stays for the next start. */
        bool newer = e->kind == E_LEDGER && (!r->filled || e->seq > r->latest);
        if (newer || (inside && (rng_in_hole_locked(r, e->seq, &first, &last) || (!e->canonical && e->kind == E_LEDGER))))
            continue;
        if (!(inside && e->canonical && e->kind == E_LEDGER))
            remove_entry(r, rng_entry_name(e, buf));
    }
    rng_free_entries(v, n);
    /* The table follows the files. */
    rng_seg_remove_below(r, r->filled ? r->oldest : UINT64_MAX);
    rng_seg_remove_above(r, r->filled ? r->latest : 0);
}

/* The records the open could not find in a log: a ring from before records (no ring-format) gets
 * one for each kept ledger that has none, made by hashing it, and a format-3 ring's own record
 * files move into the logs. A record that exists is never made again from the bytes on disk: that
 * would vouch for whatever the disk now holds. */
static int make_records(cs_ring *r, bool upgrade, cs_err *err)
{
    uint64_t made = 0, moved = 0;
    for (uint64_t s = r->oldest; r->filled && s <= r->latest; s++) {
        uint32_t first, last, seq = (uint32_t)s, line = rng_record_line(r, seq);
        if (rng_in_hole_locked(r, seq, &first, &last)) {
            s = last;
            continue;
        }
        char name[CS_LEDGER_NAME_MAX], problem[600];
        cs_ledger_record rec = {0};
        int ok = 1;
        if (line == RNG_LINE_LEGACY) {
            ok = rng_read_legacy_record(r->dfd, seq, &rec, problem, sizeof problem) == 0 &&
                 rng_append_record(r, seq, &rec) == 0;
            moved += ok;
        } else if (line == RNG_LINE_NONE && upgrade) {
            cs_ledger_name_format(name, sizeof name, seq);
            int fd = openat(r->dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            struct stat st;
            ok = fd >= 0 && fstat(fd, &st) == 0;
            if (ok) {
                rec.len = (uint64_t)st.st_size;
                ok = rng_hash_file(fd, rec.len, &rec.xxh64) == 0 && rng_append_record(r, seq, &rec) == 0;
            }
            int e = errno;
            if (fd >= 0)
                close(fd);
            errno = e;
            made += ok;
        }
        if (!ok)
            return cs_err_set(err, 0, "store: upgrade \"%s\": ledger %" PRIu32 ": %s", r->dir, seq, strerror(errno));
    }
    if (made)
        CS_LOG(CS_LOG_INFO, "ring: integrity records made from the ledgers on disk (a ring written before records)",
               KV_S("dir", r->dir), KV_U("ledgers", made));
    if (moved)
        CS_LOG(CS_LOG_INFO, "ring: integrity records moved into the records logs (a ring of format 3)",
               KV_S("dir", r->dir), KV_U("ledgers", moved));
    return 0;
}

/* Moves one entry the open found bad to the quarantine, with its sidecars when it is the ledger
 * of its sequence (or its orphan record), and logs it. */
static void quarantine_found(cs_ring *r, const open_drop *d)
{
    char path[4200], text[1600], where[4300];
    snprintf(path, sizeof path, "%s/%s", r->dir, d->name);
    rng_reason_text(text, sizeof text, d->seq, d->problem, "open", "-", "-");
    char canon[CS_LEDGER_NAME_MAX], rname[CS_LEDGER_NAME_MAX];
    cs_ledger_name_format(canon, sizeof canon, d->seq);
    rng_legacy_record_name(rname, d->seq);
    int rc;
    if (strcmp(d->name, canon) == 0 || strcmp(d->name, rname) == 0) {
        rc = rng_quarantine(r, d->seq, text, where, sizeof where);
    } else {
        /* A name the ring never writes (ledger-007.xdr): that file alone; ledger-7's are not its. */
        rc = rng_quarantine_file(r, d->seq, d->name, text, where, sizeof where);
    }
    if (rc != 0) {
        CS_LOG(CS_LOG_ERROR, "ring ledger is bad; it could not be quarantined, it is not served and stays in place",
               KV_S("file", path), KV_S("problem", d->problem), KV_S("error", strerror(errno)),
               KV_S("found_by", "open"), KV_U("oldest", r->oldest), KV_U("latest", r->latest));
        return;
    }
    CS_LOG(CS_LOG_ERROR, "ring ledger is bad; quarantined, the ledgers around it stay", KV_S("file", path),
           KV_S("problem", d->problem), KV_S("record_xxh64", "-"), KV_S("actual_xxh64", "-"), KV_S("quarantine", where),
           KV_S("found_by", "open"), KV_U("oldest", r->oldest), KV_U("latest", r->latest));
}

/* The holes the open found where no file was at all (not only quarantined ledgers): one line each. */
static void log_missing(const cs_ring *r, const open_repairs *o)
{
    for (size_t i = 0; i < r->nholes; i++) {
        uint64_t bad = 0;
        for (size_t k = 0; k < o->nbad; k++)
            bad += o->bad[k].seq >= r->holes[i].first && o->bad[k].seq <= r->holes[i].last;
        if (bad >= (uint64_t)r->holes[i].last - r->holes[i].first + 1)
            continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/ledger-%" PRIu32 ".xdr", r->dir, r->holes[i].first);
        CS_LOG(CS_LOG_ERROR, "ring ledgers are missing; their sequences are a hole, the ledgers around them stay",
               KV_S("file", path), KV_U("first", r->holes[i].first), KV_U("last", r->holes[i].last),
               KV_U("oldest", r->oldest), KV_U("latest", r->latest));
    }
}

int rng_settle_locked(cs_ring *r, cs_err *err)
{
    if (!atomic_load(&r->unsettled))
        return 0;
    open_repairs *o = &r->repairs;
    /* Quarantines and their count happen once, whatever fails later and is retried. */
    if (o->missing)
        log_missing(r, o);
    for (size_t i = 0; i < o->nbad; i++)
        quarantine_found(r, &o->bad[i]);
    atomic_fetch_add(&r->dropped, o->nbad + o->missing);
    free(o->bad);
    o->bad = NULL;
    o->nbad = 0;
    o->missing = 0;
    remove_leftover_tmps(r);
    if (make_records(r, o->upgrade, err) != 0)
        return -1;
    for (size_t i = 0; i < o->nforget; i++) {
        cs_ledger_record rec;
        char ignored[300];
        if (rng_read_record(r, o->forget[i], &rec, NULL, ignored, sizeof ignored) == 0 && rec.frames_len)
            rng_forget_frames(r, o->forget[i], &rec);
    }
    if (o->old_frames)
        CS_LOG(CS_LOG_INFO, "ring: stored frames of an older format forgotten; they are made again",
               KV_S("dir", r->dir), KV_U("ledgers", o->old_frames));
    remove_outside(r);
    if (o->rewrite_format && rng_write_small_file(r->dfd, FORMAT_NAME, FORMAT_TEXT) != 0)
        return cs_err_set(err, 0, "store: upgrade \"%s\": %s: %s", r->dir, FORMAT_NAME, strerror(errno));
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
    if (cs_mkdir_all(dir) != 0)
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
    r->app_log_fd = r->app_frames_fd = -1;
    r->app_base = UINT32_MAX;
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
    if (probe_writable(r, err) != 0 || rng_read_bookkeeping(r, err) != 0 || survey(r, err) != 0) {
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
    rng_seg_close_append(r);
    for (size_t i = 0; i < r->nsegs; i++)
        free(r->segs[i]);
    free(r->segs);
    close(r->dfd);
    free(r->repairs.bad);
    free(r->repairs.forget);
    free(r->holes);
    pthread_rwlock_destroy(&r->lock);
    pthread_mutex_destroy(&r->wmu);
    free(r->dir);
    free(r);
}
