/* SPDX-License-Identifier: Apache-2.0 */
/* A subscriber: a cursor (cursor.h) bound to an upgraded connection on a stream I/O thread
 * (wsio.h). Everything here runs on that connection's thread, through wsio's hooks: opening it
 * after the 101, writing what its cursor steps to, the stall clock, token revocation, the move of
 * a caught-up catch-up to a live thread, and its end. The only ways in from other threads are
 * wakes: a publish or a replay batch (wsio's wake hook), a granted replay slot (`granted`, then a
 * wake), a stop or a token reload (the server's atomics, then a wake). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/invariant.h"
#include "common/log.h"
#include "corestreamd/net/listener.h"
#include "corestreamd/server/server_internal.h"
#include "wire/wire.h"

/* Only on the subscriber's own stream I/O thread: checked in every build (common/invariant.h). */
#define SUB_THREAD "subscriber: its own stream I/O thread only (subscriber.c)"
#define ON_SUB_THREAD(sub) CS_OWNED(cs_wsio_thread_owner((sub)->srv->wsio, (sub)->thread), SUB_THREAD)
/* A hook for thread `thread` runs on that thread. */
#define HOOK_THREAD "stream I/O hook: on the thread it names (wsio.h)"
#define ON_HOOK_THREAD(s, thread) CS_OWNED(cs_wsio_thread_owner((s)->wsio, (thread)), HOOK_THREAD)

struct subscriber {
    cs_wsconn *tc;
    subscriber **list;   /* its thread's list; NULL in transit between threads */
    atomic_bool granted; /* a replay slot was handed over on another thread */
    int thread;          /* its stream I/O thread's index (a caught-up catch-up moves once) */
    conn_tag *tag;       /* admission's count, posted back to the accept loop at the end */
    cs_server *srv;
    cs_cursor cursor;
    cs_stream_request req;
    char remote[64];
    bool waiting; /* asked for nothing: woken by the broadcaster or a replay (not when queued for
                     a replay slot: its grant wakes it) */
    int64_t write_started; /* monotonic ns since a message has been waiting to go out; 0: none */
    bool closing; /* a close frame (or drop) was decided */
    bool revoked; /* its token was withdrawn by a reload: close 1008 at the next write */
    char token_name[CS_TOKEN_NAME_MAX + 1]; /* "" without --auth-tokens */
    uint8_t token_digest[CS_TOKEN_DIGEST_LEN];
    subscriber *prev, *next;
};

static void log_subscriber(int level, const char *msg, const subscriber *sub, size_t n, const cs_kv *extra)
{
    cs_kv kvs[9] = {KV_S("remote", sub->remote), KV_U("start", sub->req.start), KV_U("end", sub->req.end),
                    KV_B("bounded", sub->req.bounded)};
    size_t k = 4;
    if (sub->token_name[0])
        kvs[k++] = KV_S("token", sub->token_name);
    for (size_t i = 0; i < n && k < 9; i++)
        kvs[k++] = extra[i];
    cs_log_kvs(level, msg, k, kvs);
}

/* Asks for a writable hook and starts the write clock: the time from wanting to write the next
 * message until the socket takes it is what the write timeout bounds. */
static void want_write(subscriber *sub)
{
    ON_SUB_THREAD(sub);
    if (!sub->write_started)
        sub->write_started = cs_mono_ns();
    cs_wsio_want_write(sub->tc);
}

/* A replay slot freed by another subscriber was handed to this waiting one, under the slot
 * table's mutex, possibly on another thread: posted to its own. sub->thread is stable here: a
 * subscriber only moves once its ticket is released for good (it followed live and never queues
 * again), and that release took the same mutex after any grant. */
static void replay_granted(void *ctx)
{
    subscriber *sub = ctx;
    atomic_store(&sub->granted, true);
    cs_wsio_wake(sub->srv->wsio, sub->thread);
}

static void list_add(cs_server *s, subscriber *sub, int thread)
{
    subscriber **list = &s->tw[thread].subs;
    atomic_fetch_add_explicit(&s->tw[thread].nsubs, 1, memory_order_relaxed);
    sub->list = list;
    sub->prev = NULL;
    sub->next = *list;
    if (*list)
        (*list)->prev = sub;
    *list = sub;
}

/* Off its thread's list (none in transit). */
static void list_unlink(subscriber *sub)
{
    if (!sub->list)
        return;
    atomic_fetch_sub_explicit(&sub->srv->tw[sub->thread].nsubs, 1, memory_order_relaxed);
    if (sub->prev)
        sub->prev->next = sub->next;
    else
        *sub->list = sub->next;
    if (sub->next)
        sub->next->prev = sub->prev;
    sub->prev = sub->next = NULL;
    sub->list = NULL;
}

/* Whether the subscriber's token is gone from the table in force. */
static bool token_gone(cs_server *s, const subscriber *sub)
{
    if (!s->auth_on || !sub->token_name[0])
        return false;
    pthread_rwlock_rdlock(&s->tokens_rw);
    bool gone = !cs_tokens_has(s->tokens, sub->token_digest);
    pthread_rwlock_unlock(&s->tokens_rw);
    return gone;
}

static void subscriber_end(cs_server *s, subscriber *sub)
{
    ON_SUB_THREAD(sub);
    if (!sub->closing) {
        cs_kv extra[] = {KV_S("error", "connection closed")};
        log_subscriber(CS_LOG_INFO, "subscriber disconnected", sub, 1, extra);
    }
    list_unlink(sub);
    cs_cursor_destroy(&sub->cursor);
    srv_post_release(s, sub->tag);
    free(sub);
    atomic_fetch_sub(&s->subscribers, 1);
}

static int close_subscriber(cs_server *s, subscriber *sub, int code, const char *reason)
{
    cs_kv extra[] = {KV_I("code", code), KV_S("reason", reason)};
    log_subscriber(CS_LOG_INFO, "closing subscriber", sub, 2, extra);
    cs_m_count_close(s->metrics, code);
    sub->closing = true;
    cs_wsio_close(sub->tc, code, reason);
    return -1;
}

static int drop_subscriber(subscriber *sub, const char *why)
{
    sub->closing = true;
    cs_kv extra[] = {KV_S("error", why)};
    log_subscriber(CS_LOG_INFO, "subscriber disconnected", sub, 1, extra);
    return -1;
}

/* A catch-up on the background thread that reached the live flow (it has followed the tip, so it
 * holds no replay slot: cs_cursor_step released it, and it never queues again) goes to a live
 * thread: cs_wsio_move hands it over once this turn's messages are out, and io_moved asks for its
 * next write there. True: asked (write nothing more here); the write clock runs meanwhile, so a
 * peer that stops reading before the hand-off is still dropped by this thread's drop_stalled. */
static bool move_caught_up(cs_server *s, subscriber *sub)
{
    if (sub->thread != cs_wsio_bulk_thread(s->wsio) || !sub->cursor.followed_live ||
        sub->cursor.mode == CS_CUR_REPLAY || sub->cursor.mode == CS_CUR_QUEUED)
        return false;
    if (!sub->write_started)
        sub->write_started = cs_mono_ns();
    cs_wsio_move(sub->tc, (int)((unsigned)cs_wsio_fd(sub->tc) % (unsigned)cs_wsio_threads(s->wsio)));
    return true;
}

static void log_step(cs_server *s, subscriber *sub, const cs_step *st)
{
    if (st->abandoned && cs_log_enabled(CS_LOG_DEBUG)) {
        cs_kv extra[] = {KV_U("ledger", sub->cursor.abandoned_seq)};
        log_subscriber(CS_LOG_DEBUG, "live chunk flow abandoned; redelivering from the ring", sub, 1, extra);
    }
    if (st->fell_behind && cs_log_enabled(CS_LOG_DEBUG)) {
        cs_kv extra[] = {KV_U("ledger", sub->cursor.next)};
        log_subscriber(CS_LOG_DEBUG, "behind the live flow; redelivering from the ring", sub, 1, extra);
    }
    if (st->replay_queued) {
        cs_kv extra[] = {KV_U("ledger", sub->cursor.next), KV_U("position", st->queue_position),
                         KV_U("replays", cs_replay_slots_running(s->replay_slots))};
        log_subscriber(CS_LOG_INFO, "replay waiting for a slot", sub, 3, extra);
    }
    if (st->replay_started && cs_log_enabled(CS_LOG_DEBUG)) {
        cs_kv extra[] = {KV_U("ledger", sub->cursor.next),
                         KV_U("replays", cs_replay_slots_running(s->replay_slots))};
        log_subscriber(CS_LOG_DEBUG, "replay started", sub, 2, extra);
    }
}

static void count_sent(cs_server *s, const cs_msg *m)
{
    if (m->published_ns) {
        cs_m_observe_ns(&s->metrics->publish_to_write, cs_mono_ns() - m->published_ns);
        cs_m_add(&s->metrics->sent_bytes_live, m->len);
        return;
    }
    cs_m_add(&s->metrics->sent_bytes_replay, m->len);
    if (m->origin)
        cs_m_add(m->origin == CS_MSG_STORED ? &s->metrics->replay_bytes_stored : &s->metrics->replay_bytes_encoded,
                 m->len);
}

/* The writable hook: the cursor's next messages while the turn's queue has room. -1 ends the
 * connection (after a close frame when one was queued). */
static int subscriber_writable(cs_server *s, subscriber *sub)
{
    ON_SUB_THREAD(sub);
    CS_CHECK(sub->list, "subscriber: on its thread's list when it writes (not in transit)");
    if (sub->closing)
        return 0; /* the close frame is on its way */
    for (;;) {
        sub->write_started = 0;
        sub->waiting = false;
        if (atomic_load_explicit(&s->stopping, memory_order_relaxed))
            return close_subscriber(s, sub, CS_CLOSE_GOING_AWAY, CS_REASON_SHUTTING_DOWN);
        if (sub->revoked)
            return close_subscriber(s, sub, CS_CLOSE_POLICY, "token revoked");
        cs_step st;
        cs_cursor_step(&sub->cursor, sub->thread, &st);
        log_step(s, sub, &st);
        switch (st.kind) {
        case CS_STEP_WRITE: {
            int n = cs_wsio_write(sub->tc, st.msg); /* queued: the thread holds it until it is out */
            if (n >= 0)
                count_sent(s, st.msg);
            cs_msg_release(st.msg);
            if (n < 0)
                return drop_subscriber(sub, "write failed");
            if (move_caught_up(s, sub))
                return 0;
            /* A turn's messages go out in one gather write, which cs_wsio_can_write bounds. */
            if (cs_wsio_can_write(sub->tc))
                continue;
            want_write(sub); /* the next message now waits for the socket, on the clock */
            return 0;
        }
        case CS_STEP_WAIT:
            /* A cursor queued for a replay slot is woken by its grant, not by every publish: a
             * long queue costs the live path's wake-ups nothing. */
            sub->waiting = sub->cursor.mode != CS_CUR_QUEUED;
            if (move_caught_up(s, sub))
                sub->waiting = false; /* io_moved steps it again on the live thread */
            return 0;
        case CS_STEP_CLOSE:
            return close_subscriber(s, sub, st.code, st.reason);
        case CS_STEP_DROP:
        default:
            return drop_subscriber(sub, st.err.msg);
        }
    }
}

/* ---- the stream I/O threads' hooks ----------------------------------------------------------- */

static void *io_open(void *ctx, int thread, cs_wsconn *c, void *arg)
{
    cs_server *s = ctx;
    upgrade_info *u = arg;
    ON_HOOK_THREAD(s, thread);
    subscriber *sub = calloc(1, sizeof *sub);
    if (!sub) {
        srv_discard_upgrade(s, u);
        return NULL;
    }
    sub->tc = c;
    sub->thread = thread;
    sub->req = u->req;
    memcpy(sub->token_name, u->token_name, sizeof sub->token_name);
    memcpy(sub->token_digest, u->token_digest, sizeof sub->token_digest);
    sub->tag = u->tag;
    sub->srv = s;
    free(u);
    /* The token was judged on cs-heads; a reload since then may have revoked it, and its walk may
     * have run before this subscriber joined the list. */
    sub->revoked = token_gone(s, sub);
    cs_format_peer(cs_wsio_fd(c), sub->remote, sizeof sub->remote);
    cs_cursor_env env = {.bc = s->bc, .ring = s->cfg.ring, .replays = s->replays,
                         .slots = s->replay_slots, .live_abandons = &s->live_abandons};
    cs_cursor_init(&sub->cursor, &env, sub->req.start, sub->req.bounded, sub->req.end);
    sub->cursor.want_sig = sub->req.sig;
    sub->cursor.ticket.key = sub->tag->key; /* replays are counted per address, as connections */
    sub->cursor.ticket.granted = replay_granted;
    sub->cursor.ticket.granted_ctx = sub;
    list_add(s, sub, thread);
    int n = atomic_fetch_add(&s->subscribers, 1) + 1;
    cs_kv extra[] = {KV_I("subscribers", n)};
    log_subscriber(CS_LOG_INFO, "subscriber connected", sub, 1, extra);
    want_write(sub);
    return sub;
}

static int io_writable(void *ctx, void *user)
{
    return subscriber_writable(ctx, user);
}

/* cs_wsio_move: off the background thread's list, on its last call there; its cursor is given up
 * for the live thread to take. */
static void io_leave(void *ctx, void *user)
{
    (void)ctx;
    subscriber *sub = user;
    ON_SUB_THREAD(sub);
    list_unlink(sub);
    cs_cursor_leave_thread(&sub->cursor);
}

/* On the live thread it moved to: on that thread's list, its token looked at again (a reload's
 * walks may have missed it in transit), and its next step asked for. */
static void io_moved(void *ctx, int thread, void *user)
{
    cs_server *s = ctx;
    subscriber *sub = user;
    ON_HOOK_THREAD(s, thread);
    CS_CHECK(!sub->list, "subscriber: in transit until moved"); /* off the old thread's list */
    sub->thread = thread;
    list_add(s, sub, thread);
    sub->revoked = sub->revoked || token_gone(s, sub);
    cs_kv extra[] = {KV_U("ledger", sub->cursor.next), KV_I("thread", thread)};
    log_subscriber(CS_LOG_INFO, "caught up, moved to the live thread", sub, 2, extra);
    want_write(sub);
}

/* Subscribers only ever send control frames. */
static void io_data(void *ctx, void *user)
{
    subscriber *sub = user;
    if (!sub->closing)
        close_subscriber(ctx, sub, CS_CLOSE_POLICY, "unexpected data message");
}

static void io_gone(void *ctx, void *user)
{
    subscriber_end(ctx, user);
}

/* What the server decided (shutdown, a token reload), and what woke this thread's own
 * subscribers (publishes, replays, granted slots). */
static void io_wake(void *ctx, int thread)
{
    cs_server *s = ctx;
    ON_HOOK_THREAD(s, thread);
    io_worker *w = &s->tw[thread];
    if (atomic_load(&s->stopping) && !w->stopping_seen) {
        w->stopping_seen = true;
        for (subscriber *sub = w->subs; sub; sub = sub->next)
            want_write(sub);
    }
    unsigned gen = atomic_load(&s->tokens_gen);
    if (gen != w->tokens_gen_seen) {
        w->tokens_gen_seen = gen;
        for (subscriber *sub = w->subs; sub; sub = sub->next)
            if (!sub->closing && token_gone(s, sub)) {
                sub->revoked = true;
                want_write(sub);
            }
    }
    for (subscriber *sub = w->subs; sub; sub = sub->next) {
        bool granted = atomic_load_explicit(&sub->granted, memory_order_relaxed) && atomic_exchange(&sub->granted, false);
        if ((granted || sub->waiting) && !sub->closing) {
            sub->waiting = false;
            want_write(sub);
        }
    }
}

/* About once a second: a subscriber that keeps draining is never dropped, however slowly; one
 * whose socket has taken nothing for the write timeout while a message waited is, at once (a
 * close frame would wait behind what it does not read). */
static void io_tick(void *ctx, int thread)
{
    cs_server *s = ctx;
    ON_HOOK_THREAD(s, thread);
    int64_t now = cs_mono_ns();
    for (subscriber *sub = s->tw[thread].subs; sub; sub = sub->next) {
        if (sub->closing || !sub->write_started || now - sub->write_started < s->write_timeout_ns)
            continue;
        cs_m_add(&s->metrics->write_deadline_drops, 1);
        drop_subscriber(sub, "write timed out: the subscriber stopped reading");
        cs_wsio_drop(sub->tc);
    }
}

void srv_discard_upgrade(void *ctx, void *arg)
{
    upgrade_info *u = arg;
    if (!u)
        return;
    srv_post_release(ctx, u->tag);
    free(u);
}

void srv_io_hooks(cs_server *s, cs_wsio_hooks *h)
{
    *h = (cs_wsio_hooks){.ctx = s, .open = io_open, .writable = io_writable, .data = io_data,
                         .gone = io_gone, .wake = io_wake, .tick = io_tick, .discard = srv_discard_upgrade,
                         .leave = io_leave, .moved = io_moved};
}

/* ---- the hand-over from cs-heads -------------------------------------------------------------- */

/* A request whose first step reads the ring (its start is before the tip, or, before anything was
 * published, a ledger the ring holds): a catch-up, served on the background thread until it
 * reaches the live flow. Decided here, before the connection exists on any stream I/O thread, so
 * no thread ever hands over a cursor mid-replay. The tip only moves forward, so a start before it
 * stays before it; a start at the tip that the tip passes before its first step replays those few
 * ledgers on its live thread. A start past the ring with nothing published yet (the first
 * subscriber of a fresh run) waits for the live flow on a live thread. */
static bool starts_with_catch_up(cs_server *s, const cs_stream_request *req)
{
    if (req->start == 0)
        return false;
    cs_snap snap;
    cs_broadcast_watch(s->bc, &snap);
    uint32_t tip = snap.seq;
    cs_snap_release(&snap);
    if (tip != 0)
        return req->start < tip;
    uint32_t oldest, latest;
    return cs_ring_bounds(s->cfg.ring, &oldest, &latest) && req->start <= latest;
}

/* cs-heads: the 101 is out; the subscriber goes to a stream I/O thread with its transport. */
void srv_upgraded(void *ctx, cs_xport *x, void *tag, const unsigned char *early, size_t n, void *arg)
{
    cs_server *s = ctx;
    (void)tag; /* it travels in arg */
    upgrade_info *u = arg;
    if (cs_wsio_add(s->wsio, x, early, n, starts_with_catch_up(s, &u->req), arg) != 0) {
        cs_xport_free(x);
        srv_discard_upgrade(s, arg);
    }
}
