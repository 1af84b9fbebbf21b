/* SPDX-License-Identifier: Apache-2.0 */
/* Ring replay: a small pool of workers, separate from the live encoders so catch-up subscribers
 * cannot starve the live path, that turns a retained ledger into a stampless flow
 * (BEGIN(seq,0), CHUNK*, END(seq,count,len,0,xxh64)) a few messages ahead of the subscriber
 * writing it.
 * - A ledger with stored frames (docs/RING.md) is sent as it was published: each CHUNK is read
 *   with pread into a pooled message, header and payload as live, nothing compressed. The reads
 *   are hashed in order against the record's frames_xxh3 and raw_xxh3; a mismatch or short read
 *   of the frames drops the frames (cs_ring_drop_frames: they are made from the ledger again) and
 *   fails this replay CS_REPLAY_CORRUPT; one of a raw chunk (whose hash is in the frames index)
 *   asks the ring for a verdict (cs_ring_condemn): a ledger that hashes to its record keeps its
 *   place and loses its frames (the index was wrong), a proven-bad one is quarantined.
 * - An I/O error (EMFILE, EIO, …) fails the replay CS_REPLAY_FAILED and changes nothing on disk.
 * - A ledger without them is cut at its recorded live chunk size (the pool's for records made at
 *   open), read with pread, hashed against the record's XXH64 and compressed.
 * Either way END carries the recorded checksum, and only once what was read hashes to the record.
 * The I/O thread never reads a ledger, compresses or hashes: it only pops ready messages. */
#ifndef CS_CORESTREAMD_REPLAY_H
#define CS_CORESTREAMD_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/stream/message.h"
#include "store/ring.h"

#define CS_REPLAY_WORKERS 2
/* Descriptors a replay worker may hold at once (cs_replay_start), and each held replay. */
#define CS_REPLAY_WORKER_FDS 3
#define CS_REPLAY_HELD_FDS 2
/* Messages prepared ahead of the subscriber, bounded both in count and in payload bytes (a window
 * always admits one message, whatever its size): what a slow subscriber's replay may hold in
 * memory. Stored zstd chunks are ~30 KB, so the count bounds them (32 x 30 KB); raw 256 KiB chunks
 * meet the byte bound first (8 of them, 2 MiB). The window is refilled once half of it was handed
 * out, stored chunks a batch per worker, so a catch-up costs one wake-up of a worker and of the
 * I/O thread per ~16 messages rather than per message: on this 2-core machine a wake-up costs
 * about as much CPU as reading and hashing the ~30 KB it announces. */
#define CS_REPLAY_DEPTH 32
#define CS_REPLAY_WINDOW_BYTES (2u << 20)

typedef struct cs_replay_pool cs_replay_pool;
typedef struct cs_replay cs_replay;

/* wake(wake_ctx, arg) runs on a worker thread each time a message or a batch of them becomes
 * ready, or a replay fails; arg is what cs_replay_start was given for that replay, so the wake can
 * go to the one thread that consumes it. It may still run for a replay just released. */
cs_replay_pool *cs_replay_pool_new(int workers, cs_ring *ring, bool compress, int level, size_t chunk_size,
                                   void (*wake)(void *, int), void *wake_ctx, cs_err *err);
/* Stops the workers; replays still held by cursors stay valid but produce nothing more. */
void cs_replay_pool_free(cs_replay_pool *p);

/* Starts preparing ledger seq; its wakes carry wake_arg. NULL on allocation failure.
 *
 * Descriptors: an open ledger pins two (its .xdr and its frames segment). With hold, the replay keeps the
 * ledger it opened from its first read to its last (a catch-up, under a replay slot: a file
 * removed, replaced or pruned meanwhile is still read whole). Without, it holds none between
 * reads: a worker gets the ledger from the ring for each read and lets it go after, so a
 * replay whose subscriber stopped reading pins nothing however long it waits (the redelivery
 * of an abandoned live flow, which needs no slot and so has no bound of its own). Such a
 * replay ends CS_REPLAY_NOT_RETAINED if its ledger left the ring, or was replaced, between two
 * reads. Either way a worker holds at most one ledger at a time, plus one descriptor while it
 * opens one (the record) or a check drops one (the record rewritten): CS_REPLAY_WORKER_FDS. */
cs_replay *cs_replay_start(cs_replay_pool *p, uint32_t seq, int wake_arg, bool hold);

enum {
    CS_REPLAY_MSG = 0,          /* *out holds the next message (caller owns the reference) */
    CS_REPLAY_PENDING = 1,      /* nothing ready yet; a wake follows when something is */
    CS_REPLAY_DONE = 2,         /* END was already handed out */
    CS_REPLAY_NOT_RETAINED = 3, /* the ledger left the ring before it could be read */
    CS_REPLAY_FAILED = 4,       /* another read error; err says which */
    CS_REPLAY_CORRUPT = 5,      /* what was read differs from the record (truncated, changed): err
                                   says how; the ring judged it (cs_ring_condemn), and no END was sent */
    CS_REPLAY_HOLE = 6,         /* the ledger is in a hole of the ring (quarantined, or never
                                   written): err says `… (ledgers F to L)`; cs_ring_hole has them */
};
/* A terminal status comes in the flow's place of the item that failed: every message before it is
 * handed out first (CS_REPLAY_MSG), whatever the workers' timing. */
int cs_replay_next(cs_replay *r, cs_msg **out, cs_err *err);


/* Messages prepared and not yet handed out, and (in *bytes) their payload bytes as the window
 * counts them: what r holds in memory now. Any thread. */
size_t cs_replay_ahead(cs_replay *r, size_t *bytes);

/* The SIG message of the ledger r replays, from its record (a new reference; NULL when the ledger
 * is unsigned, or out of memory). Call once r has handed out its END: the I/O thread. */
cs_msg *cs_replay_sig(cs_replay *r);

/* The cursor is done with r (finished, or its connection went away). */
void cs_replay_release(cs_replay *r);

#endif
