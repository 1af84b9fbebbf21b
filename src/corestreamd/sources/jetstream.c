/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/sources/jetstream_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/godur.h"
#include "common/log.h"
#include "corestream/wire.h"

bool cs_jss_cancelled(const js_source *s, cs_err *err)
{
    if (!cs_cancel_is_set(s->cancel))
        return false;
    cs_err_set(err, CS_ERR_CANCELLED, "cancelled");
    return true;
}

void cs_jss_drop_sub(js_source *s)
{
    natsMsg_Destroy(s->cur);
    s->cur = NULL;
    /* No unsubscribe: on a lost server it would wait for a reply that never comes; the server
     * removes the ephemeral consumer after CONSUMER_INACTIVE_NS. */
    natsSubscription_Destroy(s->sub);
    s->sub = NULL;
}

void cs_jss_lost(js_source *s, const char *why)
{
    cs_jss_drop_sub(s);
    if (!s->lost)
        CS_LOG(CS_LOG_WARN, "jetstream source lost the stream; resuming", KV_S("stream", s->stream),
               KV_S("run", s->run), KV_U("after_stream_seq", s->last_sseq), KV_S("error", why));
    s->lost = true;
}

/* An ordered push consumer on the run (ephemeral, no acks, flow control and idle heartbeats), from
 * the message after the last one consumed: the server sends each message as soon as it is
 * stored, where a pull consumer waited for a fetch to ask. */
static int subscribe(js_source *s, cs_err *err)
{
    if (s->resume_want) {
        uint64_t at = 0;
        if (cs_jss_live_resume_point(s, &at, err) != 0)
            return -1;
        if (at > s->last_sseq)
            s->last_sseq = at;
        s->resume_want = 0;
    }
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = s->stream;
    so.Ordered = true; /* which implies no acks */
    so.Config.Heartbeat = HEARTBEAT_NS;
    so.Config.InactiveThreshold = CONSUMER_INACTIVE_NS;
    uint64_t from = s->last_sseq ? s->last_sseq + 1 : s->from_sseq;
    if (from) {
        so.Config.DeliverPolicy = js_DeliverByStartSequence;
        so.Config.OptStartSeq = from;
    } else {
        so.Config.DeliverPolicy = js_DeliverAll;
    }
    jsErrCode jerr = 0;
    s->sub_disconnects = atomic_load(&s->disconnects);
    natsStatus st = js_SubscribeSync(&s->sub, s->js, s->filter, NULL, &so, &jerr);
    if (st != NATS_OK) {
        s->sub = NULL;
        return cs_err_set(err, 0, "create a consumer on %s from stream sequence %llu: %s (code %d)", s->filter,
                          (unsigned long long)from, cs_jss_nats_detail(st), (int)jerr);
    }
    natsSubscription_SetPendingLimits(s->sub, -1, 256 << 20);
    s->last_msg_ns = cs_mono_ns();
    return 0;
}

/* Where the first ledger wanted starts: right after the END of the one before it, when the stream
 * still holds that END; else the run's first message. */
static int position(js_source *s, cs_err *err)
{
    cs_jss_live_open(s); /* before the stream is asked: no message falls between the two */
    uint32_t oldest, latest;
    if (cs_ring_bounds(s->ring, &oldest, &latest))
        s->need = latest + 1;
    else
        s->need = s->start;
    s->from_sseq = 0;
    if (s->need > 1) {
        char subj[CS_JS_SUBJECT_MAX];
        cs_js_subject(subj, sizeof subj, s->stream, s->run, s->need - 1);
        natsMsg *m;
        if (cs_jss_last_msg(s, subj, "last message", &m, err) != 0)
            return -1;
        if (m)
            s->from_sseq = natsMsg_GetSequence(m) + 1;
        natsMsg_Destroy(m);
    }
    rli_asm_reset(s->asm_, s->need);
    s->positioned = true;
    char server[256] = "";
    natsConnection_GetConnectedUrl(s->nc, server, sizeof server);
    CS_LOG(CS_LOG_INFO, "jetstream source following", KV_S("stream", s->stream), KV_S("run", s->run),
           KV_U("from_ledger", s->need), KV_U("from_stream_seq", s->from_sseq), KV_S("server", server));
    return 0;
}

/* The next message of the run, waiting as long as it takes (nats.c reconnecting, the consumer
 * recreated as needed: anything that keeps it from reading counts as an outage, logged once), or
 * until a gap is due (jsgap.h). NULL with err (CS_ERR_CANCELLED) on cancellation, NULL with err
 * kind 0 when the gap is due. The message stays owned by the source until the next call. */
static natsMsg *next_msg(js_source *s, cs_err *err)
{
    natsMsg_Destroy(s->cur);
    s->cur = NULL;
    for (;;) {
        if (cs_jss_cancelled(s, err))
            return NULL;
        int64_t deadline;
        if (cs_jsgap_deadline(s->gap, &deadline) && cs_mono_ns() >= deadline) {
            cs_err_set(err, 0, "a gap is due");
            return NULL;
        }
        /* A consumer older than a disconnection, or none since one (the edge was on live), means
         * an outage: logged once. */
        if (atomic_load(&s->disconnects) != s->sub_disconnects && (s->sub || !s->lost))
            cs_jss_lost(s, "the connection to NATS was lost");
        if (!s->sub) {
            cs_err e;
            if (subscribe(s, &e) != 0) {
                cs_jss_lost(s, e.msg);
                cs_cancel_sleep_until(s->cancel, cs_mono_ns() + RETRY_NS);
                continue;
            }
        }
        jsErrCode jerr = 0;
        natsStatus st = natsSubscription_NextMsg(&s->cur, s->sub, NEXT_WAIT_MS);
        if (st == NATS_OK && s->cur) {
            if (s->lost)
                CS_LOG(CS_LOG_INFO, "jetstream source resumed", KV_S("stream", s->stream), KV_S("run", s->run),
                       KV_U("at_stream_seq", s->last_sseq + 1));
            s->lost = false;
            s->last_msg_ns = cs_mono_ns();
            return s->cur;
        }
        if (st == NATS_TIMEOUT) {
            if (cs_mono_ns() - s->last_msg_ns < IDLE_CHECK_NS)
                continue;
            jsOptions jo;
            jsOptions_Init(&jo);
            jo.Wait = API_WAIT_MS;
            jsConsumerInfo *ci = NULL;
            jerr = 0;
            st = natsSubscription_GetConsumerInfo(&ci, s->sub, &jo, &jerr);
            if (st == NATS_OK) {
                jsConsumerInfo_Destroy(ci);
                s->last_msg_ns = cs_mono_ns();
                continue;
            }
        }
        char why[256];
        snprintf(why, sizeof why, "%s (code %d)", cs_jss_nats_detail(st), (int)jerr);
        cs_jss_lost(s, why);
        cs_cancel_sleep_until(s->cancel, cs_mono_ns() + RETRY_NS);
    }
}

const char *const cs_js_skip_names[CS_JS_SKIP_REASONS] = {"malformed", "subject", "out_of_place", "corrupt",
                                                           "signature"};

/* The ledger the edge waits for: the one open, else the one expected (0: any). */
static uint32_t waited_ledger(const js_source *s)
{
    uint32_t open;
    if (rli_asm_active(s->asm_, &open))
        return open;
    uint32_t want = rli_asm_expected(s->asm_);
    return want ? want : s->need;
}

/* The one way a message of the run leaves the edge unserved: counted by reason, logged (WARN the
 * first time in a row for a subject and reason, DEBUG after), and the edge waits, not ready, until
 * the ledger it needs has verified (release_wait). Never fatal. */
void cs_jss_skip(js_source *s, uint64_t sseq, const char *subject, cs_js_skip reason, const char *why)
{
    atomic_fetch_add(&s->skipped[reason], 1);
    uint32_t wait = waited_ledger(s);
    /* Not ready before the line says so: whoever read it finds /readyz waiting. Before the run's
     * first ledger (wait 0) the edge is not ready anyway: catching up. */
    if (wait && atomic_exchange(&s->waiting_for, wait) != wait)
        cs_source_tell_waiting(&s->base, wait);
    bool again = s->last_skip == (int)reason && strcmp(s->last_skip_subject, subject) == 0;
    CS_LOG(again ? CS_LOG_DEBUG : CS_LOG_WARN, "jetstream source skipped a message", KV_S("stream", s->stream),
           KV_S("run", s->run), KV_U("stream_seq", sseq), KV_S("subject", subject),
           KV_S("reason", cs_js_skip_names[reason]), KV_S("error", why), KV_U("waiting_for", wait));
    s->last_skip = (int)reason;
    snprintf(s->last_skip_subject, sizeof s->last_skip_subject, "%s", subject);
    s->skips_in_wait++;
}

/* The ledger the edge waited for has verified: ready again. */
static void release_wait(js_source *s, uint32_t seq)
{
    if (atomic_exchange(&s->waiting_for, 0) == 0)
        return;
    cs_source_tell_waiting(&s->base, 0); /* ready before the line says so */
    CS_LOG(CS_LOG_INFO, "jetstream source has the ledger it waited for", KV_S("stream", s->stream),
           KV_S("run", s->run), KV_U("ledger", seq), KV_U("skipped", s->skips_in_wait));
    s->skips_in_wait = 0;
    s->last_skip = -1;
}

/* The ledger a subject "<stream>.<run>.<seq>" names, or -1. */
int64_t cs_jss_subject_seq(const js_source *s, const char *subj)
{
    size_t ls = strlen(s->stream), lr = strlen(s->run);
    if (strncmp(subj, s->stream, ls) != 0 || subj[ls] != '.' || strncmp(subj + ls + 1, s->run, lr) != 0 ||
        subj[ls + 1 + lr] != '.')
        return -1;
    const char *p = subj + ls + lr + 2;
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p || *end || v > UINT32_MAX)
        return -1;
    return (int64_t)v;
}

static const char *type_name(int type)
{
    return type == CS_WIRE_TYPE_BEGIN   ? "BEGIN"
           : type == CS_WIRE_TYPE_CHUNK ? "CHUNK"
           : type == CS_WIRE_TYPE_SIG   ? "SIG"
                                        : "END";
}

/* Whether w continues the flow (PROTOCOL.md, section 2): false with why when it does not (another
 * ledger than the one open or expected, a chunk out of order, a CHUNK or END with no BEGIN). The
 * assembler never sees such a message, so the copy being assembled survives it. */
static bool in_place(const js_source *s, const cs_wire_msg *w, char *why, size_t len)
{
    uint32_t open;
    if (rli_asm_active(s->asm_, &open)) {
        if (w->seq != open)
            snprintf(why, len, "%s of ledger %u while ledger %u is being assembled", type_name(w->type), w->seq, open);
        else if (w->type == CS_WIRE_TYPE_CHUNK && w->chunk_idx != s->next_idx)
            snprintf(why, len, "chunk %u of ledger %u where chunk %u is next", w->chunk_idx, w->seq, s->next_idx);
        else
            return true;
        return false;
    }
    uint32_t want = rli_asm_expected(s->asm_);
    if (w->type != CS_WIRE_TYPE_BEGIN)
        snprintf(why, len, "%s of ledger %u without its BEGIN", type_name(w->type), w->seq);
    else if (want && w->seq != want)
        snprintf(why, len, "ledger %u where ledger %u is next (a %s)", w->seq, want, w->seq > want ? "gap" : "duplicate");
    else
        return true;
    return false;
}

/* The message's stream sequence (0 when it carries no JetStream metadata) and, into *stored, when
 * the server stored it (Unix ns). */
static uint64_t stream_seq(natsMsg *m, int64_t *stored)
{
    jsMsgMetaData *meta = NULL;
    uint64_t sseq = 0;
    *stored = 0;
    if (natsMsg_GetMetaData(&meta, m) == NATS_OK) {
        sseq = meta->Sequence.Stream;
        *stored = meta->Timestamp;
        jsMsgMetaData_Destroy(meta);
    }
    return sseq;
}

/* The copy is broken: the assembler refused a message in place (a chunk that does not expand, an
 * END whose count, length or XXH64 does not match), or its signature does not hold. It is dropped;
 * the edge waits for a whole copy of the same ledger, and bytes of it already forwarded are void
 * (read says so). */
static int drop_copy(js_source *s, uint64_t sseq, const char *subject, uint32_t seq, cs_js_skip reason,
                     const cs_err *e, cs_err *err)
{
    if (e->kind == RL_ERR_NOMEM)
        return cs_err_set(err, 0, "jetstream source: ledger %u: out of memory", seq);
    rli_asm_reset(s->asm_, seq); /* first: a copy that verified before its signature failed moved it on */
    s->next_idx = 0;
    s->resuming = false;
    cs_jss_skip(s, sseq, subject, reason, e->msg);
    if (s->open && s->ledger_off > 0)
        s->void_pending = true;
    return 0;
}

/* A message the assembler took in place (rs its answer), from the stream (sseq, stored) or live
 * (both 0). */
static void fed(js_source *s, const cs_wire_msg *w, const uint8_t *data, size_t len, bool again, rli_asm_status rs,
                uint64_t sseq, int64_t stored, int64_t taken)
{
    cs_jss_live_fed(s, w, data, len);
    s->next_idx = w->type == CS_WIRE_TYPE_BEGIN ? 0 : s->next_idx + (w->type == CS_WIRE_TYPE_CHUNK);
    /* A repeated BEGIN restarts the assembly: what went out of the copy before is void. */
    if (again && s->open && s->ledger_off > 0)
        s->void_pending = true;
    if (rs != RLI_ASM_LEDGER)
        return;
    rl_ledger_info info;
    s->ledger = rli_asm_ledger(s->asm_, &s->ledger_len, &info);
    s->verified = true;
    atomic_fetch_add(sseq ? &s->ledgers_stream : &s->ledgers_live, 1);
    /* Where a ledger's time went on its way here (bench/edge-path.sh reads these). */
    CS_LOG(CS_LOG_DEBUG, "jetstream source ledger verified", KV_U("ledger", info.sequence),
           KV_S("path", sseq ? "stream" : "live"), KV_I("emit_end_unix_ns", w->stamp),
           KV_I("stored_unix_ns", stored), KV_I("taken_unix_ns", taken), KV_I("verified_unix_ns", cs_wall_ns()));
    if (info.discarded_partials)
        CS_LOG(CS_LOG_WARN, "jetstream stream began a ledger again; the partial copy was dropped",
               KV_S("stream", s->stream), KV_S("run", s->run), KV_U("ledger", info.sequence), KV_U("stream_seq", sseq));
}

/* A live message: fed when it continues the flow exactly, passed over when it belongs to a ledger
 * already served (a republished copy); anything else moves the edge to the stream, which decides
 * (never a skip: live is only the fast way to what the stream holds). A copy that does not verify
 * is dropped first, so the stream's copy is taken whole. */
static int feed_live(js_source *s, natsMsg *m, cs_err *err)
{
    int64_t taken = cs_wall_ns();
    const uint8_t *data = (const uint8_t *)natsMsg_GetData(m);
    size_t len = (size_t)natsMsg_GetDataLength(m);
    cs_wire_msg w;
    cs_err e;
    char why[CS_JS_SUBJECT_MAX + 96];
    const char *subject = natsMsg_GetSubject(m);
    if (cs_wire_decode(data, len, &w, &e) != 0) {
        cs_jss_junk(s, 0, subject, data, len, CS_JS_SKIP_MALFORMED, e.msg);
        return 0;
    }
    if (cs_jss_subject_seq(s, subject) != (int64_t)w.seq) {
        snprintf(why, sizeof why, "a message of ledger %u published under another ledger's subject", w.seq);
        cs_jss_junk(s, 0, subject, data, len, CS_JS_SKIP_SUBJECT, why);
        return 0;
    }
    uint32_t open;
    bool active = rli_asm_active(s->asm_, &open);
    if (w.seq < (active ? open : rli_asm_expected(s->asm_)))
        return 0;
    if (!in_place(s, &w, why, sizeof why)) {
        cs_jss_live_to_stream(s, why);
        return 0;
    }
    bool again = w.type == CS_WIRE_TYPE_BEGIN && active;
    rli_asm_status rs = rli_asm_message(s->asm_, data, len, &e);
    if (rs == RLI_ASM_ERROR && e.kind == RL_ERR_NOMEM)
        return cs_err_set(err, 0, "jetstream source: ledger %u: out of memory", w.seq);
    if (rs == RLI_ASM_ERROR && rli_asm_active(s->asm_, &open) && open == w.seq) {
        /* The copy stays open as it was: the stream's copy of what came before is passed over
         * and the stream's message in this one's place is judged by the stream's rules. */
        cs_jss_live_to_stream(s, e.msg);
        return 0;
    }
    if (rs == RLI_ASM_ERROR || (rs == RLI_ASM_LEDGER && s->keys &&
                                cs_jsgap_check_signature(s->asm_, s->keys, &s->chain, &e) != 0)) {
        /* No copy left open to resume (a signature fails once the copy is whole): the stream's
         * copy of this ledger is read from its BEGIN. */
        rli_asm_reset(s->asm_, w.seq);
        s->next_idx = 0;
        if (s->open && s->ledger_off > 0)
            s->void_pending = true;
        cs_jss_live_to_stream(s, e.msg);
        return 0;
    }
    fed(s, &w, data, len, again, rs, 0, 0, taken);
    return 1;
}

/* Feeds the next message of the run to the assembler. Returns 1 when fed, 0 when it was not
 * (already consumed, passed over, skipped, a gap is due, or the edge moved to the stream), -1
 * with err on cancellation or no memory. */
static int feed(js_source *s, cs_err *err)
{
    natsMsg *m = NULL;
    if (!s->on_live)
        m = cs_jss_live_try(s);
    bool live = m || s->on_live;
    if (!m)
        m = s->on_live ? cs_jss_live_next(s, err) : next_msg(s, err);
    if (!m)
        return err->kind == CS_ERR_CANCELLED ? -1 : 0;
    if (live)
        return feed_live(s, m, err);
    int64_t taken = cs_wall_ns(), stored;
    const char *subject = natsMsg_GetSubject(m);
    uint64_t sseq = stream_seq(m, &stored);
    if (sseq == 0) {
        cs_jss_skip(s, s->last_sseq + 1, subject, CS_JS_SKIP_MALFORMED, "a message without JetStream metadata");
        return 0;
    }
    if (sseq <= s->last_sseq)
        return 0; /* delivered again after a consumer was recreated: already consumed */
    s->last_sseq = sseq;
    const uint8_t *data = (const uint8_t *)natsMsg_GetData(m);
    size_t len = (size_t)natsMsg_GetDataLength(m);
    cs_wire_msg w;
    cs_err e;
    char why[CS_JS_SUBJECT_MAX + 96];
    if (cs_wire_decode(data, len, &w, &e) != 0) {
        cs_jss_junk(s, sseq, subject, data, len, CS_JS_SKIP_MALFORMED, e.msg);
        return 0;
    }
    if (cs_jss_subject_seq(s, subject) != (int64_t)w.seq) {
        snprintf(why, sizeof why, "a message of ledger %u stored under another ledger's subject", w.seq);
        cs_jss_junk(s, sseq, subject, data, len, CS_JS_SKIP_SUBJECT, why);
        return 0;
    }
    if (!s->started) {
        /* Ledgers before the one wanted (or, wanting any, before the first BEGIN) are not ours to
         * serve: passed over, not skipped. */
        if ((s->need && w.seq < s->need) || (!s->need && w.type != CS_WIRE_TYPE_BEGIN))
            return 0;
        s->started = true;
    }
    if (cs_jss_live_repeat(s, &w, data, len))
        return 0;
    uint32_t open;
    if (!in_place(s, &w, why, sizeof why)) {
        cs_jss_skip(s, sseq, subject, CS_JS_SKIP_OUT_OF_PLACE, why);
        if (!rli_asm_active(s->asm_, &open))
            cs_jsgap_offer(s->gap, rli_asm_expected(s->asm_), &w, data, len, sseq, &s->chain, cs_mono_ns());
        return 0;
    }
    if (w.type == CS_WIRE_TYPE_BEGIN)
        cs_jsgap_clear(s->gap); /* the ledger waited for has begun */
    bool again = w.type == CS_WIRE_TYPE_BEGIN && rli_asm_active(s->asm_, &open);
    rli_asm_status rs = rli_asm_message(s->asm_, data, len, &e);
    if (rs == RLI_ASM_ERROR)
        return drop_copy(s, sseq, subject, w.seq, CS_JS_SKIP_CORRUPT, &e, err);
    if (rs == RLI_ASM_LEDGER && s->keys && cs_jsgap_check_signature(s->asm_, s->keys, &s->chain, &e) != 0)
        return drop_copy(s, sseq, subject, w.seq, CS_JS_SKIP_SIGNATURE, &e, err);
    fed(s, &w, data, len, again, rs, sseq, stored, taken);
    return 1;
}

/* The ledgers from the one expected up to m - 1 never came, and m verified in the stream after
 * them (jsgap.h): the gap is reported, and the edge reads on from m's BEGIN at stream sequence
 * sseq (its consumer recreated there), no longer waiting. The next emission says it follows a gap. */
static void go_past_gap(js_source *s, uint32_t m, uint64_t sseq)
{
    uint32_t from = rli_asm_expected(s->asm_);
    atomic_fetch_add(&s->gaps, 1);
    atomic_fetch_add(&s->gap_ledgers, m - from);
    CS_LOG(CS_LOG_WARN, "jetstream source gap: the stream went on without these ledgers", KV_S("stream", s->stream),
           KV_S("run", s->run), KV_U("from", from), KV_U("to", m - 1), KV_U("resume_ledger", m),
           KV_U("resume_stream_seq", sseq), KV_U("skipped", s->skips_in_wait));
    cs_jsgap_clear(s->gap);
    rli_asm_reset(s->asm_, m);
    s->next_idx = 0;
    s->resuming = false;
    s->pass_below = 0;
    s->need = 0;
    s->started = true;
    s->after_gap = true;
    if (s->sub)
        natsSubscription_Unsubscribe(s->sub); /* its server answers: delete the consumer now */
    cs_jss_drop_sub(s);
    s->last_sseq = sseq - 1;
    if (atomic_exchange(&s->waiting_for, 0) != 0)
        cs_source_tell_waiting(&s->base, 0);
    s->skips_in_wait = 0;
    s->last_skip = -1;
}

/* Starts the next ledger as soon as its BEGIN is in: the body follows through read as the stream
 * delivers it. */
static int js_next(cs_source *base, cs_emission *em, cs_err *err)
{
    js_source *s = (js_source *)base;
    em->seq = s->need ? s->need : rli_asm_expected(s->asm_);
    em->declared_size = 0;
    if (s->open && !(s->verified && s->ledger_off == s->ledger_len))
        return cs_err_set(err, 0, "jetstream source: next before the body of ledger %u was read", s->seq);
    s->open = false;
    if (!s->positioned && position(s, err) != 0)
        return -1;
    s->verified = false;
    s->ledger = NULL;
    for (;;) {
        uint32_t gap_seq;
        uint64_t gap_sseq;
        if (cs_jsgap_due(s->gap, cs_mono_ns(), &gap_seq, &gap_sseq))
            go_past_gap(s, gap_seq, gap_sseq);
        uint32_t expect = rli_asm_expected(s->asm_);
        if (expect)
            em->seq = expect;
        int r = feed(s, err);
        if (r < 0)
            return -1;
        uint32_t seq;
        if (r == 0 || !rli_asm_active(s->asm_, &seq))
            continue; /* a BEGIN opens a flow; no single message can complete one */
        s->open = true;
        s->need = 0;
        s->ledger_off = 0;
        s->void_pending = false;
        s->seq = seq;
        em->seq = seq;
        em->after_gap = s->after_gap;
        s->after_gap = false;
        return 1;
    }
}

/* The assembled bytes of the open ledger not yet handed out start at *p (have in all). */
static void assembled(const js_source *s, const uint8_t **p, size_t *have)
{
    uint32_t open, discarded;
    *p = NULL;
    *have = 0;
    if (s->verified) {
        *p = s->ledger;
        *have = s->ledger_len;
    } else if (rli_asm_active(s->asm_, &open)) {
        *p = rli_asm_partial(s->asm_, have, &discarded);
    }
}

static ssize_t js_read(cs_source *base, uint8_t *buf, size_t len, cs_err *err)
{
    js_source *s = (js_source *)base;
    if (!s->open)
        return cs_err_set(err, 0, "jetstream source: read without a ledger");
    for (;;) {
        if (s->void_pending) {
            s->void_pending = false;
            s->ledger_off = 0;
            return cs_err_set(err, CS_ERR_LEDGER_VOID, "jetstream source: ledger %u begins again", s->seq);
        }
        const uint8_t *p;
        size_t have;
        assembled(s, &p, &have);
        if (have > s->ledger_off) {
            size_t n = have - s->ledger_off;
            if (n > len)
                n = len;
            memcpy(buf, p + s->ledger_off, n);
            s->ledger_off += n;
            return (ssize_t)n;
        }
        if (s->verified) {
            release_wait(s, s->seq);
            return 0; /* every byte out and END verified: the source loop may end the ledger */
        }
        if (feed(s, err) < 0)
            return -1;
    }
}

static void js_destroy(cs_source *base)
{
    js_source *s = (js_source *)base;
    if (!s)
        return;
    natsMsg_Destroy(s->cur);
    natsMsg_Destroy(s->live_head);
    if (s->sub) {
        if (!s->lost)
            natsSubscription_Unsubscribe(s->sub); /* deletes the ephemeral consumer now */
        natsSubscription_Destroy(s->sub);
    }
    jsCtx_Destroy(s->js);
    if (s->nc)
        cs_jss_close_connection(s);
    /* The live subscription once the connection is closed: nats.c's reader may be delivering to
     * it until then. */
    natsSubscription_Destroy(s->live);
    natsConnection_Destroy(s->nc);
    natsOptions_Destroy(s->opts);
    rli_asm_free(s->asm_);
    cs_jsgap_free(s->gap);
    cs_sig_keyset_free(s->keys);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->url);
    free(s);
}

/* The SIG the ledger just forwarded came with in the stream (the core's), passed on unchanged: an
 * edge never signs. Asked once read has returned 0, so the assembler still holds that ledger. */
static size_t js_signature(cs_source *base, uint8_t out[CS_WIRE_SIG_MAX_LEN])
{
    js_source *s = (js_source *)base;
    size_t n = 0;
    const uint8_t *sig = s->verified ? rli_asm_sig(s->asm_, &n) : NULL;
    if (!sig || n > CS_WIRE_SIG_MAX_LEN)
        return 0;
    memcpy(out, sig, n);
    return n;
}

static const cs_source_ops js_ops = {
    .next = js_next, .read = js_read, .destroy = js_destroy, .signature = js_signature};

int cs_js_source_new(cs_source **out, const cs_js_source_config *cfg, cs_ring *ring, cs_cancel *cancel,
                     cs_err *err)
{
    *out = NULL;
    js_source *s = calloc(1, sizeof *s);
    if (!s)
        return cs_err_set(err, 0, "jetstream source: out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->last_skip = -1;
    if (!(s->url = strdup(cfg->url)) || !(s->asm_ = rli_asm_new(CS_MAX_PAYLOAD_SIZE, CS_MAX_CHUNK_SIZE))) {
        js_destroy(&s->base);
        return cs_err_set(err, 0, "jetstream source: out of memory");
    }
    s->base.ops = &js_ops;
    if (cfg->trusted_keys && *cfg->trusted_keys &&
        (cs_sig_keyset_load(cfg->trusted_keys, &s->keys, err) != 0 || !rli_asm_want_sha256(s->asm_))) {
        js_destroy(&s->base);
        return -1;
    }
    if (!(s->gap = cs_jsgap_new(cfg->gap_wait_ns, s->keys))) {
        js_destroy(&s->base);
        return cs_err_set(err, 0, "jetstream source: out of memory");
    }
    snprintf(s->stream, sizeof s->stream, "%s", cfg->stream);
    s->start = cfg->start;
    s->ring = ring;
    s->cancel = cancel;
    atomic_init(&s->disconnects, 0);
    int rc = cs_jss_connect(s, cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 5000, cfg->auth, err);
    if (rc == 0 && cfg->run && *cfg->run)
        snprintf(s->run, sizeof s->run, "%s", cfg->run);
    else if (rc == 0)
        rc = cs_jss_newest_run(s, err);
    if (rc != 0) {
        js_destroy(&s->base);
        return -1;
    }
    cs_js_run_filter(s->filter, sizeof s->filter, s->stream, s->run);
    *out = &s->base;
    return 0;
}

const char *cs_js_source_run(const cs_source *s) { return ((const js_source *)s)->run; }

void cs_js_source_stats(const cs_source *src, cs_js_source_stats_t *out)
{
    const js_source *s = (const js_source *)src;
    for (int i = 0; i < CS_JS_SKIP_REASONS; i++)
        out->skipped[i] = atomic_load(&((js_source *)s)->skipped[i]);
    out->waiting_for = atomic_load(&((js_source *)s)->waiting_for);
    out->gaps = atomic_load(&((js_source *)s)->gaps);
    out->gap_ledgers = atomic_load(&((js_source *)s)->gap_ledgers);
    out->ledgers_live = atomic_load(&((js_source *)s)->ledgers_live);
    out->ledgers_stream = atomic_load(&((js_source *)s)->ledgers_stream);
    out->stream_moves = atomic_load(&((js_source *)s)->stream_moves);
}

void cs_js_source_identity(const cs_source *s, char *buf, size_t len)
{
    const js_source *j = (const js_source *)s;
    snprintf(buf, len, "source=jetstream stream=%s run=%s", j->stream, j->run);
}
