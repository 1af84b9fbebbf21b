/* SPDX-License-Identifier: Apache-2.0 */
/* The retention ring's internals, shared by its files (store/ring*.c); nothing outside
 * src/store includes this. The public API and its contract are store/ring.h. */
#ifndef CS_STORE_RING_INTERNAL_H
#define CS_STORE_RING_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "common/err.h"
#include "common/futex.h"
#include "common/invariant.h"
#include "store/ledgerdir.h"
#include "store/ring.h"

typedef struct rng_hole {
    uint32_t first, last;
} rng_hole;

/* Segments (docs/RING.md, "Layout"): ledgers base..base+RNG_SEG_LEDGERS-1 (base a multiple of it)
 * keep their integrity records in records-<base>.log and their stored frames in frames-<base>.seg,
 * both appended to, never rewritten. */
#define RNG_SEG_LEDGERS CS_RING_SEG_LEDGERS
/* line[]: where a ledger's current record line is. */
#define RNG_LINE_NONE 0u            /* no record */
#define RNG_LINE_LEGACY UINT32_MAX  /* ledger-<seq>.rec of a format-3 ring, moved by the settle */

typedef struct rng_seg {
    uint32_t base;
    uint32_t line[RNG_SEG_LEDGERS]; /* offset + 1 of the record line in the log, or RNG_LINE_* */
    uint64_t len[RNG_SEG_LEDGERS];  /* the ledger's length, by its record (for the byte counters) */
    uint64_t flen[RNG_SEG_LEDGERS]; /* its frames' length, by its record; 0 without frames */
    uint64_t log_end, frames_end;   /* the files' lengths as the ring wrote (or found) them */
    bool log_torn; /* the log as found ends without a newline: the next line starts a line */
    /* The frames file as the open found it: DT_REG, DT_LNK, DT_DIR, DT_FIFO (anything else) or
     * DT_UNKNOWN (missing); frames_warned: a failed frames append was logged for this segment. */
    unsigned char frames_type;
    bool frames_warned;
} rng_seg;

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
    bool rewrite_format; /* ring-format is missing or of an older format */
    open_drop *bad;      /* entries proven bad (each costs only itself): quarantined by the settle */
    size_t nbad;
    uint64_t missing;     /* sequences inside the bounds with no ledger at all (holes, counted) */
    uint32_t *forget;     /* kept ledgers whose frames failed their check */
    size_t nforget;
    uint64_t old_frames;  /* frames files of a format-3 ring, forgotten without an ERROR (made again) */
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
    /* The largest chunk size any record met since open says a ledger was cut at (records found at
     * open, puts, frames attached): only grows. cs_ring_max_chunk_size. */
    atomic_uint max_chunk;
    /* Health, for /healthz: written by the put thread, read by anyone. */
    atomic_uint_fast64_t write_failures;
    atomic_bool degraded;
    atomic_uint_fast64_t dropped;
    /* The put thread (cs_ring_put's single writer): unbound until the first put or a
     * cs_ring_take_put_thread. */
    cs_owner put_thread;
    /* Serializes the bound changes of put with those of cs_ring_condemn (any thread). */
    pthread_mutex_t wmu;
    /* The put thread's: write ledger files with O_DIRECT when the parts allow it (set before
     * puts begin); refused once the file system said no, so it is asked once. */
    bool direct;
    bool direct_refused;
    /* Set by the open, cleared under wmu once its repairs are carried out. */
    atomic_bool unsettled;
    open_repairs repairs;
    /* The run nonce (ring-run) the claim kept or drew; 0 before the claim. Written once by the
     * claim, before anyone reads the ring. */
    uint64_t run_nonce;
    /* ring-identity and ring-run as the open read them (known: the file exists and is one line);
     * the claim reads these and keeps them current. A file that cannot be read fails the open. */
    bool identity_known;
    char identity[4097];
    char run_line[128];
    /* Holes: sequences inside the bounds that are not served (quarantined, missing, or not written
     * because puts failed), as sorted disjoint ranges. Changed with the bounds (under wmu and the
     * write lock, rng_set_bounds), read under the read lock. */
    rng_hole *holes;
    size_t nholes, holes_cap;
    /* The put thread's: consecutive puts that failed right after latest (failed_first 0: none), so
     * the put that works again makes them a hole instead of resetting the ring. */
    uint32_t failed_first, failed_last;
    atomic_uint_fast64_t io_errors;
    /* The segments holding records or frames of ledgers on disk, sorted by base. Changed under wmu
     * and the write lock, read under either. */
    rng_seg **segs;
    size_t nsegs, segs_cap;
    /* Descriptors of the segment appended to last (base app_base; -1 when none is open), under wmu:
     * the put thread appends to one segment for RNG_SEG_LEDGERS ledgers in a row. */
    uint32_t app_base;
    int app_log_fd, app_frames_fd;
    /* The doorbell of cs_ring_wait_change: bumped after every change of the bounds (and by
     * cs_ring_wake), its waiters woken (common/futex.h). */
    cs_bell changes;
};

#define FORMAT_NAME "ring-format"
#define FORMAT_TEXT "corestream-ring 4\n"
#define RNG_RECORD_VERSION 5
#define RECORD_MAX 1024

/* The public ref is embedded so that release can find the descriptor and the count. */
typedef struct ledger_file {
    cs_ledger_ref ref;
    atomic_uint refs;
    cs_frame *frames;   /* rec.chunks entries when frames_fd >= 0 */
    uint8_t *tail;      /* the frames file's index and trailer, as read */
} ledger_file;

/* E_RECORD and E_FRAMES: the per-ledger sidecars of a format-3 ring (ledger-<seq>.rec, .frames);
 * E_LOG and E_SEG: a segment's records-<base>.log and frames-<base>.seg (seq is the base). */
enum { E_LEDGER, E_RECORD, E_FRAMES, E_LOG, E_SEG };

/* One ledger-, sidecar- or segment-named entry of the directory: 16 bytes, so a scan of a week
 * of history (120,960 ledgers) sorts in milliseconds. */
typedef struct entry {
    uint32_t seq;
    uint8_t kind;       /* E_* */
    uint8_t type;       /* d_type: DT_REG, DT_LNK, DT_DIR, ..., or DT_UNKNOWN */
    bool canonical;     /* the name is exactly what the ring writes for seq, no padding */
    char *odd;          /* the name as found when it is not canonical (malloc'd), else NULL */
} entry;

/* The entry's name: odd, or the canonical name written into buf. */
const char *rng_entry_name(const entry *e, char buf[CS_LEDGER_NAME_MAX]);
/* Frees a scan's entries (their odd names too). */
void rng_free_entries(entry *v, size_t n);

/* ---- files, counters, bounds (ringdisk.c) ---------------------------------------------------- */

/* "ledger-<seq>.rec" and "ledger-<seq>.frames", the sidecars of a format-3 ring: not ledger names,
 * so the file source (and the prototype) skip them. */
void rng_legacy_record_name(char buf[CS_LEDGER_NAME_MAX], uint32_t seq);
void rng_legacy_frames_name(char buf[CS_LEDGER_NAME_MAX], uint32_t seq);
/* "records-<base>.log" and "frames-<base>.seg" of the segment holding seq. */
void rng_log_name(char buf[CS_LEDGER_NAME_MAX], uint32_t seq);
void rng_seg_name(char buf[CS_LEDGER_NAME_MAX], uint32_t seq);
/* The temporary name a ledger's file is written under before its rename. */
void rng_tmp_name(char tmp[CS_LEDGER_NAME_MAX], uint32_t seq);

/* r->bytes and r->frames_bytes by delta, never below 0. Under wmu (or by the open, alone). */
void rng_bytes_adjust(cs_ring *r, int64_t delta);
void rng_frames_bytes_adjust(cs_ring *r, int64_t delta);

/* Unlinks the ledger files [from, to], both inclusive (the 64-bit counter ends the loop at
 * 4294967295), takes their lengths off the byte counters, and removes every segment that holds no
 * sequence above to. Under wmu. */
void rng_unlink_range(cs_ring *r, uint32_t from, uint32_t to);

/* The bounds, under the write lock; callers hold wmu. Holes below the new oldest go, a hole at the
 * oldest moves the oldest past it (an empty ring when nothing is left), and every hole goes with an
 * empty ring. */
void rng_set_bounds(cs_ring *r, bool filled, uint32_t oldest, uint32_t latest);
/* The same, for a caller that holds the write lock too. */
void rng_set_bounds_wrlocked(cs_ring *r, bool filled, uint32_t oldest, uint32_t latest);

/* ---- holes and quarantine (ringquarantine.c) --------------------------------------------------- */

/* Makes [first, last] a hole (merged with its neighbours) and applies rng_set_bounds' rules; callers
 * hold wmu. Returns -1 (ENOMEM) when the hole cannot be recorded: the caller then keeps the ledger. */
int rng_hole_add(cs_ring *r, uint32_t first, uint32_t last);
/* The same, with new bounds set in the same step: a reader never sees the bounds cover the hole
 * before the hole is recorded (a put that skips sequences whose writes failed). */
int rng_hole_add_bounds(cs_ring *r, uint32_t first, uint32_t last, bool filled, uint32_t oldest, uint32_t latest);

/* Whether seq is in a hole; callers hold the read or write lock, or wmu (every writer holds it). */
bool rng_in_hole_locked(const cs_ring *r, uint32_t seq, uint32_t *first, uint32_t *last);

/* Moves the named entries (ledger, record, frames of seq; absent ones skipped) to a new directory
 * under <data-dir>/quarantine with a reason file holding text. where receives the directory's path.
 * Returns 0, or -1 with errno (what was moved stays moved). Callers hold wmu. */
int rng_quarantine(cs_ring *r, uint32_t seq, const char *text, char *where, size_t wlen);
/* The same for one entry under a name the ring never writes (ledger-007.xdr). */
int rng_quarantine_file(cs_ring *r, uint32_t seq, const char *name, const char *text, char *where, size_t wlen);

/* The reason file's text: the ledger, the problem, what found it, the two checksums ("-" when the
 * bytes were not hashed) and the time. */
void rng_reason_text(char *buf, size_t len, uint32_t seq, const char *problem, const char *suspicion,
                     const char *want, const char *got);

/* The oldest sequence that keeps [oldest, latest] within the retention count. */
uint32_t rng_pruned_oldest(const cs_ring *r, uint32_t oldest, uint32_t latest);

/* Writes name through name.tmp and a rename. On failure errno is set. */
int rng_write_small_file(int dfd, const char *name, const char *text);

/* Hashes an open ledger file with pread; on failure errno is set. */
int rng_hash_file(int fd, uint64_t len, uint64_t *sum);

/* Every ledger-, record- and frames-named entry of the directory, sorted by sequence then kind,
 * into *out (malloc'd, the caller frees; NULL when none). Returns 0, or -1 with errno. */
int rng_scan_entries(cs_ring *r, entry **out, size_t *n);

/* The ERROR line of frames that failed their check. */
void rng_log_frames_problem(const cs_ring *r, uint32_t seq, const char *problem);
/* The ledger keeps its raw file and record but loses its frames: a record without them is
 * appended (their bytes stay in the segment until it is pruned). Under wmu. A failed append leaves
 * the frames claimed; the next reader finds them bad again and falls back the same way. */
void rng_forget_frames(cs_ring *r, uint32_t seq, const cs_ledger_record *rec);

/* The frames segment's type and size against the record's frames. Returns 0 or -1 with problem. */
int rng_check_frames_stat(const struct stat *st, uint32_t seq, const cs_ledger_record *rec, char *problem,
                          size_t plen);

/* ---- records (ringrecord.c) ------------------------------------------------------------------ */

/* Raises max_chunk to chunk_size when it is larger. Any thread. */
void rng_note_chunk_size(cs_ring *r, uint32_t chunk_size);

/* The record's line for seq into buf (RECORD_MAX bytes hold any); returns its length. */
int rng_format_record(char *buf, size_t len, uint32_t seq, const cs_ledger_record *rec);

/* Parses one record line (NUL-terminated, its newline included) of ledger seq; cs_ring_record_parse. */
int rng_parse_record(const char *text, uint32_t seq, cs_ledger_record *rec, char *problem, size_t plen);

/* Reads and parses ledger-<seq>.rec of a format-3 ring (its frames fields zeroed: that format's
 * frames are not read). Returns as rng_read_record. */
int rng_read_legacy_record(int dfd, uint32_t seq, cs_ledger_record *rec, char *problem, size_t plen);

/* ---- segments (ringseg.c) -------------------------------------------------------------------- */

/* The segment holding seq, or NULL; callers hold the read or write lock, or wmu. */
rng_seg *rng_seg_find(const cs_ring *r, uint32_t seq);
/* The same, added (empty) when missing; under wmu. NULL: no memory. */
rng_seg *rng_seg_add(cs_ring *r, uint32_t seq);

/* Where seq's record line is now (RNG_LINE_*, or offset + 1). Any thread. */
uint32_t rng_record_line(cs_ring *r, uint32_t seq);

/* Reads and parses the current record of seq, and *line (may be NULL) receives where it was.
 * Returns 0, -1 with problem (the record is bad), -2 when there is none ("integrity record is
 * missing"), or -3 when a system call failed (problem names the file and the error; errno kept): an
 * I/O error, which proves nothing about the record. */
int rng_read_record(cs_ring *r, uint32_t seq, cs_ledger_record *rec, uint32_t *line, char *problem, size_t plen);

/* Appends seq's record to its segment's log and makes it seq's record. Under wmu. On failure
 * errno is set and nothing changed (the log is cut back to where it was). */
int rng_append_record(cs_ring *r, uint32_t seq, const cs_ledger_record *rec);

/* Appends iov (the frames of seq: payloads, index and trailer) to its segment's frames file at
 * *off. Under wmu. On failure errno is set and the file is cut back. */
int rng_append_frames(cs_ring *r, uint32_t seq, const struct iovec *iov, int cnt, uint64_t *off);

/* A frames append for seq failed with e (not a passing shortage): WARN `ring: stored frames could
 * not be written; the segment's ledgers are kept without them` once per segment. Under wmu. */
void rng_frames_append_failed(cs_ring *r, uint32_t seq, int e);

/* Forgets seq's record in memory (its sequence left the ring). Under wmu. */
void rng_seg_clear(cs_ring *r, uint32_t seq);
/* Appends the line that takes seq out for good (quarantined: the next open must not find its
 * record again) and forgets it. Under wmu. On failure errno is set. */
int rng_append_gone(cs_ring *r, uint32_t seq);
/* The log's length before an append (rng_log_end), and the append taken back: a put whose ledger
 * could not be renamed into place. Under wmu. */
uint64_t rng_log_end(cs_ring *r, uint32_t seq);
void rng_unappend_record(cs_ring *r, uint32_t seq, uint64_t log_end);

/* Removes the segments holding no sequence at or above keep, their files unlinked; remove_all
 * removes every one (a reset). Under wmu. */
void rng_seg_remove_below(cs_ring *r, uint64_t keep);
void rng_seg_remove_all(cs_ring *r);
/* Removes the segments holding only sequences above latest (records of puts a crash cut short,
 * found by the open). Under wmu. */
void rng_seg_remove_above(cs_ring *r, uint32_t latest);

/* Closes the append descriptors (the ring is closing, or the segment goes). Under wmu. */
void rng_seg_close_append(cs_ring *r);

/* Reads the records log of the segment at base into the table (cs_ring_log_scan: each line that
 * names a sequence of the segment becomes its record line, a later line replacing an earlier one),
 * with what the open found of its frames file (frames_type as rng_seg's, frames_size its length
 * when regular). Returns 0, or -1 with errno (an I/O error, or no memory: the open fails). */
int rng_seg_load(cs_ring *r, uint32_t base, unsigned char frames_type, uint64_t frames_size);

/* ---- run identity (ringidentity.c) ----------------------------------------------------------- */

/* Reads ring-identity and ring-run into r (either may be missing). Errors: `store: read
 * "<dir>/ring-identity": <strerror>` (or ring-run): a file that exists and cannot be read stops the
 * open, since a ring whose run cannot be told must not be reset or given a new run. */
int rng_read_bookkeeping(cs_ring *r, cs_err *err);

/* ---- the open's repairs (ringopen.c) --------------------------------------------------------- */

/* Carries out what the open found (open_repairs), under wmu, before anything is written: leftover
 * temporaries go, records are made for a ring from before them, bad frames are forgotten, every
 * entry outside the bounds goes, ring-format is brought to this format; then the drops are
 * logged and counted. Errors: `store: upgrade "<dir>": …` (kind 0). */
int rng_settle_locked(cs_ring *r, cs_err *err);

/* rng_settle_locked for a caller that does not hold wmu; nothing to do once settled. */
int rng_settle(cs_ring *r, cs_err *err);

/* ---- the write path (ringput.c) -------------------------------------------------------------- */

/* The single-writer contract every put checks (ring.h). */
#define RNG_PUT_THREAD "ring put: single writer, the put thread only (ring.h)"

/* Hands a file just written to write-back without waiting for it, so the ring's dirty pages never
 * pile up to the kernel's dirty limits and are written while the disk is idle between ledgers.
 * Advisory: a failure loses nothing (the kernel writes the pages back anyway), so it is ignored. */
void rng_start_writeback(int fd);

/* ---- the frames writer (ringframes.c) -------------------------------------------------------- */

/* A writer for seq's frames cut at chunk_size. copy: add copies each payload (the caller reuses its
 * buffer); else it keeps a reference, valid until the finish. NULL: no memory. */
cs_frames_writer *rng_frames_writer_new(cs_ring *r, uint32_t seq, uint32_t chunk_size, bool copy);
void rng_frames_writer_free(cs_frames_writer *w);

/* Appends the payloads, index and trailer to seq's segment and fills rec's frames fields. Under
 * wmu. On failure errno is set (and the segment cut back); the writer is still the caller's to
 * free either way. */
int rng_frames_finish(cs_frames_writer *w, cs_ledger_record *rec);

/* ---- reads (ringread.c) ---------------------------------------------------------------------- */

/* Whether seq is within the bounds now. Any thread. */
bool rng_retained(cs_ring *r, uint32_t seq);

#endif
