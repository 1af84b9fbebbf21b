/* SPDX-License-Identifier: Apache-2.0 */
/* The JetStream publisher of a corestreamd configured with -DCS_WITH_NATS=OFF: no libnats, no
 * publisher. The daemon refuses --jetstream-url among its flags (config.c) before anything
 * starts; should a caller reach the constructor anyway, it fails saying why. */
#include "corestreamd/jetstream/publisher.h"

#include <stdio.h>
#include <stdlib.h>

/* What no caller can reach in this build: the constructor above never makes the object these
 * take. Reaching one anyway is a bug, stopped here rather than answered as if it worked. */
static void unreachable(const char *fn)
{
    fprintf(stderr, "%s: unreachable in a build without this part\n", fn);
    abort();
}

int cs_js_publisher_new(cs_js_publisher **out, const cs_js_config *cfg, cs_broadcaster *bc, cs_ring *ring,
                        cs_err *err)
{
    (void)cfg, (void)bc, (void)ring;
    *out = NULL;
    return cs_err_set(err, 0, "jetstream: not built in (configured with -DCS_WITH_NATS=OFF)");
}

int cs_js_publisher_start(cs_js_publisher *p, cs_err *err)
{
    (void)p, (void)err;
    unreachable(__func__);
    return -1;
}

/* Stop and free take NULL, as the real ones do (the daemon calls them without a publisher). */
void cs_js_publisher_stop(cs_js_publisher *p, int64_t drain_ns)
{
    (void)drain_ns;
    if (p)
        unreachable(__func__);
}

void cs_js_publisher_free(cs_js_publisher *p)
{
    if (p)
        unreachable(__func__);
}

void cs_js_publisher_stats(cs_js_publisher *p, cs_js_stats *out)
{
    (void)p, (void)out;
    unreachable(__func__);
}
