/* SPDX-License-Identifier: Apache-2.0 */
/* The descriptor budget (docs/operations/admission.md#the-descriptor-budget): how many connections
 * the server may hold under RLIMIT_NOFILE so that nothing else it runs ever finds the limit
 * reached. Computed once, when the server has bound its listeners and started its threads
 * (cs_server_listen), from what is open then and what the other parts may still open at once:
 *
 *   reserve = ring writer 2 + stored-frames fill 3 + replay workers 2 x 3 + the server's own 7
 *           + lake readers x 3 (with the lake on) + 64 with --admin-listen (its connections' own cap) + the caller's (the source, the
 *             JetStream publisher: cs_server_config.fd_reserve)
 *           + 2 per replay slot (a catch-up holds its ledger's .xdr and its frames segment)
 *   connections = limit - open - reserve, one descriptor each (a redelivery holds none while
 *                 its subscriber does not read, replay.h)
 *
 * With no replay cap, or a cap that would leave fewer connections than 3 descriptors each would,
 * every connection is counted as a possible catch-up instead: 3 descriptors each, no slot term.
 * Pure arithmetic; any thread. */
#ifndef CS_CORESTREAMD_FDBUDGET_H
#define CS_CORESTREAMD_FDBUDGET_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"

/* What each part may hold at once. */
#define CS_FD_RING_WRITER 2  /* the ledger, frames or record file being written; the ring directory read */
#define CS_FD_FRAMES_FILL 3  /* the ledger read, the frames file written, the record rewritten */
/* The server's own, beyond what is open at listen: a connection accepted only to be refused (1),
 * a /metrics scrape's /proc file (1), a SIGHUP reload's token, certificate or key file (1), the
 * systemd notification socket (1), the source thread's look at a ring ledger (its .xdr, frames segment
 * and record: 3). */
#define CS_FD_SERVER_OWN 7
#define CS_FD_ADMIN_CONNECTIONS 64
/* A lake reader (cs-lake) making an object: the ledger it reads (.xdr, frames segment, records log). */
#define CS_FD_LAKE_READER 3 /* --admin-listen's connection cap, outside --max-connections */

typedef struct cs_fd_parts {
    uint32_t replay_slots; /* --max-replays in force; 0: no cap */
    bool admin;            /* --admin-listen */
    uint32_t caller;       /* the embedder's parts (cs_server_config.fd_reserve) */
    uint32_t lake_readers; /* cs-lake threads; 0: the lake is off */
} cs_fd_parts;

typedef struct cs_fd_budget {
    uint64_t limit;          /* the soft RLIMIT_NOFILE it was computed under */
    uint64_t open;           /* descriptors open then */
    uint64_t reserve;        /* kept for everything that is not a connection */
    uint32_t per_connection; /* 1, or 3 when every connection is counted as a possible catch-up */
    uint64_t connections;    /* what is left, in connections: at least 1 */
} cs_fd_budget;

/* Fills b for a limit with `open` descriptors already in use. When the limit leaves no room for
 * one connection: -1 with `the descriptor limit (RLIMIT_NOFILE L) leaves no room for a
 * connection: O descriptors are open and R reserved (…each part…), and a connection needs 3 (its
 * socket and the ledger a catch-up holds); raise LimitNOFILE or ulimit -n to at least N`. */
int cs_fd_budget_make(cs_fd_budget *b, uint64_t limit, uint64_t open, const cs_fd_parts *parts, cs_err *err);

#endif
