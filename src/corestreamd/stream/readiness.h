/* SPDX-License-Identifier: Apache-2.0 */
/* /readyz: whether this daemon should be sent subscribers now. Ready (200) only while the source
 * is producing ledgers and the ring is being written; otherwise 503 with the reason. Liveness is
 * /healthz, which answers 200 as long as the process serves HTTP at all. */
#ifndef CS_CORESTREAMD_READINESS_H
#define CS_CORESTREAMD_READINESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corestreamd/stream/metrics.h"

/* The status (200 or 503) and the one-line JSON body ("\n"-terminated) for state st, with
 * stopping set once a shutdown was asked for, and latest the last ledger emitted:
 *   {"ready":true,"state":"streaming","latest":L}
 *   {"ready":false,"state":"catching_up","reason":"catching up","latest":0}
 * Reasons: "starting", "catching up", "source ended", "shutting down", "source failed",
 * "ring failing", "source reconnecting"; and for an edge waiting past a skipped message
 * (CS_SRC_WAITING, the ledger in waiting_for):
 *   {"ready":false,"state":"waiting","reason":"waiting for ledger W past a skipped message","latest":L,"waiting_for":W}
 * Pure; any thread. */
unsigned cs_readiness(cs_source_state st, bool stopping, uint64_t latest, uint64_t waiting_for, char *body,
                      size_t len);

#endif
