/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner --mode lake in a build without libcurl (-DCS_WITH_CAPTIVE=OFF): options.c refuses
 * the mode before this could run; it fails the same way should it ever be reached. */
#include "benchrunner/lake.h"

int br_run_lake(const br_options *o, cs_cancel *cancel, br_progress *prog, br_collector **out, cs_err *err)
{
    (void)o;
    (void)cancel;
    (void)prog;
    *out = NULL;
    return cs_err_set(err, 0, "--mode lake is not available: this benchrunner was configured with -DCS_WITH_CAPTIVE=OFF");
}
