/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/server/fdbudget.h"

#include <inttypes.h>

#include "corestreamd/stream/replay.h"

/* Everything but the replay slots' term. */
static uint64_t fixed_reserve(const cs_fd_parts *p)
{
    return CS_FD_RING_WRITER + CS_FD_FRAMES_FILL + (uint64_t)CS_REPLAY_WORKERS * CS_REPLAY_WORKER_FDS +
           CS_FD_SERVER_OWN + (uint64_t)p->lake_readers * CS_FD_LAKE_READER + (p->admin ? CS_FD_ADMIN_CONNECTIONS : 0) + p->caller;
}

int cs_fd_budget_make(cs_fd_budget *b, uint64_t limit, uint64_t open, const cs_fd_parts *parts, cs_err *err)
{
    uint64_t fixed = fixed_reserve(parts), slots = (uint64_t)parts->replay_slots * CS_REPLAY_HELD_FDS;
    uint64_t room = limit > open + fixed ? limit - open - fixed : 0;
    const uint32_t every = 1 + CS_REPLAY_HELD_FDS; /* a connection that may be a catch-up */
    *b = (cs_fd_budget){.limit = limit, .open = open, .reserve = fixed, .per_connection = every,
                        .connections = room / every};
    /* The slots' own term when it leaves more connections than counting each one as a catch-up. */
    if (parts->replay_slots && room > slots && room - slots > b->connections) {
        b->reserve = fixed + slots;
        b->per_connection = 1;
        b->connections = room - slots;
    }
    if (b->connections >= 1)
        return 0;
    /* One connection counted as a possible catch-up is the least any replay cap needs. */
    return cs_err_set(err, 0,
                      "the descriptor limit (RLIMIT_NOFILE %" PRIu64 ") leaves no room for a connection: %" PRIu64
                      " descriptors are open and %" PRIu64 " reserved (ring writer %d, stored-frames fill %d, "
                      "replay workers %d, the server's own %d, lake readers %" PRIu32 ", admin port %d, source and publisher %" PRIu32
                      "), and a connection needs %" PRIu32 " (its socket and the ledger a catch-up holds); raise "
                      "LimitNOFILE or ulimit -n to at least %" PRIu64,
                      limit, open, fixed, CS_FD_RING_WRITER, CS_FD_FRAMES_FILL,
                      CS_REPLAY_WORKERS * CS_REPLAY_WORKER_FDS, CS_FD_SERVER_OWN,
                      parts->lake_readers * CS_FD_LAKE_READER, parts->admin ? CS_FD_ADMIN_CONNECTIONS : 0, parts->caller, every,
                      open + fixed + every);
}
