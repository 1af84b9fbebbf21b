/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: resume (rl_options.resume_retries; resume.c) against the scripted server
 * (support/scriptserver.h). A session cut mid-ledger, closed with 1011 or going away continues
 * on a new connection from the ledger expected next, every ledger once and in order; what is never
 * retried (4001, a gap, a refused upgrade); the budget of attempts without a ledger; and the pull
 * API during a backoff. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "corestream/remoteledger.h"
#include "support/rlclient.h"
#include "support/rlsuite.h"
#include "support/scriptserver.h"

/* Cut mid-ledger, then a close 1011, then a truncated bounded range: each time the next
 * connection asks for the ledger expected next, and the caller sees every ledger once, in
 * order. */
static void test_resume_exactly_once(void **state)
{
    (void)state;
    uint8_t part[40] = {0};
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 10);
    ss_ledger(ss, 2, 10);
    ss_begin(ss, 3, 0);
    ss_send_partial(ss, part, sizeof part, 1000); /* ledger 3 is cut in the middle of a chunk */
    ss_drop(ss);
    ss_next_connection(ss);
    ss_ledger(ss, 3, 10);
    ss_send_close(ss, 1011, "source failed");
    ss_next_connection(ss);
    ss_ledger(ss, 4, 10);
    ss_send_close(ss, 1001, "source ended before range complete");
    ss_next_connection(ss);
    ss_ledger(ss, 5, 10);
    ss_ledger(ss, 6, 10);
    rl_options o = resume_options(3);
    collected c = {0};
    drain_url(ss_url(ss), &o, rl_bounded_range(1, 6), &c);
    expect(&c, RL_OK, 6);
    expect_sequences(&c, 1, 6);
    assert_int_equal(rl_stream_reconnects(c.s), 3);
    drain_done(ss, &c);
    assert_int_equal(ss_connections(ss), 4);
    assert_string_equal(ss_target(ss, 0), "/stream?end=6&start=1");
    assert_string_equal(ss_target(ss, 1), "/stream?end=6&start=3");
    assert_string_equal(ss_target(ss, 2), "/stream?end=6&start=4");
    assert_string_equal(ss_target(ss, 3), "/stream?end=6&start=5");
    expect_client_close(ss, 3, 1000, "range complete");
    ss_stop(ss);
    collected_free(&c);
}

/* An unbounded stream: a restart's 1001 is resumed (a tip subscription from the ledger after the
 * last one seen), the source's clean end (1000) ends it. */
static void test_resume_unbounded_going_away(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 40, 10);
    ss_send_close(ss, 1001, "server shutting down");
    ss_next_connection(ss);
    ss_ledger(ss, 41, 10);
    ss_send_close(ss, 1000, "source ended");
    rl_options o = resume_options(-1);
    collected c = {0};
    drain_url(ss_url(ss), &o, rl_unbounded_range(0), &c);
    expect(&c, RL_OK, 2);
    expect_sequences(&c, 40, 2);
    assert_int_equal(rl_stream_reconnects(c.s), 1);
    drain_done(ss, &c);
    assert_string_equal(ss_target(ss, 1), "/stream?start=41");
    ss_stop(ss);
    collected_free(&c);
}

/* Never retried: a 4001 (returned at once, with the ledger expected next), a gap, a refused token. */
static void test_resume_does_not_retry(void **state)
{
    (void)state;
    rl_options o = resume_options(-1);
    ss_server *ss = ss_start();
    ss_ledger(ss, 5, 10);
    ss_send_close(ss, 4001, "too far behind: oldest=16 latest=20");
    collected c = {0};
    drain_url(ss_url(ss), &o, rl_unbounded_range(5), &c);
    expect(&c, RL_ERR_TOO_FAR_BEHIND, 1);
    uint32_t req = 0, oldest = 0, latest = 0;
    assert_true(rl_stream_too_far_behind(c.s, &req, &oldest, &latest));
    assert_int_equal(req, 6);
    assert_int_equal(oldest, 16);
    assert_int_equal(latest, 20);
    assert_int_equal(rl_stream_reconnects(c.s), 0);
    drain_done(ss, &c);
    assert_int_equal(ss_connections(ss), 1);
    ss_stop(ss);

    ss = ss_start();
    ss_ledger(ss, 5, 10);
    ss_ledger(ss, 7, 10);
    collected_reset(&c);
    drain_url(ss_url(ss), &o, rl_unbounded_range(5), &c);
    expect(&c, RL_ERR_GAP, 1);
    drain_done(ss, &c);
    assert_int_equal(ss_connections(ss), 1);
    ss_stop(ss);

    ss = ss_start();
    ss_reject_handshake(ss, 401);
    collected_reset(&c);
    drain_url(ss_url(ss), &o, rl_unbounded_range(5), &c);
    expect(&c, RL_ERR_DIAL, 0);
    drain_done(ss, &c);
    assert_int_equal(ss_connections(ss), 1);
    ss_stop(ss);
    collected_free(&c);
}

/* The budget: attempts in a row without a ledger. Two retries allowed, three connections cut
 * before a ledger: the last failure is returned. A ledger in between makes the budget whole. */
static void test_resume_budget(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_drop(ss);
    ss_next_connection(ss);
    ss_drop(ss);
    ss_next_connection(ss);
    ss_send_close(ss, 1011, "source failed");
    rl_options o = resume_options(2);
    collected c = {0};
    drain_url(ss_url(ss), &o, rl_unbounded_range(1), &c);
    expect(&c, RL_ERR_READ, 0);
    assert_string_equal(c.err, "remoteledger: read: failed to get reader: received close frame: status = "
                               "StatusInternalError and reason = \"source failed\"");
    assert_int_equal(rl_stream_reconnects(c.s), 2);
    drain_done(ss, &c);
    assert_int_equal(ss_connections(ss), 3);
    ss_stop(ss);

    ss = ss_start();
    ss_drop(ss);
    ss_next_connection(ss);
    ss_ledger(ss, 1, 10);
    ss_drop(ss);
    ss_next_connection(ss);
    ss_drop(ss);
    ss_next_connection(ss);
    ss_ledger(ss, 2, 10);
    ss_send_close(ss, 1000, "");
    o = resume_options(2);
    collected_reset(&c);
    drain_url(ss_url(ss), &o, rl_bounded_range(1, 2), &c);
    expect(&c, RL_OK, 2);
    drain_done(ss, &c);
    assert_int_equal(ss_connections(ss), 4);
    ss_stop(ss);

    /* nothing listening at all: the dial is retried, and its failure returned in the end */
    o = resume_options(2);
    collected_reset(&c);
    drain_url("ws://127.0.0.1:1", &o, rl_unbounded_range(1), &c);
    expect(&c, RL_ERR_DIAL, 0);
    assert_contains(c.err, "connection refused");
    rl_stream_free(c.s);
    collected_free(&c);
}

/* The pull API during a backoff: rl_stream_next's own timeout returns RL_AGAIN, and the attempt
 * happens on a later call; a cancel cuts the backoff short. */
static void test_resume_backoff_and_next_timeout(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 10);
    ss_drop(ss);
    ss_next_connection(ss);
    ss_ledger(ss, 2, 10);
    ss_drop(ss);
    rl_options o = resume_options(-1);
    o.resume_backoff_ns = 2000000000LL; /* each wait: 1 to 2 s, well past the bound below */
    o.resume_backoff_max_ns = 2000000000LL;
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), &o), RL_OK);
    assert_int_equal(rl_stream_open(s, rl_unbounded_range(1)), RL_OK);
    rl_ledger_info info;
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_OK);
    assert_int_equal(rl_stream_next(s, 50000000LL, NULL, NULL, &info), RL_AGAIN); /* cut, then backing off */
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_OK);
    assert_int_equal(info.sequence, 2);
    assert_int_equal(rl_stream_reconnects(s), 1);
    /* the second cut: a cancel from another thread ends the backoff at once */
    assert_int_equal(rl_stream_next(s, 50000000LL, NULL, NULL, &info), RL_AGAIN);
    rl_stream_cancel(s);
    int64_t t0 = mono_ms();
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_ERR_CANCELLED);
    assert_true(mono_ms() - t0 < 700);
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    assert_int_equal(ss_connections(ss), 2);
    ss_stop(ss);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_exactly_once),
        cmocka_unit_test(test_resume_unbounded_going_away),
        cmocka_unit_test(test_resume_does_not_retry),
        cmocka_unit_test(test_resume_budget),
        cmocka_unit_test(test_resume_backoff_and_next_timeout),
    };
    return RLSUITE_RUN(tests);
}
