/* --source captive in a corestreamd configured with -DCS_WITH_CAPTIVE=OFF: no libcurl, no cJSON,
 * no supervised stellar-core. config.c refuses the flag before anything starts; the constructor
 * fails the same way should a caller reach it. */
#include "corestreamd/sources/captive/captive.h"

#include <stddef.h>

int cs_captive_source_new(cs_source **out, const cs_captive_config *cfg, cs_cancel *cancel, cs_err *err)
{
    (void)cfg, (void)cancel;
    *out = NULL;
    return cs_err_set(err, 0, "captive: not built in (this corestreamd was configured with -DCS_WITH_CAPTIVE=OFF)");
}

/* Nothing below can be given a captive source: cs_captive_source_new never makes one. */
const char *cs_captive_source_workdir(const cs_source *s)
{
    (void)s;
    return "";
}

int cs_captive_source_core_pid(const cs_source *s)
{
    (void)s;
    return -1;
}
