/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: what the libremoteledger unit tests share, the files tests/test_remoteledger_<concern>.c
 * (endpoint, assemble, websocket, conn, delivery, endings, pull, resume, run; each file's first comment
 * says what its concern is). Failures are cmocka assertions; include after <cmocka.h>.
 *
 * Every one of those files ends with rlsuite_run, which runs its cases three times: through the
 * callback API (rl_stream_raw_ledgers), through the pull API (rlclient_pull), and as a poll loop
 * over rl_stream_fd with rl_stream_next(0) (rlclient_poll). A case that streams through drain,
 * drain_url or drain_expect (rlclient.h) must give the same result all three ways; a case that
 * does not stream just runs three times. */
#ifndef CS_TESTS_SUPPORT_RLSUITE_H
#define CS_TESTS_SUPPORT_RLSUITE_H

#include <stddef.h>
#include <stdint.h>

/* The last representable ledger sequence (UINT32_MAX), as the cases spell it. */
#define MAXU32 4294967295u

/* Fails the test unless needle occurs in haystack, showing both. */
void assert_contains(const char *haystack, const char *needle);
/* CLOCK_MONOTONIC in milliseconds: for measuring how long a call took. */
int64_t mono_ms(void);
/* rl_stream_cancel(arg): a step for ss_call (scriptserver.h), cancelling the client's stream from
 * the server's thread at that point of the script. */
void cancel_stream(void *arg);

/* Runs the n cases as three cmocka groups, "callback", "pull" and "poll" (see above); returns how
 * many failed in all. Leaves rlclient_pull and rlclient_poll set. */
int rlsuite_run(const struct CMUnitTest *tests, size_t n);
#define RLSUITE_RUN(tests) rlsuite_run((tests), sizeof(tests) / sizeof((tests)[0]))

#endif
