/* SPDX-License-Identifier: Apache-2.0 */
/* A reader of SEP-54 lakes (docs/LAKE.md "Reading"): corestreamd's own /lake/, a directory it
 * exported, or any other lake in the SEP's layout (Galexie's bucket behind HTTP). It reads the
 * lake's config.json, forms each batch's key (lakekey.h), fetches the object and decompresses
 * every zstd frame of it into the batch's XDR LedgerCloseMetaBatch, whose header it checks.
 *
 * Where the lake is:
 *   http://host:port/lake, https://…   the directory holding config.json, over HTTP (libcurl:
 *                                       keep-alive on one connection, redirects followed, the
 *                                       bearer token sent with every request)
 *   a path                              a directory holding config.json
 * Objects are looked for under ledgersPath, as config.json gives it: over HTTP a path starting
 * with "/" replaces the URL's path (corestreamd's "/lake/ledgers"), any other is relative to the
 * lake's URL; in a directory a relative ledgersPath is relative to it, and an absolute one is
 * read as its last component there ("/lake/ledgers": "<dir>/ledgers"), so a directory copied
 * from a served lake reads as it was served.
 *
 * Threads: a reader belongs to one thread at a time; readers are independent. */
#ifndef CS_LAKE_LAKEREADER_H
#define CS_LAKE_LAKEREADER_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/lake/lakekey.h"
#include "wire/ledgersig.h"

enum {
    /* `lake: <url>: ledger S: no object at <key> (404)`: the lake does not hold the batch. */
    CS_LAKE_READ_ERR_NOT_FOUND = 1,
    /* `lake: <url>: …`: the transfer failed (connect, timeout, 5xx, read error): a later try may
     * succeed. */
    CS_LAKE_READ_ERR_IO = 2,
    /* `lake: <url>: …`: what the lake holds is not what SEP-54 says (config.json not JSON or
     * missing a field, a compression other than zstd, an object that does not decompress or whose
     * header names another batch, any other HTTP status). */
    CS_LAKE_READ_ERR_FORMAT = 3,
};

typedef struct cs_lake_reader cs_lake_reader;

typedef struct cs_lake_reader_opts {
    const char *url;          /* where the lake is (above); required */
    const char *bearer_token; /* NULL or "": none; sent as Authorization: Bearer over HTTP */
    const char *ca_file;      /* PEM CAs for https; NULL: the system's */
    long timeout_ms;          /* each transfer; 0 → 60 s */
} cs_lake_reader_opts;

/* Opens the lake: reads and checks config.json. -1 with err (kinds above). */
int cs_lake_reader_open(cs_lake_reader **out, const cs_lake_reader_opts *o, cs_err *err);

/* The lake's layout and network, as its config.json says. */
const cs_lake_layout *cs_lake_reader_layout(const cs_lake_reader *r);
const char *cs_lake_reader_passphrase(const cs_lake_reader *r);

/* The batch holding ledger seq: *batch its range, *xdr (malloc'd, the caller frees it) the
 * decompressed LedgerCloseMetaBatch, header checked (its start, end and count are the batch's),
 * *len its length. -1 with err (kinds above); outputs untouched then. */
int cs_lake_reader_get(cs_lake_reader *r, uint32_t seq, cs_lake_batch *batch, uint8_t **xdr, size_t *len,
                       cs_err *err);

/* The signature object of the batch holding ledger seq (`<key>.sig`, docs/LAKE.md "Signatures"),
 * as the lake holds it, malloc'd: *len bytes. CS_LAKE_READ_ERR_NOT_FOUND when the lake has none
 * (an unsigned batch, or a lake that keeps no signatures); the other errors as for
 * cs_lake_reader_get. */
int cs_lake_reader_get_sig(cs_lake_reader *r, uint32_t seq, uint8_t **sig, size_t *len, cs_err *err);

/* Ledger seq's bytes ledger[0..len) (from a batch of one ledger) checked against the lake's
 * signature object for it (cs_lake_reader_get_sig), as a subscriber with trusted keys checks a
 * ledger: one SIG, signed by a key of ks over exactly these bytes (SHA-256), for chain's signing
 * run, chained to the ledger before when chain holds it (cs_sig_chain_check). 0 with chain
 * advanced, or -1 with err: cs_lake_reader_get_sig's errors, `lake: URL: ledger N: its signature
 * object is not one SIG`, `lake: signature: <the chain check's message>`. */
int cs_lake_reader_check_sig(cs_lake_reader *r, const cs_sig_keyset *ks, cs_sig_chain *chain, uint32_t seq,
                             const uint8_t *ledger, size_t len, cs_err *err);

void cs_lake_reader_free(cs_lake_reader *r);

#endif
