/* SPDX-License-Identifier: Apache-2.0 */
/* The lake exporter (--lake-dir and --lake-url, docs/LAKE.md "Export to a directory" and "Export
 * to S3"): a thread of its own (cs-lake-export, at the background nice) that follows the ring and
 * writes each batch, once the ring holds all of it, as its object in a store (lakestore.h: a lake
 * directory, lakedir.h, or an S3-compatible bucket, lakes3.h), resuming after the newest object
 * the store holds.
 *
 * It never holds up the source or the ring writer: it only reads the ring (cs_lake_object_build,
 * one ledger open at a time) and is woken by the ring's doorbell (cs_ring_wait_change) when the
 * bounds move. Falling behind, it lags; batches the ring prunes before their turn are lost to the
 * lake (counted, WARN). A failed system call (ENOSPC, EACCES, EIO, …) or request is retried with a back-off
 * from 100 ms doubling to 10 s, the streak logged once at WARN and its end at INFO; nothing that
 * fails stops the thread or the daemon. An object already at its key is never replaced
 * (the store's put): other content there is an ERROR naming the key, counted, and kept.
 *
 * Signed batches (every ledger's record carries its SIG: a --signing-key core) get their
 * signature object <key>.sig (cs_lake_sig_build) beside the object, written right after it, with
 * the same guarantees (the store's put_sig: never replaced; other bytes an ERROR naming
 * <key>.sig). After, so that the first name a listing gives that looks like a ledger file (the
 * newest batch's: how the Go SDK learns the objects' extension) is always an object's. A batch
 * with an unsigned ledger has no .sig. At resume, the objects a previous run left without their
 * .sig (a stop between the two writes; a corestreamd that wrote none; one removed) get theirs
 * while the ring has the signatures: from the newest object down while a .sig is missing and the
 * ring signs the batch, then written from the lowest found up (so a stop half-way leaves the
 * newest without, looked at again by the next start); new batches wait until then.
 *
 * Log lines (docs/operations/logging.md, "The lake export"):
 *   INFO  `lake export starts` dir (or url) next newest ring_oldest ring_latest
 *   INFO  `lake export: ledgers before the ring's oldest are skipped; this ring cannot give them to
 *         the lake` first last
 *   WARN  `lake export fell behind: the ring pruned these ledgers before they were exported; they
 *         are lost to the lake` first last
 *   WARN  `lake export: a batch is not wholly in the ring; it is lost to the lake` first last error
 *   ERROR `lake export: an object in place differs from the ring's batch; it is kept` key path
 *         problem (key and path end in .sig for a signature object)
 *   DEBUG `lake export: the object in place is the ring's batch already` path
 *   INFO  `lake export: signatures written beside objects that had none` first last signatures
 *   WARN  `lake export failed; retrying` error retry_in
 *   INFO  `lake export recovered` failures
 *
 * Threads: new, start, stop and free on one thread (the daemon's main thread); stats from any
 * thread (the /metrics scrape), any time between new and free. */
#ifndef CS_LAKE_LAKEEXPORT_H
#define CS_LAKE_LAKEEXPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/lake/lakekey.h"
#include "corestreamd/lake/lakestore.h"
#include "store/ring.h"

/* The zstd level a ledger without stored frames is compressed at: the Go SDK's default (Galexie's). */
#define CS_LAKE_EXPORT_LEVEL_DEFAULT 3
#define CS_LAKE_EXPORT_RETRY_MIN_NS (100 * 1000000LL)
#define CS_LAKE_EXPORT_RETRY_MAX_NS (10 * 1000000000LL)

/* Descriptors the exporter may hold at once beyond those its store's open leaves open (the
 * lake's directory and ledgers/): a partition directory, the ledger being read (its file and
 * frames), the temporary file or the object in place being compared, and a directory listing at
 * start (an S3 store: its connection). For the server's descriptor budget
 * (cs_server_config.fd_reserve). */
#define CS_LAKE_EXPORT_FDS 6

typedef struct cs_lake_export_config {
    /* Where the objects go (cs_lake_dir_store_open, cs_lake_s3_store_open), opened with the same
     * layout: taken by cs_lake_export_new, which closes it when it fails, and
     * cs_lake_export_free. */
    cs_lake_store *store;
    cs_lake_layout layout; /* must pass cs_lake_layout_check */
    /* Borrowed: read by the thread until cs_lake_export_stop returns, so stop before it is
     * closed (the daemon stops the exporter before cs_server_free). */
    cs_ring *ring;
    int level;                   /* 0 → CS_LAKE_EXPORT_LEVEL_DEFAULT */
    int64_t retry_min_ns;        /* 0 → CS_LAKE_EXPORT_RETRY_MIN_NS (tests shorten both) */
    int64_t retry_max_ns;        /* 0 → CS_LAKE_EXPORT_RETRY_MAX_NS */
} cs_lake_export_config;

typedef struct cs_lake_export cs_lake_export;

/* The exporter of the ring into cfg->store (opened already: the store's checks are its open's);
 * nothing is written and no thread starts. -1 only with `lake: out of memory`. */
int cs_lake_export_new(cs_lake_export **out, const cs_lake_export_config *cfg, cs_err *err);

/* Starts the thread: it settles the store (the config files where absent; a directory's ledgers/
 * and leftover temporary files, cs_lake_dir_settle; retried like any write) and then follows the
 * ring. Call once
 * the ring is claimed (the claim may reset it). -1 only when the thread cannot be made: `lake:
 * cannot start the export thread: <strerror>`. */
int cs_lake_export_start(cs_lake_export *x, cs_err *err);

/* Stops the thread and joins it. It first exports what the ring holds whole, for up to drain_ns
 * (0: not at all), then stops; an object being made or written is finished (its temporary file
 * is never left half-written by a stop). A no-op when not started; safe to call twice. */
void cs_lake_export_stop(cs_lake_export *x, int64_t drain_ns);

/* What the exporter has done since new. lag: the ring's latest ledger less the last ledger the
 * export has passed (the end of the newest object it wrote or found, or of a batch it gave up as
 * lost), 0 when the export is at or ahead of the ring. */
typedef struct cs_lake_export_stats {
    uint64_t objects;    /* objects written */
    uint64_t signatures; /* signature objects (<key>.sig) written */
    uint64_t bytes;      /* the bytes of both */
    uint64_t io_errors;  /* attempts that met a failed system call (each was retried) */
    uint64_t conflicts;  /* keys (objects' or .sig's) that held other content, kept */
    uint64_t lost;       /* ledgers lost to the lake: pruned before export, or in a hole of the ring */
    uint64_t lag;        /* ledgers */
} cs_lake_export_stats;

void cs_lake_export_stats_get(cs_lake_export *x, cs_lake_export_stats *out);

/* Stops (as cs_lake_export_stop with no drain) and frees. NULL is a no-op. */
void cs_lake_export_free(cs_lake_export *x);

#endif
