/* SPDX-License-Identifier: Apache-2.0 */
/* The background pass that stores wire frames for ledgers retained without them (a ring written
 * before stored frames, or ledgers whose frames were dropped before this start): one low-priority
 * thread, newest ledger first (the one a ring keeps longest), reads each raw ledger once, checks
 * it against its record's XXH64 while reading, compresses its chunks as the live encoder would
 * (zstd at the given level when compress is on and the frame is strictly smaller, else raw) and
 * attaches the frames (cs_ring_frames_attach). Until a ledger has them, its replays re-encode it
 * as before. A ledger whose bytes do not hash to its record is judged like a replay would
 * (cs_ring_condemn). Logs when it made any:
 *   INFO `ring: stored frames made for ledgers retained without them` ledgers=N
 * and a failure to write them once, at WARN `ring: stored frames could not be made` ledger=S error=…
 * (the pass stops; those ledgers keep replaying by re-encoding). */
#ifndef CS_CORESTREAMD_FRAMESFILL_H
#define CS_CORESTREAMD_FRAMESFILL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"
#include "store/ring.h"

typedef struct cs_frames_fill cs_frames_fill;

/* Starts the pass over the ledgers retained now. chunk_size cuts ledgers whose record has no live
 * chunking; a ledger recorded with a larger chunk size than this run's is left without frames
 * (replayed by re-encoding). Errors: `server: cannot start the stored-frames pass`. */
int cs_frames_fill_start(cs_frames_fill **out, cs_ring *ring, bool compress, int level, size_t chunk_size,
                         cs_err *err);

/* Blocks until the pass has made every ledger it will (tests). */
void cs_frames_fill_wait(cs_frames_fill *f);

/* Stops the pass (after the ledger in progress) and frees. NULL is a no-op. */
void cs_frames_fill_stop(cs_frames_fill *f);

#endif
