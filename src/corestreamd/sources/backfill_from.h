/* SPDX-License-Identifier: Apache-2.0 */
/* Where --backfill-from's ledgers come from, as backfill.c asks for them: a SEP-54 lake
 * (backfill_lake.c: a corestreamd's /lake/ over http(s), or a directory) or another corestreamd's
 * stream (backfill_peer.c: ws:// or wss://, read with libremoteledger). backfill.c checks that
 * each ledger names its own sequence; what else vouches for the bytes is the kind's own (see
 * each constructor).
 *
 * A gap is asked for as begin(first, last), then get(first), get(first + 1), ... in order until
 * get fails or last is given, then end. Nothing is opened before the first begin, so an
 * unreachable source never stops a start.
 *
 * Threads: new and destroy on the controlling thread, the rest on the source loop only. */
#ifndef CS_CORESTREAMD_SOURCES_BACKFILL_FROM_H
#define CS_CORESTREAMD_SOURCES_BACKFILL_FROM_H

#include <stddef.h>
#include <stdint.h>

#include "common/cancel.h"
#include "common/err.h"
#include "corestreamd/sources/backfill.h"

typedef struct cs_bf_from cs_bf_from;

typedef struct cs_bf_from_ops {
    /* The gap first..last is to be filled. 0, or -1 with err (then no get follows, and the gap is
     * not filled). */
    int (*begin)(cs_bf_from *f, uint32_t first, uint32_t last, cs_err *err);
    /* Ledger seq's LedgerCloseMeta in (*ledger)[0..*len): borrowed, valid until the next call on
     * f. -1 with err naming the ledger's trouble (the source does not hold it, failed, or sent
     * another). */
    int (*get)(cs_bf_from *f, uint32_t seq, const uint8_t **ledger, size_t *len, cs_err *err);
    /* The gap is over, filled or not: what begin opened is let go. */
    void (*end)(cs_bf_from *f);
    void (*destroy)(cs_bf_from *f);
} cs_bf_from_ops;

struct cs_bf_from {
    const cs_bf_from_ops *ops;
};

/* A lake at o->url (lakereader.h), asked with token (NULL or "": none) and o->ca_file. A lake
 * object carries no checksum of its ledgers: without o->trusted_keys the lake is trusted as the
 * source is; with it (a PEM file of Ed25519 public keys, read here) each ledger is checked
 * against the signature object beside its object (`<key>.sig`, cs_lake_reader_check_sig: signed
 * by one of the keys over exactly its bytes, chained to the gap's ledger before), and a ledger
 * without one is not taken. A read that fails for I/O is tried three times a second apart
 * (o->cancel cuts the wait short); a missing object is not tried again. The lake must hold one
 * ledger per batch. Strings are copied. Errors: `source: out of memory`, and the keys file's
 * (cs_sig_keyset_load). */
int cs_bf_lake_new(cs_bf_from **out, const cs_backfill_opts *o, const char *token, cs_err *err);

/* Another corestreamd's stream at o->url (ws:// or wss://, its /stream; wss checked with
 * o->ca_file, or the system's CAs), asked with token (NULL or "": none).
 * begin asks the peer's /healthz for what it holds, then streams first..last (or as much of it
 * as the peer holds) as one bounded range: each ledger arrives checked by libremoteledger (chunk
 * count, length, XXH64), and with o->trusted_keys (a PEM file of Ed25519 public keys, NULL or ""
 * for none) signed by one of them, chained to the ledger before it (PROTOCOL.md, signed
 * ledgers). A dropped connection is resumed twice (backoff from a second); a peer that does not
 * hold a ledger fails it with `the peer holds ledgers O to L`. o->cancel ends a wait within a
 * quarter of a second. Strings are copied. Errors: `source: out of memory`, and the library's
 * message for a URL or trusted-keys file it refuses (read here: a bad one stops the start). */
int cs_bf_peer_new(cs_bf_from **out, const cs_backfill_opts *o, const char *token, cs_err *err);

static inline void cs_bf_from_destroy(cs_bf_from *f)
{
    if (f)
        f->ops->destroy(f);
}

#endif
