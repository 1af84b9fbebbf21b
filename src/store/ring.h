/* The retention ring (PORTSPEC 2.5, v2 in docs/RING.md): the last `retention` completed ledgers
 * as raw files in one directory, each with a small integrity record beside it (length, chunk
 * count, the XXH64 its live END carried), written by one thread and read by many. A read hands
 * out a reference-counted open file that stays valid while held, even if the ring prunes or
 * resets that ledger meanwhile (the file is unlinked, the descriptor survives). */
#ifndef CS_STORE_RING_H
#define CS_STORE_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/err.h"

enum {
    CS_RING_ERR_NOT_RETAINED = 1, /* "store: ledger not retained: …" */
    CS_RING_ERR_INVALID_SEQ = 2,  /* "store: invalid ledger sequence: …" */
    CS_RING_ERR_IO = 3,
    CS_RING_ERR_CORRUPT = 4, /* the file differs from its record */
};

typedef struct cs_ring cs_ring;

/* What the live END of a ledger carried, stored durably beside the ledger (`ledger-<seq>.rec`).
 * chunk_size and chunks are 0 in records made at open for a ring written before records existed
 * (the live chunking is not known then); otherwise chunks = ceil(len / chunk_size). */
typedef struct cs_ledger_record {
    uint64_t len;
    uint32_t chunks;
    uint32_t chunk_size;
    uint64_t xxh64;
} cs_ledger_record;

/* An open retained ledger and its record, checked at open against the file (a regular file, not
 * followed through a symlink, of the recorded length). Immutable; share it with
 * cs_ledger_ref_retain. The file is read with pread (cs_ledger_read), never mapped: a file
 * truncated or replaced meanwhile gives a short read, not a SIGBUS. */
typedef struct cs_ledger_ref {
    uint32_t seq;
    cs_ledger_record rec;
    int fd;
} cs_ledger_ref;

/* Opens (creating with mkdir -p) dir as a ring of `retention` ledgers:
 * - removes leftover `*.tmp` files (INFO `ring: removed leftover temporary files`);
 * - checks the directory can be written (a file is created and removed);
 * - rescans it from the newest ledger down. Each must be a regular file named ledger-<seq>.xdr,
 *   with a record for that sequence whose length is the file's. The first ledger that is not,
 *   and every older one, are dropped (cs_ring_reject's ERROR line; a gap counts too), so the ring
 *   stays contiguous; the file contents are checked when replayed (cs_ledger_read, END);
 * - a ring without the `ring-format` marker was written before records: a record is made for each
 *   ledger by hashing it (INFO `ring: integrity records made from the ledgers on disk`);
 * - prunes to the retention count.
 * Errors: `store: retention must be positive, got N`, `store: create "<dir>": …`,
 * `store: "<dir>" cannot be written: create write-probe.tmp: <strerror>`,
 * `store: scan "<dir>": …`, `store: upgrade "<dir>": ledger S: …`. */
int cs_ring_open(cs_ring **out, const char *dir, int64_t retention, cs_err *err);
void cs_ring_close(cs_ring *r);

/* Writes ledger seq from parts (written in order, never joined in memory) and its record: each to
 * `<final>.tmp`, renamed into place record first (a crash never leaves a ledger without its
 * record). Then advances the bounds and prunes. rec->len must be the parts' total. A seq that
 * does not continue a filled ring (seq != latest+1; latest 4294967295 never continues) resets the
 * ring and sets *reset, once the new files are written: a write that fails (CS_RING_ERR_IO,
 * `store: write ledger S: …` or `store: publish ledger S: …`) leaves the bounds and files as they
 * were, counts a write failure and marks the ring degraded until a put succeeds. Seq 0 is refused
 * with CS_RING_ERR_INVALID_SEQ and changes nothing. Only one thread may call put. */
int cs_ring_put(cs_ring *r, uint32_t seq, const struct iovec *parts, size_t nparts,
                const cs_ledger_record *rec, bool *reset, cs_err *err);

/* Opens ledger seq. Outside the bounds, or pruned meanwhile: CS_RING_ERR_NOT_RETAINED with
 * `store: ledger not retained: ledger S outside [O,L]` or `…: ledger S was pruned`. A ledger that
 * fails its check (missing, a symlink, a directory, no record, a record for another ledger, a
 * length that differs) is rejected (cs_ring_reject: dropped with everything older, ERROR logged)
 * and reported as CS_RING_ERR_NOT_RETAINED too, `…: ledger S failed its integrity check: <what>`:
 * the caller answers with the new bounds. Other failures: CS_RING_ERR_IO `store: read ledger S: …`.
 * Thread-safe. Release the result with cs_ledger_ref_release. */
int cs_ring_get(cs_ring *r, uint32_t seq, cs_ledger_ref **out, cs_err *err);

/* Reads exactly n bytes at off (off + n <= rec.len). A short read (the file was truncated) is
 * CS_RING_ERR_CORRUPT `ledger-S.xdr is shorter than its record: ends before byte B of L`;
 * other errors CS_RING_ERR_IO. Thread-safe. */
int cs_ledger_read(const cs_ledger_ref *ref, uint64_t off, void *buf, size_t n, cs_err *err);

void cs_ledger_ref_retain(cs_ledger_ref *ref);
void cs_ledger_ref_release(cs_ledger_ref *ref);

/* A retained ledger failed a check (problem says what differed): logs ERROR
 * `ring ledger failed its integrity check; dropping it and every older ledger` file=<path>
 * problem=<problem> dropped=N oldest=O latest=L (the new bounds), unlinks the dropped files and
 * counts them. Nothing happens (and nothing is logged) when seq is no longer retained, so several
 * readers finding the same fault drop it once. Thread-safe. */
void cs_ring_reject(cs_ring *r, uint32_t seq, const char *problem);

/* Run identity: identity is one line naming what defines this run's byte stream (the source kind
 * and its parameters); first_seq is the run's first ledger, or 0 when only the source knows it.
 * Call once after open, before anyone reads the ring. When the ring holds ledgers written under
 * another recorded identity, or first_seq does not continue it (first_seq != latest+1), the ring
 * is emptied now, so no subscriber can be served ledgers of two runs, and WARN
 * `ring reset at start: its ledgers are not this run's` reason=… ring_identity=… identity=…
 * oldest=… latest=… is logged. A ring with no identity recorded (written before identities) that
 * the run continues is kept (INFO `ring: no run identity recorded; this run continues it`). The
 * identity is then recorded in `ring-identity`. Errors: `store: run identity is not one line of at
 * most 4095 bytes`, `store: write "<dir>/ring-identity": …`. */
int cs_ring_claim(cs_ring *r, const char *identity, uint32_t first_seq, cs_err *err);

/* Current bounds; returns false (and 0/0) when the ring is empty. Thread-safe. */
bool cs_ring_bounds(cs_ring *r, uint32_t *oldest, uint32_t *latest);

typedef struct cs_ring_health_t {
    uint64_t write_failures; /* puts that failed since open */
    bool degraded;           /* the last put failed */
    uint64_t dropped;        /* ledgers dropped for failing a check, at open and since */
} cs_ring_health_t;

/* Thread-safe. */
void cs_ring_health(cs_ring *r, cs_ring_health_t *out);

/* Bytes of the ledger files in the ring (as found at open, then as written, pruned and dropped).
 * Any thread. */
uint64_t cs_ring_bytes(cs_ring *r);

const char *cs_ring_dir(const cs_ring *r);

#endif
