/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: rl_stream_bounds, the server's retained bounds (GET /healthz). The request goes
 * over a connection of its own, dialed like a session's (rli_conn_dial: same timeouts, TLS, token
 * and cancel); healthz.c writes the request and reads the answer. An open pull session is left as
 * it was: its cancel descriptor is published again afterwards. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/godur.h"
#include "corestream/remoteledger.h"
#include "remoteledger/endpoint.h"
#include "remoteledger/healthz.h"
#include "remoteledger/stream_internal.h"
#include "remoteledger/transport.h"

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
            rli_conn_cancelled(c);
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
                rli_conn_fail(c, c->tp.err_tls ? RL_ERR_TLS : RL_ERR_DIAL, "remoteledger: dial %s: %s", c->ep,
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
                rli_conn_fail(c, c->tp.err_tls ? RL_ERR_TLS : RL_ERR_DIAL, "remoteledger: dial %s: %s", c->ep,
                              *c->tp.err ? c->tp.err : "read failed");
                return;
            }
        }
        int status = 0;
        const char *why = NULL;
        rli_hz_status hz = rli_hz_parse((const char *)c->rbuf, have, eof, &status, oldest, latest, &why);
        if (hz == RLI_HZ_FAILED) {
            rli_conn_fail(c, RL_ERR_PROTOCOL, "remoteledger: protocol violation: %s: %s", c->ep, why);
            return;
        }
        if (hz == RLI_HZ_DONE) {
            const char *token = c->s->opts.bearer_token;
            if (status == 200)
                rli_conn_ok(c);
            else if (status == 401)
                rli_conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: %s", c->ep,
                              token && *token ? "server rejected the token (401)" : "server requires a token (401)");
            else
                rli_conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: status %d", c->ep, status);
            return;
        }
        if (progress)
            continue;
        rli_tp_status st = rli_tp_wait(&c->tp, !eof, c->out_off < c->out_len, c->hs_deadline_ms);
        if (st == RLI_TP_TIMEOUT)
            rli_conn_fail(c, RL_ERR_HANDSHAKE_TIMEOUT, "remoteledger: dial %s: handshake timeout: no answer within %s",
                          c->ep, cs_dur_format(c->s->opts.handshake_timeout_ns, d, sizeof d));
        else if (st == RLI_TP_ERROR)
            rli_conn_fail(c, RL_ERR_DIAL, "remoteledger: dial %s: %s", c->ep, c->tp.err);
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
        cs_err_set(&s->err, RL_ERR_CANCELLED, RLI_CANCELED_MSG);
        return RL_ERR_CANCELLED;
    }
    const rli_url *u = &s->url;
    const char *token = s->opts.bearer_token;
    char *target = rli_hz_target(u->path);
    char *url = target ? healthz_url(u, target) : NULL;
    rli_conn *c = url ? calloc(1, sizeof *c) : NULL;
    size_t n = target ? rli_hz_request(NULL, 0, target, u->host, token) : 0;
    if (c && !rli_conn_out_reserve(c, n + 1)) {
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
    rli_conn_dial(s, c);
    if (!c->done)
        healthz_exchange(c, &o, &l);
    rl_result r = c->result;
    rli_stream_publish_wake(s, -1);
    rli_tp_close(&c->tp);
    if (c->wake >= 0)
        close(c->wake);
    rli_stream_publish_wake(s, session_wake); /* an open session's cancel descriptor again */
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
