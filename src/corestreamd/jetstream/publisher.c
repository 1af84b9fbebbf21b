#include "corestreamd/jetstream/publisher.h"

#include <nats/nats.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "corestream/wire.h"
#include "corestreamd/jetstream/connect.h"
#include "corestreamd/jetstream/library.h"
#include "corestreamd/jetstream/naming.h"
#include "corestreamd/jetstream/stream.h"
#include "corestreamd/stream/replay.h"
#include "wire/wire.h"

/* How long an ack may take before nats.c reports it as failed (then the position is re-read). */
#define ACK_WAIT_MS 5000
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
    pthread_mutex_t mu; /* guards kicks and the stop request */
    pthread_cond_t cond;
    uint64_t kicks;
    bool stopping;
    bool closed; /* nats.c delivered nc's closed callback: no callback of nc runs any more */
    int64_t drain_deadline; /* monotonic ns, valid once stopping */

    atomic_bool connected;
    atomic_bool resync;
    /* The lowest position whose publish failed since the last resync (a packed seq<<32|item;
     * UINT64_MAX when none): a stream that has since stored later messages has lost it. */
    atomic_uint_fast64_t first_failed;

    atomic_uint_fast64_t published, acked, duplicates, ack_failures, stalls, ledgers, ring_ledgers,
        behind_episodes, gaps, resyncs, foreign_duplicates;
    /* Resends: every position up to this one (packed + 1; 0: none) was published by this process
     * before its last resync, so the server may rightly call a publish of it a duplicate. Any
     * other duplicate is of a message this process never sent: another publisher's. */
    atomic_uint_fast64_t resend_upto;
    uint64_t sent_high; /* publisher thread: the highest position published (packed + 1) */
    atomic_bool behind_flag;

    /* The publisher thread's own state. */
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

static uint64_t pack(cs_js_pos p)
{
    return (uint64_t)p.seq << 32 | p.item;
}

static void kick(cs_js_publisher *p)
{
    pthread_mutex_lock(&p->mu);
    p->kicks++;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->mu);
}

/* Waits for a kick after `seen`, at most timeout_ns. */
static void wait_kick(cs_js_publisher *p, uint64_t seen, int64_t timeout_ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = ts.tv_nsec + timeout_ns;
    ts.tv_sec += ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    pthread_mutex_lock(&p->mu);
    while (p->kicks == seen) {
        if (pthread_cond_timedwait(&p->cond, &p->mu, &ts) != 0)
            break;
    }
    pthread_mutex_unlock(&p->mu);
}

static uint64_t kicks_now(cs_js_publisher *p)
{
    pthread_mutex_lock(&p->mu);
    uint64_t k = p->kicks;
    pthread_mutex_unlock(&p->mu);
    return k;
}

/* ---- nats.c callbacks (its threads) ---------------------------------------------------------- */

static void on_disconnected(natsConnection *nc, void *closure)
{
    (void)nc;
    cs_js_publisher *p = closure;
    atomic_store(&p->connected, false);
    kick(p);
}

static void on_closed(natsConnection *nc, void *closure)
{
    (void)nc;
    cs_js_publisher *p = closure;
    atomic_store(&p->connected, false);
    pthread_mutex_lock(&p->mu);
    p->closed = true;
    p->kicks++;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->mu);
}

/* The position a published message stands for ({0,0} when it does not decode). */
static cs_js_pos msg_pos(natsMsg *msg)
{
    cs_js_pos at = {0, 0};
    cs_wire_msg w;
    if (msg && cs_wire_decode((const uint8_t *)natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg), &w, NULL) ==
                   0) {
        at.seq = w.seq;
        at.item = w.type == CS_WIRE_TYPE_BEGIN   ? 0
                  : w.type == CS_WIRE_TYPE_CHUNK ? w.chunk_idx + 1
                  : w.type == CS_WIRE_TYPE_SIG   ? CS_JS_ITEM_END - 1 /* before its END */
                                                 : CS_JS_ITEM_END;
    }
    return at;
}

/* A duplicate ack for a message this process publishes for the first time: the stream already
 * held its id from someone else, and dropped the core's genuine message. */
static void check_duplicate(cs_js_publisher *p, natsMsg *msg, const jsPubAck *pa)
{
    atomic_fetch_add(&p->duplicates, 1);
    if (pack(msg_pos(msg)) < atomic_load(&p->resend_upto))
        return; /* a resend of this process's own */
    atomic_fetch_add(&p->foreign_duplicates, 1);
    const char *id = NULL;
    if (natsMsgHeader_Get(msg, "Nats-Msg-Id", &id) != NATS_OK)
        id = "";
    CS_LOG(CS_LOG_WARN, "jetstream stream already held a message id this process never sent",
           KV_S("subject", natsMsg_GetSubject(msg)), KV_S("msg_id", id), KV_U("stream_seq", pa->Sequence),
           KV_S("stream", p->stream),
           KV_S("detail", "another publisher used the core's subjects and ids: the stream dropped the core's message"));
}

static void on_ack(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *closure)
{
    (void)js;
    cs_js_publisher *p = closure;
    if (pa) {
        atomic_fetch_add(&p->acked, 1);
        if (pa->Duplicate)
            check_duplicate(p, msg, pa);
    } else if (pae) {
        atomic_fetch_add(&p->ack_failures, 1);
        /* A timed-out ack may still be stored; only a refusal is known to be missing. */
        if (pae->Err == NATS_TIMEOUT) {
            atomic_store(&p->resync, true);
            kick(p);
            natsMsg_Destroy(msg);
            return;
        }
        uint64_t v = pack(msg_pos(msg)), cur = atomic_load(&p->first_failed);
        while (v < cur && !atomic_compare_exchange_weak(&p->first_failed, &cur, v))
            ;
        atomic_store(&p->resync, true);
        kick(p);
    }
    natsMsg_Destroy(msg);
}

static void on_replay_ready(void *ctx, int arg)
{
    (void)arg; /* one consumer: this publisher's thread */
    kick(ctx);
}

/* ---- the connection ---------------------------------------------------------------------------- */

/* Opens a connection and its JetStream context into p->nc and p->js. On failure *what names the
 * step ("connect to", "open JetStream on") and whatever was opened stays for close_connection. */
static natsStatus open_connection(cs_js_publisher *p, const char **what)
{
    *what = "connect to";
    natsStatus s = natsConnection_Connect(&p->nc, p->opts);
    if (s != NATS_OK) {
        p->nc = NULL;
        return s;
    }
    *what = "open JetStream on";
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = 5000;
    jo.PublishAsync.MaxPending = p->cfg.max_pending;
    jo.PublishAsync.AckHandler = on_ack;
    jo.PublishAsync.AckHandlerClosure = p;
    jo.PublishAsync.StallWait = STALL_WAIT_MS;
    s = natsConnection_JetStream(&p->js, p->nc, &jo);
    if (s != NATS_OK)
        p->js = NULL;
    p->js_used = false;
    return s;
}

/* Closes p->nc, when there is one, and waits (at most CLOSE_WAIT_NS) for its closed callback,
 * which nats.c runs on its own thread after Close returns: after it no callback of that
 * connection runs, so the next connection can share the closure. */
static void close_connection(cs_js_publisher *p)
{
    jsCtx_Destroy(p->js);
    p->js = NULL;
    if (!p->nc)
        return;
    natsConnection_Close(p->nc);
    int64_t until = cs_mono_ns() + CLOSE_WAIT_NS;
    for (;;) {
        uint64_t seen = kicks_now(p);
        pthread_mutex_lock(&p->mu);
        bool closed = p->closed;
        pthread_mutex_unlock(&p->mu);
        if (closed || cs_mono_ns() >= until)
            break;
        wait_kick(p, seen, POLL_NS);
    }
    natsConnection_Destroy(p->nc);
    p->nc = NULL;
    pthread_mutex_lock(&p->mu);
    p->closed = false;
    pthread_mutex_unlock(&p->mu);
}

/* After a loss, on the publisher thread: drops what is left of the old connection and tries once
 * to open a new one. nats.c's own reconnect would send the first message published while it was
 * reconnecting on the new connection, after the ones the old one lost: a hole in the stream. A
 * new connection starts with a resync instead, so what the server stores stays, connection by
 * connection, a prefix of what was sent. */
static bool reconnect(cs_js_publisher *p)
{
    close_connection(p);
    const char *what;
    natsStatus s = open_connection(p, &what);
    if (s != NATS_OK) {
        /* Refused (credentials, TLS) is what an operator must fix: said once per outage. */
        char cause[CS_ERR_MSG_MAX / 2];
        bool loud = cs_js_refused(s) && !p->refusal_logged;
        CS_LOG(loud ? CS_LOG_WARN : CS_LOG_DEBUG, "jetstream reconnect failed", KV_S("step", what),
               KV_S("error", cs_js_connect_cause(s, p->tls, cause, sizeof cause)));
        p->refusal_logged = p->refusal_logged || loud;
        close_connection(p);
        return false;
    }
    p->refusal_logged = false;
    atomic_store(&p->resync, true);
    atomic_store(&p->connected, true);
    return true;
}

/* ---- the publisher thread --------------------------------------------------------------------- */

static void drop_sources(cs_js_publisher *p)
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

static void note_behind(cs_js_publisher *p, bool behind, const char *reason, uint32_t live)
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
    cs_js_msg_id(id, sizeof id, p->run, p->pos.seq, item);
    natsMsg *nm = NULL;
    natsStatus s = natsMsg_Create(&nm, subj, NULL, (const char *)m->data, (int)m->len);
    if (s == NATS_OK) {
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MsgId = id;
        po.MaxWait = ACK_WAIT_MS;
        s = js_PublishMsgAsync(p->js, &nm, &po);
    }
    natsMsg_Destroy(nm);
    if (s == NATS_OK) {
        p->js_used = true;
        atomic_fetch_add(&p->published, 1);
        uint64_t at = pack((cs_js_pos){p->pos.seq, item}) + 1;
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
        p->rp = cs_replay_start(p->replays, p->pos.seq, 0);
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
            if (r == CS_REPLAY_FAILED) {
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

static int step(cs_js_publisher *p, const cs_snap *snap)
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
    note_behind(p, snap->flow && p->pos.seq < snap->seq, "live flow ahead", snap->seq);
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

/* Re-reads where the run ends in the stream and continues right after it. */
static int resync(cs_js_publisher *p)
{
    atomic_store(&p->resync, false);
    /* What was published before may be published again from here on: resends, not foreign. */
    atomic_store(&p->resend_upto, p->sent_high);
    natsMsgList pending;
    if (p->js_used && js_PublishAsyncGetPendingList(&pending, p->js) == NATS_OK)
        natsMsgList_Destroy(&pending); /* what landed is in the stream; the rest is republished */
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
    if (found && failed != UINT64_MAX && pack(next) > failed + 1) {
        CS_LOG(CS_LOG_ERROR, "jetstream stream gap", KV_U("from", (uint32_t)(failed >> 32)),
               KV_U("to", (uint32_t)(failed >> 32)),
               KV_S("detail", "a publish failed while later messages were stored"), KV_S("stream", p->stream));
        atomic_fetch_add(&p->gaps, 1);
    }
    drop_sources(p);
    if (found) {
        p->pos = next;
        p->have_pos = true;
    }
    CS_LOG(CS_LOG_INFO, "jetstream publisher resuming", KV_U("ledger", p->pos.seq), KV_U("item", p->pos.item),
           KV_B("stream_has_run", found));
    return 0;
}

static void *publisher_main(void *arg)
{
    cs_js_publisher *p = arg;
    for (;;) {
        uint64_t seen = kicks_now(p);
        pthread_mutex_lock(&p->mu);
        bool stopping = p->stopping;
        int64_t deadline = p->drain_deadline;
        pthread_mutex_unlock(&p->mu);
        if (stopping && cs_mono_ns() >= deadline)
            break;
        if (!atomic_load(&p->connected)) {
            cs_snap live;
            cs_broadcast_watch(p->bc, &live);
            note_behind(p, true, "disconnected", live.seq);
            cs_snap_release(&live);
            int64_t now = cs_mono_ns();
            if (now >= p->next_connect && reconnect(p))
                continue;
            if (now >= p->next_connect)
                p->next_connect = now + RECONNECT_WAIT_NS;
            wait_kick(p, seen, POLL_NS);
            continue;
        }
        if (atomic_load(&p->resync) && resync(p) != 0) {
            wait_kick(p, seen, POLL_NS);
            continue;
        }
        cs_snap snap;
        cs_broadcast_watch(p->bc, &snap);
        int r = step(p, &snap);
        if (r == STEP_WAIT_FLOW) {
            if (snap.ended) {
                /* Nothing more will come: done once stopping, else wait for the stop. */
                cs_snap_release(&snap);
                if (stopping) {
                    p->drained = true;
                    break;
                }
                wait_kick(p, seen, POLL_NS);
                continue;
            }
            cs_broadcast_wait(p->bc, snap.gen, POLL_NS);
        } else if (r == STEP_WAIT_KICK) {
            wait_kick(p, seen, POLL_NS);
        }
        cs_snap_release(&snap);
    }
    drop_sources(p);
    return NULL;
}

/* ---- life cycle ------------------------------------------------------------------------------- */

static int nats_fail(cs_err *err, const char *what, const char *url, natsStatus s, bool tls)
{
    char cause[CS_ERR_MSG_MAX / 2];
    return cs_err_set(err, 0, "jetstream: %s %s: %s", what, url, cs_js_connect_cause(s, tls, cause, sizeof cause));
}

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

int cs_js_publisher_new(cs_js_publisher **out, const cs_js_config *cfg, cs_broadcaster *bc, cs_ring *ring,
                        cs_err *err)
{
    *out = NULL;
    cs_js_publisher *p = calloc(1, sizeof *p);
    if (!p)
        return cs_err_set(err, 0, "jetstream: out of memory");
    p->cfg = *cfg;
    p->bc = bc;
    p->ring = ring;
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cond, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&p->first_failed, UINT64_MAX);
    p->url = dup_or_empty(cfg->url);
    p->stream = dup_or_empty(cfg->stream);
    p->run = dup_or_empty(cfg->run);
    p->run_desc = dup_or_empty(cfg->run_desc);
    if (!p->url || !p->stream || !p->run || !p->run_desc) {
        cs_js_publisher_free(p);
        return cs_err_set(err, 0, "jetstream: out of memory");
    }

    int64_t timeout = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 5000;
    p->tls = cfg->auth && cs_js_auth_tls(cfg->auth);
    cs_js_conn_config cc = {.urls = p->url, .name = "corestreamd", .timeout_ms = timeout, .auth = cfg->auth};
    natsStatus s = cs_js_library_open();
    if (s != NATS_OK) {
        cs_js_publisher_free(p);
        return nats_fail(err, "set up the connection to", cfg->url, s, false);
    }
    if (cs_js_options_new(&p->opts, &cc, err) != 0) {
        cs_js_publisher_free(p);
        return -1;
    }
    /* A lost connection is replaced by the publisher thread (reconnect). */
    s = natsOptions_SetAllowReconnect(p->opts, false);
    /* A hung server is noticed in about 4 s. */
    if (s == NATS_OK)
        s = natsOptions_SetPingInterval(p->opts, 2000);
    if (s == NATS_OK)
        s = natsOptions_SetMaxPingsOut(p->opts, 2);
    /* The write buffer stays at nats.c's 32 KiB: a message larger than what is left in it goes
     * from the message straight to the socket on this thread. A buffer sized for a whole chunk
     * cost a 256 KiB copy per chunk and a hand-off to nats.c's flusher thread. */
    if (s == NATS_OK)
        s = natsOptions_SetDisconnectedCB(p->opts, on_disconnected, p);
    if (s == NATS_OK)
        s = natsOptions_SetClosedCB(p->opts, on_closed, p);
    if (s != NATS_OK) {
        cs_js_publisher_free(p);
        return nats_fail(err, "set up the connection to", cfg->url, s, false);
    }
    const char *what;
    s = open_connection(p, &what);
    if (s != NATS_OK) {
        nats_fail(err, what, cfg->url, s, p->tls);
        cs_js_publisher_free(p);
        return -1;
    }
    atomic_store(&p->connected, true);
    if (cs_js_check_payload(natsConnection_GetMaxPayload(p->nc), cfg->chunk_size, p->url, err) != 0) {
        cs_js_publisher_free(p);
        return -1;
    }
    cs_js_stream_spec spec = {.name = p->stream,
                              .max_age_ns = cfg->max_age_ns,
                              .max_bytes = cfg->max_bytes,
                              .replicas = cfg->replicas};
    bool created = false, found = false;
    if (cs_js_stream_ensure(p->js, &spec, &created, err) != 0 ||
        cs_js_stream_resume_pos(p->js, p->stream, p->run, &found, &p->pos, err) != 0) {
        cs_js_publisher_free(p);
        return -1;
    }
    p->have_pos = found;
    p->replays = cs_replay_pool_new(1, ring, cfg->compress, cfg->compress_level, cfg->chunk_size, on_replay_ready,
                                    p, err);
    if (!p->replays) {
        cs_js_publisher_free(p);
        return -1;
    }
    char subj[CS_JS_SUBJECT_MAX];
    cs_js_run_filter(subj, sizeof subj, p->stream, p->run);
    CS_LOG(CS_LOG_INFO, "jetstream publisher ready", KV_S("url", p->url), KV_S("stream", p->stream),
           KV_B("created", created), KV_S("subjects", subj), KV_S("run", p->run), KV_S("run_defined_by", p->run_desc),
           KV_I("max_payload", natsConnection_GetMaxPayload(p->nc)),
           KV_U("resume_ledger", found ? p->pos.seq : 0), KV_U("resume_item", found ? p->pos.item : 0));
    *out = p;
    return 0;
}

int cs_js_publisher_start(cs_js_publisher *p, cs_err *err)
{
    if (pthread_create(&p->thread, NULL, publisher_main, p) != 0)
        return cs_err_set(err, 0, "jetstream: cannot start the publisher thread");
    p->started = true;
    return 0;
}

void cs_js_publisher_stop(cs_js_publisher *p, int64_t drain_ns)
{
    if (!p || !p->started)
        return;
    int64_t deadline = cs_mono_ns() + (drain_ns > 0 ? drain_ns : 0);
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    p->drain_deadline = deadline;
    p->kicks++;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    p->started = false;

    int64_t left_ms = (deadline - cs_mono_ns()) / CS_MS;
    bool acked = false;
    if (p->js && atomic_load(&p->connected) && left_ms > 0) {
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MaxWait = left_ms;
        acked = js_PublishAsyncComplete(p->js, &po) == NATS_OK;
    }
    cs_js_stats st;
    cs_js_publisher_stats(p, &st);
    if (acked && p->drained)
        CS_LOG(CS_LOG_INFO, "jetstream publisher stopped", KV_U("next_ledger", p->pos.seq),
               KV_U("published", st.published), KV_U("ledgers", st.ledgers));
    else
        CS_LOG(CS_LOG_WARN, "jetstream publisher stopped behind", KV_U("next_ledger", p->pos.seq),
               KV_U("item", p->pos.item), KV_U("published", st.published), KV_U("acked", st.acked),
               KV_S("detail", "the next start catches up from the ring"));
}

void cs_js_publisher_free(cs_js_publisher *p)
{
    if (!p)
        return;
    cs_js_publisher_stop(p, 0);
    drop_sources(p);
    cs_replay_pool_free(p->replays);
    close_connection(p);
    natsOptions_Destroy(p->opts);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cond);
    free(p->url);
    free(p->stream);
    free(p->run);
    free(p->run_desc);
    free(p);
}

void cs_js_publisher_stats(cs_js_publisher *p, cs_js_stats *out)
{
    *out = (cs_js_stats){
        .published = atomic_load(&p->published),
        .acked = atomic_load(&p->acked),
        .duplicates = atomic_load(&p->duplicates),
        .ack_failures = atomic_load(&p->ack_failures),
        .stalls = atomic_load(&p->stalls),
        .ledgers = atomic_load(&p->ledgers),
        .ring_ledgers = atomic_load(&p->ring_ledgers),
        .behind_episodes = atomic_load(&p->behind_episodes),
        .gaps = atomic_load(&p->gaps),
        .resyncs = atomic_load(&p->resyncs),
        .foreign_duplicates = atomic_load(&p->foreign_duplicates),
        .behind = atomic_load(&p->behind_flag),
        .connected = atomic_load(&p->connected),
    };
}
