/* SPDX-License-Identifier: Apache-2.0 */
/* The on-disk ledger directory layout shared by the retention ring and the file source:
 * one raw ledger per file, named `ledger-<decimal seq>.xdr`. */
#ifndef CS_STORE_LEDGERDIR_H
#define CS_STORE_LEDGERDIR_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define CS_LEDGER_NAME_MAX 32 /* "ledger-4294967295.xdr" plus ".tmp" and NUL */

/* Parses a file name of the exact form `ledger-<digits>.xdr` (leading zeros allowed, the value a
 * decimal uint32). Returns 0 and sets *seq, or -1 for any other name (`ledger-7.xdr.tmp`,
 * `ledger-.xdr`, `ledger-abc.xdr`, values over 4294967295). */
int cs_ledger_name_parse(const char *name, uint32_t *seq);

/* Writes "ledger-<seq>.xdr" into buf (at least CS_LEDGER_NAME_MAX bytes). */
void cs_ledger_name_format(char *buf, size_t len, uint32_t seq);

/* One ledger file found by a scan. name is the file's own name as found in the directory. */
typedef struct cs_ledger_entry {
    uint32_t seq;
    char name[256];
} cs_ledger_entry;

enum { CS_LEDGERDIR_OK = 0, CS_LEDGERDIR_ERR_GAP = 1, CS_LEDGERDIR_ERR_SCAN = 2, CS_LEDGERDIR_ERR_EMPTY = 3 };

/* Scans dir (not recursively) for non-directory entries (symlinks count) with ledger names, sorts
 * them ascending and checks that they are contiguous. Errors are prefixed with who (e.g. "store"
 * or "file source"):
 *   `<who>: "<dir>" holds a non-contiguous ledger range (gap between ledger A and B)` (kind GAP;
 *     duplicates such as 7 and 007 count as a gap)
 *   `<who>: scan "<dir>": <strerror>` (kind SCAN)
 * An empty result is not an error here: *n is 0 and *out NULL. The caller frees *out. */
int cs_ledger_dir_scan(const char *dir, const char *who, cs_ledger_entry **out, size_t *n, cs_err *err);

#endif
