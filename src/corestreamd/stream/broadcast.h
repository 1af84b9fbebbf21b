/* SPDX-License-Identifier: Apache-2.0 */
/* The broadcaster (docs/STREAM-THREADS.md): the one current flow — BEGIN, the chunks published so
 * far, and END once complete — shared by every subscriber. Publishing appends under a short mutex
 * (seals each message's frame header first, so no sender writes it) and wakes the watchers; it
 * never blocks on a subscriber. A cursor inside the current flow reads its published state
 * without the mutex (cs_broadcast_peek). A flow stays current until the next
 * BEGIN replaces it, and is reference-counted so a subscriber can keep writing a replaced flow. */
#ifndef CS_CORESTREAMD_BROADCAST_H
#define CS_CORESTREAMD_BROADCAST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/stream/message.h"

/* Chunk pointers live in fixed segments that never move, so a reader holding a snapshot can index
 * them without the lock while the source appends more. Enough for 256 MiB at the minimum chunk. */
#define CS_FLOW_SEG_SHIFT 8
#define CS_FLOW_SEG_LEN (1u << CS_FLOW_SEG_SHIFT)
#define CS_FLOW_MAX_SEGS 257

typedef struct cs_flow {
    atomic_uint refs;
    uint32_t seq;
    cs_msg *begin;
    /* Published state, stored with release under the broadcaster lock, so a holder of the flow
     * reads it without the lock (cs_broadcast_peek): a chunk's pointer is in segs before nchunks
     * counts it, sig is set before end. */
    _Atomic(cs_msg *) end; /* NULL until complete */
    /* The ledger's SIG (signed ledgers), set with end and never changed after: read it once end
     * was seen. NULL when the ledger is unsigned. */
    cs_msg *sig;
    atomic_size_t nchunks;
    cs_msg **segs[CS_FLOW_MAX_SEGS];
} cs_flow;

cs_flow *cs_flow_retain(cs_flow *f);
void cs_flow_release(cs_flow *f);
/* Chunk i of a flow; i must be below a snapshot's nchunks. */
cs_msg *cs_flow_chunk(const cs_flow *f, size_t i);

/* What watch() returns, atomically. flow is a held reference (release with cs_snap_release). */
typedef struct cs_snap {
    cs_flow *flow; /* NULL before the first BEGIN */
    uint32_t seq;  /* 0 before the first BEGIN */
    size_t nchunks;
    cs_msg *end; /* borrowed from flow; non-NULL when the flow is complete */
    uint64_t gen; /* wake generation; changes on every publish and on finish */
    bool ended;
    bool failed;
} cs_snap;

void cs_snap_release(cs_snap *s);

typedef struct cs_broadcaster cs_broadcaster;

/* wake is called (outside the lock) after every publish and on finish, from the publishing
 * thread; it must not block. May be NULL. */
cs_broadcaster *cs_broadcaster_new(void (*wake)(void *), void *wake_ctx);
void cs_broadcaster_free(cs_broadcaster *b);

/* Each takes the caller's reference to msg (and end's to sig, which may be NULL). A guard failure returns -1 with the spec's message
 * (`server: ledger begun after the stream was finished`, `server: ledger begun while the previous
 * flow is still open`, `server: chunk published outside an open flow`, `server: end published
 * outside an open flow`), releases msg and leaves the state and the lock untouched: it is a bug in
 * the caller, which aborts. */
int cs_broadcast_begin(cs_broadcaster *b, uint32_t seq, cs_msg *begin, cs_err *err);
int cs_broadcast_chunk(cs_broadcaster *b, cs_msg *chunk, cs_err *err);
/* Replaces the open flow of ledger seq by a new one that has only begin: its bytes so far were
 * void (an edge's source found they were not the ledger's). A cursor inside the old flow sends the
 * new BEGIN and follows the new flow (a redelivery: PROTOCOL.md section 2, rule 4); the old flow
 * never gets an END. Guard: `server: ledger begun again without an open flow of it`. Only the
 * edge's source voids a ledger, and an edge runs no JetStream publisher (whose pinned flow would
 * wait for that END). */
int cs_broadcast_rebegin(cs_broadcaster *b, uint32_t seq, cs_msg *begin, cs_err *err);
int cs_broadcast_end(cs_broadcaster *b, cs_msg *end, cs_msg *sig, cs_err *err);

/* Idempotent: marks the stream ended (failed when failed is true, on the first call only). */
void cs_broadcast_finish(cs_broadcaster *b, bool failed);

void cs_broadcast_watch(cs_broadcaster *b, cs_snap *out);

/* The published chunk count and END (borrowed, NULL while open) of a flow that may no longer be
 * current, the caller holding a reference to it. Lock-free. */
void cs_broadcast_flow_state(cs_broadcaster *b, const cs_flow *f, size_t *nchunks, cs_msg **end);

/* A cursor's step in the flow it holds, without the lock: true when f is still the current flow
 * and the stream has not been finished, with f's published chunk count and END (borrowed, NULL
 * while open), as cs_broadcast_watch would have given them; false otherwise (a newer flow, or the
 * end of the stream: ask cs_broadcast_watch). The caller holds a reference to f, so f cannot be
 * freed and its address reused for a newer flow meanwhile. Any thread. */
bool cs_broadcast_peek(cs_broadcaster *b, const cs_flow *f, size_t *nchunks, cs_msg **end);

/* Blocks until the generation differs from gen or timeout_ns passes. Returns true when it changed.
 * For threads that are not the I/O loop (tests, benchrunner's loopback hold). */
bool cs_broadcast_wait(cs_broadcaster *b, uint64_t gen, int64_t timeout_ns);

/* Test hook: how many threads are blocked in cs_broadcast_wait now. Read under the lock the
 * waiters release only inside the condition wait, so a non-zero answer means one is parked there. */
int cs_broadcast_waiters(cs_broadcaster *b);

#endif
