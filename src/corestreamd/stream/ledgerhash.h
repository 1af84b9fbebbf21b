/* SPDX-License-Identifier: Apache-2.0 */
/* The ledger hasher (docs/STREAM-THREADS.md, `cs-hash`): the SHA-256 of the ledger being emitted,
 * computed beside the source loop rather than between its reads, so that signing (signing.h)
 * leaves the emit window to reading. The source loop hands each chunk over as it publishes it;
 * when the ledger's last byte is read, only what the hasher has not reached yet is left to hash.
 * Only a signing source loop has one: an unsigned or relaying loop pays nothing.
 *
 * Threads and what they may touch:
 *   - The feeder (the source loop's thread, the one that called cs_hasher_new): begin, add, finish
 *     and free, checked in code (common/invariant.h). One feeder, so the pieces of a ledger are
 *     queued in the order its bytes were read.
 *   - `cs-hash` (nice CS_NICE_LIVE, the encoders' step: it yields to the source): takes the oldest
 *     queued piece and hashes it, one piece at a time.
 *   - The SHA-256 context is touched only by the thread holding the digest, taken and given back
 *     under the hasher's mutex and checked on every use: `cs-hash` takes it for one piece; the
 *     feeder takes it in finish (to hash what is left itself, never waiting for a thread that has
 *     not yet woken), in begin (to reset), and in add when the queue is full (to hash the oldest
 *     piece itself). Whoever waits for the digest waits only for the one piece being hashed.
 *   - Every wait is a condition variable's, on state changed under that mutex: no lost wake-up.
 *
 * Memory: at most CS_HASHER_QUEUE pieces wait, each a reference to a chunk message the source
 * loop holds anyway until the ring has the ledger; the queue is a fixed array.
 *
 * Shutdown: free stops `cs-hash` after the piece it is hashing (if any), joins it and drops what
 * is still queued, so a ledger cancelled mid-emission leaves nothing behind. */
#ifndef CS_CORESTREAMD_LEDGERHASH_H
#define CS_CORESTREAMD_LEDGERHASH_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/stream/message.h"

/* Pieces that may wait for the hasher: a 16 MiB stretch of a ledger at the default chunk size. */
#define CS_HASHER_QUEUE 64

typedef struct cs_hasher cs_hasher;

/* Starts `cs-hash`; the calling thread becomes the feeder. 0, or -1 with err (out of memory, or
 * the thread could not start). */
int cs_hasher_new(cs_hasher **out, cs_err *err);

/* A new ledger: what is still queued of the last one is dropped and the digest starts afresh. Also
 * the way to void what was handed over of the ledger so far (its source began it again). */
void cs_hasher_begin(cs_hasher *h);

/* The next n bytes of the ledger, at p inside m (m stays unchanged from now on: the hasher reads
 * p concurrently with whoever else reads m). The hasher takes a reference of its own. */
void cs_hasher_add(cs_hasher *h, cs_msg *m, const uint8_t *p, size_t n);

/* The SHA-256 of every byte added since begin: hashes what is left (on the calling thread, unless
 * `cs-hash` is in the middle of a piece, which it finishes first). 0, or -1 with err when
 * libcrypto failed on any piece. */
int cs_hasher_finish(cs_hasher *h, uint8_t out[32], cs_err *err);

/* Stops `cs-hash`, drops what is queued, frees. NULL is a no-op. */
void cs_hasher_free(cs_hasher *h);

#endif
