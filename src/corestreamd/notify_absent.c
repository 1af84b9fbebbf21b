/* SPDX-License-Identifier: Apache-2.0 */
/* systemd notification in a corestreamd configured with -DCS_WITH_SYSTEMD=OFF: no libsystemd.
 * Outside systemd's Type=notify nothing changes. Under it (NOTIFY_SOCKET set) the start fails at
 * once, as systemd would otherwise wait its whole TimeoutStartSec for a READY=1 that never comes. */
#include "corestreamd/notify.h"

#include <stdlib.h>

int cs_notify_new(cs_notify **out, cs_err *err)
{
    *out = NULL;
    const char *sock = getenv("NOTIFY_SOCKET");
    if (sock && *sock)
        return cs_err_set(err, 0,
                          "systemd notify: NOTIFY_SOCKET is set (a Type=notify unit) but this corestreamd was "
                          "configured with -DCS_WITH_SYSTEMD=OFF; run it as Type=simple or build it with systemd");
    return 0;
}

/* The rest take the NULL cs_notify_new gave. */
void cs_notify_ready(cs_notify *n, const char *addr)
{
    (void)n, (void)addr;
}

void cs_notify_ledger(cs_notify *n, uint32_t seq)
{
    (void)n, (void)seq;
}

void cs_notify_stopping(cs_notify *n, const char *why)
{
    (void)n, (void)why;
}

void cs_notify_free(cs_notify *n)
{
    (void)n;
}
