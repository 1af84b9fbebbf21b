/* SPDX-License-Identifier: Apache-2.0 */
/* The edge's gap watch (sources/jetstream.c). While the edge waits for ledger N with no copy of it
 * open, the later ledgers the stream goes on with are assembled on the side, in a probe assembler
 * of their own, with the edge's checks (order, chunk count, length, XXH64, zstd; with trusted keys
 * the signature, against a copy of the edge's chain), and never served from there. The lowest
 * later ledger M that verifies (the first copy of it in the stream) becomes the candidate: once N
 * has not begun for `wait` after that, the gap is due, and the edge reports N..M-1 and goes on from
 * M's BEGIN. Junk, forgeries and copies that do not verify never make a candidate, so they never
 * move the edge on; a republished N that comes before the wait is over clears the watch.
 *
 * Threads: the source loop's only (one watch per edge source). */
#ifndef CS_CORESTREAMD_SOURCES_JSGAP_H
#define CS_CORESTREAMD_SOURCES_JSGAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "remoteledger/assemble.h"
#include "wire/ledgersig.h"
#include "wire/wire.h"

typedef struct cs_jsgap cs_jsgap;

/* A watch that waits wait_ns before a gap is due; keys (borrowed, NULL: none) as the edge's
 * --trusted-keys. NULL when out of memory. */
cs_jsgap *cs_jsgap_new(int64_t wait_ns, const cs_sig_keyset *keys);
void cs_jsgap_free(cs_jsgap *g);

/* Forgets the candidate and the probe: the ledger waited for began, or the edge moved on. */
void cs_jsgap_clear(cs_jsgap *g);

/* A message the edge skipped as out of place while it waited for ledger want with no copy open:
 * w (decoded from data[0..len), stream sequence sseq) is fed to the probe when it is of a later
 * ledger. chain is the edge's (read, not advanced). now_ns is the monotonic time. */
void cs_jsgap_offer(cs_jsgap *g, uint32_t want, const cs_wire_msg *w, const uint8_t *data, size_t len,
                    uint64_t sseq, const cs_sig_chain *chain, int64_t now_ns);

/* Whether the gap is due at now_ns: true with the candidate's ledger and its BEGIN's stream
 * sequence. */
bool cs_jsgap_due(const cs_jsgap *g, int64_t now_ns, uint32_t *seq, uint64_t *sseq);

/* Whether a candidate is waiting out the wait (the edge must then look again by the deadline even
 * when no message comes): true with that monotonic deadline. */
bool cs_jsgap_deadline(const cs_jsgap *g, int64_t *deadline_ns);

/* The signature check of a ledger a verifies (--trusted-keys): the SIG the assembler kept for it,
 * against keys and chain (cs_sig_chain_check, advancing chain). 0, or -1 with why in e
 * (`ledger N is unsigned`, or cs_sig_chain_check's). */
int cs_jsgap_check_signature(const rli_asm *a, const cs_sig_keyset *keys, cs_sig_chain *chain, cs_err *e);

#endif
