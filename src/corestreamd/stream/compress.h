/* SPDX-License-Identifier: Apache-2.0 */
/* The live encoder pool (docs/STREAM-THREADS.md): N workers, each with its own zstd context (no
 * frame checksum, content size recorded), compress chunks and publish them in submission order. A
 * chunk ships compressed only when the frame is strictly smaller than the raw payload.
 *
 * The source thread never waits for an encoder: submit takes no lock. Each worker has its own
 * single-producer queue (the source writes, the worker reads) and sleeps on a futex doorbell the
 * source rings only when the worker is asleep. A chunk goes to the least loaded worker whose
 * queue has room; 16 chunks may wait in all (16 / N per worker, at least one each). When every
 * queue is full the chunk ships raw instead (counted in raw_fallbacks), framed in place, the
 * same bytes as an incompressible chunk: compression never back-pressures the source.
 *
 * A worker compresses straight into a message from the pipeline's pool (capacity 11 +
 * ZSTD_compressBound(chunk size)): the frame is written once, never copied. A compressed chunk's
 * message goes back to that pool on its last release, which may come after destroy. A frame that
 * does not shrink goes back at once and the raw message ships.
 *
 * Publication is in submission order and never concurrent: whichever thread completes the job at
 * the head (a worker, or the source for a raw chunk) publishes it and every ready job after it.
 *
 * Level: fixed, or CS_COMPRESS_LEVEL_AUTO, where the source thread picks each chunk's level with
 * the controller in levelctl.h from the workers' measured compression times, the source's rate
 * and the queues. */
#ifndef CS_CORESTREAMD_COMPRESS_H
#define CS_CORESTREAMD_COMPRESS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zstd.h>

#include "common/complevel.h" /* cs_compress_level_parse */
#include "common/err.h"
#include "corestreamd/stream/levelctl.h"
#include "corestreamd/stream/message.h"

#define CS_DEFAULT_COMPRESS_WORKERS 4
#define CS_MAX_COMPRESS_WORKERS 64

/* --compress-workers: 0 → 4; valid 1..64, else `server: compress workers N is outside [1,64]`. */
int cs_compress_workers_resolve(int64_t n, int *out, cs_err *err);

/* The fixed level where auto does not apply (ring replays, JetStream): the prototype's. */
#define CS_DEFAULT_COMPRESS_LEVEL 1

/* --compress-level auto as a pipeline level (zstd has no level this low). */
#define CS_COMPRESS_LEVEL_AUTO INT_MIN

/* --compress-level: within zstd's own range, `server: compress level N is outside [min,max]`. */
int cs_compress_level_validate(int64_t level, cs_err *err);


/* A zstd context configured for chunks (the given level, no checksum, content size on, window at
 * least the chunk size). NULL on allocation failure. */
ZSTD_CCtx *cs_chunk_cctx_new(size_t chunk_size, int level);

/* Frames one chunk: a new message holding CHUNK(seq, idx) with the zstd frame when cctx is non-NULL
 * and the frame is strictly smaller than n, else the raw bytes. NULL on allocation failure. */
cs_msg *cs_encode_chunk(ZSTD_CCtx *cctx, uint32_t seq, uint32_t idx, const uint8_t *raw, size_t n);

/* Receives each chunk message in submission order; takes ownership of one reference. Called from
 * a worker thread or from the submitting thread, never concurrently with itself. */
typedef void (*cs_publish_fn)(void *ctx, cs_msg *chunk);

typedef struct cs_chunk_pipeline cs_chunk_pipeline;

/* workers is already resolved (1..64). level: a zstd level, or CS_COMPRESS_LEVEL_AUTO. compress
 * false: every chunk is framed raw and published inline by submit. */
int cs_pipeline_new(cs_chunk_pipeline **out, int workers, bool compress, int level, size_t chunk_size,
                    cs_publish_fn publish, void *ctx, cs_err *err);

/* raw is a message laid out as a raw CHUNK: data[0..11) reserved for the header, the payload at
 * data[11..len). The pipeline takes the caller's reference. One submitting thread (the source),
 * and the same thread flushes: the workers' queues have a single producer. The first thread to
 * submit or flush is the submitter, until another takes the role (cs_pipeline_take_submitter); a
 * submit or flush on any other thread logs `thread contract violated` and aborts, in every build
 * (common/invariant.h). Takes no lock; sleeps only when 1024 chunks are pending publication. May
 * publish (the raw chunk and any ready after it) on the calling thread. */
void cs_pipeline_submit(cs_chunk_pipeline *p, cs_msg *raw, uint32_t seq, uint32_t idx);

/* Returns once every submitted chunk has been published. The submitting thread. */
void cs_pipeline_flush(cs_chunk_pipeline *p);

/* The calling thread becomes the submitter: a hand-over, once the previous submitter has stopped
 * submitting and that is known to this thread (it joined that thread, or was started after its
 * last submit). */
void cs_pipeline_take_submitter(cs_chunk_pipeline *p);

uint64_t cs_pipeline_raw_fallbacks(const cs_chunk_pipeline *p);

/* The level given to the last chunk handed to a worker (the fixed level until then, or auto's
 * starting level; 0 with compression off). Any thread. */
int cs_pipeline_level(const cs_chunk_pipeline *p);
bool cs_pipeline_auto(const cs_chunk_pipeline *p);

/* Test hook: how many submit calls found the ring full and wait (or are about to) for a slot. */
int cs_pipeline_blocked_submits(cs_chunk_pipeline *p);

/* Publishes whatever is pending, stops the workers and frees. Once no thread submits any more
 * (the source thread joined): the calling thread takes the submitter's role. NULL is a no-op. */
void cs_pipeline_destroy(cs_chunk_pipeline *p);

#endif
