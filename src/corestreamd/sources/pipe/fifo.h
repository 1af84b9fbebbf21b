/* SPDX-License-Identifier: Apache-2.0 */
/* `--source pipe --pipe-path PATH`: tapping a stellar-core that runs on its own (its own unit,
 * `METADATA_OUTPUT_STREAM=PATH`) through a named FIFO. The frames are the pipe tap's (pipe.h:
 * record-marked LedgerCloseMeta, the seq from an XDR walk of the prefix, the body streamed as it
 * arrives); what differs is that the writer comes and goes and corestreamd stays.
 *
 * Opening: the FIFO is created (mkfifo, mode 0620: corestreamd reads, its group writes) when the
 * path does not exist; an existing path must be a FIFO. The read end is opened non-blocking, so no
 * writer is needed to start, and held while corestreamd runs, so core's open for writing does not
 * block once corestreamd is up.
 *
 * The writer leaving (EOF: every writer closed the FIFO):
 * - between ledgers: WARN `pipe source: the FIFO's writer went away; waiting for the next one`
 *   (path, after_ledger), the listener hears reconnecting=true (readiness 503 `source
 *   reconnecting`), and the FIFO is reopened; when a writer sends its first marker, INFO `pipe
 *   source: a writer reopened the FIFO` (path, reconnects) and reconnecting=false. Its ledgers go
 *   on to the source loop; wrapped in the rejoin adapter (rejoin.h), those the ring holds are
 *   compared and skipped. A frame cut short before next() returned it is dropped the same way.
 * - inside a ledger the source loop is emitting (ledger N, B of its L bytes handed out): the same
 *   wait, then read() goes on with the same ledger from the new writer. Its frames before N are
 *   compared with the ring (cs_rejoin_compare) and skipped; the next must be ledger N again, L
 *   bytes long, whose first B bytes hash as the ones handed out did; the rest is then handed out,
 *   so the subscribers' ledger N ends whole. Anything else ends the source: `pipe source: the
 *   writer of "<path>" restarted inside ledger N, then sent ledger M` / `…, then sent ledger N
 *   again as K bytes, not L` / `…, then sent ledger N again with other bytes in its first B`.
 * Records are checked as the pipe tap checks them (a malformed marker, a record over the cap, a
 * prefix that does not walk: `pipe source: read frame marker: …`, `pipe source: read frame prefix:
 * …`, `pipe source: read ledger seq: …`); those end the source.
 *
 * Errors from new: `pipe source: "<path>" is not a FIFO`, `pipe source: create FIFO "<path>": …`,
 * `pipe source: open "<path>": …`, `source: out of memory`. Once the run's cancel fires, next and
 * read report CS_ERR_CANCELLED ("context canceled"), waits included.
 *
 * Threads: new/destroy from the controlling thread, next/read from the source loop only. */
#ifndef CS_CORESTREAMD_SOURCE_FIFO_H
#define CS_CORESTREAMD_SOURCE_FIFO_H

#include <stdint.h>

#include "common/cancel.h"
#include "common/err.h"
#include "corestreamd/sources/source.h"
#include "store/ring.h"

/* The ring (borrowed; it must outlive the source) is what a mid-ledger restart's earlier frames
 * are compared with. */
int cs_fifo_source_new(cs_source **out, const char *path, cs_ring *ring, cs_cancel *cancel, cs_err *err);

/* Times a writer reopened the FIFO after another went away. Source loop thread. */
uint64_t cs_fifo_source_reconnects(const cs_source *s);

#endif
