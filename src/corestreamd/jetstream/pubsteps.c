/* SPDX-License-Identifier: Apache-2.0 */
/* What the JetStream publisher's thread publishes next (publisher_internal.h): the ledger at its
 * position, from the live flow while it is current, else from the ring, item by item under its
 * Nats-Msg-Id (naming.h), and, after a failure, where the run ends in the stream. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/clock.h"
#include "common/log.h"
#include "corestream/wire.h"
#include "corestreamd/jetstream/publisher_internal.h"
#include "corestreamd/jetstream/stream.h"
#include "wire/wire.h"

void pub_drop_sources(cs_js_publisher *p)
{
    cs_flow_release(p->flow);
    p->flow = NULL;
    cs_msg_release(p->held);
    p->held = NULL;
    cs_msg_release(p->held_end);
    p->held_end = NULL;
    if (p->rp)
        cs_replay_release(p->rp);
    p->rp = NULL;
}

void pub_note_behind(cs_js_publisher *p, bool behind, const char *reason, uint32_t live)
{
    if (behind == p->behind)
        return;
    p->behind = behind;
    atomic_store(&p->behind_flag, behind);
    if (behind) {
        p->behind_since = cs_mono_ns();
        atomic_fetch_add(&p->behind_episodes, 1);
        CS_LOG(CS_LOG_WARN, "jetstream publisher behind", KV_S("reason", reason), KV_U("ledger", p->pos.seq),
               KV_U("live", live), KV_S("stream", p->stream));
    } else {
        CS_LOG(CS_LOG_INFO, "jetstream publisher caught up", KV_U("ledger", p->pos.seq),
               KV_D("behind_for", cs_mono_ns() - p->behind_since), KV_S("stream", p->stream));
    }
}

static int publish(cs_js_publisher *p, uint32_t item, const cs_msg *m)
{
    if (!atomic_load(&p->connected) || atomic_load(&p->resync))
        return PUB_FAIL;
    char subj[CS_JS_SUBJECT_MAX], id[CS_JS_SUBJECT_MAX];
    cs_js_subject(subj, sizeof subj, p->stream, p->run, p->pos.seq);
    natsMsg *nm = NULL;
    natsStatus s = cs_js_msg_id(id, sizeof id, p->run, p->pos.seq, item, p->id_key, p->gen) == 0
                       ? natsMsg_Create(&nm, subj, NULL, (const char *)m->data, (int)m->len)
                       : NATS_NO_MEMORY;
    if (s == NATS_OK) {
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MsgId = id;
        /* No MaxWait: a per-message deadline makes nats.c re-arm its timer thread on every
         * publish (two thread wake-ups per message); the publisher thread watches the acks
         * itself (check_acks). */
        s = js_PublishMsgAsync(p->js, &nm, &po);
    }
    natsMsg_Destroy(nm);
    if (s == NATS_OK) {
        p->js_used = true;
        atomic_fetch_add(&p->published, 1);
        uint64_t at = pub_pack((cs_js_pos){p->pos.seq, item}) + 1;
        if (at > p->sent_high)
            p->sent_high = at;
        return PUB_OK;
    }
    if (s == NATS_TIMEOUT) {
        atomic_fetch_add(&p->stalls, 1);
        return PUB_STALL;
    }
    /* Anything else (the connection went, a buffer ran out): ask the stream again. */
    CS_LOG(CS_LOG_DEBUG, "jetstream publish refused", KV_S("status", natsStatus_GetText(s)),
           KV_U("ledger", p->pos.seq), KV_U("item", item));
    atomic_store(&p->resync, true);
    return PUB_FAIL;
}

static void ledger_done(cs_js_publisher *p, bool from_ring)
{
    atomic_fetch_add(&p->ledgers, 1);
    if (from_ring)
        atomic_fetch_add(&p->ring_ledgers, 1);
    p->pos = (cs_js_pos){p->pos.seq + 1, 0};
}

/* Publishes pos from the pinned live flow f as far as it goes. */
static int step_flow(cs_js_publisher *p, cs_flow *f)
{
    for (;;) {
        size_t n;
        cs_msg *end;
        cs_broadcast_flow_state(p->bc, f, &n, &end);
        uint32_t item = p->pos.item;
        cs_msg *m = NULL;
        /* A signed ledger's SIG goes between its last chunk and END (f->sig is final once end is). */
        uint32_t end_item = end ? (uint32_t)n + 1 + (f->sig != NULL) : 0;
        if (item == CS_JS_ITEM_END && end && f->sig)
            item = p->pos.item = end_item; /* resumed right after the stored SIG */
        if (item == 0)
            m = f->begin;
        else if (item <= n)
            m = cs_flow_chunk(f, item - 1);
        else if (end && f->sig && item == n + 1)
            m = f->sig;
        else if (end && item == end_item)
            m = end;
        else if (end) {
            /* The stream holds more of this ledger than the flow has: not this run's bytes. */
            CS_LOG(CS_LOG_ERROR, "jetstream stream gap", KV_U("from", p->pos.seq), KV_U("to", p->pos.seq),
                   KV_S("detail", "the stream's copy of this ledger has more chunks than the source emitted"));
            atomic_fetch_add(&p->gaps, 1);
            ledger_done(p, false);
            return STEP_PROGRESS;
        } else
            return STEP_WAIT_FLOW;
        int r = publish(p, item, m);
        if (r == PUB_STALL)
            return STEP_PROGRESS;
        if (r == PUB_FAIL)
            return STEP_WAIT_KICK;
        if (m == end) {
            ledger_done(p, false);
            cs_flow_release(p->flow);
            p->flow = NULL;
            return STEP_PROGRESS;
        }
        p->pos.item++;
    }
}

/* Publishes pos from the ring. */
static int step_ring(cs_js_publisher *p)
{
    if (!p->rp) {
        p->rp = cs_replay_start(p->replays, p->pos.seq, 0, true);
        p->rp_item = 0;
        if (!p->rp)
            return STEP_WAIT_KICK; /* out of memory: try again shortly */
    }
    for (;;) {
        cs_msg *m = p->held;
        uint32_t item = p->held_item;
        p->held = NULL;
        if (!m && p->held_end) {
            m = p->held_end;
            item = p->held_end_item;
            p->held_end = NULL;
        }
        if (!m) {
            cs_err e;
            int r = cs_replay_next(p->rp, &m, &e);
            if (r == CS_REPLAY_PENDING)
                return STEP_WAIT_KICK;
            if (r == CS_REPLAY_NOT_RETAINED || r == CS_REPLAY_DONE) {
                /* Pruned or reset under us: the next step finds it missing and says so. */
                cs_replay_release(p->rp);
                p->rp = NULL;
                return STEP_PROGRESS;
            }
            if (r == CS_REPLAY_FAILED || r == CS_REPLAY_CORRUPT || r == CS_REPLAY_HOLE) {
                CS_LOG(CS_LOG_ERROR, "jetstream stream gap", KV_U("from", p->pos.seq), KV_U("to", p->pos.seq),
                       KV_S("detail", e.msg));
                atomic_fetch_add(&p->gaps, 1);
                cs_replay_release(p->rp);
                p->rp = NULL;
                ledger_done(p, true);
                return STEP_PROGRESS;
            }
            item = p->rp_item++;
            cs_msg *sig = m->data[1] == CS_WIRE_TYPE_END ? cs_replay_sig(p->rp) : NULL;
            if (sig) { /* a signed ledger: its SIG first, END behind it */
                p->held_end = m;
                p->held_end_item = item + 1;
                m = sig;
            } else if (p->pos.item == CS_JS_ITEM_END && m->data[1] == CS_WIRE_TYPE_END) {
                item++; /* the stream has a SIG this ring copy lacks: END still goes after it */
                p->pos.item = item;
            }
            if (item < p->pos.item) {
                cs_msg_release(m); /* already in the stream */
                continue;
            }
        }
        bool is_end = m->len >= 2 && m->data[1] == CS_WIRE_TYPE_END;
        int r = publish(p, item, m);
        if (r != PUB_OK) {
            p->held = m;
            p->held_item = item;
            return r == PUB_STALL ? STEP_PROGRESS : STEP_WAIT_KICK;
        }
        cs_msg_release(m);
        if (is_end) {
            cs_replay_release(p->rp);
            p->rp = NULL;
            ledger_done(p, true);
            return STEP_PROGRESS;
        }
        p->pos.item++;
    }
}

int pub_step(cs_js_publisher *p, const cs_snap *snap)
{
    if (snap->flow && !p->first_live)
        p->first_live = snap->seq;
    if (!p->have_pos) {
        /* A run new to the stream starts with the first flow it sees: history is not owed. */
        if (!snap->flow)
            return STEP_WAIT_FLOW;
        p->pos = (cs_js_pos){snap->seq, 0};
        p->have_pos = true;
    }
    if (p->flow && p->flow->seq != p->pos.seq) {
        cs_flow_release(p->flow);
        p->flow = NULL;
    }
    if (!p->flow && snap->flow && snap->seq == p->pos.seq && !p->rp) {
        /* Live from the current flow (a replay already under way for this ledger finishes
         * from the ring, so item numbering never changes source mid-ledger needlessly). */
        p->flow = cs_flow_retain(snap->flow);
    }
    pub_note_behind(p, snap->flow && p->pos.seq < snap->seq, "live flow ahead", snap->seq);
    if (p->flow)
        return step_flow(p, p->flow);
    if (p->rp)
        return step_ring(p);
    /* The ring serves only ledgers this process emitted and has already replaced with a later
     * flow (each is in the ring before the next begins): what a ring holds from before the start
     * may be another run's bytes until the ring records the identity of the run that wrote it. */
    uint32_t oldest, latest;
    bool any = cs_ring_bounds(p->ring, &oldest, &latest);
    bool ours = p->first_live && p->pos.seq >= p->first_live && snap->flow && p->pos.seq < snap->seq;
    if (ours && any && p->pos.seq >= oldest && p->pos.seq <= latest)
        return step_ring(p);
    if (snap->flow && snap->seq > p->pos.seq) {
        uint32_t next = snap->seq;
        uint32_t floor = oldest > p->first_live ? oldest : p->first_live;
        if (any && floor > p->pos.seq && floor < snap->seq && floor <= latest)
            next = floor;
        CS_LOG(CS_LOG_ERROR, "jetstream stream gap", KV_U("from", p->pos.seq), KV_U("to", next - 1),
               KV_S("detail", p->pos.item ? "not in the ring; the first is partial in the stream"
                                          : "not in the ring; the stream skips them"),
               KV_S("stream", p->stream));
        atomic_fetch_add(&p->gaps, 1);
        p->pos = (cs_js_pos){next, 0};
        return STEP_PROGRESS;
    }
    bool source_behind = snap->flow && (snap->seq + 1 < p->pos.seq || (snap->seq + 1 == p->pos.seq && !snap->end));
    if (source_behind && p->ahead_logged != p->pos.seq) {
        p->ahead_logged = p->pos.seq;
        CS_LOG(CS_LOG_INFO, "jetstream stream is ahead of the source", KV_U("source", snap->seq),
               KV_U("resume_ledger", p->pos.seq), KV_S("stream", p->stream));
    }
    return STEP_WAIT_FLOW;
}

/* A fresh id generation (naming.h): random, never 0. */
static uint64_t fresh_gen(void)
{
    uint64_t g = 0;
    if (getrandom(&g, sizeof g, 0) != (ssize_t)sizeof g)
        g = (uint64_t)cs_wall_ns() ^ (uint64_t)cs_mono_ns() << 17;
    return g ? g : 1;
}

/* The republish a duplicate ack asked for since the last resync: true with the ledger and the id
 * that was taken. */
static bool take_republish(cs_js_publisher *p, uint32_t *seq, char *id, size_t len)
{
    pthread_mutex_lock(&p->mu);
    bool want = p->republish_want;
    *seq = p->republish_seq;
    snprintf(id, len, "%s", p->republish_id);
    p->republish_want = false;
    pthread_mutex_unlock(&p->mu);
    return want;
}

/* Ledger seq from its BEGIN again, under a fresh generation of ids: the stream lacks a message of
 * it while what came after went on, either dropped as a duplicate of someone else's (id taken) or
 * refused while later ones were stored (id NULL: an R3 stream electing a leader). Consumers get
 * the ledger whole, then the ledgers after it again. At most CS_JS_REPUBLISH_MAX times in a row
 * for one ledger: past that the ledger is given up (a taker racing every fresh id, or a stream
 * that keeps refusing). */
static void republish(cs_js_publisher *p, uint32_t seq, const char *id)
{
    unsigned attempt = seq == p->republished_seq ? p->republish_attempts + 1 : 1;
    if (attempt > CS_JS_REPUBLISH_MAX && id) {
        CS_LOG(CS_LOG_ERROR, "jetstream message id taken again; the ledger is not republished", KV_S("msg_id", id),
               KV_U("ledger", seq), KV_U("attempts", CS_JS_REPUBLISH_MAX), KV_S("stream", p->stream),
               KV_S("detail", "edges report the ledger as a gap; find who holds the id secret"));
        return;
    }
    if (attempt > CS_JS_REPUBLISH_MAX) {
        CS_LOG(CS_LOG_ERROR, "jetstream stream gap", KV_U("from", seq), KV_U("to", seq),
               KV_S("detail", "a publish failed while later messages were stored, again after republishing"),
               KV_S("stream", p->stream));
        atomic_fetch_add(&p->gaps, 1);
        return;
    }
    p->republished_seq = seq;
    p->republish_attempts = attempt;
    p->gen = fresh_gen();
    p->pos = (cs_js_pos){seq, 0};
    p->have_pos = true;
    atomic_fetch_add(&p->republishes, 1);
    CS_LOG(CS_LOG_WARN, "jetstream publisher republishing a ledger under fresh ids", KV_U("ledger", seq),
           KV_S("reason", id ? "id taken" : "refused before later messages were stored"),
           KV_S("taken_msg_id", id ? id : ""), KV_U("attempt", attempt), KV_S("stream", p->stream));
}

/* Re-reads where the run ends in the stream and continues right after it, or from the BEGIN of a
 * ledger the stream holds incomplete (an id taken, or a publish refused before later ones were
 * stored). */
int pub_resync(cs_js_publisher *p)
{
    atomic_store(&p->resync, false);
    /* What was published before may be published again from here on: resends, not foreign. */
    atomic_store(&p->resend_upto, p->sent_high);
    pub_drop_pending(p);
    bool found;
    cs_js_pos next;
    cs_err e;
    if (cs_js_stream_resume_pos(p->js, p->stream, p->run, &found, &next, &e) != 0) {
        CS_LOG(CS_LOG_DEBUG, "jetstream resync failed", KV_S("error", e.msg));
        atomic_store(&p->resync, true);
        return -1;
    }
    atomic_fetch_add(&p->resyncs, 1);
    uint64_t failed = atomic_exchange(&p->first_failed, UINT64_MAX);
    /* A refused publish with later messages stored: its ledger is incomplete in the stream. */
    bool hole = found && failed != UINT64_MAX && pub_pack(next) > failed + 1;
    pub_drop_sources(p);
    if (found) {
        p->pos = next;
        p->have_pos = true;
    }
    uint32_t seq;
    char id[CS_JS_SUBJECT_MAX];
    bool taken = take_republish(p, &seq, id, sizeof id);
    if (hole && (!taken || (uint32_t)(failed >> 32) < seq))
        republish(p, (uint32_t)(failed >> 32), NULL);
    else if (taken)
        republish(p, seq, id);
    CS_LOG(CS_LOG_INFO, "jetstream publisher resuming", KV_U("ledger", p->pos.seq), KV_U("item", p->pos.item),
           KV_B("stream_has_run", found));
    return 0;
}
