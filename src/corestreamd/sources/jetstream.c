#include "corestreamd/sources/jetstream.h"

#include <nats/nats.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "common/clock.h"
#include "common/godur.h"
#include "common/log.h"
#include "corestream/wire.h"
#include "corestreamd/jetstream/connect.h"
#include "corestreamd/jetstream/library.h"
#include "corestreamd/jetstream/naming.h"
#include "remoteledger/assemble.h"
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
    uint32_t discarded;      /* the assembler's discard count when forwarding of this copy began */
    XXH64_state_t *fwd_hash; /* over the bytes forwarded of the current ledger */
    size_t recheck_len;      /* a repeated BEGIN restarted the ledger after this many bytes had */
    uint64_t recheck_sum;    /* gone out (with this XXH64): the new copy must start with them */
} js_source;

static const char *nats_detail(natsStatus s)
{
    const char *last = nats_GetLastError(NULL);
    return last && *last ? last : natsStatus_GetText(s);
}

static void on_disconnected(natsConnection *nc, void *arg)
{
    (void)nc;
    js_source *s = arg;
    atomic_fetch_add(&s->disconnects, 1);
}

static void on_closed(natsConnection *nc, void *arg)
{
    (void)nc;
    js_source *s = arg;
    pthread_mutex_lock(&s->mu);
    s->closed = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Closes the connection and waits (at most 5 s) for its last callback, which nats.c runs on its
 * own thread after Close has returned. */
static void close_connection(js_source *s)
{
    natsConnection_Close(s->nc);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    pthread_mutex_lock(&s->mu);
    while (!s->closed)
        if (pthread_cond_timedwait(&s->cv, &s->mu, &until) != 0)
            break;
    pthread_mutex_unlock(&s->mu);
}

static void drop_sub(js_source *s)
{
    natsMsg_Destroy(s->cur);
    s->cur = NULL;
    /* No unsubscribe: on a lost server it would wait for a reply that never comes; the server
     * removes the ephemeral consumer after CONSUMER_INACTIVE_NS. */
    natsSubscription_Destroy(s->sub);
    s->sub = NULL;
}

static void lost(js_source *s, const char *why)
{
    drop_sub(s);
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
                          (unsigned long long)from, nats_detail(st), (int)jerr);
    }
    natsSubscription_SetPendingLimits(s->sub, -1, 256 << 20);
    s->last_msg_ns = cs_mono_ns();
    return 0;
}

/* Where the first ledger wanted starts: right after the END of the one before it, when the stream
 * still holds that END; else the run's first message. */
static int position(js_source *s, cs_err *err)
{
    uint32_t oldest, latest;
    if (cs_ring_bounds(s->ring, &oldest, &latest))
        s->need = latest + 1;
    else
        s->need = s->start;
    s->from_sseq = 0;
    if (s->need > 1) {
        char subj[CS_JS_SUBJECT_MAX];
        cs_js_subject(subj, sizeof subj, s->stream, s->run, s->need - 1);
        natsMsg *m = NULL;
        jsErrCode jerr = 0;
        natsStatus st = js_GetLastMsg(&m, s->js, s->stream, subj, NULL, &jerr);
        if (st == NATS_OK) {
            s->from_sseq = natsMsg_GetSequence(m) + 1;
            natsMsg_Destroy(m);
        } else if (st != NATS_NOT_FOUND && jerr != JSNoMessageFoundErr) {
            return cs_err_set(err, 0, "jetstream source: read the last message of %s: %s (code %d)", subj,
                              nats_detail(st), (int)jerr);
        }
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
 * recreated as needed: anything that keeps it from reading counts as an outage, logged once);
 * NULL with err (CS_ERR_CANCELLED) only on cancellation. The message stays owned by the source
 * until the next call. */
static natsMsg *next_msg(js_source *s, cs_err *err)
{
    natsMsg_Destroy(s->cur);
    s->cur = NULL;
    for (;;) {
        if (cs_cancel_is_set(s->cancel)) {
            cs_err_set(err, CS_ERR_CANCELLED, "cancelled");
            return NULL;
        }
        if (s->sub && atomic_load(&s->disconnects) != s->sub_disconnects)
            lost(s, "the connection to NATS was lost");
        if (!s->sub) {
            cs_err e;
            if (subscribe(s, &e) != 0) {
                lost(s, e.msg);
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
        snprintf(why, sizeof why, "%s (code %d)", nats_detail(st), (int)jerr);
        lost(s, why);
        cs_cancel_sleep_until(s->cancel, cs_mono_ns() + RETRY_NS);
    }
}

static int stream_fault(js_source *s, uint32_t seq, uint64_t sseq, const char *what, cs_err *err)
{
    CS_LOG(CS_LOG_ERROR, "jetstream stream is not a clean flow", KV_S("stream", s->stream), KV_S("run", s->run),
           KV_U("ledger", seq), KV_U("stream_seq", sseq), KV_S("error", what));
    return cs_err_set(err, 0, "jetstream source: ledger %u at stream sequence %llu: %s", seq,
                      (unsigned long long)sseq, what);
}

/* The ledger a subject "<stream>.<run>.<seq>" names, or -1. */
static int64_t subject_seq(const js_source *s, const char *subj)
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

/* Feeds the next message of the run to the assembler. Returns 1 when fed (*rs says what it did),
 * 0 when the message was skipped (already consumed, or before the first ledger served), -1 with
 * err on a fault or cancellation. seq names the ledger expected, for messages. */
static int feed(js_source *s, uint32_t seq, rli_asm_status *rs, cs_err *err)
{
    natsMsg *m = next_msg(s, err);
    if (!m)
        return -1;
    jsMsgMetaData *meta = NULL;
    uint64_t sseq = 0;
    if (natsMsg_GetMetaData(&meta, m) == NATS_OK) {
        sseq = meta->Sequence.Stream;
        jsMsgMetaData_Destroy(meta);
    }
    if (sseq == 0)
        return stream_fault(s, seq, s->last_sseq + 1, "a message without JetStream metadata", err);
    if (sseq <= s->last_sseq)
        return 0; /* delivered again after a consumer was recreated: already consumed */
    s->last_sseq = sseq;
    const uint8_t *data = (const uint8_t *)natsMsg_GetData(m);
    size_t len = (size_t)natsMsg_GetDataLength(m);
    cs_wire_msg w;
    cs_err e;
    bool decoded = cs_wire_decode(data, len, &w, &e) == 0;
    if (decoded) {
        int64_t subj = subject_seq(s, natsMsg_GetSubject(m));
        if (subj != (int64_t)w.seq) {
            char what[CS_JS_SUBJECT_MAX + 96];
            snprintf(what, sizeof what, "a message of ledger %u stored under subject %s", w.seq,
                     natsMsg_GetSubject(m));
            return stream_fault(s, w.seq, sseq, what, err);
        }
    }
    if (!s->started) {
        /* Ledgers before the one wanted (or, wanting any, before the first BEGIN) are not ours to
         * serve; the first one that is must begin here. */
        if (decoded && s->need && w.seq < s->need)
            return 0;
        if (decoded && !s->need && w.type != CS_WIRE_TYPE_BEGIN)
            return 0;
        s->started = true;
    }
    *rs = rli_asm_message(s->asm_, data, len, &e);
    if (*rs == RLI_ASM_ERROR)
        return stream_fault(s, decoded ? w.seq : seq, sseq, e.msg, err);
    if (*rs == RLI_ASM_LEDGER) {
        rl_ledger_info info;
        s->ledger = rli_asm_ledger(s->asm_, &s->ledger_len, &info);
        s->verified = true;
        if (info.discarded_partials)
            CS_LOG(CS_LOG_WARN, "jetstream stream began a ledger again; the partial copy was dropped",
                   KV_S("stream", s->stream), KV_S("run", s->run), KV_U("ledger", info.sequence),
                   KV_U("stream_seq", sseq));
    }
    return 1;
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
        uint32_t expect = rli_asm_expected(s->asm_);
        if (expect)
            em->seq = expect;
        rli_asm_status rs;
        int r = feed(s, em->seq, &rs, err);
        if (r < 0)
            return -1;
        uint32_t seq;
        if (r == 0 || !rli_asm_active(s->asm_, &seq))
            continue; /* a BEGIN opens a flow; no single message can complete one */
        size_t have;
        rli_asm_partial(s->asm_, &have, &s->discarded);
        s->open = true;
        s->need = 0;
        s->ledger_off = 0;
        s->recheck_len = 0;
        XXH64_reset(s->fwd_hash, 0);
        s->seq = seq;
        em->seq = seq;
        return 1;
    }
}

/* A repeated BEGIN restarted the ledger after part of it had gone out: what went out must be the
 * new copy's first bytes, or the subscribers hold bytes no END can vouch for. */
static int check_restart(js_source *s, const uint8_t *p, size_t have, uint32_t seq, cs_err *err)
{
    if (have < s->recheck_len)
        return 0;
    if (XXH64(p, s->recheck_len, 0) != s->recheck_sum)
        return stream_fault(s, seq, s->last_sseq,
                            "the stream began the ledger again with other bytes than those already forwarded", err);
    s->recheck_len = 0;
    return 0;
}

static ssize_t js_read(cs_source *base, uint8_t *buf, size_t len, cs_err *err)
{
    js_source *s = (js_source *)base;
    if (!s->open)
        return cs_err_set(err, 0, "jetstream source: read without a ledger");
    uint32_t seq = s->seq;
    for (;;) {
        size_t have;
        uint32_t discarded;
        const uint8_t *p;
        if (s->verified) {
            p = s->ledger;
            have = s->ledger_len;
        } else {
            p = rli_asm_partial(s->asm_, &have, &discarded);
            if (discarded != s->discarded) {
                s->discarded = discarded;
                if (s->ledger_off > 0 && s->recheck_len == 0) {
                    s->recheck_len = s->ledger_off;
                    s->recheck_sum = XXH64_digest(s->fwd_hash);
                }
            }
        }
        if (s->recheck_len) {
            if (s->verified && have < s->recheck_len)
                return stream_fault(s, seq, s->last_sseq,
                                    "the stream began the ledger again with fewer bytes than those already forwarded",
                                    err);
            if (check_restart(s, p, have, seq, err) != 0)
                return -1;
        }
        if (!s->recheck_len && have > s->ledger_off) {
            size_t n = have - s->ledger_off;
            if (n > len)
                n = len;
            memcpy(buf, p + s->ledger_off, n);
            XXH64_update(s->fwd_hash, buf, n);
            s->ledger_off += n;
            return (ssize_t)n;
        }
        if (s->verified)
            return 0; /* every byte out and END verified: the source loop may end the ledger */
        rli_asm_status rs;
        if (feed(s, seq, &rs, err) < 0)
            return -1;
    }
}

static void js_destroy(cs_source *base)
{
    js_source *s = (js_source *)base;
    if (!s)
        return;
    natsMsg_Destroy(s->cur);
    if (s->sub) {
        if (!s->lost)
            natsSubscription_Unsubscribe(s->sub); /* deletes the ephemeral consumer now */
        natsSubscription_Destroy(s->sub);
    }
    jsCtx_Destroy(s->js);
    if (s->nc) {
        close_connection(s);
        natsConnection_Destroy(s->nc);
    }
    natsOptions_Destroy(s->opts);
    rli_asm_free(s->asm_);
    if (s->fwd_hash)
        XXH64_freeState(s->fwd_hash);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->url);
    free(s);
}

static const cs_source_ops js_ops = {.next = js_next, .read = js_read, .destroy = js_destroy};

/* The run of the stream's newest message, from its subject. */
static int newest_run(js_source *s, cs_err *err)
{
    char all[CS_JS_SUBJECT_MAX];
    cs_js_stream_subjects(all, sizeof all, s->stream);
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    natsStatus st = js_GetLastMsg(&m, s->js, s->stream, all, NULL, &jerr);
    if (st == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr)
        return cs_err_set(err, 0,
                          "jetstream source: stream %s holds no message; start the core's publisher first, or "
                          "name --jetstream-run",
                          s->stream);
    if (st != NATS_OK)
        return cs_err_set(err, 0, "jetstream source: read the newest message of stream %s: %s (code %d)", s->stream,
                          nats_detail(st), (int)jerr);
    const char *subj = natsMsg_GetSubject(m);
    size_t ls = strlen(s->stream);
    const char *r = subj + ls + 1, *dot = strncmp(subj, s->stream, ls) == 0 && subj[ls] == '.' ? strchr(r, '.') : NULL;
    int rc = 0;
    if (!dot || dot == r || (size_t)(dot - r) >= sizeof s->run)
        rc = cs_err_set(err, 0, "jetstream source: the newest message's subject \"%.200s\" is not %s.<run>.<seq>", subj,
                        s->stream);
    else
        snprintf(s->run, sizeof s->run, "%.*s", (int)(dot - r), r);
    natsMsg_Destroy(m);
    return rc;
}

static int connect(js_source *s, int64_t timeout_ms, const cs_js_auth *auth, cs_err *err)
{
    natsStatus st = cs_js_library_open();
    if (st != NATS_OK)
        return cs_err_set(err, 0, "jetstream source: open nats.c: %s", natsStatus_GetText(st));
    cs_js_conn_config cc = {.urls = s->url, .name = "corestreamd-edge", .timeout_ms = timeout_ms, .auth = auth};
    if (cs_js_options_new(&s->opts, &cc, err) != 0)
        return -1;
    st = natsOptions_SetMaxReconnect(s->opts, -1);
    if (st == NATS_OK)
        st = natsOptions_SetReconnectWait(s->opts, 250);
    /* A dead server is noticed within about 4 s even when no fetch is waiting on it. */
    if (st == NATS_OK)
        st = natsOptions_SetPingInterval(s->opts, 2000);
    if (st == NATS_OK)
        st = natsOptions_SetMaxPingsOut(s->opts, 2);
    if (st == NATS_OK)
        st = natsOptions_SetIOBufSize(s->opts, 1 << 20);
    if (st == NATS_OK)
        st = natsOptions_SetDisconnectedCB(s->opts, on_disconnected, s);
    if (st == NATS_OK)
        st = natsOptions_SetClosedCB(s->opts, on_closed, s);
    if (st == NATS_OK)
        st = natsConnection_Connect(&s->nc, s->opts);
    if (st != NATS_OK) {
        char cause[CS_ERR_MSG_MAX / 2];
        return cs_err_set(err, 0, "jetstream source: connect to %s: %s", s->url,
                          cs_js_connect_cause(st, auth && cs_js_auth_tls(auth), cause, sizeof cause));
    }
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = API_WAIT_MS;
    st = natsConnection_JetStream(&s->js, s->nc, &jo);
    if (st != NATS_OK)
        return cs_err_set(err, 0, "jetstream source: JetStream context on %s: %s", s->url, nats_detail(st));
    return 0;
}

int cs_js_source_new(cs_source **out, const cs_js_source_config *cfg, cs_ring *ring, cs_cancel *cancel,
                     cs_err *err)
{
    *out = NULL;
    js_source *s = calloc(1, sizeof *s);
    if (!s)
        return cs_err_set(err, 0, "jetstream source: out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (!(s->url = strdup(cfg->url)) || !(s->asm_ = rli_asm_new(CS_MAX_PAYLOAD_SIZE, CS_MAX_CHUNK_SIZE)) ||
        !(s->fwd_hash = XXH64_createState())) {
        js_destroy(&s->base);
        return cs_err_set(err, 0, "jetstream source: out of memory");
    }
    s->base.ops = &js_ops;
    snprintf(s->stream, sizeof s->stream, "%s", cfg->stream);
    s->start = cfg->start;
    s->ring = ring;
    s->cancel = cancel;
    atomic_init(&s->disconnects, 0);
    int rc = connect(s, cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 5000, cfg->auth, err);
    if (rc == 0 && cfg->run && *cfg->run)
        snprintf(s->run, sizeof s->run, "%s", cfg->run);
    else if (rc == 0)
        rc = newest_run(s, err);
    if (rc != 0) {
        js_destroy(&s->base);
        return -1;
    }
    cs_js_run_filter(s->filter, sizeof s->filter, s->stream, s->run);
    *out = &s->base;
    return 0;
}

const char *cs_js_source_run(const cs_source *s) { return ((const js_source *)s)->run; }

void cs_js_source_identity(const cs_source *s, char *buf, size_t len)
{
    const js_source *j = (const js_source *)s;
    snprintf(buf, len, "source=jetstream stream=%s run=%s", j->stream, j->run);
}
