/* The JetStream publisher of a corestreamd configured with -DCS_WITH_NATS=OFF: no libnats, no
 * publisher. The daemon refuses --jetstream-url among its flags (config.c) before anything
 * starts; should a caller reach the constructor anyway, it fails saying why. */
#include "corestreamd/jetstream/publisher.h"

#include <string.h>

int cs_js_publisher_new(cs_js_publisher **out, const cs_js_config *cfg, cs_broadcaster *bc, cs_ring *ring,
                        cs_err *err)
{
    (void)cfg, (void)bc, (void)ring;
    *out = NULL;
    return cs_err_set(err, 0, "jetstream: not built in (this corestreamd was configured with -DCS_WITH_NATS=OFF)");
}

/* Nothing below can be given a publisher: cs_js_publisher_new never makes one. */
int cs_js_publisher_start(cs_js_publisher *p, cs_err *err)
{
    (void)p, (void)err;
    return 0;
}

void cs_js_publisher_stop(cs_js_publisher *p, int64_t drain_ns)
{
    (void)p, (void)drain_ns;
}

void cs_js_publisher_free(cs_js_publisher *p)
{
    (void)p;
}

void cs_js_publisher_stats(cs_js_publisher *p, cs_js_stats *out)
{
    (void)p;
    memset(out, 0, sizeof *out);
}
