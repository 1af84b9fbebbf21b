#include "corestreamd/replay.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "corestreamd/compress.h"
#include "wire/wire.h"

struct cs_replay {
    cs_replay_pool *pool;
    unsigned refs; /* guarded by pool->mu: the cursor's, plus one while queued */
    uint32_t seq;
    bool queued;
    bool released; /* the cursor let go: stop producing */
    int status;    /* CS_REPLAY_PENDING until a terminal error */
    cs_err err;
    /* Production state, touched only by the one worker holding the job. */
    cs_ledger_ref *ledger;
    size_t nchunks;
    size_t produced; /* items produced: 0 = BEGIN, 1..nchunks = chunks, nchunks+1 = END */
    XXH64_state_t *hash;
    /* Ready queue, guarded by pool->mu. */
    cs_msg *ready[CS_REPLAY_DEPTH];
    size_t ready_head, ready_count;
    size_t handed_out;
    cs_replay *next_job;
};

struct cs_replay_pool {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    cs_replay *q_head, *q_tail;
    bool stopping;
    cs_ring *ring;
    bool compress;
    size_t chunk_size;
    void (*wake)(void *);
    void *wake_ctx;
    int nworkers;
    pthread_t *threads;
};

typedef struct worker_arg {
    cs_replay_pool *pool;
    ZSTD_CCtx *cctx;
} worker_arg;

/* Called with the lock held. */
static void enqueue(cs_replay_pool *p, cs_replay *r)
{
    r->queued = true;
    r->refs++;
    r->next_job = NULL;
    if (p->q_tail)
        p->q_tail->next_job = r;
    else
        p->q_head = r;
    p->q_tail = r;
    pthread_cond_signal(&p->cond);
}

static void replay_free(cs_replay *r)
{
    for (size_t i = 0; i < r->ready_count; i++)
        cs_msg_release(r->ready[(r->ready_head + i) % CS_REPLAY_DEPTH]);
    if (r->ledger)
        cs_ledger_ref_release(r->ledger);
    if (r->hash)
        XXH64_freeState(r->hash);
    free(r);
}

/* Called with the lock held; returns true when the caller must free r after unlocking. */
static bool unref_locked(cs_replay *r)
{
    return --r->refs == 0;
}

/* Builds item r->produced; runs on a worker without the lock. */
static cs_msg *produce(cs_replay *r, ZSTD_CCtx *cctx, size_t chunk_size)
{
    size_t k = r->produced;
    if (k == 0) {
        cs_msg *m = cs_msg_new(CS_WIRE_BEGIN_LEN);
        if (m)
            m->len = cs_wire_put_begin(m->data, r->seq, 0);
        return m;
    }
    if (k <= r->nchunks) {
        size_t off = (k - 1) * chunk_size;
        size_t n = r->ledger->len - off < chunk_size ? r->ledger->len - off : chunk_size;
        const uint8_t *raw = r->ledger->data + off;
        XXH64_update(r->hash, raw, n);
        return cs_encode_chunk(cctx, r->seq, (uint32_t)(k - 1), raw, n);
    }
    cs_msg *m = cs_msg_new(CS_WIRE_END_LEN);
    if (m)
        m->len = cs_wire_put_end(m->data, r->seq, (uint32_t)r->nchunks, r->ledger->len, 0,
                                 XXH64_digest(r->hash));
    return m;
}

/* Opens the ledger for a replay's first job, into locals the caller publishes under the lock
 * (cs_replay_next reads ledger and nchunks). Returns a terminal status or PENDING. */
static int open_ledger(cs_replay_pool *p, cs_replay *r, cs_ledger_ref **ledger, XXH64_state_t **hash)
{
    cs_err err;
    if (cs_ring_get(p->ring, r->seq, ledger, &err) != 0) {
        r->err = err;
        return err.kind == CS_RING_ERR_NOT_RETAINED ? CS_REPLAY_NOT_RETAINED : CS_REPLAY_FAILED;
    }
    *hash = XXH64_createState();
    if (!*hash) {
        cs_err_set(&r->err, 0, "replay ledger %u: out of memory", r->seq);
        return CS_REPLAY_FAILED;
    }
    XXH64_reset(*hash, 0);
    return CS_REPLAY_PENDING;
}

static void *worker_main(void *argp)
{
    worker_arg *a = argp;
    cs_replay_pool *p = a->pool;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->q_head && !p->stopping)
            pthread_cond_wait(&p->cond, &p->mu);
        if (p->stopping)
            break;
        cs_replay *r = p->q_head;
        p->q_head = r->next_job;
        if (!p->q_head)
            p->q_tail = NULL;

        /* Produce until the ready queue is full, the flow is complete, or the cursor left. */
        while (!r->released && r->status == CS_REPLAY_PENDING && r->ready_count < CS_REPLAY_DEPTH &&
               (!r->ledger || r->produced <= r->nchunks + 1)) {
            pthread_mutex_unlock(&p->mu);
            int status = CS_REPLAY_PENDING;
            cs_msg *m = NULL;
            if (!r->ledger) {
                cs_ledger_ref *ledger = NULL;
                XXH64_state_t *hash = NULL;
                status = open_ledger(p, r, &ledger, &hash);
                pthread_mutex_lock(&p->mu);
                r->ledger = ledger;
                r->hash = hash;
                r->nchunks = ledger ? (ledger->len + p->chunk_size - 1) / p->chunk_size : 0;
                pthread_mutex_unlock(&p->mu);
            }
            if (status == CS_REPLAY_PENDING) {
                m = produce(r, a->cctx, p->chunk_size);
                if (!m) {
                    cs_err_set(&r->err, 0, "replay ledger %u: out of memory", r->seq);
                    status = CS_REPLAY_FAILED;
                }
            }
            pthread_mutex_lock(&p->mu);
            r->status = status;
            if (m) {
                r->ready[(r->ready_head + r->ready_count) % CS_REPLAY_DEPTH] = m;
                r->ready_count++;
                r->produced++;
            }
            if (m || status != CS_REPLAY_PENDING) {
                pthread_mutex_unlock(&p->mu);
                if (p->wake)
                    p->wake(p->wake_ctx);
                pthread_mutex_lock(&p->mu);
            }
            if (r->produced > r->nchunks + 1)
                break;
        }
        r->queued = false;
        if (unref_locked(r)) {
            pthread_mutex_unlock(&p->mu);
            replay_free(r);
            pthread_mutex_lock(&p->mu);
        }
    }
    pthread_mutex_unlock(&p->mu);
    ZSTD_freeCCtx(a->cctx);
    free(a);
    return NULL;
}

cs_replay_pool *cs_replay_pool_new(int workers, cs_ring *ring, bool compress, size_t chunk_size,
                                   void (*wake)(void *), void *wake_ctx, cs_err *err)
{
    cs_replay_pool *p = calloc(1, sizeof *p);
    if (!p) {
        cs_err_set(err, 0, "server: out of memory");
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->ring = ring;
    p->compress = compress;
    p->chunk_size = chunk_size;
    p->wake = wake;
    p->wake_ctx = wake_ctx;
    p->threads = calloc((size_t)workers, sizeof *p->threads);
    if (!p->threads) {
        cs_replay_pool_free(p);
        cs_err_set(err, 0, "server: out of memory");
        return NULL;
    }
    for (int i = 0; i < workers; i++) {
        worker_arg *a = calloc(1, sizeof *a);
        if (a) {
            a->pool = p;
            a->cctx = compress ? cs_chunk_cctx_new(chunk_size) : NULL;
        }
        if (!a || (compress && !a->cctx) || pthread_create(&p->threads[i], NULL, worker_main, a) != 0) {
            if (a)
                ZSTD_freeCCtx(a->cctx);
            free(a);
            cs_replay_pool_free(p);
            cs_err_set(err, 0, "server: cannot start the ring replay encoders");
            return NULL;
        }
        p->nworkers++;
    }
    return p;
}

void cs_replay_pool_free(cs_replay_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nworkers; i++)
        pthread_join(p->threads[i], NULL);
    /* Jobs still queued hold a reference each; drop them. */
    for (cs_replay *r = p->q_head, *next; r; r = next) {
        next = r->next_job;
        r->queued = false;
        if (unref_locked(r))
            replay_free(r);
    }
    free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cond);
    free(p);
}

cs_replay *cs_replay_start(cs_replay_pool *p, uint32_t seq)
{
    cs_replay *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->pool = p;
    r->refs = 1;
    r->seq = seq;
    r->status = CS_REPLAY_PENDING;
    pthread_mutex_lock(&p->mu);
    if (!p->stopping)
        enqueue(p, r);
    pthread_mutex_unlock(&p->mu);
    return r;
}

int cs_replay_next(cs_replay *r, cs_msg **out, cs_err *err)
{
    cs_replay_pool *p = r->pool;
    int rc;
    pthread_mutex_lock(&p->mu);
    if (r->ready_count) {
        *out = r->ready[r->ready_head];
        r->ready_head = (r->ready_head + 1) % CS_REPLAY_DEPTH;
        r->ready_count--;
        r->handed_out++;
        rc = CS_REPLAY_MSG;
    } else if (r->status != CS_REPLAY_PENDING) {
        if (err)
            *err = r->err;
        rc = r->status;
    } else if (r->ledger && r->handed_out > r->nchunks + 1) {
        rc = CS_REPLAY_DONE;
    } else {
        rc = CS_REPLAY_PENDING;
    }
    /* Keep the pipeline full: a consumed slot lets the next message be prepared. */
    bool more = !r->ledger || r->produced <= r->nchunks + 1;
    if (!r->queued && !p->stopping && r->status == CS_REPLAY_PENDING && more &&
        r->ready_count < CS_REPLAY_DEPTH)
        enqueue(p, r);
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void cs_replay_release(cs_replay *r)
{
    if (!r)
        return;
    cs_replay_pool *p = r->pool;
    pthread_mutex_lock(&p->mu);
    r->released = true;
    bool last = unref_locked(r);
    pthread_mutex_unlock(&p->mu);
    if (last)
        replay_free(r);
}
