/* SPDX-License-Identifier: Apache-2.0 */
/* corestreamd under systemd's Type=notify (sd_notify(3), through libsystemd). Without
 * NOTIFY_SOCKET in the environment the object does nothing and starts no thread, so a daemon run
 * by hand or by a test is unchanged.
 *
 * Every message is sent by one thread of this module, in the order the events happened:
 *   READY=1\nSTATUS=listening on <addr>; waiting for the first ledger    once, at cs_notify_ready
 *   STATUS=streaming; latest ledger <N>                                  after cs_notify_ledger,
 *       at most once per CS_NOTIFY_STATUS_PERIOD_NS; a ledger that comes sooner is sent when the
 *       period ends (only the latest one), so the status is never more than a period stale
 *   STOPPING=1\nSTATUS=<why>                                             once, at cs_notify_stopping,
 *       after any status still owed; no STATUS follows it
 *   WATCHDOG=1                                   every half WATCHDOG_USEC, when systemd asked for
 *       a watchdog (sd_watchdog_enabled): before the first ledger (start-up and a captive core
 *       catching up are not stalls), while the latest ledger came within the last WATCHDOG_USEC,
 *       and once stopping (the stop is bounded by TimeoutStopSec). A source that stops producing
 *       therefore gets no pings, and systemd kills and restarts the unit between 1.5 and 2
 *       WatchdogSec after its last ledger.
 * A failed send is logged once at WARN and never stops the daemon. */
#ifndef CS_CORESTREAMD_NOTIFY_H
#define CS_CORESTREAMD_NOTIFY_H

#include <stdint.h>

#include "common/err.h"

#define CS_NOTIFY_STATUS_PERIOD_NS 1000000000LL

typedef struct cs_notify cs_notify;

/* Reads NOTIFY_SOCKET and the watchdog settings from the environment and, when a socket is set,
 * starts the sender thread. Call from the main thread before other threads read the
 * environment. Returns 0 with *out set (NULL is possible when notification is off: every call
 * below accepts it), or -1 with `systemd notify: …` when the thread cannot be started, or, in a
 * build without libsystemd (-DCS_WITH_SYSTEMD=OFF, notify_absent.c), when NOTIFY_SOCKET is set. */
int cs_notify_new(cs_notify **out, cs_err *err);

/* The listener is bound and the source has started. addr is copied. Any thread; once. */
void cs_notify_ready(cs_notify *n, const char *addr);
/* Ledger seq has been published. Called on the source thread; never blocks on the sender. */
void cs_notify_ledger(cs_notify *n, uint32_t seq);
/* The daemon is stopping; why (copied) becomes the final STATUS. The first call wins. Any
 * thread. */
void cs_notify_stopping(cs_notify *n, const char *why);

/* Sends whatever is still owed (a STOPPING=1 included), stops the thread and frees n. NULL is
 * allowed. Call once, after the server has stopped calling cs_notify_ledger. */
void cs_notify_free(cs_notify *n);

#endif
