/* SPDX-License-Identifier: Apache-2.0 */
/* One subscriber's cursor: a small state machine its stream I/O thread drives, one message per
 * step. Anchor (tip or start), ring catch-up (stampless, prepared by the
 * replay encoders, under a replay slot), live following of the current flow, and the close
 * decision. There is no per-subscriber queue: the cursor's whole state is where it is.
 *
 * Its subscriber's stream I/O thread only (cs-ws-N or cs-ws-bulk): the cursor and its replay
 * ticket are never touched elsewhere; the slot table is shared under its own
 * mutex (replayslots.h). Checked in every build (common/invariant.h): the thread that inits a
 * cursor owns it; cs_cursor_leave_thread gives it up for a move to another stream I/O thread, whose
 * first step takes it; a step or destroy on any other thread logs `thread contract violated` and
 * aborts. The state machine's invariants (which mode holds a flow, a replay, a held END, a slot)
 * are checked around every step, in every build too. */
#ifndef CS_CORESTREAMD_CURSOR_H
#define CS_CORESTREAMD_CURSOR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/invariant.h"
#include "corestreamd/stream/broadcast.h"
#include "corestreamd/stream/replay.h"
#include "corestreamd/stream/replayslots.h"
#include "store/ring.h"

typedef struct cs_cursor_env {
    cs_broadcaster *bc;
    cs_ring *ring;
    cs_replay_pool *replays;
    cs_replay_slots *slots; /* every ring replay runs under one of these */
    atomic_uint_fast64_t *live_abandons;
} cs_cursor_env;

typedef enum cs_cursor_mode {
    CS_CUR_IDLE,      /* deciding */
    CS_CUR_LIVE,      /* following the pinned flow with its stamps */
    CS_CUR_STAMPLESS, /* writing a completed flow reached late, stamps zeroed */
    CS_CUR_REPLAY,    /* writing a ring replay */
    CS_CUR_QUEUED,    /* needs the ring, waiting for a replay slot: holds no flow and no replay */
} cs_cursor_mode;

typedef struct cs_cursor {
    cs_owner owner; /* the stream I/O thread stepping it */
    cs_cursor_env env;
    uint64_t next; /* 64-bit: serving 4294967295 leaves 2^32, never wraps to 0 */
    bool bounded;
    uint64_t end;
    cs_cursor_mode mode;
    cs_flow *pinned; /* LIVE and STAMPLESS */
    size_t sent;     /* LIVE: chunks written; STAMPLESS: items written (BEGIN, chunks, END) */
    cs_replay *replay;
    /* The replay slot: a catch-up (ring reads before the live flow was ever reached) holds one
     * from its first ring ledger until the cursor stops reading the ring. Once the cursor has
     * followed live (a tip subscriber from the start), redelivering an abandoned ledger is the
     * slow-subscriber policy of the live path and needs none. The owner sets ticket.key and
     * ticket.granted after cs_cursor_init. */
    cs_replay_ticket ticket;
    bool followed_live;
    bool catching_up; /* a replay has started under the slot held */
    bool redelivering; /* followed live, and now behind it: its ledgers come from the ring */
    uint64_t abandoned; /* this subscriber's abandons, for the logs */
    uint32_t abandoned_seq;
    /* Signed ledgers: want_sig (the request's sig=1, set by the owner after cs_cursor_init) sends
     * each signed ledger's SIG just before its END, live, stampless or replayed. sig_sent: the
     * current ledger's SIG is out, its END is next. held: a replay's END waiting behind its SIG. */
    bool want_sig;
    bool sig_sent;
    cs_msg *held;
} cs_cursor;

typedef enum cs_step_kind {
    CS_STEP_WRITE, /* write msg, then step again when writable */
    CS_STEP_WAIT,  /* nothing to send until the broadcaster, a replay or a granted slot wakes us */
    CS_STEP_CLOSE, /* send a close frame with code and reason */
    CS_STEP_DROP,  /* drop the connection without a close frame (err says why) */
} cs_step_kind;

typedef struct cs_step {
    cs_step_kind kind;
    cs_msg *msg; /* WRITE: the caller owns this reference */
    int code;
    char reason[124];
    bool abandoned; /* a live flow was abandoned during this step (ledger in abandoned_seq) */
    /* Behind the live flow with no flow abandoned (a complete flow sent whole ended after the
     * next had begun): this step started redelivering from the ring at cursor.next. */
    bool fell_behind;
    bool replay_queued;   /* began waiting for a replay slot, at queue_position (1: first) */
    size_t queue_position;
    bool replay_started;  /* took a slot and started the catch-up at cursor.next */
    cs_err err;
} cs_step;

/* start 0 anchors at the tip: the in-progress flow from chunk 0 with its stamped BEGIN, or the
 * ledger after a completed one, or (before any publish) whatever comes first. The calling thread
 * owns the cursor from now on. */
void cs_cursor_init(cs_cursor *c, const cs_cursor_env *env, uint32_t start, bool bounded, uint32_t end);
/* Releases the pinned flow, the replay and the slot or the place in the slot queue; a freed slot
 * goes to the next waiter (its granted callback runs now). Its thread only. */
void cs_cursor_destroy(cs_cursor *c);

/* Its thread gives the cursor up, as its subscriber leaves for another stream I/O thread
 * (cs_wsio_move's leave hook); the next step or destroy, on the thread it reaches, takes it. Its
 * thread only. */
void cs_cursor_leave_thread(cs_cursor *c);

/* stepper names the thread stepping c (the server: its stream I/O thread's index): a replay
 * this step starts passes it to the replay pool's wake, so its wakes reach that thread alone. Its
 * thread only. */
void cs_cursor_step(cs_cursor *c, int stepper, cs_step *out);

#endif
