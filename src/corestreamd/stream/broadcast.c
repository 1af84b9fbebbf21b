/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/stream/broadcast.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct cs_broadcaster {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    /* Written under mu; read without it by cs_broadcast_peek, which compares the pointer only. */
    _Atomic(cs_flow *) flow;
    uint64_t gen;
    atomic_bool ended; /* likewise */
    bool failed;
    void (*wake)(void *);
    void *wake_ctx;
    int waiters; /* test hook: threads inside cs_broadcast_wait, under mu */
};

cs_flow *cs_flow_retain(cs_flow *f)
{
    atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
    return f;
}

void cs_flow_release(cs_flow *f)
{
    if (!f || atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < f->nchunks; i++)
        cs_msg_release(cs_flow_chunk(f, i));
    for (size_t s = 0; s < CS_FLOW_MAX_SEGS && f->segs[s]; s++)
        free(f->segs[s]);
    cs_msg_release(f->begin);
    cs_msg_release(f->end);
    cs_msg_release(f->sig);
    free(f);
}

cs_msg *cs_flow_chunk(const cs_flow *f, size_t i)
{
    return f->segs[i >> CS_FLOW_SEG_SHIFT][i & (CS_FLOW_SEG_LEN - 1)];
}

void cs_snap_release(cs_snap *s)
{
    cs_flow_release(s->flow);
    s->flow = NULL;
    s->end = NULL;
}

cs_broadcaster *cs_broadcaster_new(void (*wake)(void *), void *wake_ctx)
{
    cs_broadcaster *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    pthread_mutex_init(&b->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&b->cond, &ca);
    pthread_condattr_destroy(&ca);
    b->wake = wake;
    b->wake_ctx = wake_ctx;
    return b;
}

void cs_broadcaster_free(cs_broadcaster *b)
{
    if (!b)
        return;
    cs_flow_release(b->flow);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cond);
    free(b);
}

/* Called with the lock held after a state change; the wake hook runs after unlocking. */
static void bump_and_unlock(cs_broadcaster *b)
{
    b->gen++;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->mu);
    if (b->wake)
        b->wake(b->wake_ctx);
}

static int guard_fail(cs_broadcaster *b, cs_msg *m, cs_err *err, const char *msg)
{
    pthread_mutex_unlock(&b->mu);
    cs_msg_release(m);
    return cs_err_set(err, 0, "%s", msg);
}

int cs_broadcast_begin(cs_broadcaster *b, uint32_t seq, cs_msg *begin, cs_err *err)
{
    cs_flow *f = calloc(1, sizeof *f);
    if (!f) {
        cs_msg_release(begin);
        return cs_err_set(err, 0, "server: out of memory beginning ledger %u", seq);
    }
    atomic_init(&f->refs, 1);
    f->seq = seq;
    f->begin = begin;
    cs_msg_ws_seal(begin);

    pthread_mutex_lock(&b->mu);
    if (b->ended || (b->flow && !b->flow->end)) {
        const char *msg = b->ended ? "server: ledger begun after the stream was finished"
                                   : "server: ledger begun while the previous flow is still open";
        f->begin = NULL;
        free(f);
        return guard_fail(b, begin, err, msg);
    }
    cs_flow *old = b->flow;
    b->flow = f;
    bump_and_unlock(b);
    cs_flow_release(old);
    return 0;
}

int cs_broadcast_rebegin(cs_broadcaster *b, uint32_t seq, cs_msg *begin, cs_err *err)
{
    cs_flow *f = calloc(1, sizeof *f);
    if (!f) {
        cs_msg_release(begin);
        return cs_err_set(err, 0, "server: out of memory beginning ledger %u again", seq);
    }
    atomic_init(&f->refs, 1);
    f->seq = seq;
    f->begin = begin;
    cs_msg_ws_seal(begin);
    pthread_mutex_lock(&b->mu);
    if (b->ended || !b->flow || b->flow->end || b->flow->seq != seq) {
        f->begin = NULL;
        free(f);
        return guard_fail(b, begin, err, "server: ledger begun again without an open flow of it");
    }
    cs_flow *old = b->flow;
    b->flow = f;
    bump_and_unlock(b);
    cs_flow_release(old);
    return 0;
}

int cs_broadcast_chunk(cs_broadcaster *b, cs_msg *chunk, cs_err *err)
{
    cs_msg_ws_seal(chunk);
    pthread_mutex_lock(&b->mu);
    cs_flow *f = b->flow;
    if (!f || f->end || b->ended)
        return guard_fail(b, chunk, err, "server: chunk published outside an open flow");
    size_t i = f->nchunks, s = i >> CS_FLOW_SEG_SHIFT;
    if (s >= CS_FLOW_MAX_SEGS)
        return guard_fail(b, chunk, err, "server: too many chunks in one flow");
    if (!f->segs[s]) {
        /* Allocating under the lock is rare (once per 256 chunks) and keeps the segment visible
         * to readers exactly when nchunks says so. */
        f->segs[s] = malloc(CS_FLOW_SEG_LEN * sizeof(cs_msg *));
        if (!f->segs[s])
            return guard_fail(b, chunk, err, "server: out of memory publishing a chunk");
    }
    f->segs[s][i & (CS_FLOW_SEG_LEN - 1)] = chunk;
    atomic_store_explicit(&f->nchunks, i + 1, memory_order_release);
    bump_and_unlock(b);
    return 0;
}

int cs_broadcast_end(cs_broadcaster *b, cs_msg *end, cs_msg *sig, cs_err *err)
{
    cs_msg_ws_seal(end);
    if (sig)
        cs_msg_ws_seal(sig);
    pthread_mutex_lock(&b->mu);
    cs_flow *f = b->flow;
    if (!f || f->end || b->ended) {
        cs_msg_release(sig);
        return guard_fail(b, end, err, "server: end published outside an open flow");
    }
    f->sig = sig; /* before end: whoever sees end (under the lock, or with acquire) sees sig */
    atomic_store_explicit(&f->end, end, memory_order_release);
    bump_and_unlock(b);
    return 0;
}

void cs_broadcast_finish(cs_broadcaster *b, bool failed)
{
    pthread_mutex_lock(&b->mu);
    if (b->ended) {
        pthread_mutex_unlock(&b->mu);
        return;
    }
    b->ended = true;
    b->failed = failed;
    bump_and_unlock(b);
}

void cs_broadcast_watch(cs_broadcaster *b, cs_snap *out)
{
    pthread_mutex_lock(&b->mu);
    cs_flow *f = b->flow;
    out->flow = f ? cs_flow_retain(f) : NULL;
    out->seq = f ? f->seq : 0;
    out->nchunks = f ? f->nchunks : 0;
    out->end = f ? f->end : NULL;
    out->gen = b->gen;
    out->ended = b->ended;
    out->failed = b->failed;
    pthread_mutex_unlock(&b->mu);
}

void cs_broadcast_flow_state(cs_broadcaster *b, const cs_flow *f, size_t *nchunks, cs_msg **end)
{
    (void)b;
    /* end first: a flow's END is published after its last chunk, so the count read after it is
     * final whenever end is set. */
    *end = atomic_load_explicit(&f->end, memory_order_acquire);
    *nchunks = atomic_load_explicit(&f->nchunks, memory_order_acquire);
}

bool cs_broadcast_peek(cs_broadcaster *b, const cs_flow *f, size_t *nchunks, cs_msg **end)
{
    if (atomic_load_explicit(&b->flow, memory_order_acquire) != f ||
        atomic_load_explicit(&b->ended, memory_order_acquire))
        return false;
    cs_broadcast_flow_state(b, f, nchunks, end);
    return true;
}

bool cs_broadcast_wait(cs_broadcaster *b, uint64_t gen, int64_t timeout_ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = ts.tv_nsec + timeout_ns % 1000000000;
    ts.tv_sec += timeout_ns / 1000000000 + ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    pthread_mutex_lock(&b->mu);
    b->waiters++;
    while (b->gen == gen) {
        if (pthread_cond_timedwait(&b->cond, &b->mu, &ts) != 0)
            break;
    }
    b->waiters--;
    bool changed = b->gen != gen;
    pthread_mutex_unlock(&b->mu);
    return changed;
}

int cs_broadcast_waiters(cs_broadcaster *b)
{
    pthread_mutex_lock(&b->mu);
    int n = b->waiters;
    pthread_mutex_unlock(&b->mu);
    return n;
}
