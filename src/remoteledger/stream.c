/* libremoteledger: the public API and the connection (PORTSPEC 3). One lws_context per
 * rl_stream_raw_ledgers call, serviced on the calling thread; the assembler (assemble.c) does the
 * protocol; this file maps WebSocket events onto it and the prototype's error classification.
 *
 * Two transports share everything above the WebSocket framing:
 *   ws://   an lws RAW client socket: the upgrade (handshake.c) and the RFC 6455 framing
 *           (wsframe.c) are ours, and payload goes to the assembler in slices straight from lws's
 *           receive buffer. lws 4.1's WebSocket client parses every payload byte on its own
 *           (about 170 MB/s per core); this path runs at memcpy-plus-XXH64 speed.
 *   wss://  lws's WebSocket client role, as before: lws 4.1.6 cannot do TLS on a RAW client
 *           connection (lws_client_connect_via_info creates the TLS session before the socket
 *           exists and fails with "tls start fail"). */
#include <libwebsockets.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/goquote.h"
#include "corestream/remoteledger.h"
#include "corestream/wire.h"
#include "remoteledger/assemble.h"
#include "remoteledger/endpoint.h"
#include "remoteledger/handshake.h"
#include "remoteledger/wsframe.h"
#include "wire/wire.h"

#define DEFAULT_DIAL_TIMEOUT_NS (30LL * 1000000000LL)
/* Socket reads go into this per-context buffer, and a RAW_RX callback hands over what one read
 * got: up to this much per recv(). Measured on loopback (2 vCPUs): throughput is flat from 64 KiB
 * to 4 MiB (memory-bound, about 3 GB/s per client core for raw chunks), but 64 KiB and 256 KiB
 * wake the client more often and lengthen the delivery tail of 200 KiB ledgers; 1 MiB gave the
 * best tail and 4 MiB nothing more. */
#define SERV_BUF_SIZE (1024u << 10)
/* wss:// only: the per-connection frame buffer lws delivers RECEIVE from: one default-size chunk
 * message whole, so the common case is decoded in place; bigger messages arrive in pieces of this
 * size. */
#define RX_BUFFER_DEFAULT (CS_DEFAULT_CHUNK_SIZE + CS_WIRE_CHUNK_HEADER_LEN + 1024)
/* TCP keepalive, as Go's default dialer sets it (KeepAlive 30 s, 9 probes). */
#define KA_TIME_S 30
#define KA_INTERVAL_S 30
#define KA_PROBES 9
/* lws's own handshake timeouts when the dial is unbounded (rl_stream_cancel still applies). */
#define UNBOUNDED_LWS_TIMEOUT_S (7u * 24 * 3600)
/* How long to let lws finish a close handshake the server started (its echo), at most. */
#define LINGER_US (1000 * 1000)
#define CLOSE_PROTOCOL_ERROR 1002 /* what coder/websocket closes with on a framing violation */
#define CANCELED_MSG "context canceled"
#define TRUNC_PREFIX "remoteledger: stream ended before the requested range was delivered: "

struct rl_stream {
    rl_options opts;
    rli_url url;
    bool url_ok;
    cs_err url_err;
    char *endpoint;
    cs_err err;
    bool tfb;
    uint32_t tfb_requested, tfb_oldest, tfb_latest;
    rli_asm *asm_;
    atomic_bool cancelled;
    pthread_mutex_t mu; /* guards live: cancel never races context creation or destruction */
    struct lws_context *live;
};

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

void rl_options_init(rl_options *o)
{
    memset(o, 0, sizeof *o);
    o->max_message_size = CS_MAX_PAYLOAD_SIZE;
    o->max_chunk_size = CS_MAX_CHUNK_SIZE;
    o->dial_timeout_ns = DEFAULT_DIAL_TIMEOUT_NS;
}

/* ---- the stream ----------------------------------------------------------------------------- */

rl_result rl_stream_new(rl_stream **out, const char *url, const rl_options *opts)
{
    *out = NULL;
    rl_stream *s = calloc(1, sizeof *s);
    if (!s)
        return RL_ERR_NOMEM;
    if (opts)
        s->opts = *opts;
    else
        rl_options_init(&s->opts);
    atomic_init(&s->cancelled, false);
    pthread_mutex_init(&s->mu, NULL);
    *out = s;
    if (rli_url_parse(&s->url, url ? url : "", &s->url_err)) {
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
    rli_url_free(&s->url);
    free(s->endpoint);
    rli_asm_free(s->asm_);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void rl_stream_cancel(rl_stream *s)
{
    atomic_store(&s->cancelled, true);
    pthread_mutex_lock(&s->mu);
    if (s->live)
        lws_cancel_service(s->live);
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
    rl_range range;
    rl_ledger_fn fn;
    void *fn_ctx;
    int64_t read_limit;

    struct lws_context *ctx;
    struct lws *wsi;
    lws_sorted_usec_list_t dial_sul;
    lws_sorted_usec_list_t linger_sul;
    struct lws_protocols protocols[2];
    bool raw; /* ws:// over a RAW socket with our framing; wss:// uses lws's WebSocket client */

    bool established;
    bool done;    /* the outcome is decided */
    bool linger;  /* ...but finish the close handshake first (bounded by linger_sul) */
    bool closing; /* a close frame of ours (or the echo of the server's) is queued for WRITEABLE */
    uint8_t close_payload[RLI_WS_MAX_CONTROL];
    size_t close_len;
    rl_result result;

    bool in_msg;      /* a data message has started and not ended */
    uint64_t msg_len; /* its length so far (wss: received; ws: declared by its frames) */

    /* ws:// only */
    const char *target;
    char key[RLI_HS_KEY_LEN + 1];
    bool request_sent;
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

static void linger_cb(lws_sorted_usec_list_t *sul);

/* Queues a close frame with this payload: it is written from WRITEABLE, and the connection is
 * then dropped without waiting for an answer. Nothing more is read meanwhile. */
static void queue_close_payload(rli_conn *c, struct lws *wsi, const uint8_t *p, size_t n)
{
    if (n > sizeof c->close_payload)
        n = sizeof c->close_payload;
    c->closing = true;
    c->linger = true;
    memcpy(c->close_payload, p, n);
    c->close_len = n;
    lws_rx_flow_control(wsi, 0);
    lws_callback_on_writable(wsi);
    lws_sul_schedule(lws_get_context(wsi), 0, &c->linger_sul, linger_cb, LINGER_US);
}

static void queue_close(rli_conn *c, struct lws *wsi, uint16_t code, const char *reason)
{
    uint8_t p[RLI_WS_MAX_CONTROL];
    size_t rlen = strlen(reason);
    if (rlen > sizeof p - 2)
        rlen = sizeof p - 2;
    p[0] = (uint8_t)(code >> 8);
    p[1] = (uint8_t)code;
    memcpy(p + 2, reason, rlen);
    queue_close_payload(c, wsi, p, 2 + rlen);
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

/* A complete ledger: stamp, observe, hand over, then decide whether to go on. Returns -1 when the
 * connection must be dropped at once (a close frame of ours, when one is due, is queued instead). */
static int deliver(rli_conn *c, struct lws *wsi)
{
    size_t len;
    rl_ledger_info info;
    const uint8_t *data = rli_asm_ledger(c->a, &len, &info);
    info.received_unix_nano = now_unix_nano();
    if (c->s->opts.observer)
        c->s->opts.observer(&info, c->s->opts.observer_ctx);
    if (c->fn && c->fn(data, len, &info, c->fn_ctx) != 0) {
        conn_ok(c);
        queue_close(c, wsi, CS_CLOSE_NORMAL, "consumer done");
        return 0;
    }
    if (c->range.bounded && info.sequence >= c->range.to) {
        conn_ok(c);
        queue_close(c, wsi, CS_CLOSE_NORMAL, "range complete");
        return 0;
    }
    if (atomic_load(&c->s->cancelled)) {
        conn_cancelled(c);
        return -1;
    }
    return 0;
}

static int after_message(rli_conn *c, struct lws *wsi, rli_asm_status st, cs_err *err)
{
    c->in_msg = false;
    if (st == RLI_ASM_ERROR) {
        conn_fail(c, (rl_result)err->kind, "%s", err->msg);
        return -1;
    }
    if (st == RLI_ASM_LEDGER)
        return deliver(c, wsi);
    return 0;
}

static int text_message(rli_conn *c)
{
    conn_fail(c, RL_ERR_PROTOCOL, "remoteledger: protocol violation: unexpected MessageText message");
    return -1;
}

/* A message over the read limit: a read error, and a close 1009 in coder/websocket's words. */
static void read_limited(rli_conn *c, struct lws *wsi)
{
    char reason[64];
    snprintf(reason, sizeof reason, "read limited at %" PRId64 " bytes", c->read_limit + 1);
    conn_fail(c, RL_ERR_READ, "remoteledger: read: %s", reason);
    queue_close(c, wsi, CS_CLOSE_TOO_BIG, reason);
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

/* The connection is gone (closed by the server, a reset, or our own drop after a decision). */
static void on_closed(rli_conn *c)
{
    if (!c->done) {
        if (atomic_load(&c->s->cancelled))
            conn_cancelled(c);
        else if (c->raw && !c->established) /* lws reports wss:// handshake failures itself */
            conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: read failed", c->s->endpoint);
        else if (c->in_msg)
            conn_fail(c, RL_ERR_READ, "remoteledger: read: failed to read frame payload: unexpected EOF");
        else
            conn_fail(c, RL_ERR_READ, "remoteledger: read: failed to get reader: failed to read frame header: EOF");
    }
    c->wsi = NULL;
    c->linger = false;
}

static void established(rli_conn *c)
{
    c->established = true;
    lws_sul_cancel(&c->dial_sul);
}

static void dial_timeout_cb(lws_sorted_usec_list_t *sul)
{
    rli_conn *c = lws_container_of(sul, rli_conn, dial_sul);
    if (!c->established) {
        conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: context deadline exceeded", c->s->endpoint);
        c->linger = false;
        /* lws runs ripe timers at the top of its next wait, which then sleeps on: wake it. */
        lws_cancel_service(c->ctx);
    }
}

static void linger_cb(lws_sorted_usec_list_t *sul)
{
    rli_conn *c = lws_container_of(sul, rli_conn, linger_sul);
    c->linger = false;
    lws_cancel_service(c->ctx);
}

/* ---- wss://: lws's WebSocket client ------------------------------------------------------------ */

static int ws_receive(rli_conn *c, struct lws *wsi, const uint8_t *in, size_t len)
{
    if (c->done)
        return c->closing ? 0 : -1; /* bytes after our decision are not wanted */
    if (atomic_load(&c->s->cancelled)) {
        conn_cancelled(c);
        return -1;
    }
    size_t remaining = lws_remaining_packet_payload(wsi);
    bool fin = lws_is_final_fragment(wsi);
    bool complete = fin && remaining == 0;
    cs_err err;

    if (!c->in_msg) {
        if (!lws_frame_is_binary(wsi))
            return text_message(c);
        c->in_msg = true;
        c->msg_len = 0;
        if (complete && (c->read_limit < 0 || (uint64_t)len <= (uint64_t)c->read_limit))
            return after_message(c, wsi, rli_asm_message(c->a, in, len, &err), &err);
        rli_asm_msg_begin(c->a, fin ? (uint64_t)len + remaining : 0);
    }
    c->msg_len += len;
    if (c->read_limit >= 0 && c->msg_len + remaining > (uint64_t)c->read_limit) {
        read_limited(c, wsi);
        return 0;
    }
    rli_asm_msg_data(c->a, in, len);
    if (!complete)
        return 0;
    return after_message(c, wsi, rli_asm_msg_end(c->a, &err), &err);
}

static int ws_write_close(rli_conn *c, struct lws *wsi)
{
    uint8_t buf[LWS_PRE + sizeof c->close_payload];
    uint8_t *p = buf + LWS_PRE;
    memcpy(p, c->close_payload, c->close_len);
    /* 4 is the close opcode's write protocol (LWS_WRITE_CLOSE, which lws's public enum leaves
     * out in favour of lws_close_reason; that route waits for the peer's acknowledgement, and
     * the prototype returns without waiting). */
    (void)lws_write(wsi, p, c->close_len, (enum lws_write_protocol)4);
    c->closing = false;
    c->linger = false;
    return -1; /* close the socket now: no close reason set, so lws sends nothing more */
}

/* ---- ws://: a RAW socket with our own upgrade and framing --------------------------------------- */

static int raw_send_request(rli_conn *c, struct lws *wsi)
{
    const rli_url *u = &c->s->url;
    size_t n = rli_hs_request(NULL, 0, c->target, u->host, c->key);
    uint8_t *buf = malloc(LWS_PRE + n + 1);
    if (!buf) {
        conn_fail(c, RL_ERR_NOMEM, "remoteledger: out of memory");
        return -1;
    }
    rli_hs_request((char *)buf + LWS_PRE, n + 1, c->target, u->host, c->key);
    int w = lws_write(wsi, buf + LWS_PRE, n, LWS_WRITE_RAW);
    free(buf);
    c->request_sent = true;
    if (w < (int)n) {
        conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: write failed", c->s->endpoint);
        return -1;
    }
    return 0;
}

/* Appends a masked client frame to out; returns its length. */
static size_t put_frame(uint8_t *out, uint8_t opcode, const uint8_t *p, size_t n)
{
    uint8_t mask[4];
    rli_random_bytes(mask, sizeof mask);
    return rli_ws_build_frame(out, opcode, p, n, mask);
}

static int raw_writeable(rli_conn *c, struct lws *wsi)
{
    if (!c->request_sent)
        return c->done ? -1 : raw_send_request(c, wsi);
    /* A pong that is due goes first, in the same write as a close queued after its ping. */
    uint8_t buf[LWS_PRE + 2 * (RLI_WS_MAX_HEADER + RLI_WS_MAX_CONTROL)];
    uint8_t *p = buf + LWS_PRE;
    size_t n = 0;
    if (c->pong_pending) {
        n += put_frame(p + n, RLI_WS_OP_PONG, c->pong, c->pong_len);
        c->pong_pending = false;
    }
    bool drop = c->closing;
    if (c->closing) {
        n += put_frame(p + n, RLI_WS_OP_CLOSE, c->close_payload, c->close_len);
        c->closing = false;
        c->linger = false;
    }
    if (n && lws_write(wsi, p, n, LWS_WRITE_RAW) < (int)n && !drop) {
        on_closed(c);
        return -1;
    }
    return drop ? -1 : 0; /* after a close, drop now, as coder/websocket's client does */
}

/* Frames, after the handshake: payload slices go to the assembler as they are, straight from
 * lws's receive buffer. */
static int raw_frames(rli_conn *c, struct lws *wsi, const uint8_t *in, size_t len)
{
    static const uint8_t empty[1];
    size_t off = 0;
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
                read_limited(c, wsi);
                return 0;
            }
            c->msg_len += ev.frame_len;
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
            if (after_message(c, wsi, st, &err) < 0)
                return -1;
            if (c->done)
                return 0; /* a close of ours is queued: the rest is not wanted */
            continue;
        }
        case RLI_WS_EV_CONTROL:
            if (ev.opcode == RLI_WS_OP_PING) {
                memcpy(c->pong, ev.data, ev.len);
                c->pong_len = ev.len;
                c->pong_pending = true; /* a later ping before it is sent replaces it */
                lws_callback_on_writable(wsi);
            } else if (ev.opcode == RLI_WS_OP_CLOSE) {
                on_peer_close(c, ev.data, ev.len);
                queue_close_payload(c, wsi, ev.data, ev.len); /* echo it, as lws did */
                return 0;
            }
            continue;
        case RLI_WS_EV_ERROR:
        default:
            conn_fail(c, RL_ERR_READ, "remoteledger: read: %s%s", ev.at_boundary ? "failed to get reader: " : "",
                      ev.err);
            queue_close(c, wsi, CLOSE_PROTOCOL_ERROR, ev.err);
            return 0;
        }
    }
}

static int raw_rx(rli_conn *c, struct lws *wsi, const uint8_t *in, size_t len)
{
    if (c->done)
        return c->closing ? 0 : -1; /* bytes after our decision are not wanted */
    if (atomic_load(&c->s->cancelled)) {
        conn_cancelled(c);
        return -1;
    }
    if (!c->established) {
        size_t used = 0;
        const char *why = NULL;
        rli_hs_status st = rli_hs_feed(&c->hs, in, len, &used, c->key, &why);
        if (st == RLI_HS_MORE)
            return 0;
        if (st == RLI_HS_FAILED) {
            conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: %s", c->s->endpoint, why);
            return -1;
        }
        established(c);
        in += used;
        len -= used;
    }
    return raw_frames(c, wsi, in, len);
}

/* ---- the protocol callback ---------------------------------------------------------------------- */

static int rli_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len)
{
    struct lws_context *ctx = lws_get_context(wsi);
    rli_conn *c = ctx ? lws_context_user(ctx) : NULL;
    if (!c)
        return lws_callback_http_dummy(wsi, reason, user, in, len);

    switch (reason) {
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
        if (atomic_load(&c->s->cancelled))
            conn_cancelled(c);
        else
            conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: %.*s", c->s->endpoint,
                      in && len ? (int)strnlen(in, len) : (int)strlen("connection failed"),
                      in && len ? (const char *)in : "connection failed");
        c->wsi = NULL;
        c->linger = false;
        return 0;

    /* wss:// */
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        established(c);
        return 0;
    case LWS_CALLBACK_CLIENT_RECEIVE:
        return ws_receive(c, wsi, in, len);
    case LWS_CALLBACK_CLIENT_WRITEABLE:
        if (c->closing)
            return ws_write_close(c, wsi);
        return 0;
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
        if (!c->done) {
            on_peer_close(c, in, len);
            c->linger = true; /* let lws echo the close, then drop */
            lws_sul_schedule(ctx, 0, &c->linger_sul, linger_cb, LINGER_US);
        }
        return 0;
    case LWS_CALLBACK_CLIENT_CLOSED:
        on_closed(c);
        return 0;

    /* ws:// */
    case LWS_CALLBACK_RAW_CONNECTED:
        if (c->raw)
            lws_callback_on_writable(wsi); /* the upgrade request */
        return 0;
    case LWS_CALLBACK_RAW_RX:
        return c->raw ? raw_rx(c, wsi, in, len) : 0;
    case LWS_CALLBACK_RAW_WRITEABLE:
        return c->raw ? raw_writeable(c, wsi) : 0;
    case LWS_CALLBACK_RAW_CLOSE:
        if (c->raw && c->wsi == wsi)
            on_closed(c);
        return 0;

    case LWS_CALLBACK_WSI_DESTROY:
        if (c->wsi == wsi) {
            c->wsi = NULL;
            c->linger = false;
            if (c->done)
                return 0;
            if (c->established)
                conn_fail(c, RL_ERR_READ, "remoteledger: read: connection closed");
            else
                conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: connection closed", c->s->endpoint);
        }
        return 0;
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}

static void publish(rl_stream *s, struct lws_context *ctx)
{
    pthread_mutex_lock(&s->mu);
    s->live = ctx;
    pthread_mutex_unlock(&s->mu);
}

static rl_result run(rl_stream *s, rli_conn *c, const char *target)
{
    const rli_url *u = &s->url;
    int64_t dial_ns = s->opts.dial_timeout_ns;
    unsigned lws_timeout = UNBOUNDED_LWS_TIMEOUT_S;
    if (dial_ns > 0) {
        int64_t secs = dial_ns / 1000000000LL + 2;
        if (secs < (int64_t)UNBOUNDED_LWS_TIMEOUT_S)
            lws_timeout = (unsigned)secs;
    }

    c->raw = !u->tls;
    c->target = target;
    if (c->raw) {
        rli_hs_key_new(c->key);
        rli_hs_reader_init(&c->hs);
        rli_ws_parser_init(&c->wp);
    }

    size_t rx = RX_BUFFER_DEFAULT;
    if (c->read_limit >= 0 && (uint64_t)c->read_limit < rx)
        rx = (size_t)c->read_limit;
    c->protocols[0] = (struct lws_protocols){
        .name = "corestream-remoteledger",
        .callback = rli_callback,
        .per_session_data_size = 0,
        .rx_buffer_size = c->raw ? 0 : rx, /* the RAW role reads into the context's buffer */
    };
    memset(&c->protocols[1], 0, sizeof c->protocols[1]);

    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = c->protocols;
    info.extensions = NULL; /* no permessage-deflate */
    info.gid = -1;
    info.uid = -1;
    info.user = c;
    info.pt_serv_buf_size = SERV_BUF_SIZE;
    info.ka_time = KA_TIME_S;
    info.ka_interval = KA_INTERVAL_S;
    info.ka_probes = KA_PROBES;
    info.timeout_secs = lws_timeout;
    info.connect_timeout_secs = lws_timeout;
    info.fd_limit_per_thread = 16;
    if (u->tls)
        info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;

    struct lws_context *ctx = lws_create_context(&info);
    if (!ctx)
        return conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: cannot create the websocket context",
                         s->endpoint);
    c->ctx = ctx;
    publish(s, ctx);

    if (atomic_load(&s->cancelled)) {
        conn_cancelled(c);
    } else {
        if (dial_ns > 0)
            lws_sul_schedule(ctx, 0, &c->dial_sul, dial_timeout_cb, (lws_usec_t)((dial_ns + 999) / 1000));
        if (u->port < 0) {
            conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: invalid port", s->endpoint);
        } else {
            struct lws_client_connect_info ci;
            memset(&ci, 0, sizeof ci);
            ci.context = ctx;
            ci.address = u->hostname;
            ci.port = u->port;
            ci.path = target;
            ci.host = u->host;
            ci.protocol = NULL;
            ci.ietf_version_or_minus_one = -1;
            ci.pwsi = &c->wsi;
            if (c->raw) {
                ci.method = "RAW";
                ci.local_protocol_name = c->protocols[0].name;
            } else {
                ci.ssl_connection = LCCSCF_USE_SSL;
                ci.alpn = "http/1.1";
            }
            if (!lws_client_connect_via_info(&ci)) {
                c->wsi = NULL;
                if (!c->done)
                    conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: connection failed", s->endpoint);
            }
        }
    }

    while (!c->done || (c->linger && c->wsi)) {
        if (!c->done && atomic_load(&s->cancelled)) {
            conn_cancelled(c);
            break;
        }
        if (lws_service(ctx, 0) < 0) {
            if (c->established)
                conn_fail(c, RL_ERR_READ, "remoteledger: read: service loop failed");
            else
                conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: service loop failed", s->endpoint);
            break;
        }
    }

    publish(s, NULL);
    lws_context_destroy(ctx);
    c->ctx = NULL;
    return c->result;
}

rl_result rl_stream_raw_ledgers(rl_stream *s, rl_range range, rl_ledger_fn fn, void *ctx)
{
    cs_err_clear(&s->err);
    s->tfb = false;
    s->tfb_requested = s->tfb_oldest = s->tfb_latest = 0;
    if (!s->url_ok) {
        s->err = s->url_err;
        return (rl_result)s->url_err.kind;
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
    if (!s->asm_) {
        s->asm_ = rli_asm_new(s->opts.max_message_size, rli_expand_bound(s->opts.max_chunk_size));
        if (!s->asm_) {
            free(target);
            cs_err_set(&s->err, RL_ERR_NOMEM, "remoteledger: out of memory");
            return RL_ERR_NOMEM;
        }
    }
    rli_asm_reset(s->asm_, range.from);

    rli_conn *c = calloc(1, sizeof *c);
    if (!c) {
        free(target);
        cs_err_set(&s->err, RL_ERR_NOMEM, "remoteledger: out of memory");
        return RL_ERR_NOMEM;
    }
    c->s = s;
    c->a = s->asm_;
    c->range = range;
    c->fn = fn;
    c->fn_ctx = ctx;
    c->read_limit = rli_read_limit(s->opts.max_chunk_size);
    rl_result r = run(s, c, target);
    free(c);
    free(target);
    return r;
}
