/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: the pull API (rl_stream_open, rl_stream_next, rl_stream_close, rl_stream_fd,
 * rl_stream_reset) against the scripted server (support/scriptserver.h). next's timeout and a
 * ledger half sent, next(0) never waiting, the descriptor while a session is open, between
 * connections of a resuming session and after it, the end of a bounded range, the idle clock
 * excluding the caller's time, and a cancelled stream staying cancelled until reset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <xxhash.h>

#include "corestream/remoteledger.h"
#include "corestream/wire.h"
#include "support/event.h"
#include "support/rlclient.h"
#include "support/rlsuite.h"
#include "support/scriptserver.h"
#include "wire/wire.h"

static void wait_event(void *arg) { assert_true(event_wait(arg, 10LL * 1000000000LL)); }

static void test_pull_timeouts_and_partial_ledgers(void **state)
{
    (void)state;
    event go;
    event_init(&go);
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 100);
    uint8_t raw[200];
    memset(raw, 2, sizeof raw);
    ss_begin(ss, 2, 0);
    ss_chunk(ss, 2, 0, CS_CODEC_RAW, raw, 100);
    ss_call(ss, wait_event, &go); /* ledger 2 stays half sent until the client has timed out */
    ss_chunk(ss, 2, 1, CS_CODEC_RAW, raw + 100, 100);
    ss_end(ss, 2, 2, 200, 0, XXH64(raw, 200, 0));
    ss_stall(ss);

    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), NULL), RL_OK);
    const uint8_t *p;
    size_t n;
    rl_ledger_info info;
    assert_int_equal(rl_stream_next(s, -1, &p, &n, &info), RL_ERR_INVALID);
    assert_string_equal(rl_stream_error(s), "remoteledger: rl_stream_next without an open stream (rl_stream_open)");
    assert_int_equal(rl_stream_open(s, rl_unbounded_range(1)), RL_OK);
    assert_string_equal(rl_stream_error(s), "");
    assert_int_equal(rl_stream_open(s, rl_unbounded_range(1)), RL_ERR_INVALID);
    assert_string_equal(rl_stream_error(s), "remoteledger: a stream is already open: rl_stream_close it first");
    assert_int_equal(rl_stream_raw_ledgers(s, rl_unbounded_range(1), NULL, NULL), RL_ERR_INVALID);

    assert_int_equal(rl_stream_next(s, -1, &p, &n, &info), RL_OK);
    assert_int_equal(info.sequence, 1);
    assert_int_equal(n, 100);
    assert_true(info.received_unix_nano > 0);
    const uint8_t *first = p;
    int64_t t0 = mono_ms();
    assert_int_equal(rl_stream_next(s, 150000000LL, &p, &n, &info), RL_AGAIN);
    int64_t took = mono_ms() - t0;
    if (took < 140 || took > 3000)
        fail_msg("a 150 ms next took %lld ms", (long long)took);
    assert_string_equal(rl_stream_error(s), "");
    assert_int_equal(rl_stream_next(s, 0, &p, &n, &info), RL_AGAIN); /* 0: poll */
    event_set(&go);
    assert_int_equal(rl_stream_next(s, 5000000000LL, &p, &n, &info), RL_OK);
    assert_int_equal(info.sequence, 2);
    assert_int_equal(info.chunks, 2);
    assert_int_equal(n, 200);
    assert_memory_equal(p, raw, 200);
    assert_ptr_equal(p, first); /* borrowed: the same assembly buffer */
    rl_stream_close(s);
    rl_stream_close(s); /* a no-op */
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    expect_client_close(ss, 0, 1000, "consumer done");

    /* closed: a new session on the same stream */
    assert_int_equal(rl_stream_next(s, 0, NULL, NULL, NULL), RL_ERR_INVALID);
    rl_stream_free(s);
    ss_stop(ss);
    event_destroy(&go);
}

/* Polls fd for input, at most ms; whether it became readable. */
static bool readable_within(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* rl_stream_next(s, 0, ...), failing when it takes longer than bound_ms. */
static rl_result next0(rl_stream *s, rl_ledger_info *info, int64_t bound_ms)
{
    int64_t t0 = mono_ms();
    rl_result r = rl_stream_next(s, 0, NULL, NULL, info);
    int64_t took = mono_ms() - t0;
    if (took > bound_ms)
        fail_msg("rl_stream_next(0) took %lld ms (%s)", (long long)took, rl_result_name(r));
    return r;
}

/* rl_stream_fd: -1 without a session, the socket while one is open (readable when a ledger has
 * come), -1 once it has ended and after close. next(0) on a frame whose header promised more than
 * has come, and on a lone first header byte, returns RL_AGAIN at once, every time. */
static void test_pull_fd_and_next0_never_waits(void **state)
{
    (void)state;
    event go;
    event_init(&go);
    uint8_t part[40];
    memset(part, 7, sizeof part);
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 100);
    ss_call(ss, wait_event, &go); /* then half a frame, and it stalls */
    ss_send_partial(ss, part, sizeof part, 1000);
    ss_stall(ss);

    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), NULL), RL_OK);
    assert_int_equal(rl_stream_fd(s), -1);
    assert_int_equal(rl_stream_open(s, rl_unbounded_range(1)), RL_OK);
    int fd = rl_stream_fd(s);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    /* ledger 1, then nothing: the contract's loop (next(0) until RL_AGAIN) */
    rl_ledger_info info;
    rl_result r;
    for (int i = 0; i < 100 && (r = next0(s, &info, 500)) == RL_AGAIN; i++)
        readable_within(rl_stream_fd(s), 100);
    assert_int_equal(r, RL_OK);
    assert_int_equal(info.sequence, 1);
    assert_int_equal(next0(s, &info, 500), RL_AGAIN);
    assert_int_equal(rl_stream_fd(s), fd);
    /* half a frame arrives: readable, and still RL_AGAIN without a wait, again and again */
    event_set(&go);
    assert_true(readable_within(fd, 5000));
    for (int i = 0; i < 20; i++)
        assert_int_equal(next0(s, &info, 200), RL_AGAIN);
    assert_int_equal(rl_stream_fd(s), fd);
    rl_stream_close(s);
    assert_int_equal(rl_stream_fd(s), -1);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    ss_stop(ss);

    /* a lone byte of a frame header */
    ss = ss_start();
    static const uint8_t b0 = 0x82;
    ss_send_bytes(ss, &b0, 1);
    ss_stall(ss);
    rl_stream_free(s);
    assert_int_equal(rl_stream_new(&s, ss_url(ss), NULL), RL_OK);
    assert_int_equal(rl_stream_open(s, rl_unbounded_range(1)), RL_OK);
    /* (it may have come with the upgrade response, already read: no poll first, as the contract
     * says) */
    for (int i = 0; i < 20; i++)
        assert_int_equal(next0(s, &info, 200), RL_AGAIN);
    rl_stream_close(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    ss_stop(ss);

    /* a bounded range: -1 once it is over */
    ss = ss_start();
    ss_ledger(ss, 5, 10);
    ss_stall(ss);
    rl_stream_free(s);
    assert_int_equal(rl_stream_new(&s, ss_url(ss), NULL), RL_OK);
    assert_int_equal(rl_stream_open(s, rl_single_ledger_range(5)), RL_OK);
    r = RL_AGAIN;
    for (int i = 0; i < 100 && (r = next0(s, &info, 500)) == RL_AGAIN; i++)
        readable_within(rl_stream_fd(s), 100);
    assert_int_equal(r, RL_OK);
    assert_int_equal(next0(s, &info, 1500), RL_END); /* the close frame goes out at once */
    assert_int_equal(rl_stream_fd(s), -1);
    rl_stream_close(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    expect_client_close(ss, 0, 1000, "range complete");
    ss_stop(ss);
    rl_stream_free(s);
    event_destroy(&go);
}

/* With resume, between connections the descriptor is a timer that becomes readable when the
 * attempt is due; next(0) returns RL_AGAIN at once before that, and dials after it. */
static void test_pull_fd_across_resume(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 10);
    ss_drop(ss);
    ss_next_connection(ss);
    ss_ledger(ss, 2, 10);
    ss_stall(ss);
    rl_options o;
    rl_options_init(&o);
    o.resume_retries = 3;
    o.resume_backoff_ns = 400000000LL; /* the wait: 200 to 400 ms */
    o.resume_backoff_max_ns = 400000000LL;
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), &o), RL_OK);
    assert_int_equal(rl_stream_open(s, rl_unbounded_range(1)), RL_OK);
    int sock = rl_stream_fd(s);
    rl_ledger_info info;
    rl_result r = RL_AGAIN;
    for (int i = 0; i < 100 && (r = next0(s, &info, 500)) == RL_AGAIN; i++)
        readable_within(rl_stream_fd(s), 100);
    assert_int_equal(r, RL_OK);
    assert_int_equal(info.sequence, 1);
    /* the drop: read as it comes, then backing off */
    int fd = sock;
    for (int i = 0; i < 100 && fd == sock; i++) {
        readable_within(fd, 100);
        assert_int_equal(next0(s, &info, 500), RL_AGAIN);
        fd = rl_stream_fd(s);
    }
    assert_true(fd >= 0 && fd != sock);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_false(S_ISSOCK(st.st_mode)); /* the timer */
    int64_t t0 = mono_ms();
    assert_int_equal(next0(s, &info, 100), RL_AGAIN); /* still backing off: no wait */
    assert_true(readable_within(fd, 5000));
    int64_t waited = mono_ms() - t0;
    if (waited > 1500)
        fail_msg("the backoff timer became readable after %lld ms (want at most 400)", (long long)waited);
    /* due: this call dials (loopback: quickly), and ledger 2 comes on the new socket */
    r = RL_AGAIN;
    for (int i = 0; i < 100 && (r = next0(s, &info, 1000)) == RL_AGAIN; i++) {
        int now = rl_stream_fd(s);
        assert_true(now >= 0);
        readable_within(now, 100);
    }
    assert_int_equal(r, RL_OK);
    assert_int_equal(info.sequence, 2);
    assert_int_equal(rl_stream_reconnects(s), 1);
    assert_int_equal(fstat(rl_stream_fd(s), &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    assert_int_equal(ss_connections(ss), 2);
    ss_stop(ss);
}

/* A bounded range: RL_END after its last ledger (the client closes with "range complete"), and
 * again on every later call until the session is closed. */
static void test_pull_end_of_range(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 7, 10);
    ss_ledger(ss, 8, 10);
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), NULL), RL_OK);
    assert_int_equal(rl_stream_open(s, rl_bounded_range(7, 8)), RL_OK);
    rl_ledger_info info;
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_OK);
    assert_int_equal(info.sequence, 7);
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_OK);
    assert_int_equal(info.sequence, 8);
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_END);
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_END);
    assert_string_equal(rl_stream_error(s), "");
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    expect_client_close(ss, 0, 1000, "range complete");
    rl_stream_close(s);
    ss_stop(ss);

    rl_stream_free(s);

    /* closed right after the last ledger, without asking for more: still "range complete" */
    ss = ss_start();
    ss_ledger(ss, 7, 10);
    ss_stall(ss);
    assert_int_equal(rl_stream_new(&s, ss_url(ss), NULL), RL_OK);
    assert_int_equal(rl_stream_open(s, rl_single_ledger_range(7)), RL_OK);
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_OK);
    rl_stream_close(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    expect_client_close(ss, 0, 1000, "range complete");
    rl_stream_free(s);
    ss_stop(ss);
}

/* The idle clock does not run while the caller holds a ledger: only the library's own waiting
 * counts. The caller here takes 700 ms over ledger 1 (the slowness under test, not a
 * synchronisation), against a 500 ms idle timeout; ledger 2 is sent only after that. */
static void test_pull_idle_excludes_the_callers_time(void **state)
{
    (void)state;
    event go;
    event_init(&go);
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 10);
    ss_call(ss, wait_event, &go);
    ss_ledger(ss, 2, 10);
    ss_stall(ss);
    rl_options o;
    rl_options_init(&o);
    o.idle_timeout_ns = 500000000LL;
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), &o), RL_OK);
    assert_int_equal(rl_stream_open(s, rl_unbounded_range(1)), RL_OK);
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, NULL), RL_OK);
    int64_t t0 = mono_ms();
    while (mono_ms() - t0 < 700)
        poll(NULL, 0, 50);
    event_set(&go);
    rl_ledger_info info;
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_OK);
    assert_int_equal(info.sequence, 2);
    /* then the server is silent: the idle timeout, from the library's own wait */
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_ERR_IDLE_TIMEOUT);
    assert_string_equal(rl_stream_error(s), "remoteledger: read: idle timeout: no complete message for 500ms");
    rl_stream_close(s);
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    ss_stop(ss);
    event_destroy(&go);
}

/* A cancelled stream stays cancelled (sticky) until rl_stream_reset; then it streams again. A
 * cancel from another thread wakes a blocked rl_stream_next. */
static void test_reset_after_cancel(void **state)
{
    (void)state;
    event opened;
    event_init(&opened);
    ss_server *ss = ss_start();
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), NULL), RL_OK);
    ss_call(ss, wait_event, &opened);
    ss_ledger(ss, 1, 10);
    ss_call(ss, cancel_stream, s); /* on the server's thread, while the client waits */
    ss_stall(ss);
    ss_next_connection(ss);
    ss_ledger(ss, 1, 10);
    ss_next_connection(ss);
    ss_ledger(ss, 1, 10);
    ss_stall(ss);

    assert_int_equal(rl_stream_open(s, rl_unbounded_range(1)), RL_OK);
    event_set(&opened);
    rl_result r;
    int got = 0;
    while ((r = rl_stream_next(s, -1, NULL, NULL, NULL)) == RL_OK && got < 10)
        got++;
    assert_int_equal(r, RL_ERR_CANCELLED);
    assert_string_equal(rl_stream_error(s), "context canceled");
    rl_stream_close(s);
    /* sticky: nothing is dialled */
    assert_int_equal(rl_stream_raw_ledgers(s, rl_single_ledger_range(1), NULL, NULL), RL_ERR_CANCELLED);
    assert_int_equal(rl_stream_open(s, rl_single_ledger_range(1)), RL_ERR_CANCELLED);

    rl_stream_reset(s);
    assert_string_equal(rl_stream_error(s), "");
    assert_int_equal(rl_stream_raw_ledgers(s, rl_single_ledger_range(1), NULL, NULL), RL_OK);

    /* reset also ends an open session, politely */
    assert_int_equal(rl_stream_open(s, rl_unbounded_range(1)), RL_OK);
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, NULL), RL_OK);
    rl_stream_reset(s);
    assert_int_equal(rl_stream_next(s, 0, NULL, NULL, NULL), RL_ERR_INVALID);
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    assert_int_equal(ss_connections(ss), 3);
    expect_client_close(ss, 1, 1000, "range complete");
    expect_client_close(ss, 2, 1000, "consumer done");
    ss_stop(ss);
    event_destroy(&opened);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pull_timeouts_and_partial_ledgers),
        cmocka_unit_test(test_pull_end_of_range),
        cmocka_unit_test(test_pull_fd_and_next0_never_waits),
        cmocka_unit_test(test_pull_fd_across_resume),
        cmocka_unit_test(test_pull_idle_excludes_the_callers_time),
        cmocka_unit_test(test_reset_after_cancel),
    };
    return RLSUITE_RUN(tests);
}
