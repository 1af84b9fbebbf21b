/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/stream/compress.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/futex.h"
#include "common/invariant.h"
#include "common/thread.h"
#include "wire/wire.h"

#define HDR CS_WIRE_CHUNK_HEADER_LEN
/* Chunks that may wait for an encoder, all workers together (each gets its share, at least 1). */
#define WORK_SLOTS 16
#define WORKER_QUEUE 16 /* a power of two holding any worker's share */
#define ORDERED_SLOTS 1024
/* Idle frame messages kept for the next chunks: about what two ledgers of the gate shape hold in
 * flight (the flow being sent and the one the ring is writing). A compressed frame touches only its
 * own length of a pooled message, so idle capacity beyond that costs address space, not memory. */
#define FRAME_POOL_KEEP 256

int cs_compress_workers_resolve(int64_t n, int *out, cs_err *err)
{
    if (n == 0)
        n = CS_DEFAULT_COMPRESS_WORKERS;
    if (n < 1 || n > CS_MAX_COMPRESS_WORKERS)
        return cs_err_set(err, 0, "server: compress workers %lld is outside [1,%d]", (long long)n,
                          CS_MAX_COMPRESS_WORKERS);
    *out = (int)n;
    return 0;
}

/* The smallest power-of-two exponent whose window covers the chunk, kept inside zstd's bounds. */
static int window_log_for(size_t chunk_size)
{
    ZSTD_bounds b = ZSTD_cParam_getBounds(ZSTD_c_windowLog);
    int log = b.lowerBound;
    while (log < b.upperBound && ((size_t)1 << log) < chunk_size)
        log++;
    return log;
}

int cs_compress_level_validate(int64_t level, cs_err *err)
{
    if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel())
        return cs_err_set(err, 0, "server: compress level %lld is outside [%d,%d]", (long long)level,
                          ZSTD_minCLevel(), ZSTD_maxCLevel());
    return 0;
}

ZSTD_CCtx *cs_chunk_cctx_new(size_t chunk_size, int level)
{
    ZSTD_CCtx *c = ZSTD_createCCtx();
    if (!c)
        return NULL;
    if (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 0)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 1)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, window_log_for(chunk_size)))) {
        ZSTD_freeCCtx(c);
        return NULL;
    }
    return c;
}

/* Compresses src into dst and returns the frame length, or 0 when the chunk should ship raw:
 * empty, a zstd error (dst too small included), or a frame no smaller than the payload. */
static size_t compress_frame(ZSTD_CCtx *c, uint8_t *dst, size_t cap, const uint8_t *src, size_t n)
{
    if (n == 0)
        return 0;
    size_t r = ZSTD_compress2(c, dst, cap, src, n);
    return ZSTD_isError(r) || r >= n ? 0 : r;
}

cs_msg *cs_encode_chunk(ZSTD_CCtx *cctx, uint32_t seq, uint32_t idx, const uint8_t *raw, size_t n)
{
    /* compressBound(n) ≥ n, so the same message can take the raw bytes if compression loses. */
    size_t cap = cctx ? ZSTD_compressBound(n) : n;
    cs_msg *m = cs_msg_new(HDR + cap);
    if (!m)
        return NULL;
    size_t z = cctx ? compress_frame(cctx, m->data + HDR, cap, raw, n) : 0;
    if (z) {
        cs_wire_put_chunk_header(m->data, seq, idx, CS_CODEC_ZSTD);
        m->len = HDR + z;
    } else {
        m->len = cs_wire_append_chunk(m->data, seq, idx, CS_CODEC_RAW, raw, n);
    }
    return m;
}

/* One chunk between submit and publication. It lives in its ordered-ring slot, which the source
 * reuses only once the job is published, so a worker may hold a pointer to it. Fields other than
 * ready are written by one thread before ready (or the worker queue) passes the job on. */
typedef struct job {
    cs_msg *raw;
    cs_msg *out; /* what to publish, set before ready */
    uint32_t seq;
    uint32_t idx;
    int level;       /* chosen at submit */
    int64_t took_ns; /* wall time of the compression, for the controller; 0: shipped raw */
    size_t bytes;
    _Atomic uint64_t ready; /* the job's number + 1 once out is set */
} job;

typedef struct worker {
    cs_chunk_pipeline *p;
    pthread_t thread;
    ZSTD_CCtx *cctx;
    int cctx_level;
    /* Jobs handed to this worker, a single-producer single-consumer ring of job numbers: the
     * source writes q[pushed % WORKER_QUEUE] then pushed; the worker reads it, then popped. */
    uint64_t q[WORKER_QUEUE];
    _Atomic uint64_t pushed;
    char pad1[64]; /* the source's and the worker's counters on different cache lines */
    _Atomic uint64_t popped;
    _Atomic uint64_t finished;
    _Atomic uint32_t doorbell; /* futex word the worker sleeps on */
    _Atomic int sleeping;
    char pad2[64];
} worker;

struct cs_chunk_pipeline {
    cs_publish_fn publish;
    void *ctx;
    int nworkers; /* 0 when compression is off */
    worker *workers;
    unsigned wcap; /* jobs that may wait (not yet started) per worker */
    bool autolevel;
    int fixed_level;
    /* Messages of HDR + ZSTD_compressBound(chunk size): a worker compresses straight into one, so
     * a frame is written once and never copied; a frame that does not shrink goes back here. */
    cs_msg_pool *frames;

    /* Ordered ring: job n lives in ring[n % ORDERED_SLOTS]; jobs [head, tail) are unpublished. */
    job ring[ORDERED_SLOTS];
    /* Only the submitting thread touches these. */
    cs_owner submitter;
    uint64_t tail;
    uint64_t observed; /* jobs below it were reported to the controller */
    cs_level_ctl ctl;
    int64_t last_submit_ns;
    uint32_t last_seq, last_idx;
    unsigned rr; /* where the search for a worker starts, so ties rotate */

    _Atomic uint64_t head;      /* next job to publish; written by the publisher */
    _Atomic uint64_t published; /* jobs whose publish() has returned */
    /* At most one thread publishes at a time (whoever sets the flag); it drains every job that
     * is ready at the head, re-checking after it lets go, so publish() is serialised and
     * ordered without a lock and without a thread of its own. */
    _Atomic bool publishing;
    _Atomic uint32_t progress; /* futex word: rung after a publish while someone waits */
    _Atomic int waiters;       /* threads in flush or in a submit that found the ring full */
    _Atomic bool stop;

    _Atomic uint64_t raw_fallbacks;
    _Atomic int blocked_submits; /* test hook */
    _Atomic int level_now;       /* the level the last chunk was given */
};

/* Frames the raw message in place: only the reserved header bytes are written. */
static cs_msg *frame_raw(const job *j)
{
    cs_wire_put_chunk_header(j->raw->data, j->seq, j->idx, CS_CODEC_RAW);
    return j->raw;
}

/* Called by whoever just made a job ready. publish() never runs concurrently with itself and
 * always in job order; a thread that finds another publishing leaves its job to it. */
static void publish_ready(cs_chunk_pipeline *p)
{
    for (;;) {
        if (atomic_exchange(&p->publishing, true))
            return;
        uint64_t h = atomic_load(&p->head);
        while (atomic_load(&p->ring[h % ORDERED_SLOTS].ready) == h + 1) {
            cs_msg *m = p->ring[h % ORDERED_SLOTS].out;
            atomic_store(&p->head, h + 1); /* the slot is the source's again */
            if (atomic_load(&p->waiters) > 0) /* a submit waiting for room need not wait for publish() */
                cs_futex_ring(&p->progress, INT_MAX);
            p->publish(p->ctx, m);
            atomic_store(&p->published, ++h);
            if (atomic_load(&p->waiters) > 0)
                cs_futex_ring(&p->progress, INT_MAX);
        }
        atomic_store(&p->publishing, false);
        /* A job made ready after the last check above found the flag still set and left: look
         * again now that it is clear (both sides use sequentially consistent operations). */
        if (atomic_load(&p->ring[h % ORDERED_SLOTS].ready) != h + 1)
            return;
    }
}

/* Sleeps until done(p) holds; every publish rings the doorbell while a waiter is counted. */
static void wait_progress(cs_chunk_pipeline *p, bool (*done)(cs_chunk_pipeline *))
{
    atomic_fetch_add(&p->waiters, 1);
    for (;;) {
        uint32_t seen = atomic_load(&p->progress);
        if (done(p))
            break;
        cs_futex_wait(&p->progress, seen);
    }
    atomic_fetch_sub(&p->waiters, 1);
}

/* Compresses one job's payload straight into a pooled message; returns the message to publish. */
static cs_msg *encode_job(worker *w, job *j)
{
    if (j->level != w->cctx_level &&
        !ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, j->level)))
        w->cctx_level = j->level;
    const uint8_t *payload = j->raw->data + HDR;
    size_t n = j->raw->len - HDR;
    cs_msg *m = cs_msg_pool_get(w->p->frames);
    int64_t t0 = cs_mono_ns();
    size_t z = m ? compress_frame(w->cctx, m->data + HDR, m->cap - HDR, payload, n) : 0;
    j->took_ns = cs_mono_ns() - t0;
    if (j->took_ns <= 0)
        j->took_ns = 1;
    j->level = w->cctx_level; /* what was really used, should setting it have failed */
    if (!z) { /* incompressible, or no memory for the frame: the raw message still ships */
        cs_msg_release(m);
        return frame_raw(j);
    }
    cs_wire_put_chunk_header(m->data, j->seq, j->idx, CS_CODEC_ZSTD);
    m->len = HDR + z;
    cs_msg_release(j->raw);
    return m;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    cs_chunk_pipeline *p = w->p;
    cs_thread_role("cs-encode", CS_NICE_LIVE);
    uint64_t popped = 0;
    for (;;) {
        if (popped < atomic_load(&w->pushed)) {
            uint64_t no = w->q[popped % WORKER_QUEUE];
            atomic_store(&w->popped, ++popped);
            job *j = &p->ring[no % ORDERED_SLOTS];
            j->out = encode_job(w, j);
            atomic_store(&w->finished, popped);
            atomic_store(&j->ready, no + 1);
            publish_ready(p);
            continue;
        }
        if (atomic_load(&p->stop))
            break; /* only once the queue is empty: destroy flushes first anyway */
        uint32_t seen = atomic_load(&w->doorbell);
        atomic_store(&w->sleeping, 1);
        if (popped == atomic_load(&w->pushed) && !atomic_load(&p->stop))
            cs_futex_wait(&w->doorbell, seen);
        atomic_store(&w->sleeping, 0);
    }
    return NULL;
}

static void free_workers(cs_chunk_pipeline *p)
{
    for (int i = 0; i < p->nworkers; i++)
        ZSTD_freeCCtx(p->workers[i].cctx);
    free(p->workers);
}

/* Stops and joins the first n workers. */
static void join_workers(cs_chunk_pipeline *p, int n)
{
    atomic_store(&p->stop, true);
    for (int i = 0; i < n; i++)
        cs_futex_ring(&p->workers[i].doorbell, 1);
    for (int i = 0; i < n; i++)
        pthread_join(p->workers[i].thread, NULL);
}

static void free_pipeline(cs_chunk_pipeline *p)
{
    free_workers(p);
    cs_msg_pool_free(p->frames); /* frames still in a flow or the ring writer free themselves later */
    free(p);
}

/* Every context and buffer is allocated before any thread starts, so a bad configuration fails
 * here, before the server listens. */
static int alloc_workers(cs_chunk_pipeline *p, int n, int level, size_t chunk_size, cs_err *err)
{
    p->workers = calloc((size_t)n, sizeof *p->workers);
    if (!p->workers)
        return cs_err_set(err, 0, "server: compression: out of memory");
    p->nworkers = n;
    if (!(p->frames = cs_msg_pool_new(HDR + ZSTD_compressBound(chunk_size), FRAME_POOL_KEEP)))
        return cs_err_set(err, 0, "server: compression: out of memory");
    for (int i = 0; i < n; i++) {
        worker *w = &p->workers[i];
        w->p = p;
        w->cctx = cs_chunk_cctx_new(chunk_size, level);
        w->cctx_level = level;
        if (!w->cctx)
            return cs_err_set(err, 0, "server: compression: cannot allocate a zstd context");
    }
    return 0;
}

int cs_pipeline_new(cs_chunk_pipeline **out, int workers, bool compress, int level, size_t chunk_size,
                    cs_publish_fn publish, void *ctx, cs_err *err)
{
    *out = NULL;
    if (compress && (workers < 1 || workers > CS_MAX_COMPRESS_WORKERS))
        return cs_err_set(err, 0, "server: compress workers %d is outside [1,%d]", workers,
                          CS_MAX_COMPRESS_WORKERS);
    if (compress && level != CS_COMPRESS_LEVEL_AUTO && cs_compress_level_validate(level, err) != 0)
        return -1;
    cs_chunk_pipeline *p = calloc(1, sizeof *p);
    if (!p)
        return cs_err_set(err, 0, "server: compression: out of memory");
    p->publish = publish;
    p->ctx = ctx;
    p->autolevel = compress && level == CS_COMPRESS_LEVEL_AUTO;
    p->fixed_level = p->autolevel ? CS_AUTO_LEVEL_START : level;
    atomic_init(&p->level_now, compress ? p->fixed_level : 0);
    if (!compress) {
        *out = p;
        return 0;
    }
    /* The waiting room of the shared queue this replaced (WORK_SLOTS), split between workers. */
    p->wcap = (unsigned)((WORK_SLOTS + workers - 1) / workers);
    cs_level_ctl_init(&p->ctl, workers);
    if (alloc_workers(p, workers, p->fixed_level, chunk_size, err) < 0) {
        free_pipeline(p);
        return -1;
    }
    for (int i = 0; i < workers; i++) {
        int rc = pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]);
        if (rc != 0) {
            join_workers(p, i);
            free_pipeline(p);
            return cs_err_set(err, 0, "server: compression: start worker: %s", strerror(rc));
        }
    }
    *out = p;
    return 0;
}

static bool ring_has_room(cs_chunk_pipeline *p)
{
    return p->tail - atomic_load(&p->head) < ORDERED_SLOTS;
}

/* Published jobs keep their timings until their slot is reused by this thread: report them. */
static void report_timings(cs_chunk_pipeline *p)
{
    uint64_t h = atomic_load(&p->head);
    for (; p->observed < h; p->observed++) {
        const job *j = &p->ring[p->observed % ORDERED_SLOTS];
        if (j->took_ns > 0)
            cs_level_ctl_observe(&p->ctl, j->level, j->bytes, j->took_ns);
    }
}

/* The least loaded worker whose waiting room has space, or NULL; fills the controller's view. */
static worker *choose_worker(cs_chunk_pipeline *p, cs_level_load *load)
{
    worker *best = NULL;
    uint64_t best_load = UINT64_MAX;
    for (int k = 0; k < p->nworkers; k++) {
        worker *w = &p->workers[(p->rr + (unsigned)k) % (unsigned)p->nworkers];
        uint64_t pushed = atomic_load_explicit(&w->pushed, memory_order_relaxed); /* ours */
        uint64_t waiting = pushed - atomic_load(&w->popped);
        uint64_t inflight = pushed - atomic_load(&w->finished);
        if (inflight == 0)
            load->idle++;
        if (waiting > 0)
            load->backlogged++;
        if (waiting < p->wcap && inflight < best_load) {
            best = w;
            best_load = inflight;
        }
    }
    p->rr++;
    load->all_full = best == NULL;
    return best;
}

#define SUBMIT_THREAD "encoder pool: one submitting thread, which flushes (compress.h)"

void cs_pipeline_submit(cs_chunk_pipeline *p, cs_msg *raw, uint32_t seq, uint32_t idx)
{
    CS_OWNED(&p->submitter, SUBMIT_THREAD);
    if (!ring_has_room(p)) {
        atomic_fetch_add(&p->blocked_submits, 1);
        wait_progress(p, ring_has_room);
        atomic_fetch_sub(&p->blocked_submits, 1);
    }
    uint64_t no = p->tail;
    job *j = &p->ring[no % ORDERED_SLOTS];
    if (p->autolevel)
        report_timings(p); /* before the slot below is overwritten */
    j->raw = raw;
    j->out = NULL;
    j->seq = seq;
    j->idx = idx;
    j->level = p->fixed_level;
    j->took_ns = 0;
    j->bytes = raw->len - HDR;
    p->tail++;

    worker *w = NULL;
    if (p->nworkers > 0) {
        cs_level_load load = {.bytes = j->bytes};
        w = choose_worker(p, &load);
        if (p->autolevel) {
            int64_t now = cs_mono_ns();
            if (idx > 0 && seq == p->last_seq && idx == p->last_idx + 1)
                load.arrival_ns = now - p->last_submit_ns;
            p->last_submit_ns = now;
            p->last_seq = seq;
            p->last_idx = idx;
            j->level = cs_level_ctl_pick(&p->ctl, &load);
            atomic_store_explicit(&p->level_now, j->level, memory_order_relaxed);
        }
    }
    if (w) {
        uint64_t pushed = atomic_load_explicit(&w->pushed, memory_order_relaxed);
        w->q[pushed % WORKER_QUEUE] = no;
        atomic_store(&w->pushed, pushed + 1);
        if (atomic_load(&w->sleeping))
            cs_futex_ring(&w->doorbell, 1);
        return;
    }
    /* Compression off, or every worker's queue full: never make the source wait for an encoder. */
    if (p->nworkers > 0)
        atomic_fetch_add_explicit(&p->raw_fallbacks, 1, memory_order_relaxed);
    j->out = frame_raw(j);
    atomic_store(&j->ready, no + 1);
    publish_ready(p);
}

static bool all_published(cs_chunk_pipeline *p)
{
    return atomic_load(&p->published) == p->tail;
}

void cs_pipeline_take_submitter(cs_chunk_pipeline *p)
{
    cs_owner_bind(&p->submitter);
    cs_owner_bind(&p->ctl.owner); /* the submitter picks the levels */
}

void cs_pipeline_flush(cs_chunk_pipeline *p)
{
    CS_OWNED(&p->submitter, SUBMIT_THREAD);
    if (!all_published(p))
        wait_progress(p, all_published);
}

uint64_t cs_pipeline_raw_fallbacks(const cs_chunk_pipeline *p)
{
    return atomic_load_explicit(&p->raw_fallbacks, memory_order_relaxed);
}

int cs_pipeline_level(const cs_chunk_pipeline *p)
{
    return atomic_load_explicit(&p->level_now, memory_order_relaxed);
}

bool cs_pipeline_auto(const cs_chunk_pipeline *p)
{
    return p->autolevel;
}

int cs_pipeline_blocked_submits(cs_chunk_pipeline *p)
{
    return atomic_load(&p->blocked_submits);
}

void cs_pipeline_destroy(cs_chunk_pipeline *p)
{
    if (!p)
        return;
    cs_pipeline_take_submitter(p); /* the submitter is done (destroy's contract) */
    cs_pipeline_flush(p);
    join_workers(p, p->nworkers);
    free_pipeline(p);
}
