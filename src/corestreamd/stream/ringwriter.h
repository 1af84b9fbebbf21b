/* SPDX-License-Identifier: Apache-2.0 */
/* The ring write of a completed ledger, on a thread of its own at low CPU priority. The source
 * loop hands the ledger over right after END and waits for the write only before the next BEGIN,
 * so Put(N) still completes before BEGIN(N+1) while the disk copy never competes for a core with
 * the delivery of the ledger that just ended.
 *
 * A failed write (ENOSPC, EROFS, EIO, EMFILE, a directory in the ledger's place, ...) degrades the
 * ring, never the live flow: the ring keeps the range it holds (and resets at the next write that
 * works, the failed ledgers leaving a gap), the store counts the failure (cs_ring_health), and the
 * writer logs once per transition:
 *   ERROR `ring write failed; live streaming continues, the ring keeps its range until a write
 *         works` ledger=S error="retain ledger S: store: write ledger S: No space left on device"
 *   INFO  `ring write recovered` ledger=S ledgers_not_retained=N */
#ifndef CS_CORESTREAMD_RINGWRITER_H
#define CS_CORESTREAMD_RINGWRITER_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/stream/broadcast.h"
#include "corestreamd/stream/message.h"
#include "store/ring.h"

typedef struct cs_ring_writer cs_ring_writer;

int cs_ring_writer_new(cs_ring_writer **out, cs_ring *ring, cs_err *err);

/* Takes over the n raw chunk messages (payload after the 11-byte header), the msgs array
 * (malloc'd) and a reference to the ledger's complete live flow (NULL: no stored frames), whose n
 * published CHUNK messages become the ledger's stored frames as they are; returns at once.
 * chunk_size and xxh64 are what the live flow used and its END carried: they go into the
 * ledger's integrity record, as does the ledger's SIG message (sig; NULL: unsigned), copied. At
 * most one write is outstanding: call cs_ring_writer_wait first. */
void cs_ring_writer_submit(cs_ring_writer *w, uint32_t seq, cs_msg **msgs, size_t n, cs_flow *flow,
                           size_t chunk_size, uint64_t xxh64, const cs_msg *sig);

/* Waits for the outstanding write, if any; its failure, if it failed, is the writer's to report.
 * Submit, wait and free are called by one thread (the source loop's). */
void cs_ring_writer_wait(cs_ring_writer *w);

/* Waits, stops the thread and frees. NULL is a no-op. */
void cs_ring_writer_free(cs_ring_writer *w);

#endif
