/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: how a session ends and what the caller is told, against the scripted server
 * (support/scriptserver.h). A normal close, a bounded range truncated (with ledgers, without, mid-
 * assembly, on a server going away) or complete, a connection dropped, other close codes as read
 * errors, too far behind the server's retention (4001) with and without its bounds, and the
 * consumer stopping. The numbers in comments (123-133) are the prototype's test cases these carry
 * over. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "corestream/remoteledger.h"
#include "corestream/wire.h"
#include "support/rlclient.h"
#include "support/rlsuite.h"
#include "support/scriptserver.h"
#include "wire/wire.h"

/* 123 */
static void test_normal_close_ends_iteration(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 16);
    ss_ledger(ss, 2, 16);
    ss_send_close(ss, 1000, "source ended");
    collected c = {0};
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_OK, 2, NULL);
    /* the client answered the close handshake */
    expect_client_close(ss, 0, 1000, NULL);
    ss_stop(ss);
    collected_free(&c);
}

/* 124 */
static void test_truncated_bounded_range(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 32);
    ss_ledger(ss, 2, 32);
    ss_send_close(ss, 1000, "source ended");
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(1, 5), &c, RL_ERR_TRUNCATED, 2,
                 "remoteledger: stream ended before the requested range was delivered: got through "
                 "ledger 2, requested through 5");
    ss_stop(ss);
    collected_free(&c);
}

/* 125 */
static void test_truncated_with_nothing_delivered(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_send_close(ss, 1000, "source ended");
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(7, 9), &c, RL_ERR_TRUNCATED, 0,
                 "remoteledger: stream ended before the requested range was delivered: received no "
                 "ledgers, requested [7,9]");
    ss_stop(ss);
}

/* 126, 127 */
static void test_truncated_mid_assembly(void **state)
{
    (void)state;
    for (int bounded = 1; bounded >= 0; bounded--) {
        ss_server *ss = ss_start();
        const void *p[] = {"whole"};
        size_t l[] = {5};
        ss_flow(ss, 1, 0, 0, 1, p, l);
        ss_begin(ss, 2, 0);
        ss_chunk(ss, 2, 0, CS_CODEC_RAW, "partial", 7);
        ss_send_close(ss, 1000, "source ended");
        collected c = {0};
        drain_expect(ss, NULL, bounded ? rl_bounded_range(1, 3) : rl_unbounded_range(1), &c, RL_ERR_TRUNCATED, 1,
                     "remoteledger: stream ended before the requested range was delivered: stream "
                     "closed mid-assembly of ledger 2");
        ss_stop(ss);
        collected_free(&c);
    }
}

/* 128 */
static void test_truncated_on_going_away(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 4, 32);
    ss_send_close(ss, 1001, "source ended before range complete");
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(4, 6), &c, RL_ERR_TRUNCATED, 1, NULL);
    assert_contains(c.err, "got through ledger 4");
    ss_stop(ss);
    collected_free(&c);
}

/* 129 */
static void test_complete_bounded_range_has_no_error(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    for (uint32_t i = 1; i <= 3; i++)
        ss_ledger(ss, i, 32);
    ss_send_close(ss, 1000, "range complete");
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(1, 3), &c, RL_OK, 3, NULL);
    ss_stop(ss);
    collected_free(&c);
}

/* 130 */
static void test_tip_bounded_close_stays_clean(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_send_close(ss, 1000, "source ended");
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(0, 5), &c, RL_OK, 0, NULL);
    ss_stop(ss);
}

/* 131 */
static void test_abrupt_close_is_an_error(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 32);
    ss_drop(ss);
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(1, 4), &c, RL_ERR_READ, 1,
                 "remoteledger: read: failed to get reader: failed to read frame header: EOF");
    ss_stop(ss);
    collected_free(&c);

    /* dropped in the middle of a message (lws hands over a partial frame once its receive buffer
     * is full, so the message sent is bigger than that buffer) */
    ss = ss_start();
    const size_t half = 1u << 20;
    uint8_t *part = malloc(half);
    cs_wire_put_chunk_header(part, 1, 0, CS_CODEC_RAW);
    memset(part + CS_WIRE_CHUNK_HEADER_LEN, 7, half - CS_WIRE_CHUNK_HEADER_LEN);
    ss_begin(ss, 1, 0);
    ss_send_partial(ss, part, half, 2 * half);
    free(part);
    ss_drop(ss);
    collected_reset(&c);
    drain_expect(ss, NULL, rl_bounded_range(1, 4), &c, RL_ERR_READ, 0,
                 "remoteledger: read: failed to read frame payload: unexpected EOF");
    ss_stop(ss);
}

/* Other close codes are read errors, in coder/websocket's words. */
static void test_other_close_codes(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 32);
    ss_send_close(ss, 1011, "source failed");
    collected c = {0};
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_READ, 1,
                 "remoteledger: read: failed to get reader: received close frame: status = "
                 "StatusInternalError and reason = \"source failed\"");
    ss_stop(ss);
    collected_free(&c);

    ss = ss_start();
    ss_send_close_empty(ss);
    collected_reset(&c);
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_READ, 0,
                 "remoteledger: read: failed to get reader: received close frame: status = "
                 "StatusNoStatusRcvd and reason = \"\"");
    ss_stop(ss);

    ss = ss_start();
    ss_send_close(ss, 4002, "odd \"one\"");
    collected_reset(&c);
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_READ, 0,
                 "remoteledger: read: failed to get reader: received close frame: status = "
                 "StatusCode(4002) and reason = \"odd \\\"one\\\"\"");
    ss_stop(ss);
}

/* 132 */
static void test_too_far_behind(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    char reason[64];
    cs_wire_format_too_far_behind(reason, sizeof reason, 500, 900);
    ss_send_close(ss, 4001, reason);
    collected c = {0};
    drain_url(ss_url(ss), NULL, rl_unbounded_range(100), &c);
    expect(&c, RL_ERR_TOO_FAR_BEHIND, 0);
    assert_string_equal(c.err, "remoteledger: requested ledger is behind the server's retention: requested 100, "
                               "server retains [500,900]");
    uint32_t req = 0, oldest = 0, latest = 0;
    assert_true(rl_stream_too_far_behind(c.s, &req, &oldest, &latest));
    assert_int_equal(req, 100);
    assert_int_equal(oldest, 500);
    assert_int_equal(latest, 900);
    drain_done(ss, &c);
    ss_stop(ss);

    /* Requested is the NEXT ledger expected, not the original start */
    ss = ss_start();
    ss_ledger(ss, 100, 8);
    ss_ledger(ss, 101, 8);
    ss_send_close(ss, 4001, reason);
    collected_reset(&c);
    drain_url(ss_url(ss), NULL, rl_unbounded_range(100), &c);
    expect(&c, RL_ERR_TOO_FAR_BEHIND, 2);
    assert_true(rl_stream_too_far_behind(c.s, &req, NULL, NULL));
    assert_int_equal(req, 102);
    drain_done(ss, &c);
    ss_stop(ss);
    collected_free(&c);
}

/* 133 */
static void test_too_far_behind_without_bounds(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_send_close(ss, 4001, "nope");
    collected c = {0};
    drain_url(ss_url(ss), NULL, rl_unbounded_range(100), &c);
    expect(&c, RL_ERR_TOO_FAR_BEHIND, 0);
    assert_string_equal(c.err, "remoteledger: requested ledger is behind the server's retention: requested 100");
    uint32_t req = 1, oldest = 1, latest = 1;
    assert_true(rl_stream_too_far_behind(c.s, &req, &oldest, &latest));
    assert_int_equal(req, 100);
    assert_int_equal(oldest, 0);
    assert_int_equal(latest, 0);
    drain_done(ss, &c);
    ss_stop(ss);
}

/* The consumer stopping: RL_OK and a 1000 "consumer done". */
static void test_consumer_done(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    for (uint32_t i = 1; i <= 3; i++)
        ss_ledger(ss, i, 32);
    collected c = {0};
    c.stop_after = 2;
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_OK, 2, NULL);
    expect_client_close(ss, 0, 1000, "consumer done");
    ss_stop(ss);
    collected_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normal_close_ends_iteration),
        cmocka_unit_test(test_truncated_bounded_range),
        cmocka_unit_test(test_truncated_with_nothing_delivered),
        cmocka_unit_test(test_truncated_mid_assembly),
        cmocka_unit_test(test_truncated_on_going_away),
        cmocka_unit_test(test_complete_bounded_range_has_no_error),
        cmocka_unit_test(test_tip_bounded_close_stays_clean),
        cmocka_unit_test(test_abrupt_close_is_an_error),
        cmocka_unit_test(test_other_close_codes),
        cmocka_unit_test(test_too_far_behind),
        cmocka_unit_test(test_too_far_behind_without_bounds),
        cmocka_unit_test(test_consumer_done),
    };
    return RLSUITE_RUN(tests);
}
