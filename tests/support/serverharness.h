/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: a real corestreamd server run in process on 127.0.0.1 (an ephemeral port), fed by
 * a paced synthetic source or one the test builds, on a thread of its own. Failures are cmocka
 * assertions. Include after <cmocka.h>. */
#ifndef CS_TESTS_SUPPORT_SERVERHARNESS_H
#define CS_TESTS_SUPPORT_SERVERHARNESS_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "corestreamd/server/server.h"
#include "support/tmpdir.h"

#define T_MS 1000000LL
#define T_SEC 1000000000LL

typedef struct harness_opts {
    uint32_t start;
    uint32_t count; /* 0 = endless */
    int64_t size;
    int64_t interval_ms; /* cadence grid */
    int64_t window_ms;
    int64_t chunk;
    bool compress;
    int64_t compress_level; /* 0: auto, the server's default */
    bool compressible;
    int64_t retention;
    uint64_t max_payload;
    bool no_linger;
    int64_t max_connections;        /* 0: the server's defaults */
    int64_t max_connections_per_ip;
    int64_t header_timeout_s;
    int64_t max_replays; /* 0: the server's defaults */
    int64_t max_replays_per_ip;
    const char *auth_tokens; /* a token file's path, or NULL */
    bool auth_healthz;
    const char *tls_cert, *tls_key, *tls_client_ca;
    int64_t write_timeout_s; /* 0: the server's default */
    const char *run; /* the run token (cs_server_set_run) the 101 and /healthz carry; NULL: none */
    /* harness_start: the first ledger waits until this many subscribers are registered (up to
     * 60 s; then the run fails with "harness: ..."), so that a test's subscribers meet the live
     * flow from its start however slowly the machine connects them. 0: no wait. */
    int await_subscribers;
} harness_opts;

typedef struct harness {
    cs_server *srv;
    cs_cancel cancel;
    pthread_t th;
    cs_tmpdir tmp;
    const char *dir; /* tmp.path: the scratch directory */
    int port;
    int run_rc;
    cs_err run_err;
    bool joined;
} harness;

/* Prepares the scratch directory (under CS_TEST_TMPDIR) and the run's cancellation, which sources
 * are built against. */
void harness_begin(harness *h);
/* Opens the ring, builds and binds the server around src, and starts it on a thread. */
void harness_launch(harness *h, const harness_opts *o, cs_source *src, cs_range range);
/* begin + a paced synthetic source from o + launch. */
void harness_start(harness *h, const harness_opts *o);
/* Waits for the server thread; returns cs_server_run's result. Idempotent. */
int harness_join(harness *h);
/* Stops, joins, frees, and removes the scratch directory. */
void harness_stop(harness *h);

#endif
