/* SPDX-License-Identifier: Apache-2.0 */
/* --source captive (and benchrunner --mode local) in a build configured with
 * -DCS_WITH_CAPTIVE=OFF: no libcurl, no cJSON, no supervised stellar-core. Both programs refuse
 * the flag before anything starts; the constructor fails the same way should a caller reach it. */
#include "corestreamd/sources/captive/captive.h"

#include <stdio.h>
#include <stdlib.h>

/* What no caller can reach in this build: the constructor above never makes the object these
 * take. Reaching one anyway is a bug, stopped here rather than answered as if it worked. */
static void unreachable(const char *fn)
{
    fprintf(stderr, "%s: unreachable in a build without this part\n", fn);
    abort();
}

int cs_captive_source_new(cs_source **out, const cs_captive_config *cfg, cs_cancel *cancel, cs_err *err)
{
    (void)cfg, (void)cancel;
    *out = NULL;
    return cs_err_set(err, 0, "captive: not built in (configured with -DCS_WITH_CAPTIVE=OFF)");
}

const char *cs_captive_source_workdir(const cs_source *s)
{
    (void)s;
    unreachable(__func__);
    return NULL;
}

int cs_captive_source_core_pid(const cs_source *s)
{
    (void)s;
    unreachable(__func__);
    return -1;
}
