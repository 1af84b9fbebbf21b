/* SPDX-License-Identifier: Apache-2.0 */
/* The edge source's state, shared by jetstream.c (the stream: where it starts, the consumer, skips
 * and gaps, forwarding) and jslive.c (the live messages). Internal to the source: every field is
 * the source loop's thread's unless it says otherwise. */
#ifndef CS_CORESTREAMD_SOURCES_JETSTREAM_INTERNAL_H
#define CS_CORESTREAMD_SOURCES_JETSTREAM_INTERNAL_H

#include <nats/nats.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/clock.h"
#include "corestreamd/jetstream/naming.h"
#include "corestreamd/sources/jetstream.h"
#include "corestreamd/sources/jsgap.h"
#include "remoteledger/assemble.h"
#include "wire/ledgersig.h"
#include "wire/wire.h"

/* The longest one wait for the next message lasts, so cancellation and outages are seen promptly. */
#define NEXT_WAIT_MS 250
/* The server's idle heartbeat on the push consumer: after a few missed ones nats.c either resets
 * the ordered consumer itself or reports NATS_MISSED_HEARTBEAT, and next_msg recreates it. */
#define HEARTBEAT_NS (1 * CS_SEC)
/* An idle consumer is asked for its info after this long without a message: a consumer whose
 * server is gone answers nothing, and is recreated. */
#define IDLE_CHECK_NS (1 * CS_SEC)
#define API_WAIT_MS 2000
#define RETRY_NS (250 * CS_MS)
#define CONSUMER_INACTIVE_NS (30 * CS_SEC)

typedef struct js_source {
    cs_source base;
    char *url;
    char stream[CS_JS_NAME_MAX];
    char run[CS_JS_NAME_MAX];
    char filter[CS_JS_SUBJECT_MAX];
    uint32_t start;
    cs_ring *ring;
    cs_cancel *cancel;
    natsOptions *opts;
    natsConnection *nc;
    jsCtx *js;
    natsSubscription *sub;
    atomic_uint disconnects; /* counted on nats.c's thread */
    unsigned sub_disconnects; /* the count when sub was created: a consumer older than a
                                 disconnection is recreated (its server may be gone) */
    /* nats.c's closed callback has run: none of its callbacks can touch this any more. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool closed;
    rli_asm *asm_;
    bool positioned;    /* the first next() has chosen where to read from */
    uint32_t need;      /* before the first ledger: the one wanted (0: the first BEGIN seen) */
    bool started;       /* a ledger's BEGIN has been fed */
    uint64_t last_sseq; /* stream sequence of the last message consumed (0: none) */
    uint64_t from_sseq; /* 0: the run's first message */
    bool lost;          /* in an outage (logged once) */
    natsMsg *cur; /* the message last returned by next_msg, owned here until the next one */
    int64_t last_msg_ns;
    /* The ledger being forwarded: its bytes go out as they are assembled; the end of the body
     * (read returning 0, after which the source loop sends END and the ring keeps the ledger)
     * waits for the assembler to verify END. */
    bool open;             /* a ledger was started by next() (until the next next()) */
    uint32_t seq;          /* that ledger */
    bool verified;         /* END verified: ledger/ledger_len are the whole ledger */
    const uint8_t *ledger;
    size_t ledger_len, ledger_off;
    uint32_t next_idx;     /* the chunk index the open copy takes next */
    bool void_pending;     /* the bytes of the open ledger handed out are void: read says so once */
    /* Skipped messages (skip), by reason, and the ledger waited for since (0: none). */
    atomic_uint_fast64_t skipped[CS_JS_SKIP_REASONS];
    atomic_uint waiting_for;
    uint64_t skips_in_wait;
    int last_skip; /* the reason of the last skip logged at WARN (-1: none) */
    char last_skip_subject[CS_JS_SUBJECT_MAX];
    /* --trusted-keys (NULL: none) and the signing run and chain of the ledgers served. */
    cs_sig_keyset *keys;
    cs_sig_chain chain;
    /* Ledgers the stream went on without (jsgap.h): the watch, whether the next ledger follows a
     * gap, and the gaps reported (and the ledgers in them). */
    cs_jsgap *gap;
    bool after_gap;
    atomic_uint_fast64_t gaps, gap_ledgers;
    /* The live messages (jslive.c): the run's subjects as plain NATS messages, which reach the
     * edge as the server receives them, before the stream stores them. */
    natsSubscription *live; /* NULL: not subscribed (the edge reads the stream only) */
    bool on_live;           /* reading live (and no consumer exists) rather than the stream */
    unsigned live_disconnects; /* the connection's disconnect count when on_live began */
    natsMsg *live_head;     /* a live message taken while on the stream, not used yet */
    bool live_heard;        /* the subscription has delivered a message */
    /* Holes in the live queue: nats.c drops a message past the pending limit (counted) and loses
     * whatever is published while the connection is down (disconnects). The counts when the queue
     * was last seen empty: while both still hold, what is queued since has no hole. On live, the
     * counts when it began. */
    int64_t live_dropped;
    unsigned live_clean_disconnects;
    /* The last junk messages skipped (cs_jss_junk): a digest of each, its low bit the path it
     * came by (1: live), so the other path's copy of one is not skipped again. */
    uint64_t junk[8];
    unsigned junk_n;
    /* The open copy: its BEGIN's XXH64, and whether its SIG is in. */
    uint64_t begin_hash;
    bool sig_in;
    /* After a move from live to the stream: the stream's copy of what live already gave is passed
     * over. resume_want: the ledger the consumer must start before (0: none pending); pass_below:
     * ledgers below it are passed over; resuming: the open copy's BEGIN (when its hash matches),
     * its first resume_chunks chunks (each once, in order) and (resume_sig) its SIG (once) are
     * passed over. */
    uint32_t resume_want, pass_below;
    bool resuming, resume_begin_seen, resume_sig;
    uint32_t resume_ledger, resume_chunks, resume_passed; /* passed: chunks passed over so far */
    atomic_uint_fast64_t ledgers_live, ledgers_stream, stream_moves;
} js_source;

/* ---- jsconn.c ---- */
/* Connects to url (nats.c reconnecting for ever, pings every 2 s, a 1 MiB buffer; disconnections
 * counted in s->disconnects) and makes the JetStream context. 0, or -1 with err (`jetstream
 * source: connect to <url>: …`). */
int cs_jss_connect(js_source *s, int64_t timeout_ms, const cs_js_auth *auth, cs_err *err);
/* The run of the stream's newest message, from its subject, into s->run; waits while JetStream
 * cannot answer. 0, or -1 with err (no message in the stream; a subject not <stream>.<run>.<seq>). */
int cs_jss_newest_run(js_source *s, cs_err *err);
/* Closes the connection and waits (at most 5 s) for nats.c's closed callback. */
void cs_jss_close_connection(js_source *s);
/* Whether the source is cancelled: true with err (CS_ERR_CANCELLED). */
bool cs_jss_cancelled(const js_source *s, cs_err *err);
/* nats.c's last error text, else the status's. */
const char *cs_jss_nats_detail(natsStatus s);
/* The newest stored message on subj into *m (owned by the caller; NULL when none is stored).
 * While JetStream cannot answer (a leaderless stream: code 10008, or no reply), it asks again
 * every 250 ms when what names the call (WARN `jetstream source waiting for JetStream to answer`
 * once), and fails when what is NULL. 0, or -1 with err (`jetstream source: read the last message
 * of <subj>: …`; CS_ERR_CANCELLED when cancelled while waiting). */
int cs_jss_last_msg(js_source *s, const char *subj, const char *what, natsMsg **m, cs_err *err);
/* The ledger a subject "<stream>.<run>.<seq>" names, or -1. */
int64_t cs_jss_subject_seq(const js_source *s, const char *subj);
/* An outage began (WARN `jetstream source lost the stream; resuming` once per outage; INFO
 * `jetstream source resumed` when a stream message comes again): drops the consumer. */
void cs_jss_lost(js_source *s, const char *why);
/* The one way a message of the run goes unserved (jetstream.h, Skips): sseq 0 for a live one. */
void cs_jss_skip(js_source *s, uint64_t sseq, const char *subject, cs_js_skip reason, const char *why);
/* Drops the consumer's subscription (and the message last taken from it) without asking the
 * server. */
void cs_jss_drop_sub(js_source *s);

/* ---- jslive.c ----
 * The edge follows the live messages whenever they continue the flow exactly, and the stream
 * otherwise. It subscribes to the run's subjects before it makes its first consumer, starts on the
 * stream, and moves to the live messages at a ledger boundary where the next live message is the
 * BEGIN of the ledger expected and the live queue has no hole (nothing dropped, no connection
 * lost, since it was last seen empty); the consumer is deleted then (a consumer reading the block
 * the server is writing slows every store, bench/results/2026-12-07-edge-path.md). A message
 * dropped, the connection lost, or a live message that does not continue the flow (a chunk out of
 * order or repeated, a later ledger begun, a copy that does not verify) moves it back to the
 * stream: a consumer after the newest stored message of the four ledgers before the one wanted
 * (else of the run, when that is earlier), which passes over what live already gave and applies
 * the stream's rules (skips, gaps) from there. Live messages of ledgers already served are passed
 * over; junk is skipped where it is met (cs_jss_junk). */

/* Subscribes to the run's subjects; a failure to subscribe leaves the edge on the stream alone
 * (WARN). A server that refuses it later (permissions) says so asynchronously (WARN `jetstream NATS
 * error`); nothing then comes live, and the edge stays on the stream. */
void cs_jss_live_open(js_source *s);
/* On the stream at a ledger boundary: when the next live message is the BEGIN of the ledger
 * expected, moves to live, deletes the consumer and returns that message (owned by the source as
 * s->cur); else NULL. */
natsMsg *cs_jss_live_try(js_source *s);
/* On live: the next live message (owned by the source as s->cur), or NULL with err kind
 * CS_ERR_CANCELLED when cancelled, or kind 0 when the edge moved to the stream. */
natsMsg *cs_jss_live_next(js_source *s, cs_err *err);
/* Moves from live to the stream, logging why (INFO `jetstream source reading the stream`). */
void cs_jss_live_to_stream(js_source *s, const char *why);
/* Before the consumer is made after a move: the stream sequence of the newest stored message of
 * one of the four ledgers before resume_want (the consumer starts after it), or 0 when none is
 * stored (it starts after last_sseq). -1 with err when the stream does not answer. */
int cs_jss_live_resume_point(js_source *s, uint64_t *sseq, cs_err *err);
/* A stream message just after a move: whether it repeats what live already gave (passed over). */
bool cs_jss_live_repeat(js_source *s, const cs_wire_msg *w, const uint8_t *data, size_t len);
/* Junk (not a wire message, or under another ledger's subject) met live (sseq 0) or in the
 * stream: skipped with reason (cs_jss_skip) and remembered, unless it is the other path's copy of
 * junk already skipped, which is passed over (once): a junk message is skipped once, on the path
 * that meets it first. */
void cs_jss_junk(js_source *s, uint64_t sseq, const char *subject, const uint8_t *data, size_t len,
                 cs_js_skip reason, const char *why);
/* A message (live or stream) fed in place: notes the open copy's BEGIN and SIG, and ends the
 * passing over. */
void cs_jss_live_fed(js_source *s, const cs_wire_msg *w, const uint8_t *data, size_t len);

#endif
