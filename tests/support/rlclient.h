/* SPDX-License-Identifier: Apache-2.0 */
/* Test support for the libremoteledger tests: run a client against the scripted server
 * (scriptserver.h) and collect what it was handed, then check the outcome. Failures are cmocka
 * assertions; include after <cmocka.h>. Only the library's public API is used here. */
#ifndef CS_TESTS_SUPPORT_RLCLIENT_H
#define CS_TESTS_SUPPORT_RLCLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corestream/remoteledger.h"
#include "support/scriptserver.h"

#define MAX_LEDGERS 64
#define SERVER_WAIT_MS 10000 /* bound on the scripted server finishing after the client */

/* What one client run saw. Zero it (or collected_reset) before a run; stop_after and
 * cancel_in_callback may be set first. */
typedef struct collected {
    rl_stream *s;
    rl_result r;
    char err[1024];
    int count;
    int first; /* first payload byte, -1 when none */
    size_t sizes[MAX_LEDGERS];
    rl_ledger_info infos[MAX_LEDGERS];
    uint8_t *copies[MAX_LEDGERS];
    int observed;
    rl_ledger_info observed_infos[MAX_LEDGERS];
    int observed_before_callback; /* observer calls seen when each callback ran */
    int stop_after;               /* return non-zero from the callback after this many (0: never) */
    bool cancel_in_callback;
    const uint8_t *first_ptr; /* 137 */
    bool borrowed_overwritten;
    bool same_buffer;
    uint8_t first_copy[256];
    size_t first_len;
    int64_t elapsed_ms;
} collected;

/* The observer and the ledger callback that fill a collected (ctx). */
void observer(const rl_ledger_info *info, void *ctx);
int on_ledger(const uint8_t *p, size_t n, const rl_ledger_info *info, void *ctx);
/* Frees the copies of the payloads (again: a no-op). */
void collected_free(collected *c);
/* collected_free, then zeroes c for the next run. */
void collected_reset(collected *c);

/* When true, drain_url streams through the pull API (rl_stream_open, rl_stream_next until RL_END
 * or an error, on_ledger on each ledger, rl_stream_close) instead of rl_stream_raw_ledgers, so a
 * suite can run every case both ways. The results must be the same. */
extern bool rlclient_pull;
/* When true (it wins over rlclient_pull), drain_url drives the pull API as a poll loop would:
 * rl_stream_next(s, 0, ...) until RL_AGAIN, then poll(rl_stream_fd(s), POLLIN), failing the test
 * when a next(0) takes a second or the descriptor is -1 while the session is open. */
extern bool rlclient_poll;

/* Streams range from url with the options (NULL: defaults plus the observer) and records it all;
 * c->s stays open for the caller to inspect (free it, or use drain_done). */
void drain_url(const char *url, rl_options *opts, rl_range range, collected *c);
/* Frees c->s and waits (bounded) for the scripted server to finish its script. */
void drain_done(ss_server *ss, collected *c);
/* drain_url against the scripted server, then drain_done. */
void drain(ss_server *ss, rl_options *opts, rl_range range, collected *c);
/* The run ended with r after count ledgers. */
void expect(const collected *c, rl_result r, int count);
/* The count ledgers delivered are from, from + 1, …, in order. */
void expect_sequences(const collected *c, uint32_t from, int count);
/* Default options with resume on: retries attempts in a row, backoff 5 ms doubling up to 20 ms
 * (the tests do not wait long). */
rl_options resume_options(int64_t retries);
/* drain, expect, and when err is not NULL the exact error text. */
void drain_expect(ss_server *ss, rl_options *opts, rl_range range, collected *c, rl_result r, int count,
                  const char *err);
/* The client closed connection i with this code, and this reason unless reason is NULL. */
void expect_client_close(const ss_server *ss, int i, int code, const char *reason);

#endif
