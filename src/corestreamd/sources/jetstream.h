/* SPDX-License-Identifier: Apache-2.0 */
/* The edge source (--source jetstream): follows one run of a JetStream stream that a core's
 * publisher fills (jetstream/publisher.h, subjects "<stream>.<run>.<seq>", bodies the wire
 * messages BEGIN/CHUNK…/END) and verifies every ledger exactly as libremoteledger verifies a
 * WebSocket flow (the same assembler: BEGIN/CHUNK/END order, chunk indices and count, length,
 * XXH64, zstd expansion). The source loop chunks, encodes and serves it with the edge's own ring,
 * so a subscriber cannot tell an edge from a core.
 *
 * Forwarding: next() returns as soon as the ledger's BEGIN is in (from the stream or live, below);
 * read() hands out the assembled bytes as each chunk arrives (zstd chunks once decoded), so the
 * edge's subscribers get the body while it is still arriving. read() returns 0 (the body's end,
 * after which the source loop sends END and the ring keeps the ledger) only once the ledger's END
 * has verified. When the copy being forwarded turns out bad (it does not verify, or the stream begins
 * the ledger again), read() fails once with CS_ERR_LEDGER_VOID: the bytes handed out are void and
 * the source loop begins the same ledger again (a fresh BEGIN); the next read()s hand out the next
 * copy from its first byte.
 *
 * Skips: a message of the run that is not the next piece of the ledger needed (cs_js_skip) is
 * never served and never fatal: WARN `jetstream source skipped a message` (stream_seq, subject,
 * reason, error), counted by reason (cs_js_source_stats); the source then tells the loop it waits
 * for that ledger (cs_source_tell_waiting, /readyz 503 `waiting`) until a whole verified copy
 * came. Every skip goes through one function with its reason.
 *
 * Gaps: when the stream goes on without the ledger the edge waits for (no copy of it open, and a
 * later ledger verified after it, jsgap.h) for gap_wait, the edge gives up on it: WARN `jetstream
 * source gap: the stream went on without these ledgers` (from, to, resume_ledger), counted
 * (cs_js_source_stats), and it reads on from that later ledger's BEGIN, whose emission says it
 * follows a gap (cs_emission.after_gap): the ring resets past the gap, as for any gap, and
 * subscribers still owed the missing ledgers are told they are too far behind.
 *
 * Where it starts: the ledger the edge's ring needs next (ring latest+1); with an empty ring,
 * --start-ledger when given, else the run's first ledger in the stream. It asks the stream for
 * the END of the ledger before that one and reads from the next stream message, or, when that
 * END is not in the stream, from the run's first message. Ledgers before the one needed are passed
 * over unread; the first one that matters must begin at its BEGIN.
 *
 * Live messages: the source also subscribes to the run's subjects as plain NATS messages, which
 * reach it as the server receives them, before the stream stores them. It starts on the stream and
 * follows live from a ledger boundary where the next live message is the BEGIN of the ledger
 * expected and nothing was lost from the live queue, deleting its consumer (INFO `jetstream source
 * following the live messages`); while live continues the flow exactly it is all it reads. A
 * message dropped (over 64 MiB unread), the connection lost, or a live message that does not
 * continue the flow (a chunk out of order or repeated, a later ledger begun, a copy that does not
 * verify) moves it back to the stream (INFO `jetstream source reading the stream`, ledger,
 * chunks_in, reason): a consumer after the newest stored message of the ledgers just before
 * (not after the last stream sequence consumed), the stream's copy of what live already gave
 * passed over (the open ledger's BEGIN when identical, its chunks and SIG already in, each once),
 * and the stream's rules from there. Live messages of ledgers already served (a republished copy)
 * are passed over; a BEGIN of the open ledger begins it again, as in the stream. Junk on live (not
 * a wire message, another ledger than its subject's) is skipped there, as below (stream_seq 0); a
 * junk message is skipped once, on the way that meets it first, its other copy passed over. A
 * subscription that fails leaves the edge on the stream alone (WARN; one the server refuses for
 * permissions shows as WARN `jetstream NATS error`). Counted in cs_js_source_stats.
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
    /* --trusted-keys: a PEM file of Ed25519 public keys (read by new); a verified ledger whose
     * SIG none of them made over its bytes, for the signing run the edge follows, in its chain
     * (cs_sig_chain_check) is skipped as CS_JS_SKIP_SIGNATURE. NULL or "": signatures are
     * forwarded unchecked. */
    const char *trusted_keys;
    /* --jetstream-gap-wait: how long the edge waits for a ledger the stream went on without (a
     * later ledger verified after it, jsgap.h) before it reports the gap and serves on from that
     * later ledger. */
    int64_t gap_wait_ns;
} cs_js_source_config;

#define CS_JS_DEFAULT_GAP_WAIT_NS (10 * 1000000000LL)

/* Connects and resolves the run (for "" the newest message's subject names it), before returning,
 * so the caller can claim the ring under cs_js_source_identity. ring and cancel are borrowed and
 * must outlive the source; the ring is first read at the first next(), after the claim. Errors:
 * the trusted keys' (`trusted keys "<f>": …`, wire/ledgersig.h), `jetstream source: connect to
 * <url>: …`, `jetstream source: stream S holds no message; start the core's publisher first, or
 * name --jetstream-run`, `jetstream source: the newest message's
 * subject "…" is not <stream>.<run>.<seq>`. */
int cs_js_source_new(cs_source **out, const cs_js_source_config *cfg, cs_ring *ring, cs_cancel *cancel,
                     cs_err *err);

/* The run token followed (resolved at new). */
const char *cs_js_source_run(const cs_source *s);

/* Why a message of the run was not served (corestreamd_edge_messages_skipped_total's reason):
 * not a wire message; a message of another ledger than its subject names; one that does not
 * continue the flow (another ledger than the one open or next, a chunk out of order, a CHUNK or
 * END without BEGIN: a gap or a duplicate too); a copy of a ledger that does not verify (a chunk
 * that does not expand, END's count, length or XXH64); with trusted keys, a copy whose signature
 * does not hold (unsigned, another key, other bytes, another run, out of its chain). A new reason
 * goes before CS_JS_SKIP_REASONS, with its name in cs_js_skip_names. */
typedef enum cs_js_skip {
    CS_JS_SKIP_MALFORMED,
    CS_JS_SKIP_SUBJECT,
    CS_JS_SKIP_OUT_OF_PLACE,
    CS_JS_SKIP_CORRUPT,
    CS_JS_SKIP_SIGNATURE,
    CS_JS_SKIP_REASONS
} cs_js_skip;

/* The label values: "malformed", "subject", "out_of_place", "corrupt", "signature". */
extern const char *const cs_js_skip_names[CS_JS_SKIP_REASONS];

typedef struct cs_js_source_stats_t {
    uint64_t skipped[CS_JS_SKIP_REASONS];
    uint32_t waiting_for; /* the ledger the edge waits for past a skipped message; 0: none */
    uint64_t gaps;        /* gaps reported (WARN `jetstream source gap: …`) */
    uint64_t gap_ledgers; /* ledgers in them */
    uint64_t ledgers_live, ledgers_stream; /* ledgers verified from the live messages, from the stream */
    uint64_t stream_moves; /* moves from the live messages to the stream */
} cs_js_source_stats_t;

/* Any thread (atomics), while the source exists. */
void cs_js_source_stats(const cs_source *s, cs_js_source_stats_t *out);

/* The ring's run identity for an edge: `source=jetstream stream=<S> run=<R>`. */
void cs_js_source_identity(const cs_source *s, char *buf, size_t len);

#endif
