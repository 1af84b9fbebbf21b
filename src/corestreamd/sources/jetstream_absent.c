/* --source jetstream in a corestreamd configured with -DCS_WITH_NATS=OFF: no libnats, no edge.
 * config.c refuses the flag before anything starts; the constructor fails the same way should a
 * caller reach it. */
#include "corestreamd/sources/jetstream.h"

#include <stdio.h>

int cs_js_source_new(cs_source **out, const cs_js_source_config *cfg, cs_ring *ring, cs_cancel *cancel,
                     cs_err *err)
{
    (void)cfg, (void)ring, (void)cancel;
    *out = NULL;
    return cs_err_set(err, 0,
                      "jetstream source: not built in (this corestreamd was configured with -DCS_WITH_NATS=OFF)");
}

/* Nothing below can be given an edge source: cs_js_source_new never makes one. */
const char *cs_js_source_run(const cs_source *s)
{
    (void)s;
    return "";
}

void cs_js_source_identity(const cs_source *s, char *buf, size_t len)
{
    (void)s;
    snprintf(buf, len, "source=jetstream");
}
