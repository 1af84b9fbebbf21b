/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: the public API (remoteledger.h; docs/PROTOCOL.md): the rl_stream object and the
 * pull calls. A session (rl_stream_open, or one rl_stream_raw_ledgers call, which is a session
 * pulled to its end) owns one connection at a time (conn.c, conn_input.c), serviced on the calling
 * thread, and, with resume, replaces a lost one (resume.c). This file opens and ends sessions,
 * hands each verified ledger over (callback or pull), and keeps what the caller reads afterwards
 * (the message, the too-far-behind bounds, the endpoint). rl_options are options.c's,
 * rl_stream_bounds is bounds.c's. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "corestream/remoteledger.h"
#include "corestream/wire.h"
#include "remoteledger/assemble.h"
#include "remoteledger/endpoint.h"
#include "remoteledger/stream_internal.h"
#include "remoteledger/transport.h"

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
        [RL_ERR_RUN_CHANGED] = "RL_ERR_RUN_CHANGED",
        [RL_ERR_SIGNATURE] = "RL_ERR_SIGNATURE",
        [RL_ERR_HOLE] = "RL_ERR_HOLE",
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
    if (o->trusted_keys_file && *o->trusted_keys_file) {
        cs_err kerr;
        if (cs_sig_keyset_load(o->trusted_keys_file, &s->keys, &kerr)) {
            cs_err_set(&s->url_err, RL_ERR_INVALID, "remoteledger: %s", kerr.msg);
            s->err = s->url_err;
            return RL_ERR_INVALID;
        }
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
    cs_sig_keyset_free(s->keys);
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

void rli_stream_publish_wake(rl_stream *s, int wake)
{
    pthread_mutex_lock(&s->mu);
    s->live_wake = wake;
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

const char *rl_stream_run(const rl_stream *s) { return s->run; }

/* ---- the pull calls ------------------------------------------------------------------------ */

static int64_t now_unix_nano(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The session's connection is over: its result is the session's, reported to every later
 * rl_stream_next. A clean end is RL_END. */
static rl_result session_end(rl_stream *s)
{
    rli_conn *c = s->conn;
    rl_result r = c->result == RL_OK ? RL_END : c->result;
    rli_conn_free(s, c);
    s->conn = NULL;
    s->session_ended = true;
    s->end_result = r;
    return r;
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
    s->run[0] = '\0'; /* a session's run is its own */
    s->sig = (cs_sig_chain){0};
    if (!s->url_ok) {
        s->err = s->url_err;
        return (rl_result)s->url_err.kind;
    }
    /* The whole range is checked before any dial (a resumed one is a part of it). */
    char *endpoint = NULL, *target = NULL;
    if (rli_endpoint_build(&s->url, range, s->keys != NULL, &endpoint, &target, &s->err))
        return (rl_result)s->err.kind;
    free(endpoint);
    free(target);
    if (!s->asm_) {
        s->asm_ = rli_asm_new(s->opts.max_message_size, rli_expand_bound(s->opts.max_chunk_size));
        if (!s->asm_ || (s->keys && !rli_asm_want_sha256(s->asm_))) {
            rli_asm_free(s->asm_);
            s->asm_ = NULL;
            cs_err_set(&s->err, RL_ERR_NOMEM, "remoteledger: out of memory");
            return RL_ERR_NOMEM;
        }
    }
    s->range = range;
    rl_result r = rli_resume_reconnect(s, true, -1);
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
    int64_t call_deadline = timeout_ns < 0 ? -1 : rli_mono_ms() + (timeout_ns == 0 ? 0 : rli_ns_to_ms(timeout_ns));
    rli_conn *c = s->conn;
    if (c && c->ready) {
        /* The last ledger was the caller's until now: its time does not count as idle. */
        c->ready = false;
        c->last_msg_ms = rli_mono_ms();
        if (c->range.bounded && c->ready_seq >= c->range.to) {
            rli_conn_ok(c);
            rli_conn_queue_close(c, CS_CLOSE_NORMAL, "range complete");
        }
    }
    for (;;) {
        if (!s->conn) { /* resuming */
            rl_result r = rli_resume_reconnect(s, false, call_deadline);
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
        rli_serve_status st = rli_conn_serve(c, false, call_deadline);
        if (st == RLI_SERVE_AGAIN) {
            cs_err_clear(&s->err);
            return RL_AGAIN;
        }
        if (st == RLI_SERVE_READY)
            break;
        if (!rli_resume_retryable_end(c) || atomic_load(&s->cancelled) || !rli_resume_schedule_retry(s))
            return session_end(s);
        rli_conn_free(s, c); /* the message of this failure stays until the next attempt's */
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
        rli_conn_ok(c);
        rli_conn_queue_close(c, CS_CLOSE_NORMAL, reason);
        rli_conn_serve(c, false, -1);
    }
    rli_conn_free(s, c);
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
    s->run[0] = '\0';
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
