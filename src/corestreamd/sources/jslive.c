/* SPDX-License-Identifier: Apache-2.0 */
/* The edge's live messages (jetstream_internal.h): the fast way to what the stream holds. */
#include "corestreamd/sources/jetstream_internal.h"

#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "common/log.h"
#include "corestreamd/sources/source.h"

/* What the live subscription may hold unread (nats.c drops past it, and the edge then reads the
 * stream): a few ledgers of the largest shape, bounded while the edge catches up on the stream. */
#define LIVE_PENDING_BYTES (64 << 20)
/* How many ledgers before the one wanted a move to the stream looks back for a stored message. */
#define RESUME_LOOKBACK 4
/* How long a wait for a live message at a boundary on the stream lasts before the stream is
 * looked at again. */
#define LIVE_POLL_MS 2

void cs_jss_live_open(js_source *s)
{
    s->live_clean_disconnects = atomic_load(&s->disconnects);
    natsStatus st = natsConnection_SubscribeSync(&s->live, s->nc, s->filter);
    if (st != NATS_OK) {
        CS_LOG(CS_LOG_WARN, "jetstream source reads the stream only: no subscription to the live messages",
               KV_S("stream", s->stream), KV_S("run", s->run), KV_S("subject", s->filter),
               KV_S("error", cs_jss_nats_detail(st)));
        s->live = NULL;
        return;
    }
    natsSubscription_SetPendingLimits(s->live, -1, LIVE_PENDING_BYTES);
    /* The server has the subscription before the stream is first asked where to start; when it
     * cannot be told now, nats.c sends it on reconnecting, and the counts above keep the edge off
     * live until the queue has been seen whole. */
    natsConnection_Flush(s->nc);
}

static int64_t live_dropped(js_source *s)
{
    int64_t n = 0;
    natsSubscription_GetDropped(s->live, &n);
    return n;
}

/* Whether the live queue may have a hole: a message dropped or a connection lost since it was
 * last seen empty (on live: since live began). */
static bool live_holed(js_source *s)
{
    return live_dropped(s) != s->live_dropped || atomic_load(&s->disconnects) != s->live_clean_disconnects;
}

/* The live message waiting at the head, decoded into *w; NULL when none is waiting now. Messages
 * that are not wire messages of their subject's ledger are skipped where they are met (the edge
 * may move to live before its consumer reaches their stored copies, which are then not skipped
 * again). */
static natsMsg *live_peek(js_source *s, cs_wire_msg *w)
{
    for (;;) {
        if (!s->live_head) {
            int msgs = 0, bytes = 0;
            int64_t dropped = live_dropped(s);
            unsigned disconnects = atomic_load(&s->disconnects);
            if (natsSubscription_GetPending(s->live, &msgs, &bytes) != NATS_OK)
                return NULL;
            if (msgs <= 0) { /* empty: whatever comes next follows on from here */
                s->live_dropped = dropped;
                s->live_clean_disconnects = disconnects;
                return NULL;
            }
            if (natsSubscription_NextMsg(&s->live_head, s->live, 1) != NATS_OK) {
                s->live_head = NULL; /* a slow consumer's notice: the flow's own order judges */
                return NULL;
            }
        }
        s->live_heard = true;
        const uint8_t *data = (const uint8_t *)natsMsg_GetData(s->live_head);
        size_t len = (size_t)natsMsg_GetDataLength(s->live_head);
        const char *subject = natsMsg_GetSubject(s->live_head);
        cs_err e;
        if (cs_wire_decode(data, len, w, &e) != 0)
            cs_jss_junk(s, 0, subject, data, len, CS_JS_SKIP_MALFORMED, e.msg);
        else if (cs_jss_subject_seq(s, subject) != (int64_t)w->seq)
            cs_jss_junk(s, 0, subject, data, len, CS_JS_SKIP_SUBJECT, "a message published under another ledger's subject");
        else
            return s->live_head;
        natsMsg_Destroy(s->live_head);
        s->live_head = NULL;
    }
}

/* At a boundary on the stream with no live message waiting: whether to wait for one a little
 * longer (it usually comes well before the stream's copy), waiting LIVE_POLL_MS for it. The
 * stream is looked at between waits; a subscription that never delivered anything (no
 * permission to subscribe, say) is not waited for. */
static bool live_wait(js_source *s, int64_t until)
{
    int msgs = 0, bytes = 0;
    if (!s->live_heard || !s->sub || cs_mono_ns() >= until || cs_cancel_is_set(s->cancel) ||
        natsSubscription_GetPending(s->sub, &msgs, &bytes) != NATS_OK || msgs > 0)
        return false;
    natsStatus st = natsSubscription_NextMsg(&s->live_head, s->live, LIVE_POLL_MS);
    if (st != NATS_OK)
        s->live_head = NULL;
    return true;
}

natsMsg *cs_jss_live_try(js_source *s)
{
    uint32_t open, want = rli_asm_expected(s->asm_);
    int64_t gap_deadline;
    /* Not while a skip or a gap is pending, nor past a disconnection the stream side has not yet
     * met (it logs the outage and resumes first). */
    if (!s->live || !s->started || !want || rli_asm_active(s->asm_, &open) || atomic_load(&s->waiting_for) ||
        cs_jsgap_deadline(s->gap, &gap_deadline) || s->lost || atomic_load(&s->disconnects) != s->sub_disconnects)
        return NULL;
    cs_wire_msg w;
    natsMsg *m;
    int64_t until = cs_mono_ns() + NEXT_WAIT_MS * CS_MS;
    for (;;) {
        while ((m = live_peek(s, &w)) && w.seq < want) {
            natsMsg_Destroy(m); /* already served from the stream */
            s->live_head = NULL;
        }
        if (m || !live_wait(s, until))
            break;
    }
    if (!m || w.seq != want || w.type != CS_WIRE_TYPE_BEGIN || live_holed(s))
        return NULL;
    if (s->sub && !s->lost)
        natsSubscription_Unsubscribe(s->sub); /* its server deletes the consumer now */
    cs_jss_drop_sub(s);
    s->live_head = NULL;
    s->cur = m;
    s->on_live = true;
    s->live_disconnects = s->live_clean_disconnects;
    s->pass_below = 0;
    s->resume_want = 0;
    CS_LOG(CS_LOG_INFO, "jetstream source following the live messages", KV_S("stream", s->stream),
           KV_S("run", s->run), KV_U("ledger", want));
    return m;
}

natsMsg *cs_jss_live_next(js_source *s, cs_err *err)
{
    natsMsg_Destroy(s->cur);
    s->cur = NULL;
    for (;;) {
        if (cs_jss_cancelled(s, err))
            return NULL;
        /* Whatever was published while the connection was down never reaches this subscription. */
        if (atomic_load(&s->disconnects) != s->live_disconnects) {
            cs_jss_live_to_stream(s, "the connection to NATS was lost");
            cs_jss_lost(s, "the connection to NATS was lost");
            cs_err_set(err, 0, "moved to the stream");
            return NULL;
        }
        if (live_dropped(s) != s->live_dropped) {
            cs_jss_live_to_stream(s, "live messages were dropped (more than 64 MiB unread)");
            cs_err_set(err, 0, "moved to the stream");
            return NULL;
        }
        natsStatus st = natsSubscription_NextMsg(&s->cur, s->live, NEXT_WAIT_MS);
        if (st == NATS_OK)
            return s->cur;
        s->cur = NULL;
        if (st != NATS_TIMEOUT) {
            char why[256];
            snprintf(why, sizeof why, "live messages: %s", cs_jss_nats_detail(st));
            cs_jss_live_to_stream(s, why);
            cs_err_set(err, 0, "moved to the stream");
            return NULL;
        }
    }
}

void cs_jss_live_to_stream(js_source *s, const char *why)
{
    uint32_t open = 0;
    bool active = rli_asm_active(s->asm_, &open);
    uint32_t want = active ? open : rli_asm_expected(s->asm_);
    s->on_live = false;
    atomic_fetch_add(&s->stream_moves, 1);
    s->resume_want = want;
    s->pass_below = want;
    s->resuming = active;
    s->resume_ledger = open;
    s->resume_chunks = s->next_idx;
    s->resume_passed = 0;
    s->resume_sig = s->sig_in;
    s->resume_begin_seen = false;
    CS_LOG(CS_LOG_INFO, "jetstream source reading the stream", KV_S("stream", s->stream), KV_S("run", s->run),
           KV_U("ledger", want), KV_U("chunks_in", active ? s->next_idx : 0), KV_S("reason", why));
}

int cs_jss_live_resume_point(js_source *s, uint64_t *sseq, cs_err *err)
{
    *sseq = 0;
    for (uint32_t k = 1; k <= RESUME_LOOKBACK && k < s->resume_want; k++) {
        char subj[CS_JS_SUBJECT_MAX];
        cs_js_subject(subj, sizeof subj, s->stream, s->run, s->resume_want - k);
        natsMsg *m;
        if (cs_jss_last_msg(s, subj, NULL, &m, err) != 0)
            return -1;
        if (m) {
            *sseq = natsMsg_GetSequence(m);
            natsMsg_Destroy(m);
            return 0;
        }
    }
    /* None of them stored (the stream far behind live): after the run's newest stored message
     * when it belongs to an earlier ledger, rather than everything read before live began. */
    natsMsg *m;
    if (cs_jss_last_msg(s, s->filter, NULL, &m, err) != 0)
        return -1;
    int64_t newest = m ? cs_jss_subject_seq(s, natsMsg_GetSubject(m)) : -1;
    if (newest >= 0 && newest < (int64_t)s->resume_want)
        *sseq = natsMsg_GetSequence(m);
    natsMsg_Destroy(m);
    return 0;
}

bool cs_jss_live_repeat(js_source *s, const cs_wire_msg *w, const uint8_t *data, size_t len)
{
    if (w->seq < s->pass_below)
        return true;
    if (!s->resuming || w->seq != s->resume_ledger)
        return false;
    switch (w->type) {
    case CS_WIRE_TYPE_BEGIN:
        if (s->resume_begin_seen || XXH64(data, len, 0) != s->begin_hash)
            return false; /* another copy begins: the stream's rules take it */
        s->resume_begin_seen = true;
        return true;
    case CS_WIRE_TYPE_CHUNK: /* each one once, in order: a repeat is the stream's to judge */
        if (w->chunk_idx >= s->resume_chunks || w->chunk_idx != s->resume_passed)
            return false;
        s->resume_passed++;
        return true;
    case CS_WIRE_TYPE_SIG: {
        bool once = s->resume_sig;
        s->resume_sig = false;
        return once;
    }
    default:
        return false;
    }
}

void cs_jss_live_fed(js_source *s, const cs_wire_msg *w, const uint8_t *data, size_t len)
{
    if (w->type == CS_WIRE_TYPE_BEGIN) {
        s->begin_hash = XXH64(data, len, 0);
        s->sig_in = false;
    } else if (w->type == CS_WIRE_TYPE_SIG) {
        s->sig_in = true;
    }
    s->pass_below = 0;
    s->resuming = false;
}

void cs_jss_junk(js_source *s, uint64_t sseq, const char *subject, const uint8_t *data, size_t len,
                 cs_js_skip reason, const char *why)
{
    size_t cap = sizeof s->junk / sizeof s->junk[0], n = s->junk_n < cap ? s->junk_n : cap;
    uint64_t live = sseq == 0, d = (XXH64(data, len, XXH64(subject, strlen(subject), 0)) & ~1ULL) | live;
    for (size_t i = 0; i < n; i++)
        if (s->junk[i] == (d ^ 1)) {
            s->junk[i] = 0; /* its one other copy */
            return;
        }
    s->junk[s->junk_n++ % cap] = d;
    cs_jss_skip(s, sseq, subject, reason, why);
}
