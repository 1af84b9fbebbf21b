/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: one connection (docs/PROTOCOL.md), serviced on the calling thread. The transport
 * (transport.c: a socket of our own, wrapped in TLS for wss://) is dialed by the dial and
 * handshake deadlines, the upgrade request (handshake.c) written, and the loop below then runs it:
 * what is read goes to conn_input.c, what is due goes out (the request, then pongs and the close
 * frame, RFC 6455 framing from wsframe.c), and the timeouts (handshake, idle, the caller's own
 * bound, the linger of a close) are kept. The connection's outcome is decided once
 * (rli_conn_fail, rli_conn_ok) and then only a close frame of ours may still be written. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/godur.h"
#include "corestream/remoteledger.h"
#include "remoteledger/endpoint.h"
#include "remoteledger/handshake.h"
#include "remoteledger/stream_internal.h"
#include "remoteledger/transport.h"
#include "remoteledger/wsframe.h"

/* How long to let a close frame of ours (or the echo of the server's) get written, at most. */
#define LINGER_MS 1000

/* ---- the outcome ------------------------------------------------------------------------------- */

rl_result rli_conn_fail(rli_conn *c, rl_result r, const char *fmt, ...)
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

void rli_conn_ok(rli_conn *c)
{
    if (c->done)
        return;
    cs_err_clear(&c->s->err);
    c->result = RL_OK;
    c->done = true;
}

void rli_conn_cancelled(rli_conn *c)
{
    rli_conn_fail(c, RL_ERR_CANCELLED, RLI_CANCELED_MSG);
    c->linger = false;
}

/* ---- output ------------------------------------------------------------------------------------ */

void rli_conn_queue_close_payload(rli_conn *c, const uint8_t *p, size_t n)
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

void rli_conn_queue_close(rli_conn *c, uint16_t code, const char *reason)
{
    uint8_t p[RLI_WS_MAX_CONTROL];
    size_t rlen = strlen(reason);
    if (rlen > sizeof p - 2)
        rlen = sizeof p - 2;
    p[0] = (uint8_t)(code >> 8);
    p[1] = (uint8_t)code;
    memcpy(p + 2, reason, rlen);
    rli_conn_queue_close_payload(c, p, 2 + rlen);
}

bool rli_conn_out_reserve(rli_conn *c, size_t n)
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
    if (!rli_conn_out_reserve(c, 2 * (RLI_WS_MAX_HEADER + RLI_WS_MAX_CONTROL)))
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

/* Puts the upgrade request for target into the output, the first thing written. false when out
 * of memory. */
static bool queue_request(rli_conn *c, const char *target)
{
    const rli_url *u = &c->s->url;
    const char *token = c->s->opts.bearer_token;
    size_t n = rli_hs_request(NULL, 0, target, u->host, c->key, token);
    if (!rli_conn_out_reserve(c, n + 1))
        return false;
    rli_hs_request((char *)c->out, n + 1, target, u->host, c->key, token);
    c->out_len = n;
    return true;
}

/* ---- the connection's loop --------------------------------------------------------------------- */

/* What a step of rli_conn_serve's loop decided: an rli_serve_status to return, or one of these. */
enum { STEP_ON = -1 /* go on to the next step */, STEP_LOOP = -2 /* start the loop over */ };

/* Parses what is left of the last read into rbuf. */
static int serve_parse(rli_conn *c)
{
    size_t used = 0;
    int rc = rli_conn_on_bytes(c, c->rbuf + c->in_off, c->in_len - c->in_off, &used);
    c->in_off += used;
    if (rc < 0)
        return RLI_SERVE_DONE;
    if (c->ready)
        return RLI_SERVE_READY;
    return STEP_LOOP;
}

/* Writes what is due, once the upgrade is done composing the control frames when the output is
 * drained. *progress: bytes went out. */
static int serve_write(rli_conn *c, bool *progress)
{
    if (c->out_off == c->out_len && c->established && !compose_control(c)) {
        rli_conn_fail(c, RL_ERR_NOMEM, "remoteledger: out of memory");
        return RLI_SERVE_DONE;
    }
    if (c->out_off >= c->out_len)
        return STEP_ON;
    size_t n = 0;
    rli_tp_status st = rli_tp_write(&c->tp, c->out + c->out_off, c->out_len - c->out_off, &n);
    if (st == RLI_TP_OK) {
        *progress = true;
        c->out_off += n;
        if (c->out_off == c->out_len) {
            c->out_off = c->out_len = 0;
            if (c->drop_after) {
                c->linger = false;
                return RLI_SERVE_DONE;
            }
        }
    } else if (st != RLI_TP_AGAIN) {
        if (!c->drop_after)
            rli_conn_on_transport_error(c);
        c->linger = false;
        return RLI_SERVE_DONE;
    }
    return STEP_ON;
}

/* Reads once, unless reading is over: into rbuf (serve_parse takes it from there), or in place,
 * where the assembler keeps the payload (parsed at once). */
static int serve_read(rli_conn *c)
{
    if (c->rx_off || c->done)
        return STEP_ON;
    size_t n = 0, room = 0;
    uint8_t *slot = c->established ? rli_conn_rx_slot(c, &room) : NULL;
    size_t cap = RLI_RBUF_SIZE;
    if (slot)
        cap = room;
    else if (c->established && c->big_frames && rli_ws_payload_left(&c->wp) == 0)
        cap = RLI_HEAD_READ; /* at a header: see RLI_HEAD_READ (a payload with no slot, one being
                              * skipped after an error, is read in full) */
    rli_tp_status st = rli_tp_read(&c->tp, slot ? slot : c->rbuf, cap, &n);
    if (st == RLI_TP_OK && slot) {
        /* All payload of the current frame (n <= what it has left), already where the
         * assembler keeps it: parsed there, nothing copied. */
        size_t used = 0;
        int rc = rli_conn_on_bytes(c, slot, n, &used);
        if (rc < 0)
            return RLI_SERVE_DONE;
        if (c->ready)
            return RLI_SERVE_READY; /* never here: only an END completes a ledger */
        return STEP_LOOP;
    } else if (st == RLI_TP_OK) {
        c->in_off = 0;
        c->in_len = n;
        return STEP_LOOP;
    } else if (st == RLI_TP_EOF) {
        rli_conn_on_closed(c);
        return RLI_SERVE_DONE;
    } else if (st != RLI_TP_AGAIN) {
        rli_conn_on_transport_error(c);
        return RLI_SERVE_DONE;
    }
    return STEP_ON;
}

/* Nothing moved: waits for the socket, the wake descriptor or the nearest deadline (busy-polling
 * first when the options ask for it), and decides what a deadline that passed means. */
static int serve_wait(rli_conn *c, int64_t call_deadline_ms)
{
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
        return STEP_LOOP; /* readable (or woken) without sleeping */
    rli_tp_status st = rli_tp_wait(&c->tp, want_read, c->out_off < c->out_len, deadline);
    if (st == RLI_TP_TIMEOUT) {
        if (c->done) {
            c->linger = false;
            return RLI_SERVE_DONE; /* the close frame could not be written in time: drop */
        }
        if (deadline != phase)
            return RLI_SERVE_AGAIN;
        char d[CS_DUR_STR_MAX];
        if (c->established)
            rli_conn_fail(c, RL_ERR_IDLE_TIMEOUT, "remoteledger: read: idle timeout: no complete message for %s",
                          cs_dur_format(c->s->opts.idle_timeout_ns, d, sizeof d));
        else
            rli_conn_fail(c, RL_ERR_HANDSHAKE_TIMEOUT,
                          "remoteledger: dial %s: handshake timeout: no upgrade response within %s", c->ep,
                          cs_dur_format(c->s->opts.handshake_timeout_ns, d, sizeof d));
        return RLI_SERVE_DONE;
    }
    if (st == RLI_TP_WOKEN && c->done) {
        c->linger = false;
        return RLI_SERVE_DONE; /* cancelled while a close was on its way out: drop now */
    }
    if (st == RLI_TP_ERROR) {
        if (c->established)
            rli_conn_fail(c, RL_ERR_READ, "remoteledger: read: %s", c->tp.err);
        else
            rli_conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: %s", c->ep, c->tp.err);
        return RLI_SERVE_DONE;
    }
    return STEP_LOOP;
}

rli_serve_status rli_conn_serve(rli_conn *c, bool until_established, int64_t call_deadline_ms)
{
    for (;;) {
        if (c->done && !c->linger)
            return RLI_SERVE_DONE;
        if (!c->done && atomic_load(&c->s->cancelled)) {
            rli_conn_cancelled(c);
            return RLI_SERVE_DONE;
        }
        if (until_established && c->established && !c->done) /* a refused run closes first */
            return RLI_SERVE_ESTABLISHED;
        /* Input already read is parsed before anything else; then write, read, and wait only
         * when nothing moved. */
        int step = STEP_ON;
        bool progress = false;
        if (!c->done && c->in_off < c->in_len)
            step = serve_parse(c);
        if (step == STEP_ON)
            step = serve_write(c, &progress);
        if (step == STEP_ON)
            step = serve_read(c);
        if (step == STEP_ON && !progress)
            step = serve_wait(c, call_deadline_ms);
        if (step >= 0)
            return (rli_serve_status)step;
    }
}

/* ---- dial, start, free ------------------------------------------------------------------------- */

/* A dial step (the TCP connect, or the TLS handshake when tls) that did not succeed. */
static void dial_failed(rli_conn *c, rli_tp_status st, bool tls)
{
    char d[CS_DUR_STR_MAX];
    if (st == RLI_TP_WOKEN || atomic_load(&c->s->cancelled))
        rli_conn_cancelled(c);
    else if (st == RLI_TP_TIMEOUT && tls)
        rli_conn_fail(c, RL_ERR_HANDSHAKE_TIMEOUT,
                      "remoteledger: dial %s: handshake timeout: no TLS handshake within %s", c->ep,
                      cs_dur_format(c->s->opts.handshake_timeout_ns, d, sizeof d));
    else if (st == RLI_TP_TIMEOUT)
        rli_conn_fail(c, RL_ERR_DIAL_TIMEOUT, "remoteledger: dial %s: dial timeout: not connected within %s",
                      c->ep, cs_dur_format(c->s->opts.dial_timeout_ns, d, sizeof d));
    else
        rli_conn_fail(c, c->tp.err_tls ? RL_ERR_TLS : RL_ERR_DIAL, "remoteledger: dial %s: %s", c->ep,
                      c->tp.err);
}

int64_t rli_ns_to_ms(int64_t ns) { return ns > 0 ? ns / 1000000 + (ns % 1000000 != 0) : -1; }

/* The monotonic deadline that far from now; -1 for none. */
static int64_t deadline_after(int64_t ns)
{
    int64_t ms = rli_ns_to_ms(ns);
    return ms < 0 ? -1 : rli_mono_ms() + ms;
}

void rli_conn_dial(rl_stream *s, rli_conn *c)
{
    const rli_url *u = &s->url;
    c->dial_deadline_ms = deadline_after(s->opts.dial_timeout_ns);
    c->hs_deadline_ms = -1;
    c->idle_ms = rli_ns_to_ms(s->opts.idle_timeout_ns);
    c->wake = rli_tp_wake_new();
    if (c->wake < 0) {
        rli_conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: cannot create an eventfd", c->ep);
        return;
    }
    rli_tp_init(&c->tp, c->wake);
    rli_stream_publish_wake(s, c->wake);

    rli_tp_status st;
    c->rbuf = malloc(RLI_RBUF_SIZE);
    if (!c->rbuf)
        rli_conn_fail(c, RL_ERR_NOMEM, "remoteledger: out of memory");
    else if (atomic_load(&s->cancelled))
        rli_conn_cancelled(c);
    else if (u->port < 0)
        rli_conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: invalid port", c->ep);
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

rl_result rli_conn_start(rl_stream *s, rli_conn *c, const char *target)
{
    rli_hs_key_new(c->key);
    rli_hs_reader_init(&c->hs);
    rli_ws_parser_init(&c->wp);
    if (!queue_request(c, target))
        return rli_conn_fail(c, RL_ERR_NOMEM, "remoteledger: out of memory");
    rli_conn_dial(s, c);
    if (!c->done)
        rli_conn_serve(c, true, -1);
    return c->done ? c->result : RL_OK;
}

void rli_conn_free(rl_stream *s, rli_conn *c)
{
    if (!c)
        return;
    rli_stream_publish_wake(s, -1);
    rli_tp_close(&c->tp);
    if (c->wake >= 0)
        close(c->wake);
    free(c->rbuf);
    free(c->out);
    free(c);
}
