/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/stream/framesfill.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>
#include <zstd.h>

#include "common/log.h"
#include "common/thread.h"
#include "corestreamd/stream/compress.h"

struct cs_frames_fill {
    cs_ring *ring;
    bool compress;
    int level;
    size_t chunk_size;
    atomic_bool stop;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
};

enum { FILL_MADE, FILL_SKIPPED, FILL_FAILED };

/* Makes the frames of one ledger. */
static int fill_one(cs_frames_fill *f, ZSTD_CCtx *cctx, uint8_t *raw, uint8_t *out, size_t out_cap, uint32_t seq,
                    XXH64_state_t *hash, cs_err *err)
{
    cs_ledger_ref *ref;
    if (cs_ring_get(f->ring, seq, &ref, err) != 0)
        return FILL_SKIPPED; /* pruned meanwhile, or dropped (the ring logged it) */
    if (ref->frames_fd >= 0) {
        cs_ledger_ref_release(ref);
        return FILL_SKIPPED;
    }
    size_t cs = ref->rec.chunk_size ? ref->rec.chunk_size : f->chunk_size;
    if (cs > f->chunk_size) { /* a ring from a larger --chunk-size: its buffers are not ours */
        cs_ledger_ref_release(ref);
        return FILL_SKIPPED;
    }
    cs_frames_writer *w;
    if (cs_ring_frames_begin(f->ring, seq, (uint32_t)cs, &w, err) != 0) {
        cs_ledger_ref_release(ref);
        return FILL_FAILED;
    }
    XXH64_reset(hash, 0);
    int rc = FILL_MADE;
    for (uint64_t off = 0; off < ref->rec.len && rc == FILL_MADE; off += cs) {
        if (atomic_load(&f->stop)) {
            rc = FILL_SKIPPED;
            break;
        }
        size_t n = ref->rec.len - off < cs ? (size_t)(ref->rec.len - off) : cs;
        if (cs_ledger_read(ref, off, raw, n, err) != 0) {
            if (err->kind == CS_RING_ERR_CORRUPT)
                cs_ring_condemn(f->ring, seq, err->msg);
            rc = FILL_SKIPPED;
            break;
        }
        XXH64_update(hash, raw, n);
        size_t z = cctx ? ZSTD_compress2(cctx, out, out_cap, raw, n) : 0;
        if (cctx && !ZSTD_isError(z) && z > 0 && z < n)
            cs_frames_writer_add(w, 1, out, z);
        else
            cs_frames_writer_add(w, 0, raw, n);
    }
    if (rc == FILL_MADE) {
        uint64_t sum = XXH64_digest(hash);
        if (sum != ref->rec.xxh64) {
            char problem[200];
            snprintf(problem, sizeof problem,
                     "ledger-%" PRIu32 ".xdr changed on disk: its bytes hash to %016" PRIx64 ", its record says %016" PRIx64,
                     seq, sum, ref->rec.xxh64);
            cs_ring_condemn(f->ring, seq, problem);
            rc = FILL_SKIPPED;
        }
    }
    if (rc == FILL_MADE) {
        if (cs_ring_frames_attach(f->ring, ref, w, err) != 0)
            rc = err->kind == CS_RING_ERR_NOT_RETAINED ? FILL_SKIPPED : FILL_FAILED;
    } else {
        cs_frames_writer_abort(w);
    }
    cs_ledger_ref_release(ref);
    return rc;
}

static void *fill_main(void *arg)
{
    cs_frames_fill *f = arg;
    cs_thread_role("cs-frames", cs_thread_background_nice());
    uint32_t oldest, latest;
    uint64_t made = 0;
    size_t out_cap = ZSTD_compressBound(f->chunk_size);
    uint8_t *raw = malloc(f->chunk_size ? f->chunk_size : 1), *out = malloc(out_cap);
    ZSTD_CCtx *cctx = f->compress ? cs_chunk_cctx_new(f->chunk_size, f->level) : NULL;
    XXH64_state_t *hash = XXH64_createState();
    bool ready = raw && out && hash && (!f->compress || cctx);
    if (ready && cs_ring_bounds(f->ring, &oldest, &latest)) {
        for (uint64_t s = latest; s >= oldest && s > 0 && !atomic_load(&f->stop); s--) {
            if (cs_ring_has_frames(f->ring, (uint32_t)s))
                continue; /* the ring's own note: no file is opened for it */
            cs_err err;
            int rc = fill_one(f, cctx, raw, out, out_cap, (uint32_t)s, hash, &err);
            if (rc == FILL_FAILED) {
                CS_LOG(CS_LOG_WARN, "ring: stored frames could not be made", KV_U("ledger", s), KV_S("error", err.msg));
                break;
            }
            made += rc == FILL_MADE;
        }
    }
    if (made)
        CS_LOG(CS_LOG_INFO, "ring: stored frames made for ledgers retained without them", KV_U("ledgers", made));
    XXH64_freeState(hash);
    ZSTD_freeCCtx(cctx);
    free(raw);
    free(out);
    pthread_mutex_lock(&f->mu);
    f->done = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

int cs_frames_fill_start(cs_frames_fill **out, cs_ring *ring, bool compress, int level, size_t chunk_size,
                         cs_err *err)
{
    *out = NULL;
    cs_frames_fill *f = calloc(1, sizeof *f);
    if (!f)
        return cs_err_set(err, 0, "server: cannot start the stored-frames pass");
    f->ring = ring;
    f->compress = compress;
    f->level = level;
    f->chunk_size = chunk_size;
    atomic_init(&f->stop, false);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    if (pthread_create(&f->thread, NULL, fill_main, f) != 0) {
        pthread_mutex_destroy(&f->mu);
        pthread_cond_destroy(&f->cv);
        free(f);
        return cs_err_set(err, 0, "server: cannot start the stored-frames pass");
    }
    *out = f;
    return 0;
}

void cs_frames_fill_wait(cs_frames_fill *f)
{
    pthread_mutex_lock(&f->mu);
    while (!f->done)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

void cs_frames_fill_stop(cs_frames_fill *f)
{
    if (!f)
        return;
    atomic_store(&f->stop, true);
    pthread_join(f->thread, NULL);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
}
