/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: a real Debian nats-server with JetStream (`nats-server -c <conf>`, JetStream on,
 * store_dir in the server's own scratch directory) on 127.0.0.1. The first start takes an
 * ephemeral port (port -1, read back from the server's "Listening for client connections" line);
 * a restart binds the same port and the same store, as an operator's restart does. The server is
 * a child process (procharness), stopped by PID. Every wait is bounded. Not thread-safe. */
#ifndef CS_TESTS_SUPPORT_NATSSERVER_H
#define CS_TESTS_SUPPORT_NATSSERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "support/procharness.h"
#include "support/tmpdir.h"

typedef struct cs_nats_server {
    cs_proc proc;
    cs_tmpdir dir;    /* nats.conf and store/ */
    int port;         /* 0 until the first start */
    char url[64];     /* nats://127.0.0.1:<port> */
    int64_t max_payload; /* 0: the server's default (1 MiB) */
    const char *extra_conf; /* appended to the config as it is (accounts, tls); NULL: none */
    bool running;
    /* A cluster node (cs_nats_cluster_start): its index, its route port (0 until its first start)
     * and its peers'. */
    bool clustered;
    int index;
    int route_port;
    int peer_routes[4];
    int npeers;
} cs_nats_server;

/* A JetStream cluster of n nodes on loopback (cluster "cs", each node with its own scratch
 * directory, server_name n0..n<n-1>), for R3 streams. Client and route ports are the servers' own
 * ephemeral picks (port -1), read back from their logs, so no port is chosen before the server that
 * binds it. JetStream clustering wants routes configured at start: the nodes start in order, each
 * with routes to those already up (the first to port 0, refused at once), and gossip completes the
 * mesh. route_port[i] is node i's route port. A restarted node (cs_nats_restart) keeps its ports
 * and store, with routes to every other node. */
#define CS_NATS_CLUSTER_MAX 5
typedef struct cs_nats_cluster {
    cs_nats_server node[CS_NATS_CLUSTER_MAX];
    int route_port[CS_NATS_CLUSTER_MAX];
    int n;
    char urls[CS_NATS_CLUSTER_MAX * 32]; /* every node's client URL, comma-separated */
} cs_nats_cluster;

/* Starts the nodes and waits (bounded by timeout_ms) until the cluster can place a stream with
 * n replicas: a probe stream is created (retried every 100 ms while the meta group forms) and
 * deleted. 0, or -1 (the nodes' output is in node[i].proc.log). */
int cs_nats_cluster_start(cs_nats_cluster *c, int n, int timeout_ms);
/* Kills every node and removes their directories. Idempotent. */
void cs_nats_cluster_free(cs_nats_cluster *c);

/* Makes the scratch directory, writes the config and starts the server; returns once it says
 * "Server is ready" (0), or -1 (the server's output is then in proc.log). */
int cs_nats_start(cs_nats_server *s, int64_t max_payload, int timeout_ms);
/* The same with extra_conf appended to the config (borrowed: it must outlive the server). */
int cs_nats_start_conf(cs_nats_server *s, const char *extra_conf, int timeout_ms);
/* Starts a stopped server again on its port and store. 0 or -1. */
int cs_nats_restart(cs_nats_server *s, int timeout_ms);
/* Sends sig (SIGTERM for a clean stop, SIGKILL for a crash) and waits for the exit. 0 or -1. */
int cs_nats_stop(cs_nats_server *s, int sig, int timeout_ms);
/* Kills a running server and removes its directory. Idempotent. */
void cs_nats_free(cs_nats_server *s);

#endif
