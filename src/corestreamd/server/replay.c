#include "corestreamd/server/replay.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/thread.h"
#include "corestreamd/server/compress.h"
#include "wire/wire.h"

/* One ledger being turned into a stampless flow: item 0 is BEGIN, items 1..n the chunks, item
 * n+1 END. Items are claimed in order but produced by any free worker, so one catch-up
 * subscriber can use the whole pool; at most CS_REPLAY_DEPTH items exist ahead of the cursor. */
struct cs_replay {
    cs_replay_pool *pool;
    unsigned refs; /* the cursor's, one while queued, one per worker producing */
    uint32_t seq;
    bool queued;
    bool released; /* the cursor let go: stop producing */
    bool opening;  /* a worker is mapping the ledger */
    int status;    /* CS_REPLAY_PENDING until a terminal error */
    cs_err err;
    cs_ledger_ref *ledger; /* NULL until opened */
    uint64_t checksum;
    size_t nitems;
    size_t claimed;
    size_t handed_out;
    cs_msg *slot[CS_REPLAY_DEPTH]; /* item k lives in slot[k % DEPTH] until handed out */
    cs_replay *next_job;
};

struct cs_replay_pool {
    pthread_mutex_t mu; /* guards the queue and every replay's fields above but ledger data */
    pthread_cond_t cond;
    cs_replay *q_head, *q_tail;
    bool stopping;
    cs_ring *ring;
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

/* All helpers below named *_locked expect pool->mu held. */

static void enqueue_locked(cs_replay_pool *p, cs_replay *r)
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

static bool can_claim_locked(const cs_replay *r)
{
    return r->ledger && !r->released && r->status == CS_REPLAY_PENDING && r->claimed < r->nitems &&
           r->claimed < r->handed_out + CS_REPLAY_DEPTH;
}

/* Whether a worker should look at r: to open it, or to produce its next item. */
static bool needs_work_locked(const cs_replay *r)
{
    if (r->released || r->status != CS_REPLAY_PENDING)
        return false;
    return r->ledger ? can_claim_locked(r) : !r->opening;
}

static void replay_free(cs_replay *r)
{
    for (size_t k = r->handed_out; k < r->claimed; k++)
        cs_msg_release(r->slot[k % CS_REPLAY_DEPTH]);
    if (r->ledger)
        cs_ledger_ref_release(r->ledger);
    free(r);
}

/* Drops one reference; frees after unlocking when it was the last. Returns with the lock held. */
static void unref_locked(cs_replay_pool *p, cs_replay *r)
{
    if (--r->refs)
        return;
    pthread_mutex_unlock(&p->mu);
    replay_free(r);
    pthread_mutex_lock(&p->mu);
}

/* Builds item k; runs without the lock (the ledger mapping is immutable). */
static cs_msg *produce(const cs_replay *r, size_t k, ZSTD_CCtx *cctx, size_t chunk_size)
{
    cs_msg *m;
    if (k == 0) {
        if ((m = cs_msg_new(CS_WIRE_BEGIN_LEN)))
            m->len = cs_wire_put_begin(m->data, r->seq, 0);
        return m;
    }
    if (k < r->nitems - 1) {
        size_t off = (k - 1) * chunk_size;
        size_t n = r->ledger->len - off < chunk_size ? r->ledger->len - off : chunk_size;
        return cs_encode_chunk(cctx, r->seq, (uint32_t)(k - 1), r->ledger->data + off, n);
    }
    if ((m = cs_msg_new(CS_WIRE_END_LEN)))
        m->len = cs_wire_put_end(m->data, r->seq, (uint32_t)(r->nitems - 2), r->ledger->len, 0, r->checksum);
    return m;
}

/* Maps the ledger and hashes it whole (XXH64 runs far faster than compression, and knowing the
 * checksum up front lets chunks be produced in any order). Called and returns with the lock held. */
static void open_locked(cs_replay_pool *p, cs_replay *r)
{
    r->opening = true;
    pthread_mutex_unlock(&p->mu);
    cs_ledger_ref *ledger = NULL;
    cs_err err;
    int status = CS_REPLAY_PENDING;
    uint64_t sum = 0;
    if (cs_ring_get(p->ring, r->seq, &ledger, &err) != 0)
        status = err.kind == CS_RING_ERR_NOT_RETAINED ? CS_REPLAY_NOT_RETAINED : CS_REPLAY_FAILED;
    else
        sum = XXH64(ledger->data, ledger->len, 0);
    pthread_mutex_lock(&p->mu);
    r->opening = false;
    if (status != CS_REPLAY_PENDING) {
        r->status = status;
        r->err = err;
        return;
    }
    r->ledger = ledger;
    r->checksum = sum;
    r->nitems = (ledger->len + p->chunk_size - 1) / p->chunk_size + 2;
}

static void notify(cs_replay_pool *p)
{
    pthread_mutex_unlock(&p->mu);
    if (p->wake)
        p->wake(p->wake_ctx);
    pthread_mutex_lock(&p->mu);
}

static void *worker_main(void *argp)
{
    worker_arg *a = argp;
    cs_replay_pool *p = a->pool;
    /* A catch-up can always wait: it takes what the live path and stellar-core leave. */
    cs_thread_role("cs-replay", CS_NICE_BACKGROUND);
    pthread_mutex_lock(&p->mu);
    while (!p->stopping) {
        cs_replay *r = p->q_head;
        if (!r) {
            pthread_cond_wait(&p->cond, &p->mu);
            continue;
        }
        /* The queue's reference becomes this worker's. */
        p->q_head = r->next_job;
        if (!p->q_head)
            p->q_tail = NULL;
        r->queued = false;
        if (!r->ledger && !r->opening && !r->released && r->status == CS_REPLAY_PENDING) {
            open_locked(p, r);
            if (r->status != CS_REPLAY_PENDING)
                notify(p);
        }
        if (can_claim_locked(r)) {
            size_t k = r->claimed++;
            /* Let another worker take the next item of the same ledger meanwhile. */
            if (!r->queued && can_claim_locked(r))
                enqueue_locked(p, r);
            pthread_mutex_unlock(&p->mu);
            cs_msg *m = produce(r, k, a->cctx, p->chunk_size);
            pthread_mutex_lock(&p->mu);
            if (!m) {
                r->status = CS_REPLAY_FAILED;
                cs_err_set(&r->err, 0, "replay ledger %u: out of memory", r->seq);
            }
            r->slot[k % CS_REPLAY_DEPTH] = m;
            notify(p);
        }
        unref_locked(p, r);
    }
    pthread_mutex_unlock(&p->mu);
    ZSTD_freeCCtx(a->cctx);
    free(a);
    return NULL;
}

cs_replay_pool *cs_replay_pool_new(int workers, cs_ring *ring, bool compress, int level, size_t chunk_size,
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
            a->cctx = compress ? cs_chunk_cctx_new(chunk_size, level) : NULL;
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
    /* Jobs still queued hold a reference each. */
    pthread_mutex_lock(&p->mu);
    while (p->q_head) {
        cs_replay *r = p->q_head;
        p->q_head = r->next_job;
        r->queued = false;
        unref_locked(p, r);
    }
    pthread_mutex_unlock(&p->mu);
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
        enqueue_locked(p, r);
    pthread_mutex_unlock(&p->mu);
    return r;
}

int cs_replay_next(cs_replay *r, cs_msg **out, cs_err *err)
{
    cs_replay_pool *p = r->pool;
    int rc;
    pthread_mutex_lock(&p->mu);
    size_t k = r->handed_out;
    if (r->status != CS_REPLAY_PENDING) {
        if (err)
            *err = r->err;
        rc = r->status;
    } else if (r->ledger && k == r->nitems) {
        rc = CS_REPLAY_DONE;
    } else if (k < r->claimed && r->slot[k % CS_REPLAY_DEPTH]) {
        *out = r->slot[k % CS_REPLAY_DEPTH];
        r->slot[k % CS_REPLAY_DEPTH] = NULL;
        r->handed_out++;
        rc = CS_REPLAY_MSG;
    } else {
        rc = CS_REPLAY_PENDING;
    }
    /* A consumed slot lets the next item be prepared. */
    if (!r->queued && !p->stopping && needs_work_locked(r))
        enqueue_locked(p, r);
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
    unref_locked(p, r);
    pthread_mutex_unlock(&p->mu);
}
