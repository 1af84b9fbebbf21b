/* The edge source (--source jetstream): follows one run of a JetStream stream that a core's
 * publisher fills (jetstream/publisher.h, subjects "<stream>.<run>.<seq>", bodies the wire
 * messages BEGIN/CHUNK…/END) and verifies every ledger exactly as libremoteledger verifies a
 * WebSocket flow (the same assembler: BEGIN/CHUNK/END order, chunk indices and count, length,
 * XXH64, zstd expansion). The source loop chunks, encodes and serves it with the edge's own ring,
 * so a subscriber cannot tell an edge from a core.
 *
 * Forwarding: next() returns as soon as the stream's BEGIN of the ledger is in; read() hands out
 * the assembled bytes as each stream chunk arrives (zstd chunks once decoded), so the edge's
 * subscribers get the body while it is still arriving. read() returns 0 (the body's end, after
 * which the source loop sends END and the ring keeps the ledger) only once the stream's END has
 * verified; on a fault read() fails instead, so the ledger never ends and is never retained. A
 * BEGIN repeated mid-ledger restarts the assembly: the new copy must begin with the bytes already
 * handed out (XXH64 of that prefix), else that is a fault too.
 *
 * Where it starts: the ledger the edge's ring needs next (ring latest+1); with an empty ring,
 * --start-ledger when given, else the run's first ledger in the stream. It asks the stream for
 * the END of the ledger before that one and reads from the next stream message, or, when that
 * END is not in the stream, from the run's first message. Ledgers before the one needed are passed
 * over unread; the first one that matters must begin at its BEGIN.
 *
 * The consumer is an ordered push consumer (nats.c's jsSubOptions.Ordered: ephemeral, no ack,
 * flow control, a 1 s idle heartbeat, filtered on the run), so the server sends each message as
 * soon as it is stored. This source recreates it, after the last stream sequence it consumed,
 * whenever it cannot trust it: the connection was lost since the consumer was made (nats.c
 * reconnects, through every URL given and every server the cluster announces), the next message
 * fails with anything but a timeout (missed heartbeats included), or an idle consumer no longer
 * answers for its info (its server is gone). So a node loss or a NATS restart resumes at the next message expected, with no
 * duplicate and no gap. WARN `jetstream source lost the stream; resuming` once per outage, INFO
 * `jetstream source resumed` when messages flow again.
 *
 * A gap, a duplicate or a corrupt ledger in the stream is never skipped: it is ERROR `jetstream
 * stream is not a clean flow` (ledger, stream_seq, error) and the source fails with the
 * assembler's message (`jetstream source: ledger N at stream sequence S: …`).
 *
 * Threads: new/destroy from the controlling thread, next/read from the source loop only. */
#ifndef CS_CORESTREAMD_SOURCES_JETSTREAM_H
#define CS_CORESTREAMD_SOURCES_JETSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include "common/cancel.h"
#include "common/err.h"
#include "corestreamd/jetstream/auth.h"
#include "corestreamd/sources/source.h"
#include "store/ring.h"

typedef struct cs_js_source_config {
    const char *url;    /* nats://host:port[,nats://…] (copied) */
    const char *stream; /* valid stream name (copied) */
    const char *run;    /* run token to follow; "" or NULL: the run of the stream's newest message */
    uint32_t start;     /* ledger to start at when the ring is empty; 0: the run's first */
    int64_t connect_timeout_ms; /* 0 → 5000 */
    const cs_js_auth *auth;     /* credentials and TLS (borrowed for new only); NULL: none */
} cs_js_source_config;

/* Connects and resolves the run (for "" the newest message's subject names it), before returning,
 * so the caller can claim the ring under cs_js_source_identity. ring and cancel are borrowed and
 * must outlive the source; the ring is first read at the first next(), after the claim. Errors:
 * `jetstream source: connect to <url>: …`, `jetstream source: stream S holds no message; start the
 * core's publisher first, or name --jetstream-run`, `jetstream source: the newest message's
 * subject "…" is not <stream>.<run>.<seq>`. */
int cs_js_source_new(cs_source **out, const cs_js_source_config *cfg, cs_ring *ring, cs_cancel *cancel,
                     cs_err *err);

/* The run token followed (resolved at new). */
const char *cs_js_source_run(const cs_source *s);

/* The ring's run identity for an edge: `source=jetstream stream=<S> run=<R>`. */
void cs_js_source_identity(const cs_source *s, char *buf, size_t len);

#endif
