/* SPDX-License-Identifier: Apache-2.0 */
/* The ledger sequence of a serialized LedgerCloseMeta, found without decoding the meta: a
 * bounds-checked walk over its leading bytes to LedgerHeader.ledgerSeq (CAPTIVE.md 3.3). Used by
 * the pipe tap on the first min(frame, 4096) bytes of each frame. */
#ifndef CS_CORESTREAMD_XDRWALK_H
#define CS_CORESTREAMD_XDRWALK_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* Schema maxima on the walk (Stellar-ledger.x, Stellar-types.x). */
#define CS_XDR_MAX_UPGRADES 6        /* UpgradeType upgrades<6> */
#define CS_XDR_MAX_UPGRADE_LEN 128   /* typedef opaque UpgradeType<128> */
#define CS_XDR_MAX_SIGNATURE_LEN 64  /* typedef opaque Signature<64> */

/* The longest possible walk: LedgerCloseMeta v1/v2 with ext v1, six 128-byte upgrades and a
 * signed StellarValue with a 64-byte signature puts ledgerSeq at bytes 1096..1099. */
#define CS_XDR_SEQ_PREFIX_WORST 1100

/* Walks buf[0..len) — a LedgerCloseMeta v0, v1 or v2, from its union discriminant — through the
 * LedgerHeaderHistoryEntry to ledgerSeq, and stores it in *seq. Every discriminant on the path
 * must be a known arm, every variable length must be within its schema maximum and the buffer,
 * and XDR padding must be zero; bytes past ledgerSeq are not looked at. Returns 0, or -1 with a
 * message starting "xdr: " (upgrades are numbered from 0). Never reads outside buf. */
int cs_xdr_ledger_seq(const uint8_t *buf, size_t len, uint32_t *seq, cs_err *err);

#endif
