/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner --verify-dir: the expected bytes of each ledger from a dump directory of
 * ledger-<seq>.xdr files, numbered as corestreamd's file source numbers them.
 *
 * The file source renumbers: the names only set the order, and ledger N is record
 * (N - base) mod records in dump order, base being its --start-ledger (1 when not given, also
 * when a run continues its ring). So ledger N is expected to be record (N - 1) mod records of
 * the directory: for a dump numbered from 1 that is ledger-N.xdr itself, and past the last
 * record the dump cycles as the source does. Checked against a server run with another
 * --start-ledger, the records would be shifted. */
#ifndef CS_BENCHRUNNER_DUMPVERIFY_H
#define CS_BENCHRUNNER_DUMPVERIFY_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct br_dump br_dump;

/* Scans dir (as the file source does: contiguous ledger-<seq>.xdr names, symlinks allowed).
 * Returns 0, or -1 with err:
 *   --verify-dir: scan "<dir>": <strerror>
 *   --verify-dir: "<dir>" holds a non-contiguous ledger range (gap between ledger A and B)
 *   --verify-dir: "<dir>" holds no ledger-<seq>.xdr files */
int br_dump_open(br_dump **out, const char *dir, cs_err *err);

/* Checks ledger seq's bytes against its record, the length first (the file's size, read from
 * disk only when it matches; the last record read is kept for the next subscriber). Returns 0,
 * or -1 with err:
 *   ledger <seq> is <n> bytes, <path> holds <m> (--verify-dir)
 *   ledger <seq> payload does not match <path> (first difference at byte <offset>)
 *   --verify-dir: ledger <seq>: <path>: <strerror>   (the file could not be read) */
int br_dump_check(br_dump *d, uint32_t seq, const uint8_t *p, size_t len, cs_err *err);

void br_dump_free(br_dump *d);

#endif
