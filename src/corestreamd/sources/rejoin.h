/* SPDX-License-Identifier: Apache-2.0 */
/* Rejoining the ring: a source whose core may emit ledgers the ring already holds (core restarted
 * under a pipe command or a FIFO, or captive core replaying from its last closed ledger after
 * corestreamd's own restart) wrapped so that those ledgers are compared with the ring instead of
 * reaching the stream.
 *
 * A ledger the ring holds (oldest <= seq <= latest when next() sees it) is read whole from the
 * inner source and compared with the ring's integrity record for it: the same length and XXH64
 * (the checksum every subscriber verifies at END) and it is skipped; once the source moves past the
 * ring, one INFO line `source re-emitted ledgers the ring holds; skipped them` first=… last=…
 * ledgers=… says how many. Different bytes end the source with `ledger N differs from the ring's:
 * the source sent L bytes hashing to X, the ring holds R bytes hashing to Y`, and a ledger older
 * than the ring's oldest with `ledger N is older than the ring's oldest ledger O, so it cannot be
 * compared with it`: next() fails with em->seq = N, before anything of it is published or written,
 * so the run stops with the ring as it was. Anything else passes through untouched: a gap past the
 * ring's latest is the source loop's (or the ring's) to judge, as without this adapter.
 *
 * The comparison needs the ring to hold every ledger already published: the source loop waits for
 * the ring write of the previous ledger before it asks for the next one (sourceloop.h). A ledger
 * the ring failed to write (a degraded ring) is not held, so its re-emission passes through and
 * the source loop refuses it as out of order.
 *
 * Threads: new/destroy from the controlling thread, next/read from the source loop only; the ring
 * is read through its thread-safe calls. */
#ifndef CS_CORESTREAMD_SOURCES_REJOIN_H
#define CS_CORESTREAMD_SOURCES_REJOIN_H

#include <stdint.h>

#include "common/err.h"
#include "corestreamd/sources/source.h"
#include "store/ring.h"

/* Takes ownership of inner (destroyed with the adapter, or at once when this fails). The ring is
 * borrowed and must outlive the adapter. Errors: `source: out of memory`. */
int cs_rejoin_source_new(cs_source **out, cs_source *inner, cs_ring *ring, cs_err *err);

/* Ledgers skipped so far because the ring held them, the same bytes. Source loop thread. */
uint64_t cs_rejoin_source_skipped(const cs_source *s);

/* Reads body bytes; as cs_source_ops.read. */
typedef ssize_t (*cs_rejoin_read_fn)(void *arg, uint8_t *buf, size_t len, cs_err *err);

/* The comparison itself, for a source that meets a re-emitted ledger inside its own read (the FIFO
 * source, after a writer restarted mid-ledger): reads one ledger's body whole through read and
 * compares it with what the ring holds for seq. Returns 0 when it is the same, and when the ring
 * cannot compare it (seq is in a hole, or its record cannot be read now: WARN `source re-emitted a
 * ledger the ring cannot compare; skipped it` ledger reason); -1 with err: the
 * read's error, `ledger N differs from the ring's: …`, `ledger N is older than the ring's oldest
 * ledger O, so it cannot be compared with it`, or `ledger N is not in the ring, so it cannot be
 * compared with it`. Any thread. */
int cs_rejoin_compare(cs_ring *ring, uint32_t seq, cs_rejoin_read_fn read, void *arg, cs_err *err);

#endif
