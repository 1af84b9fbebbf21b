/* The live encoder pool (PORTSPEC 2.3): N workers, each with its own zstd context (level 1, no
 * frame checksum, content size recorded), compress chunks and publish them in submission order.
 * When every worker is busy a chunk ships raw instead (counted in raw_fallbacks): compression
 * never back-pressures the source. A chunk ships compressed only when the frame is strictly
 * smaller than the raw payload. */
#ifndef CS_CORESTREAMD_COMPRESS_H
#define CS_CORESTREAMD_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <zstd.h>

#include "common/err.h"
#include "corestreamd/server/message.h"

#define CS_DEFAULT_COMPRESS_WORKERS 4
#define CS_MAX_COMPRESS_WORKERS 64

/* --compress-workers: 0 → 4; valid 1..64, else `server: compress workers N is outside [1,64]`. */
int cs_compress_workers_resolve(int64_t n, int *out, cs_err *err);

/* zstd level for chunks unless --compress-level says otherwise: the prototype's fastest setting. */
#define CS_DEFAULT_COMPRESS_LEVEL 1

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

/* workers is already resolved (1..64). compress false: every chunk is framed raw and published
 * inline by submit. */
int cs_pipeline_new(cs_chunk_pipeline **out, int workers, bool compress, int level, size_t chunk_size,
                    cs_publish_fn publish, void *ctx, cs_err *err);

/* raw is a message laid out as a raw CHUNK: data[0..11) reserved for the header, the payload at
 * data[11..len). The pipeline takes the caller's reference. Blocks only when 1024 chunks are
 * pending publication. */
void cs_pipeline_submit(cs_chunk_pipeline *p, cs_msg *raw, uint32_t seq, uint32_t idx);

/* Returns once every submitted chunk has been published. */
void cs_pipeline_flush(cs_chunk_pipeline *p);

uint64_t cs_pipeline_raw_fallbacks(const cs_chunk_pipeline *p);

/* Test hook: how many submit calls are blocked now waiting for a free slot. Read under the lock a
 * blocked submit releases only inside its wait, so a test sees back-pressure without timing it. */
int cs_pipeline_blocked_submits(cs_chunk_pipeline *p);

/* Publishes whatever is pending, stops the workers and frees. NULL is a no-op. */
void cs_pipeline_destroy(cs_chunk_pipeline *p);

#endif
