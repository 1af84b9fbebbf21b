/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: a session's connections (docs/PROTOCOL.md, section 4). Each connection of a
 * session starts at the ledger the tracker expects next (the range's start for the first), so a
 * replacement continues where the last one stopped and a partial ledger is dropped. With resume
 * (resume_retries != 0) a failure that may pass (the transport, a server going away, the timeouts)
 * is retried within the budget, after a capped exponential backoff with jitter; a ledger makes the
 * budget whole again. Between attempts the wait is a timerfd the caller may poll (rl_stream_fd) and
 * an eventfd rl_stream_cancel signals. */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/timerfd.h>
#include <time.h>

#include "corestream/remoteledger.h"
#include "corestream/wire.h"
#include "remoteledger/assemble.h"
#include "remoteledger/endpoint.h"
#include "remoteledger/stream_internal.h"
#include "remoteledger/transport.h"
#include "remoteledger/wsframe.h"

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
    if (rli_endpoint_build(&s->url, range, s->keys != NULL, &endpoint, &target, &s->err))
        return (rl_result)s->err.kind;
    free(s->endpoint);
    s->endpoint = endpoint;
    if (atomic_load(&s->cancelled)) {
        free(target);
        cs_err_set(&s->err, RL_ERR_CANCELLED, RLI_CANCELED_MSG);
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
    rl_result r = rli_conn_start(s, c, target);
    free(target);
    if (r != RL_OK) {
        *retry = !c->no_retry && (r == RL_ERR_DIAL || r == RL_ERR_DIAL_TIMEOUT || r == RL_ERR_HANDSHAKE_TIMEOUT ||
                                  r == RL_ERR_READ);
        rli_conn_free(s, c); /* c->done: any close frame of ours was written by rli_conn_serve */
        return r;
    }
    s->conn = c;
    return RL_OK;
}

bool rli_resume_retryable_end(const rli_conn *c)
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
    return rli_ns_to_ms(ns > 0 ? ns : 1);
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

bool rli_resume_schedule_retry(rl_stream *s)
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

rl_result rli_resume_reconnect(rl_stream *s, bool first, int64_t call_deadline_ms)
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
        if (!retry || !rli_resume_schedule_retry(s))
            return r;
        first = false;
    }
}
