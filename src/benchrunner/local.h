/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner's no-network modes (benchrunner(1)): `local` drains captive core in this process,
 * `localtap` drains the pipe tap. They measure how fast ledgers can be produced at all: cadence
 * and throughput, with no delivery stamps to measure against. */
#ifndef CS_BENCHRUNNER_LOCAL_H
#define CS_BENCHRUNNER_LOCAL_H

#include "benchrunner/options.h"
#include "benchrunner/progress.h"
#include "benchrunner/stats.h"
#include "common/err.h"
#include "common/cancel.h"

/* Each fills a new collector (*out, NULL only on allocation failure) and returns 0 at the end of
 * the range or of the source, or -1 with err. cancel ends the run (CS_ERR_CANCELLED in err). Each
 * ledger is noted to prog (NULL: no progress line). */
int br_run_localtap(const br_options *o, cs_cancel *cancel, br_progress *prog, br_collector **out, cs_err *err);
int br_run_local(const br_options *o, cs_cancel *cancel, br_progress *prog, br_collector **out, cs_err *err);

#endif
