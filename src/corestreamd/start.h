/* SPDX-License-Identifier: Apache-2.0 */
/* Which run this is and where it starts. The run identity (the source kind and the parameters its
 * bytes follow from) is what the ring records beside its ledgers (docs/RING.md); the start is the
 * first ledger the run emits:
 *   given     --start-ledger;
 *   continue  no --start-ledger, and the ring holds ledgers of this identity: its latest + 1, so a
 *             restart with an unchanged command line carries on where the last run stopped;
 *   default   neither: 1 for synthetic and file; pipe and jetstream take their first ledger from
 *             core or the stream (1 is then only a label); captive cannot start (an error).
 * Called by main only, after the ring is opened and before it is claimed. */
#ifndef CS_CORESTREAMD_START_H
#define CS_CORESTREAMD_START_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/config.h"
#include "corestreamd/sources/source.h"
#include "store/ring.h"

typedef enum cs_start_mode {
    CS_START_GIVEN,
    CS_START_CONTINUE,
    CS_START_DEFAULT,
} cs_start_mode;

typedef struct cs_run_start {
    cs_start_mode mode;
    uint32_t first;       /* the run's first ledger (a label for pipe and jetstream) */
    uint32_t ring_latest; /* CS_START_CONTINUE: the ring's latest ledger; else 0 */
} cs_run_start;

/* "given", "continue" or "default": the `start` field of the listening line and /healthz. */
const char *cs_start_mode_name(cs_start_mode mode);

/* The run identity of c's source into buf (one line): `source=synthetic size=S compressible=B`,
 * `source=file dir=<real path>`, `source=pipe network=N`, `source=captive network=N`; for
 * jetstream the stream and the run it follows, from src (the built edge source; NULL otherwise). */
void cs_run_identity(const cs_daemon_config *c, const cs_source *src, char *buf, size_t len);

/* The run token: what the 101 answer of a subscription carries as `X-Corestream-Run` and /healthz
 * as "run" (docs/PROTOCOL.md), so that a resuming client can tell this run from another:
 * "<source>-<16 hex digits of XXH64(identity, seed nonce)>", e.g. "synthetic-5f0c…", at most
 * CS_RUN_TOKEN_MAX - 1 characters of [a-z0-9-]. nonce is the ring's run nonce
 * (cs_ring_run_nonce), so a new data directory is a new run; for jetstream (edge) it is ignored:
 * every edge of one stream's run serves the same bytes, and answers the same token. */
#define CS_RUN_TOKEN_MAX 48
void cs_run_token(const cs_daemon_config *c, const char *identity, uint64_t nonce, char *buf, size_t len);

/* Decides where the run starts, reading the ring (cs_ring_continues); changes nothing. Errors:
 * `--start-ledger is required with --source captive: the ring "<dir>" holds no ledgers of this
 * run to continue`, and for a bounded synthetic or file run that would reach ledger 4294967295:
 * `the run continues the ring at ledger F, so --synthetic-count N would reach ledger 4294967295,
 * which is not streamable` (--file-count likewise). */
int cs_run_start_decide(const cs_daemon_config *c, cs_ring *ring, const char *identity, cs_run_start *out,
                        cs_err *err);

#endif
