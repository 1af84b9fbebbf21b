/* SPDX-License-Identifier: Apache-2.0 */
/* The source loop (docs/STREAM-THREADS.md): the only reader of the source. Per ledger it publishes
 * BEGIN before the first body read, cuts the body into chunk-size pieces as it arrives, hands each
 * to the encoder pool and the hash (and, when it signs, to the ledger hasher, whose SHA-256 runs
 * beside it: ledgerhash.h), publishes END after every chunk (with the ledger's SIG, signed here
 * once the hasher has the last chunk, or relayed from the source), and only then writes the ring
 * (on the ring writer's thread). That write is finished before the source is asked for the next
 * ledger, so the ring holds every ledger published (sources/rejoin.h relies on it). Nothing here
 * waits on a subscriber. */
#ifndef CS_CORESTREAMD_SOURCELOOP_H
#define CS_CORESTREAMD_SOURCELOOP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/stream/broadcast.h"
#include "common/cancel.h"
#include "corestreamd/stream/compress.h"
#include "corestreamd/stream/metrics.h"
#include "corestreamd/stream/signing.h"
#include "corestreamd/sources/source.h"
#include "store/ring.h"

typedef struct cs_source_loop {
    cs_source *src;
    cs_range range; /* for the start-up log only */
    size_t chunk_size;
    uint64_t max_payload; /* CS_MAX_PAYLOAD_SIZE; smaller in tests */
    cs_chunk_pipeline *pipeline;
    cs_broadcaster *bc;
    cs_ring *ring;
    cs_cancel *cancel;
    atomic_int *subscribers; /* for the periodic `streaming` log; may be NULL */
    cs_metrics *metrics;     /* the source thread's counters and state; may be NULL */
    /* Signs every ledger published (a SIG published with its END and kept in its record); NULL:
     * ledgers are unsigned, or carry the SIG their source gives (ops->signature). */
    cs_signing *signing;
    uint64_t published;      /* out: ledgers published and retained */
    /* Called on this thread, holding nothing: once with seq 0 when the loop starts, then with each
     * ledger's sequence once its END is published and it is handed to the ring writer. It must
     * return quickly (it delays the next ledger). NULL: none. */
    void (*on_progress)(void *arg, uint32_t seq);
    void *progress_arg;
} cs_source_loop;

/* Runs until the source is exhausted (0), cancelled (0, logged `source loop cancelled`) or fails
 * (-1 with `source failed at ledger N: …` and the like). The caller drains the pipeline and
 * finishes the broadcaster afterwards. */
int cs_source_loop_run(cs_source_loop *l, cs_err *err);

#endif
