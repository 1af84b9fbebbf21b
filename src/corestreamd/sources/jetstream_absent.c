/* SPDX-License-Identifier: Apache-2.0 */
/* --source jetstream in a corestreamd configured with -DCS_WITH_NATS=OFF: no libnats, no edge.
 * config.c refuses the flag before anything starts; the constructor fails the same way should a
 * caller reach it. */
#include "corestreamd/sources/jetstream.h"

#include <stdio.h>
#include <stdlib.h>

/* What no caller can reach in this build: the constructor above never makes the object these
 * take. Reaching one anyway is a bug, stopped here rather than answered as if it worked. */
static void unreachable(const char *fn)
{
    fprintf(stderr, "%s: unreachable in a build without this part\n", fn);
    abort();
}

int cs_js_source_new(cs_source **out, const cs_js_source_config *cfg, cs_ring *ring, cs_cancel *cancel,
                     cs_err *err)
{
    (void)cfg, (void)ring, (void)cancel;
    *out = NULL;
    return cs_err_set(err, 0, "jetstream source: not built in (configured with -DCS_WITH_NATS=OFF)");
}

const char *cs_js_source_run(const cs_source *s)
{
    (void)s;
    unreachable(__func__);
    return NULL;
}

void cs_js_source_identity(const cs_source *s, char *buf, size_t len)
{
    (void)s, (void)buf, (void)len;
    unreachable(__func__);
}

const char *const cs_js_skip_names[CS_JS_SKIP_REASONS] = {"malformed", "subject", "out_of_place", "corrupt",
                                                                 "signature"};

void cs_js_source_stats(const cs_source *s, cs_js_source_stats_t *out)
{
    (void)s, (void)out;
    unreachable(__func__);
}
