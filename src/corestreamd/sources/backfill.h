/* SPDX-License-Identifier: Apache-2.0 */
/* Filling a gap instead of resetting the ring (--backfill-from, docs/operations/restarts.md): a
 * source whose core may move on without corestreamd (a FIFO core that outlived a killed daemon, a
 * pipe writer restarted past ledgers nobody read) wrapped so that, when its next ledger S lies
 * past the ring's latest + 1, the ledgers in between are fetched from a backfill source and
 * emitted first, in order, as if the source had sent them: streamed live, written to the ring,
 * which stays contiguous. Then S passes as the source sent it.
 *
 * The backfill source (backfill_from.h) is a SEP-54 lake (a corestreamd's /lake/ over http(s),
 * or a directory) or another corestreamd's stream (ws://, wss://). Each fetched ledger is checked
 * before anything of it is emitted: its LedgerCloseMeta must name its own sequence (xdrwalk.h);
 * a peer's also arrives checked by its XXH64, and by its signature with trusted keys. Logs: INFO
 * `filling a gap from the backfill source` from first last when it starts, INFO `gap filled from
 * the backfill source` from first last ledgers when done. When a ledger cannot be had (the source
 * does not hold it, fails, or gives another ledger), WARN `gap not filled: the backfill source
 * could not give a ledger` from ledger error, and S passes as without a backfill source (after_gap
 * when some of the gap was filled): the ring then starts over, as today. Nothing is dialled or
 * opened before the first gap, so an unreachable source never stops a start.
 *
 * Threads: new/destroy from the controlling thread, next/read from the source loop only (which
 * waits for each ledger's ring write before the next, so the ring's bounds are current). */
#ifndef CS_CORESTREAMD_SOURCES_BACKFILL_H
#define CS_CORESTREAMD_SOURCES_BACKFILL_H

#include "common/cancel.h"
#include "common/err.h"
#include "corestreamd/sources/source.h"
#include "store/ring.h"

typedef struct cs_backfill_opts {
    const char *url;          /* --backfill-from: ws:// or wss:// is a peer, anything else a lake */
    const char *token_file;   /* --backfill-token-file: NULL or "" sends no bearer token */
    const char *ca_file;      /* --backfill-ca: PEM CAs for https/wss; NULL or "": the system's */
    const char *trusted_keys; /* --trusted-keys, for a peer: NULL or "" checks no signatures */
    cs_cancel *cancel;        /* ends a fetch's waits; borrowed, must outlive the adapter */
} cs_backfill_opts;

/* Takes ownership of inner (destroyed with the adapter, or at once when this fails). ring is
 * borrowed and must outlive it; o's strings are copied, and the token file read, here. Errors:
 * `source: out of memory`; `--backfill-token-file F: <cause>` (secretfile.h); for a peer, a URL,
 * CA or trusted-keys file libremoteledger refuses (`--backfill-from URL: <its message>`). */
int cs_backfill_source_new(cs_source **out, cs_source *inner, cs_ring *ring, const cs_backfill_opts *o, cs_err *err);

/* Ledgers filled so far. Source loop thread. */
uint64_t cs_backfill_source_filled(const cs_source *s);

#endif
