/* SPDX-License-Identifier: Apache-2.0 */
/* The synthetic ledger stream (docs/operations/sources.md): one reused buffer refilled per
 * sequence. */
#ifndef CS_CORESTREAMD_SOURCE_SYNTHETIC_H
#define CS_CORESTREAMD_SOURCE_SYNTHETIC_H

#include <stdbool.h>
#include <stdint.h>

#include "common/cancel.h"
#include "corestreamd/sources/source.h"

/* size ≤ 0 means 204800. NULL on allocation failure. */
cs_ledger_stream *cs_synthetic_stream_new(int64_t size, bool compressible, cs_cancel *cancel);

#endif
