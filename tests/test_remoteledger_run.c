/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: the run a session follows (X-Corestream-Run in the 101; rl_options.
 * allow_run_change, rl_stream_run; conn_input.c) against the scripted server
 * (support/scriptserver.h). A resume onto a server of the same run goes on; onto another run it
 * ends with RL_ERR_RUN_CHANGED, naming both tokens, closing that connection with 1000 "run changed"
 * and never retried; a server without the header (an older one) is accepted; allow_run_change
 * follows the new run; a malformed token is a protocol violation; each session's run is its own. */
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

#define RUN_A "synthetic-7c31a2d9e0f4b816"
#define RUN_B "synthetic-0b5d2e55c1a3f9e4"

static rl_options resuming(void)
{
    rl_options o = resume_options(3); /* more than any case needs: a refusal is not for want of budget */
    o.idle_timeout_ns = 3000000000LL; /* a client that reads past a refusal fails in seconds */
    return o;
}

/* One connection of a script: its 101 with run (NULL: without the header), ledger seq, then the
 * connection dropped and the next one awaited. */
static void drop_after(ss_server *ss, const char *run, uint32_t seq)
{
    if (run)
        ss_handshake_run(ss, run);
    ss_ledger(ss, seq, 10);
    ss_drop(ss);
    ss_next_connection(ss);
}

/* The same token on every connection: the session resumes as it always did. */
static void test_same_run_resumes(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_handshake_run(ss, RUN_A);
    ss_ledger(ss, 1, 10);
    drop_after(ss, NULL, 2);
    ss_handshake_run(ss, RUN_A);
    ss_ledger(ss, 3, 10);
    rl_options o = resuming();
    collected c = {0};
    drain_url(ss_url(ss), &o, rl_bounded_range(1, 3), &c);
    expect(&c, RL_OK, 3);
    expect_sequences(&c, 1, 3);
    assert_int_equal(rl_stream_reconnects(c.s), 1);
    assert_string_equal(rl_stream_run(c.s), RUN_A);
    drain_done(ss, &c);
    assert_int_equal(ss_connections(ss), 2);
    expect_client_close(ss, 1, 1000, "range complete");
    ss_stop(ss);
    collected_free(&c);
}

/* A resume onto another run: RL_ERR_RUN_CHANGED with both tokens, after the ledgers of the first
 * run and none of the second (its ledger 3 is never read), the connection closed with 1000 "run
 * changed", and no further attempt although the budget allows three. */
static void test_another_run_is_refused(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_handshake_run(ss, RUN_A);
    ss_ledger(ss, 1, 10);
    drop_after(ss, NULL, 2);
    ss_handshake_run(ss, RUN_B);
    ss_ledger(ss, 3, 10);
    ss_stall(ss);
    rl_options o = resuming();
    collected c = {0};
    drain_url(ss_url(ss), &o, rl_bounded_range(1, 5), &c);
    expect(&c, RL_ERR_RUN_CHANGED, 2);
    expect_sequences(&c, 1, 2);
    char want[512];
    snprintf(want, sizeof want,
             "remoteledger: dial ws://127.0.0.1:%d/stream?end=5&start=3: run changed: the server is now run "
             RUN_B ", the session began on run " RUN_A,
             ss_port(ss));
    assert_string_equal(c.err, want);
    assert_string_equal(rl_result_name(RL_ERR_RUN_CHANGED), "RL_ERR_RUN_CHANGED");
    assert_string_equal(rl_stream_run(c.s), RUN_A); /* still the session's */
    drain_done(ss, &c);
    assert_int_equal(ss_connections(ss), 2);
    expect_client_close(ss, 1, 1000, "run changed");
    ss_stop(ss);
    collected_free(&c);
}

/* A server without the header (an older corestreamd, or a proxy's own answer) is accepted
 * whatever the session's run, and a session whose first server sent none takes the first token
 * that comes. */
static void test_absent_header_is_accepted(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    drop_after(ss, RUN_A, 1);
    drop_after(ss, NULL, 2); /* the standard 101: no X-Corestream-Run */
    ss_handshake_run(ss, RUN_A);
    ss_ledger(ss, 3, 10);
    rl_options o = resuming();
    collected c = {0};
    drain_url(ss_url(ss), &o, rl_bounded_range(1, 3), &c);
    expect(&c, RL_OK, 3);
    expect_sequences(&c, 1, 3);
    assert_string_equal(rl_stream_run(c.s), RUN_A);
    drain_done(ss, &c);
    assert_int_equal(ss_connections(ss), 3);
    ss_stop(ss);

    ss = ss_start();
    drop_after(ss, NULL, 1);
    drop_after(ss, RUN_B, 2);
    ss_handshake_run(ss, RUN_A); /* B was the session's first token: A is another run */
    ss_stall(ss);
    collected_reset(&c);
    drain_url(ss_url(ss), &o, rl_bounded_range(1, 3), &c);
    expect(&c, RL_ERR_RUN_CHANGED, 2);
    assert_string_equal(rl_stream_run(c.s), RUN_B);
    drain_done(ss, &c);
    assert_int_equal(ss_connections(ss), 3);
    ss_stop(ss);

    /* no token anywhere: rl_stream_run stays "" */
    ss = ss_start();
    ss_ledger(ss, 1, 10);
    collected_reset(&c);
    drain_url(ss_url(ss), &o, rl_single_ledger_range(1), &c);
    expect(&c, RL_OK, 1);
    assert_string_equal(rl_stream_run(c.s), "");
    drain_done(ss, &c);
    ss_stop(ss);
    collected_free(&c);
}

/* allow_run_change: the session goes on across the change and follows the new run. */
static void test_allow_run_change(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    drop_after(ss, RUN_A, 1);
    drop_after(ss, RUN_B, 2);
    ss_handshake_run(ss, RUN_B);
    ss_ledger(ss, 3, 10);
    rl_options o = resuming();
    o.allow_run_change = true;
    collected c = {0};
    drain_url(ss_url(ss), &o, rl_bounded_range(1, 3), &c);
    expect(&c, RL_OK, 3);
    expect_sequences(&c, 1, 3);
    assert_string_equal(rl_stream_run(c.s), RUN_B);
    assert_int_equal(rl_stream_reconnects(c.s), 2);
    drain_done(ss, &c);
    ss_stop(ss);
    collected_free(&c);
}

/* A token that is not 1 to 64 visible ASCII characters: RL_ERR_PROTOCOL on the first connection,
 * closed with 1002, not retried. */
static void test_malformed_token(void **state)
{
    (void)state;
    char long_run[80];
    memset(long_run, 'a', 65);
    long_run[65] = '\0';
    const char *bad[] = {long_run, "two words"};
    const char *quoted[] = {"\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"", "\"two words\""};
    for (size_t i = 0; i < 2; i++) {
        ss_server *ss = ss_start();
        ss_handshake_run(ss, bad[i]);
        ss_ledger(ss, 1, 10);
        ss_stall(ss);
        rl_options o = resuming();
        collected c = {0};
        drain_url(ss_url(ss), &o, rl_single_ledger_range(1), &c);
        expect(&c, RL_ERR_PROTOCOL, 0);
        char want[512];
        snprintf(want, sizeof want,
                 "remoteledger: dial ws://127.0.0.1:%d/stream?end=1&start=1: protocol violation: X-Corestream-Run "
                 "%s is not a run token",
                 ss_port(ss), quoted[i]);
        assert_string_equal(c.err, want);
        drain_done(ss, &c);
        assert_int_equal(ss_connections(ss), 1);
        expect_client_close(ss, 0, 1002, "malformed X-Corestream-Run");
        ss_stop(ss);
        collected_free(&c);
    }
}

/* A session's run is its own: the next session on the same stream starts without one (so another
 * run's server is fine), and rl_stream_reset clears it. */
static void test_each_session_has_its_run(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_handshake_run(ss, RUN_A);
    ss_ledger(ss, 1, 10);
    ss_next_connection(ss);
    ss_handshake_run(ss, RUN_B);
    ss_ledger(ss, 2, 10);
    rl_options o = resuming();
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), &o), RL_OK);
    assert_string_equal(rl_stream_run(s), "");
    assert_int_equal(rl_stream_raw_ledgers(s, rl_single_ledger_range(1), NULL, NULL), RL_OK);
    assert_string_equal(rl_stream_run(s), RUN_A);
    assert_int_equal(rl_stream_open(s, rl_single_ledger_range(2)), RL_OK);
    assert_string_equal(rl_stream_run(s), RUN_B);
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, NULL), RL_OK);
    rl_stream_close(s);
    assert_string_equal(rl_stream_run(s), RUN_B); /* kept past the session's end */
    rl_stream_reset(s);
    assert_string_equal(rl_stream_run(s), "");
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    ss_stop(ss);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_run_resumes),
        cmocka_unit_test(test_another_run_is_refused),
        cmocka_unit_test(test_absent_header_is_accepted),
        cmocka_unit_test(test_allow_run_change),
        cmocka_unit_test(test_malformed_token),
        cmocka_unit_test(test_each_session_has_its_run),
    };
    return RLSUITE_RUN(tests);
}
