/* SPDX-License-Identifier: Apache-2.0 */
/* The retention ring (docs/RING.md): the last `retention` completed ledgers
 * as raw files in one directory, their integrity records (length, chunk count, the XXH64 the live
 * END carried) and stored frames appended to one log and one frames file per 1,024 ledgers,
 * written by one thread and read by many. A read hands
 * out a reference-counted open file that stays valid while held, even if the ring prunes or
 * resets that ledger meanwhile (the file is unlinked, the descriptor survives). */
#ifndef CS_STORE_RING_H
#define CS_STORE_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/err.h"
#include "corestream/wire.h"
#include "store/frames.h"

enum {
    CS_RING_ERR_NOT_RETAINED = 1, /* "store: ledger not retained: …" */
    CS_RING_ERR_INVALID_SEQ = 2,  /* "store: invalid ledger sequence: …" */
    CS_RING_ERR_IO = 3,      /* an I/O error (errno named): says nothing about the ledger */
    CS_RING_ERR_CORRUPT = 4, /* a check failed: the ledger is suspect until cs_ring_condemn proves it */
    CS_RING_ERR_HOLE = 5,    /* "store: ledger S is missing from the ring (ledgers F to L)": quarantined or
                                never written, inside the bounds */
};

typedef struct cs_ring cs_ring;

/* Ledgers per segment: ledger S's record and frames are in records-<B>.log and frames-<B>.seg,
 * B = S - S % CS_RING_SEG_LEDGERS (docs/RING.md, "Layout"). */
#define CS_RING_SEG_LEDGERS 1024u

/* What the live END of a ledger carried, stored durably as its line in `records-<base>.log`.
 * chunk_size and chunks are 0 in records made at open for a ring written before records existed
 * (the live chunking is not known then); otherwise chunks = ceil(len / chunk_size).
 * frames_len, frames_off, frames_xxh3 and raw_xxh3 describe the stored wire frames (in
 * `frames-<base>.seg` at frames_off,
 * store/frames.h): the file's length and XXH3-64, and XXH3-64 of the raw (codec 0) chunks' bytes
 * in chunk order, which replay reads from the ledger file. Two hashes, so a mismatch says which
 * file changed: the frames (dropped, the ledger is re-encoded) or the ledger (dropped). All 0: no
 * frames. sig is the ledger's SIG message as it was published (signed ledgers, docs/RING.md), sig_len
 * 0 when it had none. */
typedef struct cs_ledger_record {
    uint64_t len;
    uint32_t chunks;
    uint32_t chunk_size;
    uint64_t xxh64;
    uint64_t frames_len;
    uint64_t frames_off; /* where the frames start in their segment (docs/RING.md); 0 without frames */
    uint64_t frames_xxh3;
    uint64_t raw_xxh3;
    uint16_t sig_len;
    uint8_t sig[CS_WIRE_SIG_MAX_LEN];
    int version; /* of the line it was read from (4 for this build's); writers ignore it */
} cs_ledger_record;

/* An open retained ledger and its record, checked at open against the file (a regular file, not
 * followed through a symlink, of the recorded length). Immutable; share it with
 * cs_ledger_ref_retain. The file is read with pread (cs_ledger_read), never mapped: a file
 * truncated or replaced meanwhile gives a short read, not a SIGBUS. */
typedef struct cs_ledger_ref {
    uint32_t seq;
    cs_ledger_record rec; /* frames_len 0 when the ledger has no usable frames */
    int fd;
    /* The stored frames, checked at get (their segment's frames file: a regular file, never a
     * symlink, long enough to hold them, whose index agrees with the record); frames_fd is that
     * file and frames[k].off counts from its start; frames_fd -1 and the rest NULL/0 without them. */
    int frames_fd;
    const cs_frame *frames;     /* rec.chunks entries */
    const uint8_t *frames_tail; /* the file's index and trailer, as read: the last bytes hashed */
    size_t frames_tail_len;
    /* Why the stored frames were left out ("" when they were not, or an I/O error kept them out),
     * and the frames_xxh3 their record claims (for cs_ring_drop_frames). */
    char frames_problem[300];
    uint64_t frames_claimed_xxh3;
} cs_ledger_ref;

/* Opens (creating with mkdir -p) dir as a ring of `retention` ledgers. The open only looks: it
 * changes nothing in the directory (apart from creating it, and a file created and removed to
 * check it can be written). What it finds is carried out, under the write lock, by the first call
 * that writes (cs_ring_claim, cs_ring_put, cs_ring_frames_begin, cs_ring_condemn,
 * cs_ring_drop_frames), so a caller whose start fails after the open leaves the ring as it was:
 * - the newest good ledger is the latest; every ledger within the retention count below it is
 *   checked (older ones are pruned unchecked). A good ledger is a regular file named
 *   ledger-<seq>.xdr with a record for that sequence in its segment's log; the newest 1,024 are
 *   stat'ed and their length checked against the record, older ones are taken by their directory
 *   entry's type and checked when first read (docs/RING.md, "Lazy checks"); the contents are
 *   checked when replayed. A bad one (or one under a name the ring never writes, ledger-007.xdr,
 *   or a record whose ledger is missing) costs only itself: it is quarantined (cs_ring_condemn's
 *   ERROR, found_by=open) and, inside the bounds, its sequence is a hole, as is every sequence with
 *   no file at all (ERROR `ring ledgers are missing; their sequences are a hole, the ledgers around
 *   them stay` first last); both count in `dropped`;
 * - leftover `*.tmp` files go (INFO `ring: removed leftover temporary files`), and so does every
 *   ledger outside the bounds and every segment holding none of the bounds' sequences (an empty
 *   directory in a ledger's place too; one that is not empty stays, and writing that ledger fails);
 * - a ring without the `ring-format` marker was written before records: a record is made for each
 *   kept ledger by hashing it (INFO `ring: integrity records made from the ledgers on disk`); a ring
 *   of format 3 or 2 (a record file beside each ledger) has them moved into the logs (INFO `ring:
 *   integrity records moved into the records logs`), its frames files removed, the marker rewritten;
 * - frames a record claims must lie inside their segment's frames file, else they are forgotten
 *   (cs_ring_drop_frames' ERROR, logged at open; the ledger stays).
 * A system call that fails while looking (EMFILE, EACCES, EIO, …) proves nothing, so it fails the
 * open rather than costing a ledger: `store: open "<dir>": records-B.log: <strerror>`; so does
 * ring-identity, ring-run or ring-format that exists and cannot be read: `store: read
 * "<dir>/ring-identity": <strerror>`.
 * Other errors: `store: retention must be positive, got N`, `store: create "<dir>": …`,
 * `store: "<dir>" cannot be written: create write-probe.tmp: <strerror>`,
 * `store: scan "<dir>": …`; and from the first write, `store: upgrade "<dir>": ledger S: …` or
 * `store: upgrade "<dir>": ring-format: …`. */
int cs_ring_open(cs_ring **out, const char *dir, int64_t retention, cs_err *err);
void cs_ring_close(cs_ring *r);

/* How put writes a ledger file. With direct on (the default), a ledger whose parts all start on
 * a 4096-byte boundary, all but the last a multiple of 4096 long (the source loop's chunks are), is
 * written with O_DIRECT straight from those buffers: no copy into the page cache, and the ring
 * does not fill the page cache with ledgers (a catch-up reading the file reads the disk; stored
 * frames, which a catch-up reads instead where they exist, go through the page cache as before).
 * Other parts, a file system that refuses O_DIRECT (logged once: WARN `ring: O_DIRECT write
 * refused; ledger files are written through the page cache`) or direct off: through the page
 * cache. Either way each file put writes is handed to write-back as soon as it is written
 * (sync_file_range SYNC_FILE_RANGE_WRITE, no wait), and what is stored, and when it is visible, is
 * the same. Called by the put thread, or before it has one (checked in Debug, ASan and TSan
 * builds). */
void cs_ring_set_direct(cs_ring *r, bool on);

/* Writes ledger seq from parts (written in order, never joined in memory), its stored frames when
 * chunks is non-NULL (the ledger's nchunks CHUNK messages as published, header included: their
 * zstd payloads are written, never recompressed; rec->chunk_size must be the live one and nchunks
 * rec->chunks) and its record (rec's frames fields are filled by put): the ledger to
 * `ledger-<seq>.xdr.tmp`, then the frames and the record appended to its segment, then the ledger
 * renamed into place (a crash never leaves a ledger without its record, or a record claiming
 * frames not written). Then advances the bounds and prunes (a segment goes once no retained
 * ledger is in it). A reset removes the old ledgers and segments before the new ledger's frames
 * and record are appended: a put that resets and then fails to append leaves the ring empty. rec->len must be the parts' total. A seq that
 * does not continue a filled ring (seq != latest+1; latest 4294967295 never continues) resets the
 * ring and sets *reset, once the new files are written, unless the sequences it skips are
 * exactly the puts that failed since latest: they become a hole (WARN `ring: ledgers whose writes
 * failed are a hole; the ledgers before them stay` first last ledger) and nothing is reset. A
 * write that fails (CS_RING_ERR_IO, `store: write ledger S: …` or `store: publish ledger S: …`)
 * leaves the bounds and files as they were, counts a write failure and marks the ring degraded
 * until a put succeeds; one that met a shortage a moment may end (EMFILE, ENFILE, ENOMEM) is
 * retried once, 5 ms later, before it counts. Seq 0 is refused
 * with CS_RING_ERR_INVALID_SEQ and changes nothing.
 * Single writer: only the put thread calls put. The put thread is the first thread to put, or the
 * one that took the role (cs_ring_take_put_thread) since; a put from any other thread logs `thread
 * contract violated` naming both threads and aborts, in every build (common/invariant.h). */
int cs_ring_put(cs_ring *r, uint32_t seq, const struct iovec *parts, size_t nparts, const struct iovec *chunks,
                size_t nchunks, const cs_ledger_record *rec, bool *reset, cs_err *err);

/* The calling thread becomes the put thread (a ring writer as it starts: stream/ringwriter.h),
 * whichever thread put before: a hand-over, so the previous put thread must be done putting (a
 * test's puts before it starts a server on the ring). A put thread that puts again after the role
 * was taken from it aborts at that put. */
void cs_ring_take_put_thread(cs_ring *r);
/* The put thread gives the role up (a ring writer as it stops; checked): the next put's thread
 * takes it. */
void cs_ring_leave_put_thread(cs_ring *r);

/* Stored frames made later for a retained ledger that has none (a ring from before frames, or
 * frames dropped): begin a writer at the chunk size the frames cut the ledger at, add every chunk
 * in order (codec 0: payload is the ledger's bytes for that chunk, hashed, not stored; codec 1: a
 * zstd frame, stored), then attach, which writes the index, renames the file into place and
 * rewrites the record (chunk_size and chunks become the writer's) — only if ref is still the
 * retained ledger seq with no frames (else CS_RING_ERR_NOT_RETAINED, nothing changes). attach
 * and abort consume the writer; add never fails (an error is reported by attach). Errors:
 * CS_RING_ERR_IO `store: write ledger S frames: …`, `store: publish ledger S frames: …`. One
 * writer per ledger; any thread but the put thread's ledger. */
typedef struct cs_frames_writer cs_frames_writer;
int cs_ring_frames_begin(cs_ring *r, uint32_t seq, uint32_t chunk_size, cs_frames_writer **out, cs_err *err);
void cs_frames_writer_add(cs_frames_writer *w, uint8_t codec, const void *payload, size_t len);
int cs_ring_frames_attach(cs_ring *r, const cs_ledger_ref *ref, cs_frames_writer *w, cs_err *err);
void cs_frames_writer_abort(cs_frames_writer *w);

/* Stored frames that failed a check while read (problem says what): logs ERROR `ring frames
 * failed their integrity check; the ledger is replayed by re-encoding it` file=<path of the
 * frames> problem=<problem> ledger=S, rewrites the record without frames and removes the file.
 * The ledger stays. Nothing happens when seq is no longer retained or its record no longer claims
 * these frames (frames_xxh3), so several readers drop them once. Thread-safe. */
void cs_ring_drop_frames(cs_ring *r, uint32_t seq, uint64_t frames_xxh3, const char *problem);

/* Opens ledger seq and its stored frames, if any, and checks them against the record. Reads only:
 * it never writes, moves or removes a file, whatever it finds. Outside the bounds, or pruned
 * meanwhile: CS_RING_ERR_NOT_RETAINED with `store: ledger not retained: ledger S outside [O,L]` or
 * `…: ledger S was pruned`. Inside a hole (cs_ring_hole): CS_RING_ERR_HOLE `store: ledger S is missing
 * from the ring (ledgers F to L)`. A check that fails (missing, a symlink, a directory, no record, a
 * record that is unreadable or for another ledger, a length that differs): CS_RING_ERR_CORRUPT
 * `store: ledger S failed its integrity check: <what>`; the ledger is only suspect, and the caller
 * hands the message to cs_ring_condemn for a verdict. Any system call that fails (EMFILE, ENFILE,
 * ENOMEM, EACCES, EIO, …): CS_RING_ERR_IO `store: read ledger S: <what>: <strerror>`, counted in
 * io_errors. Frames that fail their check are left out of the ref (it has none: a replay
 * re-encodes) and frames_problem says why when it is a finding rather than an I/O error (the caller
 * may cs_ring_drop_frames them). Thread-safe. Release the result with cs_ledger_ref_release. */
int cs_ring_get(cs_ring *r, uint32_t seq, cs_ledger_ref **out, cs_err *err);

/* Whether ledger seq's record, as the ring last wrote or checked it, claims stored frames: a look
 * at memory, no file is opened (the background pass skips such ledgers). The frames are checked
 * only when cs_ring_get opens them. Thread-safe. */
bool cs_ring_has_frames(cs_ring *r, uint32_t seq);

/* Reads exactly n bytes at off (off + n <= rec.len). A short read (the file was truncated) is
 * CS_RING_ERR_CORRUPT `ledger-S.xdr is shorter than its record: ends before byte B of L`;
 * other errors CS_RING_ERR_IO. Thread-safe. */
int cs_ledger_read(const cs_ledger_ref *ref, uint64_t off, void *buf, size_t n, cs_err *err);

/* Reads chunk k's stored payload (frames[k].len bytes; ref->frames_fd >= 0, k < rec.chunks) into
 * buf: a zstd frame from the frames file, a raw chunk from the ledger. A short read is
 * CS_RING_ERR_CORRUPT (`frames-B.seg is shorter than ledger S's record: …`, or the ledger's message);
 * other errors CS_RING_ERR_IO. Thread-safe. */
int cs_frame_read(const cs_ledger_ref *ref, uint32_t k, void *buf, cs_err *err);

void cs_ledger_ref_retain(cs_ledger_ref *ref);
void cs_ledger_ref_release(cs_ledger_ref *ref);

/* The one way a ledger leaves the ring other than pruning or a reset: a reader found ledger seq
 * suspect (suspicion says what it saw) and asks for a verdict. condemn proves it, reading the ledger
 * file and its record afresh: the ledger is bad only when its record fails its own check (missing,
 * unreadable, for another ledger, a bad self checksum) or the file is not what the record says (not
 * a regular file, another length, bytes whose XXH64 differs). Then it is quarantined: the ledger,
 * its record and its frames move to `<data-dir>/quarantine/ledger-S-<UTC time>/` with a `reason`
 * file, ERROR `ring ledger is bad; quarantined, the ledgers around it stay` file problem
 * record_xxh64 actual_xxh64 quarantine oldest latest is logged, and seq becomes a hole (cs_ring_hole)
 * unless it was the oldest (the bounds then start after it). A quarantine that cannot be written
 * still makes the hole (the files stay where they are, ERROR naming the failure; the next open
 * quarantines them). Verdicts:
 * - CS_RING_VERDICT_BAD: proven and quarantined (or made a hole);
 * - CS_RING_VERDICT_GOOD: the ledger hashes to its record; nothing changes (the caller's suspicion
 *   was of something else: frames, the index, a read racing with a change);
 * - CS_RING_VERDICT_GONE: seq left the bounds, is a hole already, or was replaced meanwhile;
 * - CS_RING_VERDICT_IO: a system call failed, so nothing is proven: nothing changes, the errno is
 *   logged (WARN `ring ledger could not be checked; it stays`) and counted in io_errors.
 * Several readers finding one fault quarantine it once. It hashes the whole ledger, so it runs on
 * the caller's thread, never the put thread's. Thread-safe. */
enum { CS_RING_VERDICT_BAD = 0, CS_RING_VERDICT_GOOD = 1, CS_RING_VERDICT_GONE = 2, CS_RING_VERDICT_IO = 3 };
int cs_ring_condemn(cs_ring *r, uint32_t seq, const char *suspicion);

/* Whether seq is inside a hole: a retained sequence whose ledger is not served (quarantined, found
 * missing, or never written because the ring's writes failed). *first and *last receive the hole's
 * range. Thread-safe. */
bool cs_ring_hole(cs_ring *r, uint32_t seq, uint32_t *first, uint32_t *last);

/* Run identity: identity is one line naming what defines this run's byte stream (the source kind
 * and its parameters); first_seq is the run's first ledger, or 0 when only the source knows it.
 * Call once after open, before anyone reads the ring; it first carries out what the open found
 * (cs_ring_open). When the ring holds ledgers written under
 * another recorded identity, or first_seq does not continue it (first_seq != latest+1), the ring
 * is emptied now, so no subscriber can be served ledgers of two runs, and WARN
 * `ring reset at start: its ledgers are not this run's` reason=… ring_identity=… identity=…
 * oldest=… latest=… is logged. A ring with no identity recorded (written before identities) that
 * the run continues is kept (INFO `ring: no run identity recorded; this run continues it`). The
 * identity is then recorded in `ring-identity`.
 *
 * The run nonce (`ring-run`, docs/RING.md): 64 random bits that tell this directory's run of an
 * identity from any other directory's. It is kept while the identity recorded with it is this
 * one (a reset for a first_seq that does not continue the ring keeps it), and drawn anew, and
 * written before any reset, when there is none for this identity (a new directory, a ring of an
 * older build, another identity) or another run's ledgers are dropped. cs_ring_run_nonce reads it.
 *
 * Errors (an identity that is too long fails before anything is read or written): `store: run
 * identity is not one line of at most 4095 bytes`, `store: write "<dir>/ring-run": …` (nothing
 * reset), `store: write "<dir>/ring-identity": …`, and the open's `store: upgrade …`. */
int cs_ring_claim(cs_ring *r, const char *identity, uint32_t first_seq, cs_err *err);

/* The run nonce the claim kept or drew (never 0 after a successful claim; 0 before one). Read
 * after the claim, on its thread or one it handed the ring to. */
uint64_t cs_ring_run_nonce(const cs_ring *r);

/* Whether a run of this identity continues the ring: it holds ledgers, the identity recorded
 * with them (`ring-identity`) is this one, and latest + 1 is a streamable sequence (below
 * 4294967295). *latest receives the ring's latest ledger when true, else 0. A ring with no
 * identity recorded is not continued (nothing says whose ledgers it holds). Reads only; call
 * between open and claim, on the thread that claims. */
bool cs_ring_continues(cs_ring *r, const char *identity, uint32_t *latest);

/* The record's one line (docs/RING.md), exposed for its fuzz target: parse accepts exactly what
 * format writes (version 4) or a record of versions 1 to 3 (no signature; 1: no frames either),
 * consistent (chunks, frames fields, a SIG of this ledger), of ledger seq; else -1 with problem
 * `integrity record is unreadable`, `integrity record fails its own checksum` or `integrity
 * record is for ledger S`. format returns the line's length (newline included; buf of 1024 bytes
 * holds any). */
int cs_ring_record_parse(const char *text, uint32_t seq, cs_ledger_record *rec, char *problem, size_t plen);

/* A records log's text (buf, size bytes; NUL bytes are not special) of the segment at base, as the
 * open indexes it (exposed for the fuzz target): each line that names a sequence of the segment
 * (` seq=S `) sets line[S - base] to its offset + 1, or to 0 for a `corestream-ring-gone` line, a
 * later line replacing an earlier one; a line that names none is skipped. buf is left as it was
 * (lines are cut in place while scanned). Returns whether the text ends without a newline (the
 * last append was cut short). */
bool cs_ring_log_scan(char *buf, size_t size, uint32_t base, uint32_t line[CS_RING_SEG_LEDGERS]);
size_t cs_ring_record_format(char *buf, size_t len, uint32_t seq, const cs_ledger_record *rec);

/* Current bounds; returns false (and 0/0) when the ring is empty. Thread-safe. */
bool cs_ring_bounds(cs_ring *r, uint32_t *oldest, uint32_t *latest);

/* Waiting for the ring to move, without polling: every change of the bounds (a put, its prune, a
 * reset, a hole at the oldest) bumps a counter, once the new bounds are readable, and wakes the
 * threads waiting on it. A follower takes cs_ring_changes, looks at the ring (cs_ring_bounds),
 * and, with nothing to do, sleeps in cs_ring_wait_change until the counter differs from what it
 * took, timeout_ns passes, or a spurious wake (it looks again either way). cs_ring_wake bumps the
 * counter without a change: the follower's owner, having set its own stop flag, wakes it so it
 * looks at that flag. Any thread; the put thread's share is an atomic add, and a futex wake only when a follower sleeps. */
uint32_t cs_ring_changes(cs_ring *r);
void cs_ring_wait_change(cs_ring *r, uint32_t seen, int64_t timeout_ns);
void cs_ring_wake(cs_ring *r);

typedef struct cs_ring_health_t {
    uint64_t write_failures; /* puts that failed since open */
    bool degraded;           /* the last put failed */
    uint64_t dropped;        /* ledgers lost to the ring since open: quarantined, or found missing */
    uint64_t holes;          /* sequences inside the bounds that are not served now */
    uint64_t io_errors;      /* reads and checks that met a system call's error since open */
} cs_ring_health_t;

/* Thread-safe. */
void cs_ring_health(cs_ring *r, cs_ring_health_t *out);

/* Bytes of the ledger files in the ring (as found at open, then as written, pruned and dropped).
 * Any thread. */
uint64_t cs_ring_bytes(cs_ring *r);
/* The largest chunk size a retained ledger's record names (found at open, or put or given frames
 * since; it never shrinks, so a ledger dropped meanwhile may still count): a replay cuts a ledger
 * at its recorded chunk size, so no CHUNK this ring serves is larger than this or the current
 * --chunk-size. 0 when no record names one. Any thread. */
uint32_t cs_ring_max_chunk_size(cs_ring *r);

/* Bytes of the stored frames of the ledgers in the ring (their frames_len), counted the
 * same way: at open, then as put, attached, dropped and pruned. Any thread. */
uint64_t cs_ring_frames_bytes(cs_ring *r);

const char *cs_ring_dir(const cs_ring *r);

#endif
