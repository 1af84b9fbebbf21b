/* Filling a gap instead of resetting the ring (--backfill-from, docs/operations/restarts.md): a
 * source whose core may move on without corestreamd (a FIFO core that outlived a killed daemon, a
 * pipe writer restarted past ledgers nobody read) wrapped so that, when its next ledger S lies
 * past the ring's latest + 1, the ledgers in between are fetched from a SEP-54 lake
 * (lakereader.h: a corestreamd's /lake/ over http(s), or a directory) and emitted first, in
 * order, as if the source had sent them: streamed live, written to the ring, which stays
 * contiguous. Then S passes as the source sent it.
 *
 * Each fetched ledger is checked before anything of it is emitted: its LedgerCloseMeta must name
 * its own sequence (xdrwalk.h); the lake must hold one ledger per batch. A lake object carries no
 * checksum of the ledger, so the lake is trusted as the source is (docs/LAKE.md). Logs: INFO
 * `filling a gap from the backfill source` from first last when it starts, INFO `gap filled from
 * the backfill source` from first last ledgers when done. When a ledger cannot be had (the lake
 * does not hold it, answers 404, or fails three tries a second apart, or the ledger is not the
 * one asked for), WARN `gap not filled: the backfill source could not give a ledger` from ledger
 * error, and S passes as without a backfill source (after_gap when some of the gap was filled):
 * the ring then starts over, as today. The lake is opened at the first gap, so an unreachable
 * one never stops a start.
 *
 * Threads: new/destroy from the controlling thread, next/read from the source loop only (which
 * waits for each ledger's ring write before the next, so the ring's bounds are current). */
#ifndef CS_CORESTREAMD_SOURCES_BACKFILL_H
#define CS_CORESTREAMD_SOURCES_BACKFILL_H

#include "common/cancel.h"
#include "common/err.h"
#include "corestreamd/sources/source.h"
#include "store/ring.h"

/* Takes ownership of inner (destroyed with the adapter, or at once when this fails). ring and
 * cancel are borrowed and must outlive it; url is copied. cancel ends a fetch's wait between
 * tries. Errors: `source: out of memory`. */
int cs_backfill_source_new(cs_source **out, cs_source *inner, cs_ring *ring, const char *url, cs_cancel *cancel,
                           cs_err *err);

/* Ledgers filled so far. Source loop thread. */
uint64_t cs_backfill_source_filled(const cs_source *s);

#endif
