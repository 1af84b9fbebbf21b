/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/jetstream/publisher.h"

#include <nats/nats.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "corestream/wire.h"
#include "corestreamd/jetstream/connect.h"
#include "corestreamd/jetstream/idkey.h"
#include "corestreamd/jetstream/library.h"
#include "corestreamd/jetstream/naming.h"
#include "corestreamd/jetstream/publisher_internal.h"
#include "corestreamd/jetstream/stream.h"
#include "corestreamd/stream/replay.h"
#include "wire/wire.h"

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

/* Asks the publisher thread to publish ledger seq again under fresh ids (its id `id` was taken):
 * the lowest ledger asked for since the last resync wins. */
static void request_republish(cs_js_publisher *p, uint32_t seq, const char *id)
{
    pthread_mutex_lock(&p->mu);
    if (!p->republish_want || seq < p->republish_seq) {
        p->republish_seq = seq;
        snprintf(p->republish_id, sizeof p->republish_id, "%s", id);
    }
    p->republish_want = true;
    pthread_mutex_unlock(&p->mu);
    atomic_store(&p->resync, true); /* publishes stop until the resync */
    kick(p);
}

/* A duplicate ack for a message this process publishes for the first time: the stream already
 * held its id from someone else, and dropped the core's genuine message. Its ledger is published
 * again under fresh ids. */
static void check_duplicate(cs_js_publisher *p, natsMsg *msg, const jsPubAck *pa)
{
    atomic_fetch_add(&p->duplicates, 1);
    cs_js_pos at = msg_pos(msg);
    if (pub_pack(at) < atomic_load(&p->resend_upto))
        return; /* a resend of this process's own */
    atomic_fetch_add(&p->foreign_duplicates, 1);
    const char *id = NULL;
    if (natsMsgHeader_Get(msg, "Nats-Msg-Id", &id) != NATS_OK)
        id = "";
    CS_LOG(CS_LOG_WARN, "jetstream stream already held a message id this process never sent",
           KV_S("subject", natsMsg_GetSubject(msg)), KV_S("msg_id", id), KV_U("stream_seq", pa->Sequence),
           KV_S("stream", p->stream),
           KV_S("detail", "another publisher used the core's subjects and ids: the stream dropped the core's "
                          "message; the ledger is published again under fresh ids"));
    request_republish(p, at.seq, id);
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
        /* A refusal: that message is known to be missing. (Never a timeout: publishes carry no
         * deadline for nats.c; check_acks watches for acks that stop.) */
        atomic_fetch_add(&p->ack_failures, 1);
        uint64_t v = pub_pack(msg_pos(msg)), cur = atomic_load(&p->first_failed);
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

void pub_drop_pending(cs_js_publisher *p)
{
    natsMsgList pending;
    if (p->js && p->js_used && js_PublishAsyncGetPendingList(&pending, p->js) == NATS_OK) {
        p->dropped += (uint64_t)pending.Count;
        natsMsgList_Destroy(&pending);
    }
}

/* Closes p->nc, when there is one, and waits (at most CLOSE_WAIT_NS) for its closed callback,
 * which nats.c runs on its own thread after Close returns: after it no callback of that
 * connection runs, so the next connection can share the closure. */
static void close_connection(cs_js_publisher *p)
{
    pub_drop_pending(p);
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

/* Every publish ends in exactly one ack callback (acked or ack_failures) or in nats.c's pending
 * list, taken back at a resync (dropped). While some are owed an answer and none has come for
 * ACK_WAIT_NS (a server that still answers pings but stores nothing: an R3 stream without its
 * quorum), they are reported as timed out and the position is read again from the stream; the
 * resync takes them back from nats.c (dropped), which settles the accounting. A single ack lost
 * while later ones come is not seen here: it holds one place of the window until the next
 * resync. */
static void check_acks(cs_js_publisher *p)
{
    uint64_t done = atomic_load(&p->acked) + atomic_load(&p->ack_failures);
    /* This thread counts a publish before it can look here, so owed is never below 0. */
    uint64_t owed = atomic_load(&p->published) - p->dropped - done;
    int64_t now = cs_mono_ns();
    if (owed == 0 || done != p->acks_seen) {
        p->acks_seen = done;
        p->ack_wait_since = now;
        return;
    }
    if (now - p->ack_wait_since < ACK_WAIT_NS)
        return;
    CS_LOG(CS_LOG_WARN, "jetstream publish acks stopped", KV_U("owed", owed), KV_D("waited", now - p->ack_wait_since),
           KV_U("ledger", p->pos.seq), KV_S("stream", p->stream),
           KV_S("detail", "the server takes publishes but acknowledges none; the position is read again from the "
                          "stream until it answers"));
    atomic_fetch_add(&p->ack_timeouts, owed);
    p->ack_wait_since = now;
    atomic_store(&p->resync, true);
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
            pub_note_behind(p, true, "disconnected", live.seq);
            cs_snap_release(&live);
            int64_t now = cs_mono_ns();
            if (now >= p->next_connect && reconnect(p))
                continue;
            if (now >= p->next_connect)
                p->next_connect = now + RECONNECT_WAIT_NS;
            wait_kick(p, seen, POLL_NS);
            continue;
        }
        check_acks(p);
        if (atomic_load(&p->resync) && pub_resync(p) != 0) {
            wait_kick(p, seen, POLL_NS);
            continue;
        }
        cs_snap snap;
        cs_broadcast_watch(p->bc, &snap);
        int r = pub_step(p, &snap);
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
    pub_drop_sources(p);
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

    bool key_created = false;
    if (cs_js_id_key_load(cfg->data_dir, p->id_key, &key_created, err) != 0) {
        cs_js_publisher_free(p);
        return -1;
    }
    p->id_key_unsaved = key_created;
    if (!(p->data_dir = strdup(cfg->data_dir))) {
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
    /* Each publish goes to the socket from this thread as it is made (send as soon as
     * possible): buffered, a chunk's last bytes waited for nats.c's flusher thread, about a
     * millisecond and two wake-ups later. The write buffer stays at nats.c's 32 KiB: a message
     * larger than what is left in it goes from the message straight to the socket; a buffer
     * sized for a whole chunk cost a 256 KiB copy per chunk. */
    if (s == NATS_OK)
        s = natsOptions_SetSendAsap(p->opts, true);
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
           KV_U("resume_ledger", found ? p->pos.seq : 0), KV_U("resume_item", found ? p->pos.item : 0),
           KV_B("id_secret_created", key_created));
    *out = p;
    return 0;
}

int cs_js_publisher_start(cs_js_publisher *p, cs_err *err)
{
    /* A secret drawn at new is written only now: every start-up check has passed. */
    if (p->id_key_unsaved && cs_js_id_key_save(p->data_dir, p->id_key, err) != 0)
        return -1;
    p->id_key_unsaved = false;
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
    pub_drop_sources(p);
    cs_replay_pool_free(p->replays);
    close_connection(p);
    natsOptions_Destroy(p->opts);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cond);
    free(p->url);
    free(p->stream);
    free(p->run);
    free(p->run_desc);
    free(p->data_dir);
    OPENSSL_cleanse(p->id_key, sizeof p->id_key);
    free(p);
}

void cs_js_publisher_stats(cs_js_publisher *p, cs_js_stats *out)
{
    *out = (cs_js_stats){
        .published = atomic_load(&p->published),
        .acked = atomic_load(&p->acked),
        .duplicates = atomic_load(&p->duplicates),
        .ack_failures = atomic_load(&p->ack_failures) + atomic_load(&p->ack_timeouts),
        .stalls = atomic_load(&p->stalls),
        .ledgers = atomic_load(&p->ledgers),
        .ring_ledgers = atomic_load(&p->ring_ledgers),
        .behind_episodes = atomic_load(&p->behind_episodes),
        .gaps = atomic_load(&p->gaps),
        .resyncs = atomic_load(&p->resyncs),
        .foreign_duplicates = atomic_load(&p->foreign_duplicates),
        .republishes = atomic_load(&p->republishes),
        .behind = atomic_load(&p->behind_flag),
        .connected = atomic_load(&p->connected),
    };
}
