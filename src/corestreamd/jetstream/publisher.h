/* SPDX-License-Identifier: Apache-2.0 */
/* The JetStream publisher: a second consumer of the broadcaster's flows, beside the WebSocket
 * cursors. On its own thread it follows the current flow and publishes each ledger's wire
 * messages (BEGIN, CHUNK…, END: the very buffers the WebSocket subscribers are sent) to
 * "<stream>.<run>.<seq>" with a Nats-Msg-Id per message (naming.h).
 *
 * Never in the way of the live path: it only watches the broadcaster (a short lock, no hook on
 * the source thread) and pins the one flow it is publishing, as a cursor does. Publishing is
 * nats.c's asynchronous publish with a bounded window (max_pending messages in flight); a full
 * window, a slow server or a lost connection only delays this thread. Acks that stop while
 * publishes are owed one (5 s with the connection up: an R3 stream without its quorum) count as
 * failed, with WARN `jetstream publish acks stopped`, and lead to a resync as a failed ack does.
 * When it is behind (the live flow has moved past what it is publishing, or NATS is unreachable)
 * it logs WARN `jetstream publisher behind` once, and when it has caught up INFO `jetstream
 * publisher caught up`.
 * Ledgers the live flow has left behind come from the ring through a replay encoder of its own
 * (the stampless flow a ring replay sends a WebSocket subscriber); a ledger the ring no longer
 * holds is logged at ERROR `jetstream stream gap` with the first and last ledger missing.
 *
 * Ids are unguessable (naming.h): nobody without the data directory's secret can take the id of a
 * message before the core sends it. Should the stream still answer a publish as a duplicate of a
 * message this process never sent (someone holding the secret), it logs WARN `jetstream stream
 * already held a message id this process never sent` and publishes the ledger again from its
 * BEGIN under fresh ids, with
 * everything after it, so consumers still get the genuine ledger (WARN `jetstream publisher
 * republishing a ledger under fresh ids`); at most CS_JS_REPUBLISH_MAX times for one ledger,
 * then ERROR `jetstream message id taken again; the ledger is not republished`. A publish the
 * stream refused while it stored later ones is mended the same way (then ERROR `jetstream stream
 * gap` after CS_JS_REPUBLISH_MAX attempts).
 *
 * Where to publish from is otherwise always the stream's own answer: at start and after every reconnect or
 * failed acknowledgement the publisher reads the run's last stored message and continues right
 * after it (stream.h), so a core restart neither duplicates nor skips; a message whose ack was
 * lost and is published again is deduplicated by the server within the stream's duplicate
 * window. A lost connection is closed and the publisher thread opens a new one (an attempt every
 * 250 ms, each bounded by connect_timeout_ms per server), then asks the stream where the run ends
 * before it publishes again. nats.c's own reconnect stays off: it would send a message published
 * while it was reconnecting on the new connection, after the ones the lost connection dropped, and
 * leave a hole in the stream. So what the server stored is, connection by connection, a prefix of
 * what was sent.
 *
 * Threads: new/start/stop/free from one controlling thread; stats from any thread. nats.c's own
 * threads call the connection and ack callbacks, which only touch atomics and wake the
 * publisher. */
#ifndef CS_CORESTREAMD_JETSTREAM_PUBLISHER_H
#define CS_CORESTREAMD_JETSTREAM_PUBLISHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/jetstream/auth.h"
#include "corestreamd/stream/broadcast.h"
#include "store/ring.h"

#define CS_JS_DEFAULT_STREAM "CORESTREAM"
#define CS_JS_DEFAULT_MAX_AGE_NS (24 * 3600 * 1000000000LL)
#define CS_JS_DEFAULT_MAX_BYTES (16LL << 30)
#define CS_JS_DEFAULT_REPLICAS 1
#define CS_JS_DEFAULT_MAX_PENDING 64
#define CS_JS_MAX_REPLICAS 5
#define CS_JS_MAX_MAX_PENDING 4096
/* Times one ledger is republished under fresh ids (its id taken, or a publish of it refused
 * before later ones were stored), before giving up. */
#define CS_JS_REPUBLISH_MAX 3

typedef struct cs_js_config {
    const char *url;    /* nats://host:port[,nats://…] (copied) */
    const char *stream; /* valid per cs_js_validate_stream_name (copied) */
    const char *run;    /* run token (cs_js_run_id; copied). When the ring records the identity
                           of the run that wrote it, that identity is what goes here. */
    const char *run_desc; /* what the token was made from, for the start-up log (copied) */
    const char *data_dir; /* holds the message id secret (idkey.h; borrowed for new only) */
    int64_t max_age_ns;   /* 0: none */
    int64_t max_bytes;    /* -1: none */
    int64_t replicas;     /* 1..5 */
    int64_t max_pending;  /* messages in flight, 1..4096 */
    size_t chunk_size;    /* the server's, resolved */
    bool compress;        /* for ring catch-up, as the server's replays */
    int compress_level;
    int64_t connect_timeout_ms; /* 0 → 5000 */
    const cs_js_auth *auth;     /* credentials and TLS (borrowed for new only); NULL: none */
} cs_js_config;

typedef struct cs_js_publisher cs_js_publisher;

/* Reads (or draws and writes) the message id secret of cfg->data_dir (idkey.h), connects, refuses
 * a chunk size that cannot fit the server's max_payload (cs_js_check_payload), creates or checks
 * the stream (cs_js_stream_ensure) and reads where the run ends in it, all before returning; logs
 * INFO `jetstream publisher ready`. bc and ring are borrowed and must outlive the publisher.
 * Errors: those of idkey.h, `jetstream: connect to <url>: …` and those of stream.h. NATS must be
 * reachable at start; later outages are ridden out. */
int cs_js_publisher_new(cs_js_publisher **out, const cs_js_config *cfg, cs_broadcaster *bc, cs_ring *ring,
                        cs_err *err);

/* Starts the thread. Call before the source publishes its first ledger. */
int cs_js_publisher_start(cs_js_publisher *p, cs_err *err);

/* Once the broadcaster is finished: publishes what is left of the last flow and waits for the
 * acks, for at most drain_ns, then stops the thread and logs INFO `jetstream publisher stopped`
 * (WARN with the ledger it stopped at when it could not finish: the next start catches up from
 * the ring). Safe on a publisher never started. */
void cs_js_publisher_stop(cs_js_publisher *p, int64_t drain_ns);

/* Stops (drain 0) if still running, closes the connection and frees. NULL is a no-op. */
void cs_js_publisher_free(cs_js_publisher *p);

typedef struct cs_js_stats {
    uint64_t published;       /* messages handed to nats.c */
    uint64_t acked;           /* acknowledged by the stream (duplicates included) */
    uint64_t duplicates;      /* acknowledged as duplicates (dedupe by Nats-Msg-Id) */
    uint64_t ack_failures;    /* failed or timed-out acknowledgements */
    uint64_t stalls;          /* publishes that met a full window */
    uint64_t ledgers;         /* ledgers whose END was published */
    uint64_t ring_ledgers;    /* of which read back from the ring */
    uint64_t behind_episodes; /* transitions into `behind` */
    uint64_t gaps;            /* `jetstream stream gap` errors */
    uint64_t resyncs;         /* times the position was re-read from the stream */
    uint64_t foreign_duplicates; /* of duplicates, those of a message this process had never sent:
                                    another publisher had used its id (WARN logged, the ledger
                                    republished under fresh ids) */
    uint64_t republishes;        /* ledgers published again under fresh ids for that, or after a
                                    publish refused before later ones were stored */
    bool behind;
    bool connected;
} cs_js_stats;

void cs_js_publisher_stats(cs_js_publisher *p, cs_js_stats *out);

#endif
