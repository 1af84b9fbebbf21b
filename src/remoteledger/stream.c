/* libremoteledger: the public API and the connection (PORTSPEC 3). A session (rl_stream_open, or
 * one rl_stream_raw_ledgers call, which is a session pulled to its end) owns one connection at a
 * time, serviced on the calling thread: the transport (transport.c: a socket of our own, wrapped
 * in TLS for wss://), the upgrade (handshake.c), the RFC 6455 framing (wsframe.c) and the
 * assembler (assemble.c), which does the protocol. This file drives them, maps what happens onto
 * the prototype's error classification and the timeouts, stops the parse at each verified ledger
 * so it can be handed over (callback or pull), and, with resume, replaces a lost connection by one
 * that starts at the ledger the tracker expects next. ws:// and wss:// differ only in the
 * transport: payload goes to the assembler in slices straight from one large receive buffer
 * either way. rl_stream_bounds (GET /healthz, read by healthz.c) reuses the dial. */
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "common/godur.h"
#include "common/goquote.h"
#include "corestream/remoteledger.h"
#include "corestream/wire.h"
#include "remoteledger/assemble.h"
#include "remoteledger/endpoint.h"
#include "remoteledger/handshake.h"
#include "remoteledger/healthz.h"
#include "remoteledger/stream_internal.h"
#include "remoteledger/transport.h"
#include "remoteledger/wsframe.h"
#include "wire/wire.h"

/* Socket reads go into this per-call buffer, and the framing parser consumes it in place. Measured
 * on loopback (2 vCPUs) with lws's RAW socket before: throughput is flat from 64 KiB to 4 MiB
 * (memory-bound, about 3 GB/s per client core for raw chunks), but 64 KiB and 256 KiB wake the
 * client more often and lengthen the delivery tail of 200 KiB ledgers; 1 MiB gave the best tail
 * and 4 MiB nothing more. */
#define RBUF_SIZE (1024u << 10)
/* Payload the assembler can take in place (a raw CHUNK's bytes, a fragmented zstd CHUNK's) is read
 * straight into the assembly buffer, at most this much per read. Once frames are this large
 * (CHUNK-sized), a read at a frame boundary takes only HEAD_READ bytes into rbuf: the frame header
 * and the CHUNK header (2 + 8 + 11 bytes) with a little payload, so the rest of the frame lands in
 * place instead of being read into rbuf and copied. One more read per frame buys a copy less per
 * payload byte. */
#define INPLACE_MAX (4096u << 10)
#define INPLACE_FRAME_MIN (16u << 10)
#define HEAD_READ 64u
/* How long to let a close frame of ours (or the echo of the server's) get written, at most. */
#define LINGER_MS 1000
#define CLOSE_PROTOCOL_ERROR 1002 /* what coder/websocket closes with on a framing violation */
#define CANCELED_MSG "context canceled"
#define TRUNC_PREFIX "remoteledger: stream ended before the requested range was delivered: "

/* ---- small public helpers ------------------------------------------------------------------ */

const char *rl_result_name(rl_result r)
{
    static const char *const names[] = {
        [RL_OK] = "RL_OK",
        [RL_ERR_TOO_FAR_BEHIND] = "RL_ERR_TOO_FAR_BEHIND",
        [RL_ERR_GAP] = "RL_ERR_GAP",
        [RL_ERR_TRUNCATED] = "RL_ERR_TRUNCATED",
        [RL_ERR_PROTOCOL] = "RL_ERR_PROTOCOL",
        [RL_ERR_DIAL] = "RL_ERR_DIAL",
        [RL_ERR_READ] = "RL_ERR_READ",
        [RL_ERR_CANCELLED] = "RL_ERR_CANCELLED",
        [RL_ERR_INVALID] = "RL_ERR_INVALID",
        [RL_ERR_NOMEM] = "RL_ERR_NOMEM",
        [RL_ERR_TLS] = "RL_ERR_TLS",
        [RL_ERR_DIAL_TIMEOUT] = "RL_ERR_DIAL_TIMEOUT",
        [RL_ERR_HANDSHAKE_TIMEOUT] = "RL_ERR_HANDSHAKE_TIMEOUT",
        [RL_ERR_IDLE_TIMEOUT] = "RL_ERR_IDLE_TIMEOUT",
        [RL_END] = "RL_END",
        [RL_AGAIN] = "RL_AGAIN",
    };
    if ((unsigned)r < sizeof names / sizeof names[0] && names[r])
        return names[r];
    return "RL_ERR_UNKNOWN";
}

rl_range rl_bounded_range(uint32_t from, uint32_t to) { return (rl_range){from, to, true}; }
rl_range rl_unbounded_range(uint32_t from) { return (rl_range){from, 0, false}; }
rl_range rl_single_ledger_range(uint32_t seq) { return (rl_range){seq, seq, true}; }

bool rl_info_delivery(const rl_ledger_info *i, int64_t *ns)
{
    if (i->emit_end_unix_nano == 0)
        return false;
    *ns = i->received_unix_nano - i->emit_end_unix_nano;
    return true;
}

bool rl_info_pipeline(const rl_ledger_info *i, int64_t *ns)
{
    if (i->emit_start_unix_nano == 0)
        return false;
    *ns = i->received_unix_nano - i->emit_start_unix_nano;
    return true;
}

bool rl_info_emit_window(const rl_ledger_info *i, int64_t *ns)
{
    if (i->emit_start_unix_nano == 0 || i->emit_end_unix_nano == 0)
        return false;
    *ns = i->emit_end_unix_nano - i->emit_start_unix_nano;
    return true;
}

unsigned rl_version_number(void) { return RL_VERSION_NUMBER; }
const char *rl_version_string(void) { return RL_VERSION_STRING; }

_Static_assert(RL_DEFAULT_MAX_MESSAGE_SIZE == CS_MAX_PAYLOAD_SIZE, "the documented cap is the protocol's");
_Static_assert(RL_DEFAULT_MAX_CHUNK_SIZE == CS_MAX_CHUNK_SIZE, "the documented chunk bound is the protocol's");

/* ---- the stream ----------------------------------------------------------------------------- */

rl_result rl_stream_new(rl_stream **out, const char *url, const rl_options *opts)
{
    *out = NULL;
    rl_stream *s = calloc(1, sizeof *s);
    if (!s)
        return RL_ERR_NOMEM;
    atomic_init(&s->cancelled, false);
    pthread_mutex_init(&s->mu, NULL);
    s->live_wake = -1;
    s->backoff_wake = -1;
    s->retry_timer = -1;
    if (rli_opts_copy(&s->opts, opts, &s->url_err)) {
        s->err = s->url_err;
        *out = s;
        return (rl_result)s->url_err.kind;
    }
    rl_options *o = &s->opts;
    if (!rli_opts_own_strings(o, &s->strs)) {
        rl_stream_free(s);
        return RL_ERR_NOMEM;
    }
    *out = s;
    if (rli_opts_check(o, &s->url_err) || rli_url_parse(&s->url, url ? url : "", &s->url_err)) {
        s->err = s->url_err;
        return (rl_result)s->url_err.kind;
    }
    s->url_ok = true;
    return RL_OK;
}

void rl_stream_free(rl_stream *s)
{
    if (!s)
        return;
    rl_stream_close(s);
    rli_url_free(&s->url);
    free(s->endpoint);
    rli_asm_free(s->asm_);
    if (s->backoff_wake >= 0)
        close(s->backoff_wake);
    if (s->retry_timer >= 0)
        close(s->retry_timer);
    pthread_mutex_destroy(&s->mu);
    rli_opts_free_strings(&s->strs);
    free(s);
}

void rl_stream_cancel(rl_stream *s)
{
    atomic_store(&s->cancelled, true);
    pthread_mutex_lock(&s->mu);
    if (s->live_wake >= 0)
        rli_tp_wake(s->live_wake);
    if (s->backoff_wake >= 0)
        rli_tp_wake(s->backoff_wake);
    pthread_mutex_unlock(&s->mu);
}

const char *rl_stream_error(const rl_stream *s) { return s->err.msg; }

bool rl_stream_too_far_behind(const rl_stream *s, uint32_t *requested, uint32_t *oldest, uint32_t *latest)
{
    if (!s->tfb)
        return false;
    if (requested)
        *requested = s->tfb_requested;
    if (oldest)
        *oldest = s->tfb_oldest;
    if (latest)
        *latest = s->tfb_latest;
    return true;
}

const char *rl_stream_endpoint(const rl_stream *s) { return s->endpoint ? s->endpoint : ""; }

/* ---- one connection --------------------------------------------------------------------------- */

typedef struct rli_conn {
    rl_stream *s;
    rli_asm *a;
    const char *ep; /* the URL that messages name: the stream's endpoint, or the /healthz URL */
    rl_range range;
    int64_t read_limit;
    int wake;                   /* the wake eventfd (published as live_wake) */
    bool ready;                 /* a verified ledger is in the assembler, handed over or about to be */
    bool no_retry;              /* resume must not retry this failure (a refusal, a limit of ours) */
    uint16_t peer_close;        /* the code of the server's close frame, 0 when none came */
    uint32_t ready_seq;

    rli_tp tp;
    int64_t dial_deadline_ms;   /* for the TCP connect; -1: none */
    int64_t hs_deadline_ms;     /* for TLS and the upgrade, until established; -1: none */
    int64_t idle_ms;            /* once established: the idle timeout, -1 for none */
    int64_t last_msg_ms;        /* when the idle clock last restarted (a message, a hand-over) */
    int64_t linger_deadline_ms; /* while linger */
    uint8_t *rbuf;              /* RBUF_SIZE */
    size_t in_off, in_len;      /* rbuf[in_off, in_len) is read and not yet parsed */
    uint8_t *out;               /* what is still to be written: the request, then control frames */
    size_t out_len, out_off, out_cap;

    bool established;
    bool done;       /* the outcome is decided */
    bool linger;     /* ...but write the close frame first (bounded by linger_deadline_ms) */
    bool closing;    /* a close frame of ours (or the echo of the server's) is due */
    bool rx_off;     /* nothing more is read: a close is on its way out */
    bool drop_after; /* the bytes in out end with that close frame: drop once they are written */
    uint8_t close_payload[RLI_WS_MAX_CONTROL];
    size_t close_len;
    rl_result result;

    bool in_msg;      /* a data message has started and not ended */
    uint64_t msg_len; /* its length so far, as declared by its frames */
    bool big_frames;  /* the last data frame longer than HEAD_READ was CHUNK-sized (see HEAD_READ) */

    char key[RLI_HS_KEY_LEN + 1];
    uint64_t msg_hint; /* the message's length when its first frame is its last, else 0 */
    rli_ws_parser wp;
    bool pong_pending;
    uint8_t pong[RLI_WS_MAX_CONTROL];
    size_t pong_len;
    rli_hs_reader hs;
} rli_conn;

static rl_result conn_fail(rli_conn *c, rl_result r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static rl_result conn_fail(rli_conn *c, rl_result r, const char *fmt, ...)
{
    if (c->done)
        return c->result;
    va_list ap;
    va_start(ap, fmt);
    cs_err_vset(&c->s->err, (int)r, fmt, ap);
    va_end(ap);
    c->result = r;
    c->done = true;
    return r;
}

static void conn_ok(rli_conn *c)
{
    if (c->done)
        return;
    cs_err_clear(&c->s->err);
    c->result = RL_OK;
    c->done = true;
}

static void conn_cancelled(rli_conn *c)
{
    conn_fail(c, RL_ERR_CANCELLED, CANCELED_MSG);
    c->linger = false;
}

/* Queues a close frame with this payload: it is written next, and the connection is then dropped
 * without waiting for an answer. Nothing more is read meanwhile. */
static void queue_close_payload(rli_conn *c, const uint8_t *p, size_t n)
{
    if (n > sizeof c->close_payload)
        n = sizeof c->close_payload;
    c->closing = true;
    c->linger = true;
    c->rx_off = true;
    memcpy(c->close_payload, p, n);
    c->close_len = n;
    c->linger_deadline_ms = rli_mono_ms() + LINGER_MS;
}

static void queue_close(rli_conn *c, uint16_t code, const char *reason)
{
    uint8_t p[RLI_WS_MAX_CONTROL];
    size_t rlen = strlen(reason);
    if (rlen > sizeof p - 2)
        rlen = sizeof p - 2;
    p[0] = (uint8_t)(code >> 8);
    p[1] = (uint8_t)code;
    memcpy(p + 2, reason, rlen);
    queue_close_payload(c, p, 2 + rlen);
}

static int64_t now_unix_nano(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* coder/websocket's StatusCode names, as the prototype's read errors print them. */
static void status_name(uint16_t code, char *buf, size_t len)
{
    static const char *const names[] = {
        "StatusNormalClosure",     "StatusGoingAway",      "StatusProtocolError",
        "StatusUnsupportedData",   "statusReserved",       "StatusNoStatusRcvd",
        "StatusAbnormalClosure",   "StatusInvalidFramePayloadData", "StatusPolicyViolation",
        "StatusMessageTooBig",     "StatusMandatoryExtension", "StatusInternalError",
        "StatusServiceRestart",    "StatusTryAgainLater",  "StatusBadGateway",
        "StatusTLSHandshake",
    };
    if (code >= 1000 && code <= 1015)
        snprintf(buf, len, "%s", names[code - 1000]);
    else
        snprintf(buf, len, "StatusCode(%u)", code);
}

/* A complete ledger: parsing stops here, so the ledger can be handed over (the assembler holds
 * it until it is fed again). */
static int ledger_ready(rli_conn *c)
{
    rl_ledger_info info;
    rli_asm_ledger(c->a, NULL, &info);
    c->ready = true;
    c->ready_seq = info.sequence;
    return 1;
}

static int after_message(rli_conn *c, rli_asm_status st, cs_err *err)
{
    c->in_msg = false;
    c->last_msg_ms = rli_mono_ms();
    if (st == RLI_ASM_ERROR) {
        conn_fail(c, (rl_result)err->kind, "%s", err->msg);
        return -1;
    }
    if (st == RLI_ASM_LEDGER)
        return ledger_ready(c);
    return 0;
}

static int text_message(rli_conn *c)
{
    conn_fail(c, RL_ERR_PROTOCOL, "remoteledger: protocol violation: unexpected MessageText message");
    return -1;
}

/* A message over the read limit: a read error, and a close 1009 in coder/websocket's words. */
static void read_limited(rli_conn *c)
{
    c->no_retry = true; /* the same ledger would be over the limit again */
    char reason[64];
    snprintf(reason, sizeof reason, "read limited at %" PRId64 " bytes", c->read_limit + 1);
    conn_fail(c, RL_ERR_READ, "remoteledger: read: %s", reason);
    queue_close(c, CS_CLOSE_TOO_BIG, reason);
}

/* The server closed with a close frame: PORTSPEC 3.3's classification. */
static void on_peer_close(rli_conn *c, const uint8_t *in, size_t len)
{
    uint16_t code = 1005; /* no status received */
    const char *reason = "";
    size_t rlen = 0;
    if (len >= 2) {
        code = (uint16_t)(in[0] << 8 | in[1]);
        reason = (const char *)in + 2;
        rlen = len - 2;
    }
    c->peer_close = code;
    uint32_t active_seq;
    uint32_t expected = rli_asm_expected(c->a);
    if (code == CS_CLOSE_NORMAL || code == CS_CLOSE_GOING_AWAY) {
        if (rli_asm_active(c->a, &active_seq)) {
            conn_fail(c, RL_ERR_TRUNCATED, TRUNC_PREFIX "stream closed mid-assembly of ledger %" PRIu32,
                      active_seq);
            return;
        }
        rl_range r = c->range;
        if (!r.bounded || expected == 0 || expected > r.to) {
            conn_ok(c);
        } else if (expected == r.from) {
            char rs[64];
            rli_range_format(r, rs, sizeof rs);
            conn_fail(c, RL_ERR_TRUNCATED, TRUNC_PREFIX "received no ledgers, requested %s", rs);
        } else {
            conn_fail(c, RL_ERR_TRUNCATED,
                      TRUNC_PREFIX "got through ledger %" PRIu32 ", requested through %" PRIu32,
                      expected - 1, r.to);
        }
        return;
    }
    if (code == CS_CLOSE_TOO_FAR_BEHIND) {
        uint32_t oldest = 0, latest = 0;
        if (!cs_wire_parse_too_far_behind(reason, rlen, &oldest, &latest))
            oldest = latest = 0;
        rl_stream *s = c->s;
        s->tfb = true;
        s->tfb_requested = expected;
        s->tfb_oldest = oldest;
        s->tfb_latest = latest;
        if (oldest == 0 && latest == 0)
            conn_fail(c, RL_ERR_TOO_FAR_BEHIND,
                      "remoteledger: requested ledger is behind the server's retention: requested %" PRIu32,
                      expected);
        else
            conn_fail(c, RL_ERR_TOO_FAR_BEHIND,
                      "remoteledger: requested ledger is behind the server's retention: requested %" PRIu32
                      ", server retains [%" PRIu32 ",%" PRIu32 "]",
                      expected, oldest, latest);
        return;
    }
    char name[40], quoted[512];
    status_name(code, name, sizeof name);
    cs_go_quote_n(quoted, sizeof quoted, reason, rlen);
    conn_fail(c, RL_ERR_READ, "remoteledger: read: failed to get reader: received close frame: status = %s and reason = %s",
              name, quoted);
}

/* The connection is gone (closed by the server, or reset). */
static void on_closed(rli_conn *c)
{
    if (c->done)
        return;
    if (atomic_load(&c->s->cancelled))
        conn_cancelled(c);
    else if (!c->established)
        conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: read failed", c->ep);
    else if (c->in_msg)
        conn_fail(c, RL_ERR_READ, "remoteledger: read: failed to read frame payload: unexpected EOF");
    else
        conn_fail(c, RL_ERR_READ, "remoteledger: read: failed to get reader: failed to read frame header: EOF");
}

/* The transport failed. A TLS failure is reported in its words; a plain socket error (a reset,
 * say) reads as the connection closing, as it did over lws. */
static void on_transport_error(rli_conn *c)
{
    if (c->done)
        return;
    if (atomic_load(&c->s->cancelled))
        conn_cancelled(c);
    else if (!c->tp.err_tls)
        on_closed(c);
    else if (!c->established)
        conn_fail(c, RL_ERR_TLS, "remoteledger: dial %s: %s", c->ep, c->tp.err);
    else
        conn_fail(c, RL_ERR_READ, "remoteledger: read: %s", c->tp.err);
}

/* ---- output ------------------------------------------------------------------------------------ */

static bool out_reserve(rli_conn *c, size_t n)
{
    if (c->out_cap - c->out_len >= n)
        return true;
    size_t cap = c->out_len + n;
    uint8_t *p = realloc(c->out, cap);
    if (!p)
        return false;
    c->out = p;
    c->out_cap = cap;
    return true;
}

/* Appends a masked client frame to the output. */
static void put_frame(rli_conn *c, uint8_t opcode, const uint8_t *p, size_t n)
{
    uint8_t mask[4];
    rli_random_bytes(mask, sizeof mask);
    c->out_len += rli_ws_build_frame(c->out + c->out_len, opcode, p, n, mask);
}

/* Once the output is drained: the frames that are due. A pong that is due goes first, in the same
 * write as a close queued after its ping. Returns false when memory ran out. */
static bool compose_control(rli_conn *c)
{
    if (!c->pong_pending && !c->closing)
        return true;
    c->out_len = c->out_off = 0;
    if (!out_reserve(c, 2 * (RLI_WS_MAX_HEADER + RLI_WS_MAX_CONTROL)))
        return false;
    if (c->pong_pending) {
        put_frame(c, RLI_WS_OP_PONG, c->pong, c->pong_len);
        c->pong_pending = false;
    }
    if (c->closing) {
        put_frame(c, RLI_WS_OP_CLOSE, c->close_payload, c->close_len);
        c->closing = false;
        c->drop_after = true; /* after a close, drop at once, as coder/websocket's client does */
    }
    return true;
}

static bool queue_request(rli_conn *c, const char *target)
{
    const rli_url *u = &c->s->url;
    const char *token = c->s->opts.bearer_token;
    size_t n = rli_hs_request(NULL, 0, target, u->host, c->key, token);
    if (!out_reserve(c, n + 1))
        return false;
    rli_hs_request((char *)c->out, n + 1, target, u->host, c->key, token);
    c->out_len = n;
    return true;
}

/* ---- input ------------------------------------------------------------------------------------- */

/* Frames, after the handshake: payload slices go to the assembler as they are, straight from the
 * receive buffer. *used is how much of the input was parsed: all of it, unless a ledger completed
 * (c->ready), when parsing stops right after its END. Returns -1 when the connection must be
 * dropped now. */
static int on_frames(rli_conn *c, const uint8_t *in, size_t len, size_t *used)
{
    static const uint8_t empty[1];
    size_t off = 0;
    *used = len; /* unless a ledger stops the parse below */
    for (;;) {
        rli_ws_event ev;
        off += rli_ws_parse(&c->wp, in + off, len - off, &ev);
        switch (ev.kind) {
        case RLI_WS_EV_NONE:
            return 0;
        case RLI_WS_EV_FRAME:
            if (ev.first) {
                if (ev.opcode != RLI_WS_OP_BINARY)
                    return text_message(c);
                c->in_msg = true;
                c->msg_len = 0;
                c->msg_hint = ev.fin ? ev.frame_len : 0;
            }
            /* The whole frame counts as soon as its header says how long it is. */
            if (c->read_limit >= 0 && (ev.frame_len > (uint64_t)c->read_limit ||
                                       c->msg_len > (uint64_t)c->read_limit - ev.frame_len)) {
                read_limited(c);
                return 0;
            }
            c->msg_len += ev.frame_len;
            if (ev.frame_len > HEAD_READ) /* BEGIN, END and control frames leave it as it was */
                c->big_frames = ev.frame_len >= INPLACE_FRAME_MIN;
            continue;
        case RLI_WS_EV_DATA: {
            cs_err err;
            rli_asm_status st;
            if (ev.msg_start && ev.msg_end) {
                /* the whole message is in this buffer: decoded in place */
                st = rli_asm_message(c->a, ev.len ? ev.data : empty, ev.len, &err);
            } else {
                if (ev.msg_start)
                    rli_asm_msg_begin(c->a, c->msg_hint);
                if (ev.len)
                    rli_asm_msg_data(c->a, ev.data, ev.len);
                if (!ev.msg_end)
                    continue;
                st = rli_asm_msg_end(c->a, &err);
            }
            if (after_message(c, st, &err) < 0)
                return -1;
            if (c->ready) {
                *used = off;
                return 0;
            }
            if (c->done)
                return 0; /* a close of ours is queued: the rest is not wanted */
            continue;
        }
        case RLI_WS_EV_CONTROL:
            if (ev.opcode == RLI_WS_OP_PING) {
                memcpy(c->pong, ev.data, ev.len);
                c->pong_len = ev.len;
                c->pong_pending = true; /* a later ping before it is sent replaces it */
            } else if (ev.opcode == RLI_WS_OP_CLOSE) {
                on_peer_close(c, ev.data, ev.len);
                queue_close_payload(c, ev.data, ev.len); /* echo it, as lws did */
                return 0;
            }
            continue;
        case RLI_WS_EV_ERROR:
        default:
            conn_fail(c, RL_ERR_READ, "remoteledger: read: %s%s", ev.at_boundary ? "failed to get reader: " : "",
                      ev.err);
            queue_close(c, CLOSE_PROTOCOL_ERROR, ev.err);
            c->no_retry = true;
            return 0;
        }
    }
}

/* What one read got, or what is left of it: *used bytes were parsed. Until the upgrade is done
 * only the response head is taken, so the frames after it wait for the first rl_stream_next.
 * Returns -1 when the connection must be dropped now. */
static int on_bytes(rli_conn *c, const uint8_t *in, size_t len, size_t *used)
{
    *used = len;
    if (atomic_load(&c->s->cancelled)) {
        conn_cancelled(c);
        return -1;
    }
    if (c->established)
        return on_frames(c, in, len, used);
    const char *why = NULL;
    rli_hs_status st = rli_hs_feed(&c->hs, in, len, used, c->key, &why);
    if (st == RLI_HS_MORE) {
        *used = len;
        return 0;
    }
    if (st == RLI_HS_FAILED) {
        const char *token = c->s->opts.bearer_token;
        c->no_retry = c->hs.tls || (c->hs.status >= 400 && c->hs.status < 500); /* asked and refused */
        if (c->hs.status == 401 && token && *token)
            why = "server rejected the token (401)";
        /* A TLS answer on ws:// is the transport's mismatch, like plain HTTP on wss://. */
        conn_fail(c, c->hs.tls ? RL_ERR_TLS : RL_ERR_DIAL, "remoteledger: dial %s: %s", c->ep, why);
        return -1;
    }
    c->established = true;
    c->last_msg_ms = rli_mono_ms();
    return 0;
}

/* Where the next read may land in place: inside a data frame's payload that the assembler takes
 * as it is (see rli_asm_recv_slot), at most what the frame has left, so the read holds no header.
 * NULL: read into rbuf. */
static uint8_t *rx_slot(rli_conn *c, size_t *room)
{
    uint64_t left = rli_ws_payload_left(&c->wp);
    if (!c->in_msg || left == 0)
        return NULL;
    return rli_asm_recv_slot(c->a, left < INPLACE_MAX ? (size_t)left : INPLACE_MAX, room);
}

/* ---- the connection's loop ---------------------------------------------------------------------- */

typedef enum serve_status {
    SERVE_DONE,        /* the outcome is decided (c->result) and any close frame of ours is out */
    SERVE_READY,       /* a ledger is ready (c->ready) */
    SERVE_ESTABLISHED, /* the upgrade is done (only when asked for) */
    SERVE_AGAIN,       /* the call's own deadline passed first */
} serve_status;

/* Runs the connection until one of the above. until_established: return as soon as the upgrade is
 * done. call_deadline_ms: the caller's own bound (-1: none); it never cuts short a close frame
 * on its way out. */
static serve_status serve(rli_conn *c, bool until_established, int64_t call_deadline_ms)
{
    for (;;) {
        if (c->done && !c->linger)
            return SERVE_DONE;
        if (!c->done && atomic_load(&c->s->cancelled)) {
            conn_cancelled(c);
            return SERVE_DONE;
        }
        if (until_established && c->established)
            return SERVE_ESTABLISHED;
        bool progress = false;
        if (!c->done && c->in_off < c->in_len) {
            size_t used = 0;
            int rc = on_bytes(c, c->rbuf + c->in_off, c->in_len - c->in_off, &used);
            c->in_off += used;
            if (rc < 0)
                return SERVE_DONE;
            if (c->ready)
                return SERVE_READY;
            continue;
        }
        if (c->out_off == c->out_len && c->established && !compose_control(c)) {
            conn_fail(c, RL_ERR_NOMEM, "remoteledger: out of memory");
            return SERVE_DONE;
        }
        if (c->out_off < c->out_len) {
            size_t n = 0;
            rli_tp_status st = rli_tp_write(&c->tp, c->out + c->out_off, c->out_len - c->out_off, &n);
            if (st == RLI_TP_OK) {
                progress = true;
                c->out_off += n;
                if (c->out_off == c->out_len) {
                    c->out_off = c->out_len = 0;
                    if (c->drop_after) {
                        c->linger = false;
                        return SERVE_DONE;
                    }
                }
            } else if (st != RLI_TP_AGAIN) {
                if (!c->drop_after)
                    on_transport_error(c);
                c->linger = false;
                return SERVE_DONE;
            }
        }
        if (!c->rx_off && !c->done) {
            size_t n = 0, room = 0;
            uint8_t *slot = c->established ? rx_slot(c, &room) : NULL;
            size_t cap = RBUF_SIZE;
            if (slot)
                cap = room;
            else if (c->established && c->big_frames && rli_ws_payload_left(&c->wp) == 0)
                cap = HEAD_READ; /* at a header: see HEAD_READ (a payload with no slot, one being
                                  * skipped after an error, is read in full) */
            rli_tp_status st = rli_tp_read(&c->tp, slot ? slot : c->rbuf, cap, &n);
            if (st == RLI_TP_OK && slot) {
                /* All payload of the current frame (n <= what it has left), already where the
                 * assembler keeps it: parsed there, nothing copied. */
                size_t used = 0;
                int rc = on_bytes(c, slot, n, &used);
                if (rc < 0)
                    return SERVE_DONE;
                if (c->ready)
                    return SERVE_READY; /* never here: only an END completes a ledger */
                continue;
            } else if (st == RLI_TP_OK) {
                c->in_off = 0;
                c->in_len = n;
                continue;
            } else if (st == RLI_TP_EOF) {
                on_closed(c);
                return SERVE_DONE;
            } else if (st != RLI_TP_AGAIN) {
                on_transport_error(c);
                return SERVE_DONE;
            }
        }
        if (progress)
            continue;
        int64_t phase = c->hs_deadline_ms;
        if (c->established)
            phase = c->idle_ms >= 0 ? c->last_msg_ms + c->idle_ms : -1;
        int64_t deadline = phase;
        if (c->done)
            deadline = c->linger_deadline_ms;
        else if (call_deadline_ms >= 0 && (deadline < 0 || call_deadline_ms < deadline))
            deadline = call_deadline_ms;
        bool want_read = !c->rx_off && !c->done;
        /* Busy-poll first, unless the caller asked not to wait (rl_stream_next with timeout 0). */
        bool may_wait = call_deadline_ms < 0 || call_deadline_ms > rli_mono_ms();
        if (want_read && may_wait && c->established && c->out_off == c->out_len && c->s->opts.busy_poll_ns > 0 &&
            rli_tp_spin(&c->tp, c->s->opts.busy_poll_ns))
            continue; /* readable (or woken) without sleeping */
        rli_tp_status st = rli_tp_wait(&c->tp, want_read, c->out_off < c->out_len, deadline);
        if (st == RLI_TP_TIMEOUT) {
            if (c->done) {
                c->linger = false;
                return SERVE_DONE; /* the close frame could not be written in time: drop */
            }
            if (deadline != phase)
                return SERVE_AGAIN;
            char d[CS_DUR_STR_MAX];
            if (c->established)
                conn_fail(c, RL_ERR_IDLE_TIMEOUT, "remoteledger: read: idle timeout: no complete message for %s",
                          cs_dur_format(c->s->opts.idle_timeout_ns, d, sizeof d));
            else
                conn_fail(c, RL_ERR_HANDSHAKE_TIMEOUT,
                          "remoteledger: dial %s: handshake timeout: no upgrade response within %s", c->ep,
                          cs_dur_format(c->s->opts.handshake_timeout_ns, d, sizeof d));
            return SERVE_DONE;
        }
        if (st == RLI_TP_WOKEN && c->done) {
            c->linger = false;
            return SERVE_DONE; /* cancelled while a close was on its way out: drop now */
        }
        if (st == RLI_TP_ERROR) {
            if (c->established)
                conn_fail(c, RL_ERR_READ, "remoteledger: read: %s", c->tp.err);
            else
                conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: %s", c->ep, c->tp.err);
            return SERVE_DONE;
        }
    }
}

/* A dial step (the TCP connect, or the TLS handshake when tls) that did not succeed. */
static void dial_failed(rli_conn *c, rli_tp_status st, bool tls)
{
    char d[CS_DUR_STR_MAX];
    if (st == RLI_TP_WOKEN || atomic_load(&c->s->cancelled))
        conn_cancelled(c);
    else if (st == RLI_TP_TIMEOUT && tls)
        conn_fail(c, RL_ERR_HANDSHAKE_TIMEOUT, "remoteledger: dial %s: handshake timeout: no TLS handshake within %s",
                  c->ep, cs_dur_format(c->s->opts.handshake_timeout_ns, d, sizeof d));
    else if (st == RLI_TP_TIMEOUT)
        conn_fail(c, RL_ERR_DIAL_TIMEOUT, "remoteledger: dial %s: dial timeout: not connected within %s",
                  c->ep, cs_dur_format(c->s->opts.dial_timeout_ns, d, sizeof d));
    else
        conn_fail(c, c->tp.err_tls ? RL_ERR_TLS : RL_ERR_DIAL, "remoteledger: dial %s: %s", c->ep,
                  c->tp.err);
}

/* A timeout option (resolved: positive, or negative for none) in whole milliseconds, rounded up;
 * -1 for none. */
static int64_t ns_to_ms(int64_t ns) { return ns > 0 ? ns / 1000000 + (ns % 1000000 != 0) : -1; }

/* The monotonic deadline that far from now; -1 for none. */
static int64_t deadline_after(int64_t ns)
{
    int64_t ms = ns_to_ms(ns);
    return ms < 0 ? -1 : rli_mono_ms() + ms;
}

static void publish(rl_stream *s, int wake)
{
    pthread_mutex_lock(&s->mu);
    s->live_wake = wake;
    pthread_mutex_unlock(&s->mu);
}

/* Connects and runs TLS for wss://, by the dial and handshake deadlines; c->done with the failure
 * when it did not work. The wake descriptor is created and published for rl_stream_cancel. */
static void conn_dial(rl_stream *s, rli_conn *c)
{
    const rli_url *u = &s->url;
    c->dial_deadline_ms = deadline_after(s->opts.dial_timeout_ns);
    c->hs_deadline_ms = -1;
    c->idle_ms = ns_to_ms(s->opts.idle_timeout_ns);
    c->wake = rli_tp_wake_new();
    if (c->wake < 0) {
        conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: cannot create an eventfd", c->ep);
        return;
    }
    rli_tp_init(&c->tp, c->wake);
    publish(s, c->wake);

    rli_tp_status st;
    c->rbuf = malloc(RBUF_SIZE);
    if (!c->rbuf)
        conn_fail(c, RL_ERR_NOMEM, "remoteledger: out of memory");
    else if (atomic_load(&s->cancelled))
        conn_cancelled(c);
    else if (u->port < 0)
        conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: invalid port", c->ep);
    else if ((st = rli_tp_connect(&c->tp, u->hostname, u->port, c->dial_deadline_ms)) != RLI_TP_OK)
        dial_failed(c, st, false);
    if (!c->done) /* connected: the handshake's clock starts */
        c->hs_deadline_ms = deadline_after(s->opts.handshake_timeout_ns);
    if (!c->done && u->tls) {
        const rl_options *o = &s->opts;
        rli_tls_config cfg = {
            .ca_file = o->tls_ca_file,
            .ca_dir = o->tls_ca_dir,
            .server_name = o->tls_server_name,
            .cert_file = o->tls_cert_file,
            .key_file = o->tls_key_file,
            .insecure_skip_verify = o->tls_insecure_skip_verify,
        };
        if ((st = rli_tp_tls_start(&c->tp, &cfg, u->hostname, c->hs_deadline_ms)) != RLI_TP_OK)
            dial_failed(c, st, true);
    }
}

/* Dials, runs TLS and the upgrade: RL_OK once the server's 101 is in, or the failure. */
static rl_result conn_start(rl_stream *s, rli_conn *c, const char *target)
{
    rli_hs_key_new(c->key);
    rli_hs_reader_init(&c->hs);
    rli_ws_parser_init(&c->wp);
    if (!queue_request(c, target))
        return conn_fail(c, RL_ERR_NOMEM, "remoteledger: out of memory");
    conn_dial(s, c);
    if (!c->done)
        serve(c, true, -1);
    return c->done ? c->result : RL_OK;
}

/* Drops the connection (anything due has been written, or given up on) and frees it. */
static void conn_free(rl_stream *s, rli_conn *c)
{
    if (!c)
        return;
    publish(s, -1);
    rli_tp_close(&c->tp);
    if (c->wake >= 0)
        close(c->wake);
    free(c->rbuf);
    free(c->out);
    free(c);
}

/* The session's connection is over: its result is the session's, reported to every later
 * rl_stream_next. A clean end is RL_END. */
static rl_result session_end(rl_stream *s)
{
    rli_conn *c = s->conn;
    rl_result r = c->result == RL_OK ? RL_END : c->result;
    conn_free(s, c);
    s->conn = NULL;
    s->session_ended = true;
    s->end_result = r;
    return r;
}

/* One connection for the session, from the ledger the tracker expects next (the range's start
 * on the first one): RL_OK with s->conn set, or the failure with the connection gone and *retry
 * saying whether resume may try again. */
static rl_result session_connect(rl_stream *s, bool first, bool *retry)
{
    *retry = false;
    rl_range range = s->range;
    if (!first) {
        range.from = rli_asm_expected(s->asm_); /* 0 again for a tip subscription with nothing yet */
        if (range.bounded && range.from == 0)
            range.from = s->range.from;
    }
    char *endpoint = NULL, *target = NULL;
    if (rli_endpoint_build(&s->url, range, &endpoint, &target, &s->err))
        return (rl_result)s->err.kind;
    free(s->endpoint);
    s->endpoint = endpoint;
    if (atomic_load(&s->cancelled)) {
        free(target);
        cs_err_set(&s->err, RL_ERR_CANCELLED, CANCELED_MSG);
        return RL_ERR_CANCELLED;
    }
    rli_asm_reset(s->asm_, range.from); /* a partial ledger of the last connection is dropped */
    rli_conn *c = calloc(1, sizeof *c);
    if (!c) {
        free(target);
        cs_err_set(&s->err, RL_ERR_NOMEM, "remoteledger: out of memory");
        return RL_ERR_NOMEM;
    }
    c->s = s;
    c->ep = s->endpoint;
    c->a = s->asm_;
    c->range = range;
    c->wake = -1;
    rli_tp_init(&c->tp, -1);
    c->read_limit = rli_read_limit(s->opts.max_chunk_size);
    rl_result r = conn_start(s, c, target);
    free(target);
    if (r != RL_OK) {
        *retry = !c->no_retry && (r == RL_ERR_DIAL || r == RL_ERR_DIAL_TIMEOUT || r == RL_ERR_HANDSHAKE_TIMEOUT ||
                                  r == RL_ERR_READ);
        conn_free(s, c); /* c->done: any close frame of ours was written by serve */
        return r;
    }
    s->conn = c;
    return RL_OK;
}

/* Whether resume may retry the end of this connection: the transport failing, the server closing
 * before the range was done (a restart's 1001 included), the timeouts. Never a 4001, a gap, a
 * protocol violation, a cancel, or a refusal. */
static bool retryable_end(const rli_conn *c)
{
    if (c->no_retry)
        return false;
    switch (c->result) {
    case RL_ERR_READ:
    case RL_ERR_TRUNCATED:
    case RL_ERR_DIAL:
    case RL_ERR_DIAL_TIMEOUT:
    case RL_ERR_HANDSHAKE_TIMEOUT:
    case RL_ERR_IDLE_TIMEOUT:
        return true;
    case RL_OK: /* an unbounded stream the server closed as it went away, not one that ended */
        return c->peer_close == CS_CLOSE_GOING_AWAY && !c->range.bounded;
    default:
        return false;
    }
}

/* The wait before resume attempt n (1-based): capped exponential, with equal jitter (half the
 * step fixed, half random), so many clients cut off together do not come back together. */
static int64_t backoff_ms(const rl_options *o, int64_t n)
{
    int64_t base = o->resume_backoff_ns, cap = o->resume_backoff_max_ns;
    for (int64_t i = 1; i < n && base < cap; i++)
        base = base > cap / 2 ? cap : base * 2;
    if (base > cap)
        base = cap;
    uint64_t r;
    rli_random_bytes((uint8_t *)&r, sizeof r);
    int64_t half = base / 2;
    int64_t ns = half + (half > 0 ? (int64_t)(r % (uint64_t)(half + 1)) : 0);
    return ns_to_ms(ns > 0 ? ns : 1);
}

/* Arms the descriptor rl_stream_fd hands out between connections, so a caller's poll wakes when
 * the attempt is due (rli_mono_ms is CLOCK_MONOTONIC, as the timer). Without one (timerfd_create
 * failed) rl_stream_fd says -1 and the caller's own poll timeout has to bring it back. */
static void arm_retry_timer(rl_stream *s)
{
    if (s->retry_timer < 0)
        s->retry_timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (s->retry_timer < 0)
        return;
    struct itimerspec at = {.it_value = {.tv_sec = (time_t)(s->retry_at_ms / 1000),
                                         .tv_nsec = (long)(s->retry_at_ms % 1000) * 1000000L}};
    if (at.it_value.tv_sec == 0 && at.it_value.tv_nsec == 0)
        at.it_value.tv_nsec = 1; /* all zeroes would disarm it */
    /* re-arming also clears an expiry the caller has not read */
    timerfd_settime(s->retry_timer, TFD_TIMER_ABSTIME, &at, NULL);
}

/* Whether resume may try once more after a failure: then the attempt is scheduled. */
static bool schedule_retry(rl_stream *s)
{
    int64_t budget = s->opts.resume_retries;
    if (budget == 0 || (budget > 0 && s->failures >= budget))
        return false;
    s->failures++;
    s->retry_at_ms = rli_mono_ms() + backoff_ms(&s->opts, s->failures);
    arm_retry_timer(s);
    return true;
}

/* Waits for the scheduled attempt, by the call's deadline; false when that passed first (or a
 * cancel came: the caller checks). */
static bool backoff_wait(rl_stream *s, int64_t call_deadline_ms)
{
    if (s->backoff_wake < 0) {
        int fd = rli_tp_wake_new();
        pthread_mutex_lock(&s->mu);
        s->backoff_wake = fd;
        pthread_mutex_unlock(&s->mu);
    }
    for (;;) {
        if (atomic_load(&s->cancelled))
            return true;
        int64_t now = rli_mono_ms();
        if (now >= s->retry_at_ms)
            return true;
        int64_t until = s->retry_at_ms;
        if (call_deadline_ms >= 0 && call_deadline_ms < until)
            until = call_deadline_ms;
        if (now >= until)
            return false;
        int64_t left = until - now;
        struct pollfd p = {.fd = s->backoff_wake, .events = POLLIN};
        poll(&p, s->backoff_wake >= 0 ? 1 : 0, left > 1000000 ? 1000000 : (int)left);
    }
}

/* Connects the session, retrying within the budget when resume is on. RL_OK, RL_AGAIN (the
 * call's deadline came during a backoff: the attempt stays scheduled), or the last failure. */
static rl_result session_reconnect(rl_stream *s, bool first, int64_t call_deadline_ms)
{
    for (;;) {
        if (!first && !backoff_wait(s, call_deadline_ms))
            return RL_AGAIN;
        bool retry;
        rl_result r = session_connect(s, first, &retry);
        if (r == RL_OK) {
            if (!first)
                s->reconnects++;
            return RL_OK;
        }
        if (!retry || !schedule_retry(s))
            return r;
        first = false;
    }
}

rl_result rl_stream_open(rl_stream *s, rl_range range)
{
    if (s->session) {
        cs_err_set(&s->err, RL_ERR_INVALID, "remoteledger: a stream is already open: rl_stream_close it first");
        return RL_ERR_INVALID;
    }
    cs_err_clear(&s->err);
    s->tfb = false;
    s->tfb_requested = s->tfb_oldest = s->tfb_latest = 0;
    s->failures = 0;
    s->reconnects = 0;
    if (!s->url_ok) {
        s->err = s->url_err;
        return (rl_result)s->url_err.kind;
    }
    /* The whole range is checked before any dial (a resumed one is a part of it). */
    char *endpoint = NULL, *target = NULL;
    if (rli_endpoint_build(&s->url, range, &endpoint, &target, &s->err))
        return (rl_result)s->err.kind;
    free(endpoint);
    free(target);
    if (!s->asm_) {
        s->asm_ = rli_asm_new(s->opts.max_message_size, rli_expand_bound(s->opts.max_chunk_size));
        if (!s->asm_) {
            cs_err_set(&s->err, RL_ERR_NOMEM, "remoteledger: out of memory");
            return RL_ERR_NOMEM;
        }
    }
    s->range = range;
    rl_result r = session_reconnect(s, true, -1);
    if (r != RL_OK)
        return r;
    s->session = true;
    s->session_ended = false;
    return RL_OK;
}

uint64_t rl_stream_reconnects(const rl_stream *s) { return s->reconnects; }

int rl_stream_fd(const rl_stream *s)
{
    if (!s->session || s->session_ended)
        return -1;
    if (s->conn)
        return s->conn->tp.fd;
    return s->retry_timer; /* resuming: readable once the next attempt is due */
}

rl_result rl_stream_next(rl_stream *s, int64_t timeout_ns, const uint8_t **ledger, size_t *len,
                         rl_ledger_info *info)
{
    if (!s->session) {
        cs_err_set(&s->err, RL_ERR_INVALID, "remoteledger: rl_stream_next without an open stream (rl_stream_open)");
        return RL_ERR_INVALID;
    }
    if (s->session_ended)
        return s->end_result;
    int64_t call_deadline = timeout_ns < 0 ? -1 : rli_mono_ms() + (timeout_ns == 0 ? 0 : ns_to_ms(timeout_ns));
    rli_conn *c = s->conn;
    if (c && c->ready) {
        /* The last ledger was the caller's until now: its time does not count as idle. */
        c->ready = false;
        c->last_msg_ms = rli_mono_ms();
        if (c->range.bounded && c->ready_seq >= c->range.to) {
            conn_ok(c);
            queue_close(c, CS_CLOSE_NORMAL, "range complete");
        }
    }
    for (;;) {
        if (!s->conn) { /* resuming */
            rl_result r = session_reconnect(s, false, call_deadline);
            if (r == RL_AGAIN) {
                cs_err_clear(&s->err);
                return RL_AGAIN;
            }
            if (r != RL_OK) {
                s->session_ended = true;
                s->end_result = r;
                return r;
            }
        }
        c = s->conn;
        serve_status st = serve(c, false, call_deadline);
        if (st == SERVE_AGAIN) {
            cs_err_clear(&s->err);
            return RL_AGAIN;
        }
        if (st == SERVE_READY)
            break;
        if (!retryable_end(c) || atomic_load(&s->cancelled) || !schedule_retry(s))
            return session_end(s);
        conn_free(s, c); /* the message of this failure stays until the next attempt's */
        s->conn = NULL;
    }
    s->failures = 0; /* a ledger: the budget is whole again */
    size_t n;
    rl_ledger_info li;
    const uint8_t *data = rli_asm_ledger(c->a, &n, &li);
    li.received_unix_nano = now_unix_nano();
    if (s->opts.observer)
        s->opts.observer(&li, s->opts.observer_ctx);
    cs_err_clear(&s->err);
    if (ledger)
        *ledger = data;
    if (len)
        *len = n;
    if (info)
        *info = li;
    return RL_OK;
}

/* Ends the session: a close 1000 first when the connection is still up (bounded by the linger). */
static void session_close(rl_stream *s, const char *reason)
{
    if (!s->session)
        return;
    rli_conn *c = s->conn;
    if (c && !c->done) {
        if (c->ready && c->range.bounded && c->ready_seq >= c->range.to)
            reason = "range complete";
        conn_ok(c);
        queue_close(c, CS_CLOSE_NORMAL, reason);
        serve(c, false, -1);
    }
    conn_free(s, c);
    s->conn = NULL;
    s->session = false;
    s->session_ended = false;
}

void rl_stream_close(rl_stream *s) { session_close(s, "consumer done"); }

void rl_stream_reset(rl_stream *s)
{
    session_close(s, "consumer done");
    /* the backoff's descriptor may still hold the cancel's signal: a fresh one when next needed */
    pthread_mutex_lock(&s->mu);
    if (s->backoff_wake >= 0)
        close(s->backoff_wake);
    s->backoff_wake = -1;
    pthread_mutex_unlock(&s->mu);
    atomic_store(&s->cancelled, false);
    cs_err_clear(&s->err);
    s->tfb = false;
    s->tfb_requested = s->tfb_oldest = s->tfb_latest = 0;
}

rl_result rl_stream_raw_ledgers(rl_stream *s, rl_range range, rl_ledger_fn fn, void *ctx)
{
    if (s->session) {
        cs_err_set(&s->err, RL_ERR_INVALID, "remoteledger: a stream is already open: rl_stream_close it first");
        return RL_ERR_INVALID;
    }
    rl_result r = rl_stream_open(s, range);
    if (r != RL_OK)
        return r;
    for (;;) {
        const uint8_t *p;
        size_t n;
        rl_ledger_info info;
        r = rl_stream_next(s, -1, &p, &n, &info);
        if (r != RL_OK)
            break;
        if (fn && fn(p, n, &info, ctx) != 0) {
            session_close(s, "consumer done");
            cs_err_clear(&s->err);
            return RL_OK;
        }
    }
    /* keep the message: session_close does not touch it */
    session_close(s, "consumer done");
    return r == RL_END ? RL_OK : r;
}

/* ---- the server's retained bounds (GET /healthz) ------------------------------------------------ */

/* The /healthz URL messages name, e.g. "http://box:8462/healthz" (https for wss://). */
static char *healthz_url(const rli_url *u, const char *target)
{
    size_t n = strlen(u->host) + strlen(target) + sizeof "https://";
    char *url = malloc(n);
    if (url)
        snprintf(url, n, "%s://%s%s", u->tls ? "https" : "http", u->host, target);
    return url;
}

/* Sends the request and reads the answer, by the handshake deadline. */
static void healthz_exchange(rli_conn *c, uint32_t *oldest, uint32_t *latest)
{
    char d[CS_DUR_STR_MAX];
    size_t have = 0;
    bool eof = false;
    while (!c->done) {
        if (atomic_load(&c->s->cancelled)) {
            conn_cancelled(c);
            return;
        }
        bool progress = false;
        if (c->out_off < c->out_len) {
            size_t n = 0;
            rli_tp_status st = rli_tp_write(&c->tp, c->out + c->out_off, c->out_len - c->out_off, &n);
            if (st == RLI_TP_OK) {
                c->out_off += n;
                progress = true;
            } else if (st != RLI_TP_AGAIN) {
                conn_fail(c, c->tp.err_tls ? RL_ERR_TLS : RL_ERR_DIAL, "remoteledger: dial %s: %s", c->ep,
                          *c->tp.err ? c->tp.err : "write failed");
                return;
            }
        }
        if (!eof) {
            size_t n = 0;
            rli_tp_status st = have < RLI_HZ_MAX_ANSWER
                                   ? rli_tp_read(&c->tp, c->rbuf + have, RLI_HZ_MAX_ANSWER - have, &n)
                                   : RLI_TP_AGAIN;
            if (st == RLI_TP_OK) {
                have += n;
                progress = true;
            } else if (st == RLI_TP_EOF) {
                eof = true;
                progress = true;
            } else if (st != RLI_TP_AGAIN) {
                conn_fail(c, c->tp.err_tls ? RL_ERR_TLS : RL_ERR_DIAL, "remoteledger: dial %s: %s", c->ep,
                          *c->tp.err ? c->tp.err : "read failed");
                return;
            }
        }
        int status = 0;
        const char *why = NULL;
        rli_hz_status hz = rli_hz_parse((const char *)c->rbuf, have, eof, &status, oldest, latest, &why);
        if (hz == RLI_HZ_FAILED) {
            conn_fail(c, RL_ERR_PROTOCOL, "remoteledger: protocol violation: %s: %s", c->ep, why);
            return;
        }
        if (hz == RLI_HZ_DONE) {
            const char *token = c->s->opts.bearer_token;
            if (status == 200)
                conn_ok(c);
            else if (status == 401)
                conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: %s", c->ep,
                          token && *token ? "server rejected the token (401)" : "server requires a token (401)");
            else
                conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: status %d", c->ep, status);
            return;
        }
        if (progress)
            continue;
        rli_tp_status st = rli_tp_wait(&c->tp, !eof, c->out_off < c->out_len, c->hs_deadline_ms);
        if (st == RLI_TP_TIMEOUT)
            conn_fail(c, RL_ERR_HANDSHAKE_TIMEOUT, "remoteledger: dial %s: handshake timeout: no answer within %s",
                      c->ep, cs_dur_format(c->s->opts.handshake_timeout_ns, d, sizeof d));
        else if (st == RLI_TP_ERROR)
            conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: %s", c->ep, c->tp.err);
    }
}

rl_result rl_stream_bounds(rl_stream *s, uint32_t *oldest, uint32_t *latest)
{
    cs_err_clear(&s->err);
    if (!s->url_ok) {
        s->err = s->url_err;
        return (rl_result)s->url_err.kind;
    }
    if (atomic_load(&s->cancelled)) {
        cs_err_set(&s->err, RL_ERR_CANCELLED, CANCELED_MSG);
        return RL_ERR_CANCELLED;
    }
    const rli_url *u = &s->url;
    const char *token = s->opts.bearer_token;
    char *target = rli_hz_target(u->path);
    char *url = target ? healthz_url(u, target) : NULL;
    rli_conn *c = url ? calloc(1, sizeof *c) : NULL;
    size_t n = target ? rli_hz_request(NULL, 0, target, u->host, token) : 0;
    if (c && !out_reserve(c, n + 1)) {
        free(c);
        c = NULL;
    }
    if (!c) {
        free(target);
        free(url);
        cs_err_set(&s->err, RL_ERR_NOMEM, "remoteledger: out of memory");
        return RL_ERR_NOMEM;
    }
    rli_hz_request((char *)c->out, n + 1, target, u->host, token);
    c->out_len = n;
    c->s = s;
    c->ep = url;
    c->wake = -1;
    rli_tp_init(&c->tp, -1);
    int session_wake = s->conn ? s->conn->wake : -1;
    uint32_t o = 0, l = 0;
    conn_dial(s, c);
    if (!c->done)
        healthz_exchange(c, &o, &l);
    rl_result r = c->result;
    publish(s, -1);
    rli_tp_close(&c->tp);
    if (c->wake >= 0)
        close(c->wake);
    publish(s, session_wake); /* an open session's cancel descriptor again */
    free(c->rbuf);
    free(c->out);
    free(c);
    free(target);
    free(url);
    if (r == RL_OK) {
        if (oldest)
            *oldest = o;
        if (latest)
            *latest = l;
    }
    return r;
}
