/* The paced adapter (docs/operations/sources.md): turns a stream of complete ledgers into
 * emissions whose starts follow an absolute cadence grid and whose bytes are released over an emit
 * window, so the overlap of emission and transfer is measurable. */
#ifndef CS_CORESTREAMD_PACE_H
#define CS_CORESTREAMD_PACE_H

#include "common/godur.h"
#include "common/cancel.h"
#include "corestreamd/sources/source.h"

/* Takes ownership of ls. window ≤ 0: bytes are released at once; cadence ≤ 0: no wait between
 * ledgers. Sequences count from range.from; a bounded range stops after range.to. */
cs_source *cs_paced_source_new(cs_ledger_stream *ls, cs_range range, cs_dur window, cs_dur cadence,
                               cs_cancel *cancel);

#endif
