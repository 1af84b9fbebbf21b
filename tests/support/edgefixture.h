/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: the edge's end-to-end tests (test_edge_e2e, test_edge_faults_e2e). A scratch
 * directory, a real nats-server (or a 3-node cluster), and corestreamd processes on it: a core
 * publishing synthetic ledgers of CS_EDGEFX_SIZE bytes in 64 KiB chunks every 100 ms, and an edge
 * (--source jetstream) following the stream. Failures are cmocka assertions; include after
 * <cmocka.h>. */
#ifndef CS_TESTS_SUPPORT_EDGEFIXTURE_H
#define CS_TESTS_SUPPORT_EDGEFIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "support/natsserver.h"
#include "support/procharness.h"
#include "support/tmpdir.h"

#define CS_EDGEFX_STREAM "CORESTREAM"
#define CS_EDGEFX_SIZE 300000

typedef struct cs_edgefx {
    cs_tmpdir tmp;
    cs_nats_server nats;
    cs_nats_cluster cluster;
    bool clustered;
    cs_proc core, edge;
    bool core_live, edge_live;
} cs_edgefx;

/* The scratch directory and one nats-server (clustered: three, R3-capable). 0, or -1 with the
 * servers' logs on stderr and nothing left running. */
int cs_edgefx_setup(cs_edgefx *fx, bool clustered);
/* Stops whatever still runs and removes the directory. */
void cs_edgefx_teardown(cs_edgefx *fx);
/* The NATS URLs (comma-separated for the cluster). */
const char *cs_edgefx_urls(const cs_edgefx *fx);

/* The core on <tmp>/core with extra flags (NULL-terminated, may be NULL); returns once it
 * publishes and listens, with its run token in run. */
void cs_edgefx_start_core(cs_edgefx *fx, const char *const *extra, char *run, size_t runlen);
/* The edge on <tmp>/edge, reading from url (NULL: every node), with extra flags; returns once it
 * runs, without waiting for it to follow the stream. */
void cs_edgefx_launch_edge(cs_edgefx *fx, const char *url, const char *const *extra);
/* The edge on <tmp>/edge; returns once it follows the stream and listens. following (may be NULL)
 * gets the `jetstream source following` line. */
void cs_edgefx_start_edge(cs_edgefx *fx, const char *const *extra, char *following, size_t flen);
/* Waits (bounded) until ledger seq of run is in the stream. */
void cs_edgefx_wait_stream_ledger(cs_edgefx *fx, const char *run, uint32_t seq);

#endif
