/* SPDX-License-Identifier: Apache-2.0 */
/* The JetStream publisher's internals (publisher.h), shared by its two files: publisher.c (nats.c's
 * callbacks, the connection, the thread's loop, the life cycle) and pubsteps.c (what the thread
 * publishes next: the live flow or the ring, item by item, and the resync after a failure). */
#ifndef CS_CORESTREAMD_JETSTREAM_PUBLISHER_INTERNAL_H
#define CS_CORESTREAMD_JETSTREAM_PUBLISHER_INTERNAL_H

#include <nats/nats.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "corestreamd/jetstream/naming.h"
#include "corestreamd/jetstream/publisher.h"
#include "corestreamd/stream/broadcast.h"
#include "corestreamd/stream/replay.h"

/* How long the publisher waits for the next ack while publishes are owed one before it takes them
 * as lost and re-reads the position (check_acks in publisher.c). */
#define ACK_WAIT_NS (5 * CS_SEC)
/* A full window makes a publish wait this long before it returns (nats.c's StallWait). */
#define STALL_WAIT_MS 200
/* The longest the thread waits for anything, so a stop or a state change is seen promptly. */
#define POLL_NS (100 * CS_MS)
/* Between two attempts to open a new connection after one was lost. */
#define RECONNECT_WAIT_NS (250 * CS_MS)
/* How long closing a lost connection waits for nats.c's last callback. */
#define CLOSE_WAIT_NS (5 * CS_SEC)

enum step_result {
    STEP_PROGRESS,  /* did something; look again */
    STEP_WAIT_FLOW, /* nothing to publish until the broadcaster changes */
    STEP_WAIT_KICK, /* waiting for a replay message or for NATS */
};

enum pub_result { PUB_OK, PUB_STALL, PUB_FAIL };

struct cs_js_publisher {
    cs_js_config cfg; /* strings below are owned copies */
    char *url, *stream, *run, *run_desc;
    cs_broadcaster *bc;
    cs_ring *ring;
    natsOptions *opts;
    /* The current connection and its JetStream context: opened by new, replaced only on the
     * publisher thread after a loss (nats.c's own reconnect is off), closed by free. */
    natsConnection *nc;
    jsCtx *js;
    bool js_used; /* js has taken a message (nats.c's pending list exists only from then on) */
    cs_replay_pool *replays;

    pthread_t thread;
    bool started;
    pthread_mutex_t mu; /* guards kicks, the stop request and the republish request */
    pthread_cond_t cond;
    uint64_t kicks;
    bool stopping;
    bool closed; /* nats.c delivered nc's closed callback: no callback of nc runs any more */
    /* A ledger whose message id someone else had taken (the lowest asked for since the last
     * resync), with that id: published again under fresh ids by the next resync. */
    bool republish_want;
    uint32_t republish_seq;
    char republish_id[CS_JS_SUBJECT_MAX];
    int64_t drain_deadline; /* monotonic ns, valid once stopping */

    atomic_bool connected;
    atomic_bool resync;
    /* The lowest position whose publish failed since the last resync (a packed seq<<32|item;
     * UINT64_MAX when none): a stream that has since stored later messages has lost it. */
    atomic_uint_fast64_t first_failed;

    /* ack_failures: refusals (an ack callback with an error); ack_timeouts: publishes owed an ack
     * when acks stopped (check_acks), reported with the refusals but not part of the accounting
     * below, since nats.c's pending list still holds them. */
    atomic_uint_fast64_t published, acked, duplicates, ack_failures, ack_timeouts, stalls, ledgers, ring_ledgers,
        behind_episodes, gaps, resyncs, foreign_duplicates, republishes;
    /* Resends: every position up to this one (packed + 1; 0: none) was published by this process
     * before its last resync, so the server may rightly call a publish of it a duplicate. Any
     * other duplicate is of a message this process never sent: another publisher's. */
    atomic_uint_fast64_t resend_upto;
    uint64_t sent_high; /* publisher thread: the highest position published (packed + 1) */
    /* Publishes taken back unanswered from nats.c's pending list (at a resync or a lost
     * connection). Every publish ends in exactly one of acked, ack_failures and dropped. The
     * publisher thread's, and the controlling thread's once that thread has stopped. */
    uint64_t dropped;
    uint64_t acks_seen;     /* acked + ack_failures at the last check_acks */
    int64_t ack_wait_since; /* monotonic ns: since when an ack is awaited without one coming */
    atomic_bool behind_flag;

    /* The publisher thread's own state. */
    uint8_t id_key[CS_JS_ID_KEY_LEN]; /* the message id secret (idkey.h), read by new */
    bool id_key_unsaved;              /* drawn by new; start writes it to data_dir */
    char *data_dir;
    uint64_t gen;                     /* the id generation (naming.h): 0, or fresh per republish */
    uint32_t republished_seq;         /* the ledger last republished, and how many times */
    unsigned republish_attempts;
    bool have_pos;
    cs_js_pos pos;
    cs_flow *flow;       /* pinned flow of pos.seq, when it came live */
    cs_replay *rp;       /* ring replay of pos.seq */
    uint32_t rp_item;    /* item number the replay hands out next */
    cs_msg *held;        /* a replay message whose publish met a full window */
    uint32_t held_item;
    cs_msg *held_end; /* a replayed signed ledger's END, behind its SIG */
    uint32_t held_end_item;
    bool behind;
    bool drained; /* the thread ended with everything the source emitted published */
    int64_t behind_since;
    uint32_t ahead_logged; /* the position last reported as ahead of the source */
    uint32_t first_live;   /* the first flow this process emitted (0 until seen) */
    int64_t next_connect;  /* monotonic ns: no new connection is tried before */
    bool refusal_logged;   /* this outage's refusal (credentials, TLS) was logged at WARN */
    bool tls;              /* TLS asked for (--jetstream-tls-*), for the causes of a failed connect */
};

/* A position as one ordered number: seq << 32 | item. */
static inline uint64_t pub_pack(cs_js_pos p)
{
    return (uint64_t)p.seq << 32 | p.item;
}

/* publisher.c, on the publisher thread: hands nats.c's unanswered publishes back (counted in
 * dropped; what landed is in the stream, the rest is published again after the resync). */
void pub_drop_pending(cs_js_publisher *p);

/* pubsteps.c, all on the publisher thread. */

/* Lets go of the pinned flow, the ring replay and any held message. */
void pub_drop_sources(cs_js_publisher *p);
/* Logs (once per change) that the thread fell behind the live flow, or caught up. */
void pub_note_behind(cs_js_publisher *p, bool behind, const char *reason, uint32_t live);
/* Publishes what comes next at p->pos against the broadcaster's snapshot: a step_result. */
int pub_step(cs_js_publisher *p, const cs_snap *snap);
/* Re-reads where the run ends in the stream and continues right after it, or from the BEGIN of a
 * ledger to republish under fresh ids: 0, or -1 (asked again later). */
int pub_resync(cs_js_publisher *p);

#endif
