/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/stream/cursor.h"

#include <stdio.h>
#include <string.h>

#include "wire/wire.h"

/* The contract every cursor call checks (cursor.h). */
#define CURSOR_THREAD "cursor: its subscriber's stream I/O thread only (cursor.h)"

void cs_cursor_init(cs_cursor *c, const cs_cursor_env *env, uint32_t start, bool bounded, uint32_t end)
{
    memset(c, 0, sizeof *c);
    cs_owner_bind(&c->owner);
    c->env = *env;
    c->bounded = bounded;
    c->end = end;
    c->next = start;
    c->followed_live = start == 0;
    if (start == 0) {
        cs_snap s;
        cs_broadcast_watch(env->bc, &s);
        if (s.seq != 0)
            c->next = s.end ? (uint64_t)s.seq + 1 : s.seq;
        cs_snap_release(&s);
    }
}

static void unpin(cs_cursor *c)
{
    cs_flow_release(c->pinned);
    c->pinned = NULL;
    c->sent = 0;
    c->sig_sent = false;
    c->mode = CS_CUR_IDLE;
}

/* The cursor no longer reads the ring: its slot (or its place in the queue) goes to others. */
static void leave_slot(cs_cursor *c)
{
    cs_replay_slots_release(c->env.slots, &c->ticket);
    c->catching_up = false;
}

void cs_cursor_destroy(cs_cursor *c)
{
    CS_OWNED(&c->owner, CURSOR_THREAD);
    cs_msg_release(c->held);
    c->held = NULL;
    unpin(c);
    cs_replay_release(c->replay);
    c->replay = NULL;
    leave_slot(c);
}

static void write_msg(cs_step *out, cs_msg *m)
{
    out->kind = CS_STEP_WRITE;
    out->msg = m;
}

static void close_with(cs_step *out, int code, const char *reason)
{
    out->kind = CS_STEP_CLOSE;
    out->code = code;
    snprintf(out->reason, sizeof out->reason, "%s", reason);
}

/* A stampless re-framing of a complete flow's BEGIN or END: same counts and checksum, stamps 0. */
static cs_msg *stampless_begin(uint32_t seq)
{
    cs_msg *m = cs_msg_new(CS_WIRE_BEGIN_LEN);
    if (m)
        m->len = cs_wire_put_begin(m->data, seq, 0);
    return m;
}

static cs_msg *stampless_end(const cs_msg *end)
{
    cs_wire_msg w;
    cs_msg *m = cs_msg_new(CS_WIRE_END_LEN);
    if (!m || cs_wire_decode(end->data, end->len, &w, NULL) != 0) {
        cs_msg_release(m);
        return NULL;
    }
    m->len = cs_wire_put_end(m->data, w.seq, w.chunk_count, w.total_len, 0, w.checksum);
    return m;
}

static void oom(cs_step *out)
{
    out->kind = CS_STEP_DROP;
    cs_err_set(&out->err, 0, "out of memory");
}

/* The end of a ledger: its SIG first when the subscriber asked for signatures and the ledger has
 * one (then false: END goes at the next step), else end (a reference the caller gives up, NULL
 * when out of memory). True when END was written. */
static bool write_tail(cs_cursor *c, cs_step *out, cs_msg *sig, cs_msg *end)
{
    if (c->want_sig && sig && !c->sig_sent) {
        c->sig_sent = true;
        cs_msg_release(end);
        write_msg(out, cs_msg_retain(sig));
        return false;
    }
    c->sig_sent = false;
    if (!end) {
        oom(out);
        return false;
    }
    write_msg(out, end);
    return true;
}

/* STAMPLESS: BEGIN(seq,0), the shared chunks as they are, END re-framed with zero stamps. The
 * flow is complete, so its chunk count and END are final. */
static bool step_stampless(cs_cursor *c, cs_step *out)
{
    cs_flow *f = c->pinned;
    size_t k = c->sent++;
    if (k == 0) {
        cs_msg *m = stampless_begin(f->seq);
        m ? write_msg(out, m) : oom(out);
        return true;
    }
    if (k <= f->nchunks) {
        write_msg(out, cs_msg_retain(cs_flow_chunk(f, k - 1)));
        return true;
    }
    if (write_tail(c, out, f->sig, stampless_end(f->end))) {
        c->next++;
        unpin(c);
    }
    return true;
}

/* A replay that ended before its END: the subscriber is closed with what it means. Out of the
 * ring: 4001 with the bounds now. In a hole: 4002 naming it (everything before it went out; a
 * client can tell it from a ring that moved on and fetch it elsewhere). Could not be read or
 * differs from its record: 1011 naming the ledger, no END, so nothing of it is accepted (the ring's
 * line says what differed). */
static void replay_ended(cs_cursor *c, int rc, const cs_err *err, cs_step *out)
{
    char reason[96];
    uint32_t a = 0, b = 0;
    int code = CS_CLOSE_INTERNAL_ERROR;
    if (rc == CS_REPLAY_NOT_RETAINED) {
        cs_ring_bounds(c->env.ring, &a, &b);
        cs_wire_format_too_far_behind(reason, sizeof reason, a, b);
        code = CS_CLOSE_TOO_FAR_BEHIND;
    } else if (rc == CS_REPLAY_HOLE) {
        if (!cs_ring_hole(c->env.ring, (uint32_t)c->next, &a, &b)) /* pruned since: the ledger alone */
            a = b = (uint32_t)c->next;
        cs_wire_format_ring_hole(reason, sizeof reason, a, b);
        code = CS_CLOSE_RING_HOLE;
    } else {
        snprintf(reason, sizeof reason, "ring ledger %u %s", (unsigned)c->next,
                 rc == CS_REPLAY_CORRUPT ? "failed its integrity check" : "could not be read");
    }
    cs_replay_release(c->replay);
    c->replay = NULL;
    c->mode = CS_CUR_IDLE;
    close_with(out, code, reason);
    if (code == CS_CLOSE_INTERNAL_ERROR)
        out->err = *err;
}

/* REPLAY: pop the next prepared message. Returns false when the step must be decided again. */
static bool step_replay(cs_cursor *c, cs_step *out)
{
    cs_msg *m = NULL;
    cs_err err;
    if (c->held) { /* the END behind its SIG */
        write_msg(out, c->held);
        c->held = NULL;
        return true;
    }
    int rc = cs_replay_next(c->replay, &m, &err);
    switch (rc) {
    case CS_REPLAY_MSG:
        if (c->want_sig && m->data[1] == CS_WIRE_TYPE_END) {
            cs_msg *sig = cs_replay_sig(c->replay);
            if (sig) {
                c->held = m;
                m = sig;
            }
        }
        write_msg(out, m);
        return true;
    case CS_REPLAY_PENDING:
        out->kind = CS_STEP_WAIT;
        return true;
    case CS_REPLAY_DONE:
        cs_replay_release(c->replay);
        c->replay = NULL;
        c->mode = CS_CUR_IDLE;
        c->next++;
        return false;
    default:
        replay_ended(c, rc, &err, out);
        return true;
    }
}

/* A catch-up reads the ring under a replay slot. False when none is free: the cursor then waits,
 * holding no flow and no replay, until a freed slot is handed over and wakes it. Retention is
 * looked at again when it starts (4001 then, if its ledger is gone meanwhile). */
static bool take_slot(cs_cursor *c, cs_step *out)
{
    if (c->followed_live)
        return true;
    size_t position;
    if (!cs_replay_slots_acquire(c->env.slots, &c->ticket, &position)) {
        out->replay_queued = position != 0;
        out->queue_position = position;
        out->kind = CS_STEP_WAIT;
        c->mode = CS_CUR_QUEUED;
        return false;
    }
    out->replay_started = !c->catching_up;
    c->catching_up = true;
    return true;
}

/* Nothing to send: either wait for the next publish, or the stream is over. */
static void sleep_or_close(const cs_cursor *c, const cs_snap *s, cs_step *out)
{
    if (!s->ended) {
        out->kind = CS_STEP_WAIT;
        return;
    }
    if (s->failed)
        close_with(out, CS_CLOSE_INTERNAL_ERROR, CS_REASON_SOURCE_FAILED);
    else if (c->bounded && c->next <= c->end)
        close_with(out, CS_CLOSE_GOING_AWAY, CS_REASON_RANGE_INCOMPLETE);
    else
        close_with(out, CS_CLOSE_NORMAL, CS_REASON_SOURCE_ENDED);
}

/* One decision against a snapshot. Returns false when it changed state without producing a step,
 * so the caller decides again. */
static bool decide(cs_cursor *c, const cs_snap *s, int stepper, cs_step *out)
{
    if (c->next == 0)
        c->next = s->seq;
    if (c->next != 0 && c->bounded && c->next > c->end) {
        close_with(out, CS_CLOSE_NORMAL, "");
        return true;
    }

    if (c->next != 0 && c->next == s->seq) {
        c->followed_live = true;
        c->redelivering = false;
        bool begun = c->mode == CS_CUR_LIVE;
        if (!begun && s->end) {
            /* A completed flow reached late: served without stamps, it measures nothing. */
            c->mode = CS_CUR_STAMPLESS;
            c->pinned = cs_flow_retain(s->flow);
            c->sent = 0;
            return step_stampless(c, out);
        }
        if (!begun || c->pinned != s->flow) {
            unpin(c);
            c->mode = CS_CUR_LIVE;
            c->pinned = cs_flow_retain(s->flow);
            write_msg(out, cs_msg_retain(s->flow->begin));
            return true;
        }
        if (c->sent < s->nchunks) {
            write_msg(out, cs_msg_retain(cs_flow_chunk(s->flow, c->sent++)));
            return true;
        }
        if (s->end) {
            if (write_tail(c, out, s->flow->sig, cs_msg_retain(s->end))) {
                c->next++;
                unpin(c);
            }
            return true;
        }
        out->kind = CS_STEP_WAIT;
        return true;
    }

    if (c->next != 0 && (c->next < s->seq || s->seq == 0)) {
        if (c->mode == CS_CUR_LIVE) {
            /* The flow being written was replaced by the next BEGIN. Only its END may still go
             * out; a subscriber still mid-ledger has spent its budget and gets the ledger again,
             * complete and stampless, from the ring. */
            size_t nchunks;
            cs_msg *end;
            cs_broadcast_flow_state(c->env.bc, c->pinned, &nchunks, &end);
            if (end && c->sent == nchunks) {
                if (write_tail(c, out, c->pinned->sig, cs_msg_retain(end))) {
                    c->next++;
                    unpin(c);
                }
                return true;
            }
            out->abandoned = true;
            c->abandoned++;
            c->abandoned_seq = c->pinned->seq;
            atomic_fetch_add(c->env.live_abandons, 1);
            unpin(c);
        }
        uint32_t oldest, latest;
        if (!cs_ring_bounds(c->env.ring, &oldest, &latest) || c->next > latest) {
            sleep_or_close(c, s, out);
            return true;
        }
        if (!take_slot(c, out))
            return true;
        /* A catch-up holds its ledger under its slot; a redelivery, which has no slot, holds
         * none while its subscriber does not read (replay.h). */
        c->replay = cs_replay_start(c->env.replays, (uint32_t)c->next, stepper, !c->followed_live);
        if (!c->replay) {
            oom(out);
            return true;
        }
        out->fell_behind = c->followed_live && !c->redelivering && !out->abandoned;
        c->redelivering = c->followed_live;
        c->mode = CS_CUR_REPLAY;
        return false;
    }

    sleep_or_close(c, s, out);
    return true;
}

/* LIVE inside the flow that is still current: the next chunk, the END, or a wait, from the flow's
 * published state read without the broadcaster's lock. False when the flow was replaced or the
 * stream finished: decide() against a snapshot then. */
static bool step_live(cs_cursor *c, cs_step *out)
{
    size_t nchunks;
    cs_msg *end;
    if (!cs_broadcast_peek(c->env.bc, c->pinned, &nchunks, &end))
        return false;
    if (c->sent < nchunks) {
        write_msg(out, cs_msg_retain(cs_flow_chunk(c->pinned, c->sent++)));
        return true;
    }
    if (end) {
        if (write_tail(c, out, c->pinned->sig, cs_msg_retain(end))) {
            c->next++;
            unpin(c);
        }
        return true;
    }
    out->kind = CS_STEP_WAIT;
    return true;
}

/* The state machine's invariants, checked around every step in every build: each guards a
 * reference (a pinned flow, a replay, a held END) that a wrong mode would leak, release twice or
 * send from, or the replay slot a catch-up must hold. */
static void check_state(const cs_cursor *c)
{
    CS_CHECK((c->mode == CS_CUR_LIVE || c->mode == CS_CUR_STAMPLESS) == (c->pinned != NULL),
             "cursor: a pinned flow exactly in LIVE and STAMPLESS");
    CS_CHECK((c->mode == CS_CUR_REPLAY) == (c->replay != NULL), "cursor: a replay exactly in REPLAY");
    CS_CHECK(!c->held || c->mode == CS_CUR_REPLAY, "cursor: a held END only in REPLAY");
    CS_CHECK(!c->sig_sent || c->mode == CS_CUR_LIVE || c->mode == CS_CUR_STAMPLESS,
             "cursor: a SIG sent ahead of its END only in LIVE and STAMPLESS");
    CS_CHECK(c->mode != CS_CUR_QUEUED || !c->followed_live, "cursor: once live, never queued again");
    CS_CHECK(c->mode != CS_CUR_REPLAY || c->catching_up || c->followed_live, "cursor: a catch-up holds a slot");
}

void cs_cursor_leave_thread(cs_cursor *c)
{
    cs_owner_release(&c->owner, CURSOR_THREAD);
}

void cs_cursor_step(cs_cursor *c, int stepper, cs_step *out)
{
    CS_OWNED(&c->owner, CURSOR_THREAD);
    check_state(c);
    memset(out, 0, sizeof *out);
    bool decided = false;
    /* Bounded: each pass either produces a step or advances the mode (replay done → idle). */
    for (int pass = 0; pass < 4 && !decided; pass++) {
        if (c->mode == CS_CUR_STAMPLESS) {
            decided = step_stampless(c, out);
        } else if (c->mode == CS_CUR_REPLAY) {
            decided = step_replay(c, out);
        } else if (c->mode == CS_CUR_LIVE && step_live(c, out)) {
            decided = true;
        } else {
            if (c->mode == CS_CUR_QUEUED)
                c->mode = CS_CUR_IDLE; /* ask again: the slot may have been granted */
            cs_snap s;
            cs_broadcast_watch(c->env.bc, &s);
            decided = decide(c, &s, stepper, out);
            cs_snap_release(&s);
        }
    }
    if (!decided)
        out->kind = CS_STEP_WAIT;
    /* Following live, sleeping ahead of the ring or closing: the catch-up is over. A replay that
     * just finished keeps the slot only if the next ledger comes from the ring too. */
    if (c->mode != CS_CUR_REPLAY && c->mode != CS_CUR_QUEUED)
        leave_slot(c);
    check_state(c);
}
