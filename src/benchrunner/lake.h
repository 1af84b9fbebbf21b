/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner --mode lake (benchrunner(1)): reads ledgers --start..--end from a SEP-54 lake, a
 * corestreamd's /lake/ over http(s) (--url http://host:8462/lake; --token, --token-file and
 * --tls-ca apply) or a directory (--url /path/to/lake), batch by batch on one connection, and
 * with --verify-dir checks each against the dump as the remote mode does. It measures how fast
 * history comes out of the lake (throughput, per-ledger arrival), not delivery: there are no
 * emit stamps in a lake. */
#ifndef CS_BENCHRUNNER_LAKE_H
#define CS_BENCHRUNNER_LAKE_H

#include "benchrunner/options.h"
#include "benchrunner/progress.h"
#include "benchrunner/stats.h"
#include "common/cancel.h"
#include "common/err.h"

/* Fills a new collector (*out, NULL only on allocation failure) and returns 0 once the range is
 * read, or -1 with err: the lake's (lakereader.h: a batch the lake does not hold is
 * `lake: <url>: ledger S: no object at <key>`), --verify-dir's (dumpverify.h), or
 * CS_ERR_CANCELLED when cancel fired. */
int br_run_lake(const br_options *o, cs_cancel *cancel, br_progress *prog, br_collector **out, cs_err *err);

#endif
