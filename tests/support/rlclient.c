/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: client runs against the scripted server. See rlclient.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <poll.h>

#include "support/rlclient.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
void observer(const rl_ledger_info *info, void *ctx)
{
    collected *c = ctx;
    if (c->observed < MAX_LEDGERS)
        c->observed_infos[c->observed] = *info;
    c->observed++;
}

int on_ledger(const uint8_t *p, size_t n, const rl_ledger_info *info, void *ctx)
{
    collected *c = ctx;
    if (c->count == 0) {
        c->first = n ? p[0] : -1;
        c->first_ptr = p;
        c->first_len = n < sizeof c->first_copy ? n : sizeof c->first_copy;
        memcpy(c->first_copy, p, c->first_len);
    } else if (c->count == 1) {
        c->same_buffer = p == c->first_ptr;
        if (c->same_buffer)
            c->borrowed_overwritten = memcmp(c->first_ptr, c->first_copy, c->first_len) != 0;
    }
    if (c->count < MAX_LEDGERS) {
        c->sizes[c->count] = n;
        c->infos[c->count] = *info;
        c->copies[c->count] = malloc(n ? n : 1);
        memcpy(c->copies[c->count], p, n);
    }
    c->observed_before_callback = c->observed;
    c->count++;
    if (c->cancel_in_callback)
        rl_stream_cancel(c->s);
    return c->stop_after && c->count >= c->stop_after;
}

void collected_free(collected *c)
{
    for (int i = 0; i < c->count && i < MAX_LEDGERS; i++) {
        free(c->copies[i]);
        c->copies[i] = NULL; /* so a collected_reset after it frees nothing twice */
    }
}

void collected_reset(collected *c)
{
    collected_free(c);
    memset(c, 0, sizeof *c);
}

bool rlclient_pull;

/* rl_stream_raw_ledgers through the pull calls. */
static rl_result pull_all(rl_stream *s, rl_range range, collected *c)
{
    rl_result r = rl_stream_open(s, range);
    if (r != RL_OK)
        return r;
    for (;;) {
        const uint8_t *p = NULL;
        size_t n = 0;
        rl_ledger_info info;
        r = rl_stream_next(s, -1, &p, &n, &info);
        if (r != RL_OK)
            break;
        assert_non_null(p);
        if (on_ledger(p, n, &info, c) != 0)
            break; /* rl_stream_close says "consumer done" */
    }
    if (r != RL_OK && r != RL_END) {
        /* the session keeps answering with its end until it is closed */
        assert_int_equal(rl_stream_next(s, 0, NULL, NULL, NULL), r);
    }
    rl_stream_close(s);
    return r == RL_END ? RL_OK : r;
}

bool rlclient_poll;

/* The slowest rl_stream_next(s, 0, ...) may be: it must never wait for the network (the scripted
 * server dials in well under this on loopback, and a close frame goes out at once). */
#define POLL_NEXT_MAX_MS 1000
/* The poll timeout: short, so idle timeouts and cancels are seen about as soon as with next(-1). */
#define POLL_TICK_MS 20

/* rl_stream_raw_ledgers through rl_stream_fd, poll and rl_stream_next(0): what one thread serving
 * many streams does. Every next(0) is timed. */
static rl_result poll_all(rl_stream *s, rl_range range, collected *c)
{
    assert_int_equal(rl_stream_fd(s), -1);
    rl_result r = rl_stream_open(s, range);
    if (r != RL_OK) {
        assert_int_equal(rl_stream_fd(s), -1);
        return r;
    }
    for (;;) {
        const uint8_t *p = NULL;
        size_t n = 0;
        rl_ledger_info info;
        int64_t t0 = now_ms();
        r = rl_stream_next(s, 0, &p, &n, &info);
        int64_t took = now_ms() - t0;
        if (took > POLL_NEXT_MAX_MS)
            fail_msg("rl_stream_next(0) took %lld ms (%s)", (long long)took, rl_result_name(r));
        if (r == RL_OK) {
            assert_non_null(p);
            if (on_ledger(p, n, &info, c) != 0)
                break;
            continue;
        }
        if (r != RL_AGAIN)
            break;
        int fd = rl_stream_fd(s);
        assert_true(fd >= 0); /* an open session that is not over has something to poll */
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        assert_true(poll(&pf, 1, POLL_TICK_MS) >= 0);
    }
    if (r != RL_OK) {
        assert_int_equal(rl_stream_fd(s), -1); /* over: nothing more to poll */
        if (r != RL_END)
            assert_int_equal(rl_stream_next(s, 0, NULL, NULL, NULL), r);
    }
    rl_stream_close(s);
    assert_int_equal(rl_stream_fd(s), -1);
    return r == RL_END ? RL_OK : r;
}

void drain_url(const char *url, rl_options *opts, rl_range range, collected *c)
{
    rl_options o;
    if (opts)
        o = *opts;
    else
        rl_options_init(&o);
    if (!o.observer) {
        o.observer = observer;
        o.observer_ctx = c;
    }
    c->first = -1;
    rl_result nr = rl_stream_new(&c->s, url, &o);
    assert_non_null(c->s);
    int64_t t0 = now_ms();
    if (nr != RL_OK)
        c->r = nr;
    else if (rlclient_poll)
        c->r = poll_all(c->s, range, c);
    else if (rlclient_pull)
        c->r = pull_all(c->s, range, c);
    else
        c->r = rl_stream_raw_ledgers(c->s, range, on_ledger, c);
    c->elapsed_ms = now_ms() - t0;
    snprintf(c->err, sizeof c->err, "%s", rl_stream_error(c->s));
    if (c->r == RL_OK)
        assert_string_equal(c->err, "");
    else
        assert_string_not_equal(c->err, "");
}

void drain_done(ss_server *ss, collected *c)
{
    rl_stream_free(c->s);
    c->s = NULL;
    if (!ss_wait(ss, SERVER_WAIT_MS))
        fail_msg("the scripted server did not finish (client: %s \"%s\", %d ledgers)", rl_result_name(c->r),
                 c->err, c->count);
}

void drain(ss_server *ss, rl_options *opts, rl_range range, collected *c)
{
    drain_url(ss_url(ss), opts, range, c);
    drain_done(ss, c);
}

void expect(const collected *c, rl_result r, int count)
{
    if (c->r != r)
        fail_msg("result %s \"%s\", want %s", rl_result_name(c->r), c->err, rl_result_name(r));
    if (c->count != count)
        fail_msg("%d ledgers, want %d (%s)", c->count, count, c->err);
}

void drain_expect(ss_server *ss, rl_options *opts, rl_range range, collected *c, rl_result r, int count,
                  const char *err)
{
    drain(ss, opts, range, c);
    expect(c, r, count);
    if (err)
        assert_string_equal(c->err, err);
}

void expect_client_close(const ss_server *ss, int i, int code, const char *reason)
{
    char got[128];
    assert_int_equal(ss_client_close(ss, i, got, sizeof got), code);
    if (reason)
        assert_string_equal(got, reason);
}

void expect_sequences(const collected *c, uint32_t from, int count)
{
    assert_int_equal(c->count, count);
    for (int i = 0; i < count && i < MAX_LEDGERS; i++)
        if (c->infos[i].sequence != from + (uint32_t)i)
            fail_msg("ledger %d is %u, want %u", i, c->infos[i].sequence, from + (uint32_t)i);
}

rl_options resume_options(int64_t retries)
{
    rl_options o;
    rl_options_init(&o);
    o.resume_retries = retries;
    o.resume_backoff_ns = 5000000LL;
    o.resume_backoff_max_ns = 20000000LL;
    return o;
}
