/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: what one connection reads (docs/PROTOCOL.md, section 2). Until the upgrade is
 * done that is the response head (handshake.c); after it, RFC 6455 frames (wsframe.c), whose
 * payload goes to the assembler (assemble.c) in slices straight from the receive buffer, or read in
 * place into the assembler's own buffer. Parsing stops at each verified ledger so it can be handed
 * over. The server's close, the end of the stream and the transport's failures are classified here
 * into the prototype's errors, in its words. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/goquote.h"
#include "corestream/remoteledger.h"
#include "corestream/wire.h"
#include "remoteledger/assemble.h"
#include "remoteledger/endpoint.h"
#include "remoteledger/handshake.h"
#include "remoteledger/stream_internal.h"
#include "remoteledger/wsframe.h"
#include "wire/wire.h"

#define CLOSE_PROTOCOL_ERROR 1002 /* what coder/websocket closes with on a framing violation */
#define TRUNC_PREFIX "remoteledger: stream ended before the requested range was delivered: "

/* ---- messages and closes ----------------------------------------------------------------------- */

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
 * it until it is fed again). With trusted keys only once its signature holds (sigcheck.c). */
static int ledger_ready(rli_conn *c)
{
    cs_err err;
    if (c->s->keys && rli_sigcheck(c->s, c->a, &err)) {
        c->no_retry = true; /* another connection would bring the same ledger */
        rli_conn_fail(c, RL_ERR_SIGNATURE, "%s", err.msg);
        rli_conn_queue_close(c, CS_CLOSE_POLICY, "ledger signature refused");
        return 0; /* not handed over; the close goes out before the connection is dropped */
    }
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
        rli_conn_fail(c, (rl_result)err->kind, "%s", err->msg);
        return -1;
    }
    if (st == RLI_ASM_LEDGER)
        return ledger_ready(c);
    return 0;
}

static int text_message(rli_conn *c)
{
    rli_conn_fail(c, RL_ERR_PROTOCOL, "remoteledger: protocol violation: unexpected MessageText message");
    return -1;
}

/* A message over the read limit: a read error, and a close 1009 in coder/websocket's words. */
static void read_limited(rli_conn *c)
{
    c->no_retry = true; /* the same ledger would be over the limit again */
    char reason[64];
    snprintf(reason, sizeof reason, "read limited at %" PRId64 " bytes", c->read_limit + 1);
    rli_conn_fail(c, RL_ERR_READ, "remoteledger: read: %s", reason);
    rli_conn_queue_close(c, CS_CLOSE_TOO_BIG, reason);
}

/* The server closed with a close frame: the classification of docs/PROTOCOL.md, section 4. */
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
            rli_conn_fail(c, RL_ERR_TRUNCATED, TRUNC_PREFIX "stream closed mid-assembly of ledger %" PRIu32,
                          active_seq);
            return;
        }
        rl_range r = c->range;
        if (!r.bounded || expected == 0 || expected > r.to) {
            rli_conn_ok(c);
        } else if (expected == r.from) {
            char rs[64];
            rli_range_format(r, rs, sizeof rs);
            rli_conn_fail(c, RL_ERR_TRUNCATED, TRUNC_PREFIX "received no ledgers, requested %s", rs);
        } else {
            rli_conn_fail(c, RL_ERR_TRUNCATED,
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
            rli_conn_fail(c, RL_ERR_TOO_FAR_BEHIND,
                          "remoteledger: requested ledger is behind the server's retention: requested %" PRIu32,
                          expected);
        else
            rli_conn_fail(c, RL_ERR_TOO_FAR_BEHIND,
                          "remoteledger: requested ledger is behind the server's retention: requested %" PRIu32
                          ", server retains [%" PRIu32 ",%" PRIu32 "]",
                          expected, oldest, latest);
        return;
    }
    uint32_t first, last;
    if (code == CS_CLOSE_RING_HOLE && cs_wire_parse_ring_hole(reason, rlen, &first, &last)) {
        rli_conn_fail(c, RL_ERR_HOLE,
                      "remoteledger: ledgers %" PRIu32 " to %" PRIu32 " are missing from the server's ring (requested %" PRIu32
                      ")",
                      first, last, expected);
        return;
    }
    char name[40], quoted[512];
    status_name(code, name, sizeof name);
    cs_go_quote_n(quoted, sizeof quoted, reason, rlen);
    rli_conn_fail(c, RL_ERR_READ,
                  "remoteledger: read: failed to get reader: received close frame: status = %s and reason = %s",
                  name, quoted);
}

void rli_conn_on_closed(rli_conn *c)
{
    if (c->done)
        return;
    if (atomic_load(&c->s->cancelled))
        rli_conn_cancelled(c);
    else if (!c->established)
        rli_conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: read failed", c->ep);
    else if (c->in_msg)
        rli_conn_fail(c, RL_ERR_READ, "remoteledger: read: failed to read frame payload: unexpected EOF");
    else
        rli_conn_fail(c, RL_ERR_READ, "remoteledger: read: failed to get reader: failed to read frame header: EOF");
}

void rli_conn_on_transport_error(rli_conn *c)
{
    if (c->done)
        return;
    if (atomic_load(&c->s->cancelled))
        rli_conn_cancelled(c);
    else if (!c->tp.err_tls)
        rli_conn_on_closed(c);
    else if (!c->established)
        rli_conn_fail(c, RL_ERR_TLS, "remoteledger: dial %s: %s", c->ep, c->tp.err);
    else
        rli_conn_fail(c, RL_ERR_READ, "remoteledger: read: %s", c->tp.err);
}

/* ---- frames and bytes -------------------------------------------------------------------------- */

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
            if (ev.frame_len > RLI_HEAD_READ) /* BEGIN, END and control frames leave it as it was */
                c->big_frames = ev.frame_len >= RLI_INPLACE_FRAME_MIN;
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
                rli_conn_queue_close_payload(c, ev.data, ev.len); /* echo it, as lws did */
                return 0;
            }
            continue;
        case RLI_WS_EV_ERROR:
        default:
            rli_conn_fail(c, RL_ERR_READ, "remoteledger: read: %s%s", ev.at_boundary ? "failed to get reader: " : "",
                          ev.err);
            rli_conn_queue_close(c, CLOSE_PROTOCOL_ERROR, ev.err);
            c->no_retry = true;
            return 0;
        }
    }
}

/* The upgrade is done: its X-Corestream-Run against the session's run. The first token a
 * session meets is its run; a later connection that answers another decides the outcome
 * (RL_ERR_RUN_CHANGED, or RL_ERR_PROTOCOL for a malformed one), not retried, and closes before
 * any of its frames is read. No header (an older server) passes; allow_run_change takes the new
 * token as the session's. */
static void check_run(rli_conn *c)
{
    rl_stream *s = c->s;
    const char *v;
    size_t n;
    if (!rli_hs_header(c->hs.buf, c->hs.line, "X-Corestream-Run", &v, &n))
        return;
    bool ok = n >= 1 && n <= RLI_RUN_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = v[i] > 0x20 && v[i] < 0x7f;
    if (!ok) {
        char quoted[RLI_RUN_MAX * 4 + 8];
        cs_go_quote_n(quoted, sizeof quoted, v, n < 2 * RLI_RUN_MAX ? n : 2 * RLI_RUN_MAX);
        c->no_retry = true;
        rli_conn_fail(c, RL_ERR_PROTOCOL,
                      "remoteledger: dial %s: protocol violation: X-Corestream-Run %s is not a run token", c->ep,
                      quoted);
        rli_conn_queue_close(c, CLOSE_PROTOCOL_ERROR, "malformed X-Corestream-Run");
        return;
    }
    char run[RLI_RUN_MAX + 1];
    memcpy(run, v, n);
    run[n] = '\0';
    if (!*s->run || strcmp(s->run, run) == 0 || s->opts.allow_run_change) {
        memcpy(s->run, run, n + 1);
        return;
    }
    c->no_retry = true;
    rli_conn_fail(c, RL_ERR_RUN_CHANGED,
                  "remoteledger: dial %s: run changed: the server is now run %s, the session began on run %s", c->ep,
                  run, s->run);
    rli_conn_queue_close(c, CS_CLOSE_NORMAL, "run changed");
}

/* The upgrade is done: its X-Corestream-Chunk-Size, the largest chunk the server sends, bounds
 * this connection's chunks when it is below the caller's bound (rli_asm_set_server_bound). Absent
 * (an older server) or not a chunk size (4096 to 8388608): the caller's bound alone. */
static void check_chunk_size(rli_conn *c)
{
    const char *v;
    size_t n;
    uint64_t size = 0;
    if (rli_hs_header(c->hs.buf, c->hs.line, "X-Corestream-Chunk-Size", &v, &n)) {
        size_t i = 0;
        for (; i < n && i < 8 && v[i] >= '0' && v[i] <= '9'; i++)
            size = size * 10 + (uint64_t)(v[i] - '0');
        if (i != n || size < CS_MIN_CHUNK_SIZE || size > CS_MAX_CHUNK_SIZE)
            size = 0;
    }
    rli_asm_set_server_bound(c->a, (size_t)size);
}

int rli_conn_on_bytes(rli_conn *c, const uint8_t *in, size_t len, size_t *used)
{
    *used = len;
    if (atomic_load(&c->s->cancelled)) {
        rli_conn_cancelled(c);
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
        rli_conn_fail(c, c->hs.tls ? RL_ERR_TLS : RL_ERR_DIAL, "remoteledger: dial %s: %s", c->ep, why);
        return -1;
    }
    c->established = true;
    c->last_msg_ms = rli_mono_ms();
    check_run(c); /* a refusal lingers for its close frame: nothing more is read */
    if (c->a)
        check_chunk_size(c);
    return 0;
}

uint8_t *rli_conn_rx_slot(rli_conn *c, size_t *room)
{
    uint64_t left = rli_ws_payload_left(&c->wp);
    if (!c->in_msg || left == 0)
        return NULL;
    return rli_asm_recv_slot(c->a, left < RLI_INPLACE_MAX ? (size_t)left : RLI_INPLACE_MAX, room);
}
