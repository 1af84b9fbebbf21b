/* SPDX-License-Identifier: Apache-2.0 */
/* The file dump replay stream (docs/operations/sources.md): a directory of ledger-<seq>.xdr files
 * replayed in order, renumbered by the caller, cycling after the last record. */
#ifndef CS_CORESTREAMD_SOURCE_FILE_H
#define CS_CORESTREAMD_SOURCE_FILE_H

#include <stddef.h>

#include "common/err.h"
#include "common/cancel.h"
#include "corestreamd/sources/source.h"

/* Refuses a --file-dir that is this server's own ring (<data-dir>/ledgers), by absolute path or
 * by inode, with the spec's message. */
int cs_file_dir_validate(const char *file_dir, const char *data_dir, cs_err *err);

/* Scans dir: `file source: "<dir>" holds no ledger-<seq>.xdr files`, the gap error, or
 * `file source: scan "<dir>": …`. *records receives the record count. The first pull replays
 * record `skip mod records` (in dump order): a run that continues another at its k-th ledger
 * replays what that run would have. */
int cs_file_stream_new(cs_ledger_stream **out, const char *dir, cs_cancel *cancel, uint64_t skip, size_t *records,
                       cs_err *err);

#endif
