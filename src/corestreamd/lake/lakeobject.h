/* SPDX-License-Identifier: Apache-2.0 */
/* A SEP-54 object made from the ring (docs/LAKE.md): the zstd of the XDR LedgerCloseMetaBatch
 * of one batch, built from the retained ledgers' raw bytes as stored, only when the ring holds
 * the whole batch. */
#ifndef CS_LAKE_LAKEOBJECT_H
#define CS_LAKE_LAKEOBJECT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/lake/lakekey.h"
#include "store/ring.h"

enum {
    /* "lake: batch A-B is not wholly in the ring: …": a ledger of it is outside the bounds, in a
     * hole, pruned meanwhile, or proven bad while read (then quarantined, a hole now). Says
     * nothing about the disk: another batch may be served. */
    CS_LAKE_OBJ_ERR_NOT_AVAILABLE = 1,
    /* "lake: batch A-B: …": a system call, memory or zstd failed, or a ledger was suspect and could
     * not be proven either way: nothing was learnt about the batch; a later call may succeed. */
    CS_LAKE_OBJ_ERR_IO = 2,
};

/* zstd's own default level, as Galexie's encoder uses: the level objects are made at. */
#define CS_LAKE_LEVEL 3

/* 0 when the ring holds every ledger of batch b now (inside its bounds, none in a hole), else -1
 * with CS_LAKE_OBJ_ERR_NOT_AVAILABLE: `lake: batch A-B is not wholly in the ring: it holds
 * ledgers F to L` (or `the ring is empty`, `ledgers F to L are missing from it`). Reads no file:
 * a look at the ring's bounds and holes under its lock, cheap enough for a server I/O thread.
 * Any thread. */
int cs_lake_batch_available(cs_ring *r, cs_lake_batch b, cs_err *err);

/* Builds batch b's object: startSequence, endSequence and the count of ledgers (u32 big-endian
 * each), then each ledger's bytes as the ring stores them (a LedgerCloseMeta's XDR), as zstd
 * frames: a ledger with stored frames (docs/RING.md) contributes them as stored (a raw chunk
 * compressed at level), checked as a replay checks them: each chunk against its index entry
 * before it goes in, then the file against the record's frames_xxh3 and the raw chunks against
 * its raw_xxh3; one without, its bytes compressed at level, in the frame the header or the
 * ledgers before it began, checked against the record's XXH64. So an object is one frame only
 * when no ledger of it has stored frames; decompressed, it is the same bytes either way. Stored
 * frames that fail a check are dropped (cs_ring_drop_frames; the ledger stays) and the ledger is
 * compressed instead. The batch must be wholly in the ring: it is checked before any ledger is
 * read (bounds, holes), and each ledger is opened (cs_ring_get), read and checked, then released
 * before the next, so at most one ledger's descriptors are held and none after the return. A ledger that fails a check is handed to cs_ring_condemn on
 * this thread (which hashes it again). *out receives malloc'd bytes the caller frees, *len their
 * count, and *modified (unless NULL) the newest modification time of the batch's ledger files, in
 * Unix seconds (when the ring stored the batch's last ledger); all untouched on error.
 * Threads: any thread but the ring's put thread, concurrently with puts and other builds; it
 * blocks on the disk and compresses the whole batch, so never on a server I/O thread. */
int cs_lake_object_build(cs_ring *r, cs_lake_batch b, int level, uint8_t **out, size_t *len, int64_t *modified,
                         cs_err *err);

/* The name a batch's signature object has beside its object: the object's key and this. */
#define CS_LAKE_SIG_SUFFIX ".sig"

/* Builds batch b's signature object (docs/LAKE.md, "Signatures"): for each ledger of the batch in
 * order, the length of its SIG message (u16 big-endian) and the message as the live flow
 * published it (PROTOCOL.md, signed ledgers), read from the ledgers' records. A batch with an
 * unsigned ledger has none: CS_LAKE_OBJ_ERR_NOT_AVAILABLE `lake: batch A-B has no signatures:
 * ledger S is unsigned`; the rest as cs_lake_object_build (the records are read, not the
 * ledgers' bytes: a reader checks those against the signatures). *out malloc'd, the caller frees
 * it. Threads: as cs_lake_object_build. */
int cs_lake_sig_build(cs_ring *r, cs_lake_batch b, uint8_t **out, size_t *len, cs_err *err);

#endif
