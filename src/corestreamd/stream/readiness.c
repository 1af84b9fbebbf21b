/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/stream/readiness.h"

#include <inttypes.h>
#include <stdio.h>

static const char *reason_of(cs_source_state st)
{
    switch (st) {
    case CS_SRC_STARTING: return "starting";
    case CS_SRC_CATCHING_UP: return "catching up";
    case CS_SRC_STREAMING: return NULL;
    case CS_SRC_ENDED: return "source ended";
    case CS_SRC_STOPPED: return "shutting down";
    case CS_SRC_RING_FAILED: return "ring failing";
    case CS_SRC_RECONNECTING: return "source reconnecting";
    case CS_SRC_WAITING: return "waiting";
    case CS_SRC_FAILED:
    default: return "source failed";
    }
}

unsigned cs_readiness(cs_source_state st, bool stopping, uint64_t latest, uint64_t waiting_for, char *body,
                      size_t len)
{
    /* A failure outranks a shutdown it may have caused; a shutdown outranks everything else. */
    const char *reason = reason_of(st);
    if (stopping && st != CS_SRC_FAILED && st != CS_SRC_RING_FAILED)
        reason = "shutting down";
    if (!reason) {
        snprintf(body, len, "{\"ready\":true,\"state\":\"%s\",\"latest\":%" PRIu64 "}\n", cs_source_state_name(st),
                 latest);
        return 200;
    }
    if (st == CS_SRC_WAITING && !stopping) {
        snprintf(body, len,
                 "{\"ready\":false,\"state\":\"waiting\",\"reason\":\"waiting for ledger %" PRIu64
                 " past a skipped message\",\"latest\":%" PRIu64 ",\"waiting_for\":%" PRIu64 "}\n",
                 waiting_for, latest, waiting_for);
        return 503;
    }
    snprintf(body, len, "{\"ready\":false,\"state\":\"%s\",\"reason\":\"%s\",\"latest\":%" PRIu64 "}\n",
             cs_source_state_name(st), reason, latest);
    return 503;
}
