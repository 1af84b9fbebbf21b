/* The retention ring (PORTSPEC 2.5): the last `retention` completed ledgers as raw files in one
 * directory, written by one thread and read through mmap by many. A read hands out a
 * reference-counted mapping that stays valid while held, even if the ring prunes or resets that
 * ledger meanwhile (the file is unlinked, the mapping survives). */
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
};

typedef struct cs_ring cs_ring;

/* A mapped ledger. data is NULL when len is 0. Immutable; share it with cs_ledger_ref_retain. */
typedef struct cs_ledger_ref {
    uint32_t seq;
    const uint8_t *data;
    size_t len;
} cs_ledger_ref;

/* Opens (creating with mkdir -p) dir as a ring of `retention` ledgers: removes leftover `*.tmp`
 * files (logged at INFO `ring: removed leftover temporary files`), checks that the directory can
 * be written (a file is created and removed), rescans what is there (contiguity check) and prunes
 * to the retention count.
 * Errors: `store: retention must be positive, got N`, `store: create "<dir>": …`,
 * `store: "<dir>" cannot be written: create write-probe.tmp: <strerror>`,
 * `store: "<dir>" holds a non-contiguous ledger range (gap between ledger A and B)`. */
int cs_ring_open(cs_ring **out, const char *dir, int64_t retention, cs_err *err);
void cs_ring_close(cs_ring *r);

/* Writes ledger seq from parts (written in order, never joined in memory) to `<final>.tmp` and
 * renames it into place, then advances the bounds and prunes. A seq that does not continue a
 * filled ring (seq != latest+1; latest 4294967295 never continues) resets the ring and sets
 * *reset, once the new file is written: a write that fails (CS_RING_ERR_IO, `store: write ledger
 * S: …` or `store: publish ledger S: …`) leaves the bounds and files as they were, counts a write
 * failure and marks the ring degraded until a put succeeds. Seq 0 is refused with
 * CS_RING_ERR_INVALID_SEQ and changes nothing. Only one thread may call put. */
int cs_ring_put(cs_ring *r, uint32_t seq, const struct iovec *parts, size_t nparts, bool *reset,
                cs_err *err);

/* Maps ledger seq. Outside the bounds, or pruned between the bounds check and the open:
 * CS_RING_ERR_NOT_RETAINED with `store: ledger not retained: ledger S outside [O,L]` or
 * `store: ledger not retained: ledger S was pruned`. Other failures: `store: read ledger S: …`.
 * Thread-safe. Release the result with cs_ledger_ref_release. */
int cs_ring_get(cs_ring *r, uint32_t seq, cs_ledger_ref **out, cs_err *err);

void cs_ledger_ref_retain(cs_ledger_ref *ref);
void cs_ledger_ref_release(cs_ledger_ref *ref);

/* Current bounds; returns false (and 0/0) when the ring is empty. Thread-safe. */
bool cs_ring_bounds(cs_ring *r, uint32_t *oldest, uint32_t *latest);

typedef struct cs_ring_health_t {
    uint64_t write_failures; /* puts that failed since open */
    bool degraded;           /* the last put failed */
} cs_ring_health_t;

/* Thread-safe. */
void cs_ring_health(cs_ring *r, cs_ring_health_t *out);

const char *cs_ring_dir(const cs_ring *r);

#endif
