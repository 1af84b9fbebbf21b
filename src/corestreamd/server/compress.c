#include "corestreamd/server/compress.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/thread.h"
#include "wire/wire.h"

#define HDR CS_WIRE_CHUNK_HEADER_LEN
#define WORK_SLOTS 16
#define ORDERED_SLOTS 1024

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

/* One chunk between submit and publication. It lives in its ordered-ring slot, which is not
 * reused until the job is published, so workers may hold a pointer to it. */
typedef struct job {
    cs_msg *raw;
    cs_msg *out; /* what to publish, set when done */
    uint32_t seq;
    uint32_t idx;
    bool done;
} job;

typedef struct worker {
    cs_chunk_pipeline *p;
    pthread_t thread;
    ZSTD_CCtx *cctx;
    uint8_t *scratch; /* the frame is built here, then copied into an exactly sized message */
    size_t scratch_cap;
} worker;

struct cs_chunk_pipeline {
    cs_publish_fn publish;
    void *ctx;
    int nworkers; /* 0 when compression is off */
    worker *workers;

    pthread_mutex_t mu;
    pthread_cond_t work_cv;  /* workers: the work queue has a job, or stop */
    pthread_cond_t space_cv; /* submit: the ordered ring has a free slot */
    pthread_cond_t idle_cv;  /* flush: everything submitted is published */

    /* Ordered ring: jobs [head, tail) await publication; counters run free, slot = n % size. */
    job ring[ORDERED_SLOTS];
    uint64_t head;
    uint64_t tail;
    uint64_t published;
    /* At most one thread publishes at a time; it drains every job that becomes ready at the head
     * meanwhile, so publish() is serialised and ordered without a thread of its own. */
    bool publishing;

    job *work[WORK_SLOTS];
    unsigned work_head;
    unsigned work_count;
    bool stop;

    _Atomic uint64_t raw_fallbacks;
    int blocked_submits; /* test hook: submits waiting on space_cv, under mu */
};

/* Frames the raw message in place: only the reserved header bytes are written. */
static cs_msg *frame_raw(const job *j)
{
    cs_wire_put_chunk_header(j->raw->data, j->seq, j->idx, CS_CODEC_RAW);
    return j->raw;
}

/* Called with mu held after a job was marked done: publishes the run of done jobs at the head
 * unless another thread is already doing so (it re-checks the head before it lets go). publish()
 * runs without mu so submitters and workers are never held up by it. */
static void publish_ready(cs_chunk_pipeline *p)
{
    if (p->publishing)
        return;
    p->publishing = true;
    while (p->head != p->tail && p->ring[p->head % ORDERED_SLOTS].done) {
        cs_msg *m = p->ring[p->head % ORDERED_SLOTS].out;
        if (p->tail - p->head == ORDERED_SLOTS)
            pthread_cond_signal(&p->space_cv);
        p->head++;
        pthread_mutex_unlock(&p->mu);
        p->publish(p->ctx, m);
        pthread_mutex_lock(&p->mu);
        if (++p->published == p->tail)
            pthread_cond_broadcast(&p->idle_cv);
    }
    p->publishing = false;
}

/* Compresses one job's payload; returns the message to publish. Runs without mu. */
static cs_msg *encode_job(worker *w, const job *j)
{
    const uint8_t *payload = j->raw->data + HDR;
    size_t n = j->raw->len - HDR;
    size_t z = compress_frame(w->cctx, w->scratch, w->scratch_cap, payload, n);
    cs_msg *m = z ? cs_msg_new(HDR + z) : NULL;
    if (!m) /* incompressible, or no memory for the frame: the raw message still ships */
        return frame_raw(j);
    cs_wire_put_chunk_header(m->data, j->seq, j->idx, CS_CODEC_ZSTD);
    memcpy(m->data + HDR, w->scratch, z);
    m->len = HDR + z;
    cs_msg_release(j->raw);
    return m;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    cs_chunk_pipeline *p = w->p;
    cs_thread_role("cs-encode", 0);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->work_count == 0 && !p->stop)
            pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->work_count == 0)
            break;
        job *j = p->work[p->work_head];
        p->work_head = (p->work_head + 1) % WORK_SLOTS;
        p->work_count--;
        pthread_mutex_unlock(&p->mu);

        cs_msg *out = encode_job(w, j);

        pthread_mutex_lock(&p->mu);
        j->out = out;
        j->done = true;
        publish_ready(p);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void free_workers(cs_chunk_pipeline *p)
{
    for (int i = 0; i < p->nworkers; i++) {
        ZSTD_freeCCtx(p->workers[i].cctx);
        free(p->workers[i].scratch);
    }
    free(p->workers);
}

/* Stops and joins the first n workers. */
static void join_workers(cs_chunk_pipeline *p, int n)
{
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < n; i++)
        pthread_join(p->workers[i].thread, NULL);
}

static void free_pipeline(cs_chunk_pipeline *p)
{
    free_workers(p);
    pthread_cond_destroy(&p->idle_cv);
    pthread_cond_destroy(&p->space_cv);
    pthread_cond_destroy(&p->work_cv);
    pthread_mutex_destroy(&p->mu);
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
    size_t cap = ZSTD_compressBound(chunk_size);
    for (int i = 0; i < n; i++) {
        worker *w = &p->workers[i];
        w->p = p;
        w->cctx = cs_chunk_cctx_new(chunk_size, level);
        w->scratch = malloc(cap);
        w->scratch_cap = cap;
        if (!w->cctx || !w->scratch)
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
    cs_chunk_pipeline *p = calloc(1, sizeof *p);
    if (!p)
        return cs_err_set(err, 0, "server: compression: out of memory");
    p->publish = publish;
    p->ctx = ctx;
    atomic_init(&p->raw_fallbacks, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->space_cv, NULL);
    pthread_cond_init(&p->idle_cv, NULL);
    if (!compress) {
        *out = p;
        return 0;
    }
    if (alloc_workers(p, workers, level, chunk_size, err) < 0) {
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

void cs_pipeline_submit(cs_chunk_pipeline *p, cs_msg *raw, uint32_t seq, uint32_t idx)
{
    pthread_mutex_lock(&p->mu);
    p->blocked_submits++;
    while (p->tail - p->head == ORDERED_SLOTS)
        pthread_cond_wait(&p->space_cv, &p->mu);
    p->blocked_submits--;
    job *j = &p->ring[p->tail % ORDERED_SLOTS];
    *j = (job){.raw = raw, .seq = seq, .idx = idx};
    p->tail++;
    if (p->nworkers > 0 && p->work_count < WORK_SLOTS) {
        p->work[(p->work_head + p->work_count) % WORK_SLOTS] = j;
        p->work_count++;
        pthread_mutex_unlock(&p->mu);
        pthread_cond_signal(&p->work_cv); /* after unlocking, so the woken worker need not wait */
        return;
    }
    /* Compression off, or every worker busy: never make the source wait for an encoder. */
    if (p->nworkers > 0)
        atomic_fetch_add_explicit(&p->raw_fallbacks, 1, memory_order_relaxed);
    j->out = frame_raw(j);
    j->done = true;
    publish_ready(p);
    pthread_mutex_unlock(&p->mu);
}

void cs_pipeline_flush(cs_chunk_pipeline *p)
{
    pthread_mutex_lock(&p->mu);
    while (p->published != p->tail)
        pthread_cond_wait(&p->idle_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

uint64_t cs_pipeline_raw_fallbacks(const cs_chunk_pipeline *p)
{
    return atomic_load_explicit(&p->raw_fallbacks, memory_order_relaxed);
}

int cs_pipeline_blocked_submits(cs_chunk_pipeline *p)
{
    pthread_mutex_lock(&p->mu);
    int n = p->blocked_submits;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void cs_pipeline_destroy(cs_chunk_pipeline *p)
{
    if (!p)
        return;
    cs_pipeline_flush(p);
    join_workers(p, p->nworkers);
    free_pipeline(p);
}
