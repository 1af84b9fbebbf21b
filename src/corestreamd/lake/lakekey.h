/* SPDX-License-Identifier: Apache-2.0 */
/* The ring as a SEP-54 data lake (docs/LAKE.md): which batch holds a ledger, the object key that
 * batch has, and the reverse, a request path read back into the batch it names. Keys are formed
 * exactly as the Go SDK forms them (support/datastore, GetObjectKeyFromSequenceNumber), uint32
 * arithmetic included, so a client of the SDK asks for the keys this code serves. Pure functions
 * of their arguments: no state, any thread. */
#ifndef CS_LAKE_LAKEKEY_H
#define CS_LAKE_LAKEKEY_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

enum {
    CS_LAKE_KEY_ERR_LAYOUT = 1,  /* "lake: ledgers per batch must be at least 1, got 0", … */
    CS_LAKE_KEY_ERR_CEILING = 2, /* "lake: ledger S: its batch of N ledgers would end past 4294967295" */
    CS_LAKE_KEY_ERR_NOT_KEY = 3, /* "lake: \"<path>\" is not a ledger object key of this lake" */
};

/* The defaults of the public network's lake: one ledger per batch, 64000 batches per partition. */
#define CS_LAKE_LEDGERS_PER_BATCH_DEFAULT 1u
#define CS_LAKE_BATCHES_PER_PARTITION_DEFAULT 64000u

/* Where the batches live, as config.json names it (ledgersPath); request paths start with it and
 * a slash. */
#define CS_LAKE_LEDGERS_PATH "/lake/ledgers"

/* The lake's two JSON texts as served: SEP-54's config.json beside the ledgers path, and the Go
 * SDK's manifest at the root its datastore reads keys from (lakeconfig.h). */
#define CS_LAKE_CONFIG_PATH "/lake/config.json"
#define CS_LAKE_MANIFEST_PATH CS_LAKE_LEDGERS_PATH "/.config.json"

/* The longest key cs_lake_key writes, with its NUL: "%08X--<10 digits>-<10 digits>/" and
 * "%08X--<10 digits>-<10 digits>.xdr.zst". */
#define CS_LAKE_KEY_MAX 80

/* How the lake cuts ledgers into batches and batches into partitions (SEP-54's ledgersPerBatch
 * and batchesPerPartition). */
typedef struct cs_lake_layout {
    uint32_t ledgers_per_batch;
    uint32_t batches_per_partition;
} cs_lake_layout;

/* The ledgers [start, end] one object holds. */
typedef struct cs_lake_batch {
    uint32_t start;
    uint32_t end;
} cs_lake_batch;

/* The public network's layout (the defaults above). */
cs_lake_layout cs_lake_layout_default(void);

/* 0 when the layout can name keys: both counts at least 1 and a partition
 * (ledgers_per_batch * batches_per_partition) at most 4294967295 ledgers, which the SDK's uint32
 * product needs. Else -1, CS_LAKE_KEY_ERR_LAYOUT naming the count and its value. */
int cs_lake_layout_check(const cs_lake_layout *l, cs_err *err);

/* The batch holding ledger seq. -1 with CS_LAKE_KEY_ERR_CEILING for the last batch of a layout
 * whose batch size does not divide 2^32, when that batch would end past 4294967295 (the SDK's key
 * would wrap; no object can hold it). l must pass cs_lake_layout_check. */
int cs_lake_batch_of(const cs_lake_layout *l, uint32_t seq, cs_lake_batch *out, cs_err *err);

/* The key of batch b relative to the ledgers path, in key[CS_LAKE_KEY_MAX]: the partition
 * directory `%08X--<start>-<end>/` (0xFFFFFFFF - the partition's first ledger; left out when a
 * partition holds one batch), then `%08X--<start>[-<end>].xdr.zst` (the end left out when a batch
 * holds one ledger). As in the SDK, the end of the last partition wraps past 4294967295 (under
 * the default layout 4294912000's partition is `0000D7FF--4294912000-8703/`). b must be a batch
 * cs_lake_batch_of gave for l. Returns the key's length. */
size_t cs_lake_key(const cs_lake_layout *l, cs_lake_batch b, char key[CS_LAKE_KEY_MAX]);

/* Reads a request path (len bytes, no NUL needed, no query) back into the batch it names: it
 * must be CS_LAKE_LEDGERS_PATH, a slash and exactly the key cs_lake_key gives for that batch
 * under l: upper-case hex, no leading zeros, no other prefix or suffix, the partition directory
 * present exactly when l has one. Anything else is -1 with CS_LAKE_KEY_ERR_NOT_KEY naming the
 * path (cut to 200 bytes). */
int cs_lake_key_parse(const cs_lake_layout *l, const char *path, size_t len, cs_lake_batch *out, cs_err *err);

#endif
