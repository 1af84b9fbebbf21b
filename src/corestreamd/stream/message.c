/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/stream/message.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

struct cs_msg_pool {
    pthread_mutex_t mu;
    size_t cap, keep;
    size_t align_at; /* SIZE_MAX: plain messages; else data + align_at is CS_MSG_ALIGN-aligned */
    cs_msg **idle; /* a stack of `keep` slots */
    size_t nidle;
    /* One reference for the owner, one for every message out of the pool. */
    size_t refs;
};

static cs_msg *msg_alloc(size_t cap, cs_msg_pool *pool)
{
    cs_msg *m;
    uint8_t *data;
    if (pool && pool->align_at != SIZE_MAX) {
        /* The struct at the start of an aligned block, data placed so that data + align_at starts
         * the block's second CS_MSG_ALIGN page; the headroom fits in between. */
        void *blk;
        if (posix_memalign(&blk, CS_MSG_ALIGN, CS_MSG_ALIGN - pool->align_at + cap) != 0)
            return NULL;
        m = blk;
        data = (uint8_t *)blk + CS_MSG_ALIGN - pool->align_at;
    } else {
        if (!(m = malloc(sizeof *m + CS_MSG_HEADROOM + cap)))
            return NULL;
        data = m->buf + CS_MSG_HEADROOM;
    }
    m->pool = pool;
    m->cap = cap;
    m->published_ns = 0;
    m->data = data;
    return m;
}

static cs_msg *msg_reset(cs_msg *m)
{
    atomic_init(&m->refs, 1);
    atomic_init(&m->ws_header, 0);
    m->len = 0;
    m->origin = 0;
    return m;
}

static size_t ws_header_len(const cs_msg *m)
{
    return m->len < 126 ? 2 : m->len <= 0xffff ? 4 : 10;
}

static void ws_header_write(cs_msg *m, size_t hl)
{
    uint8_t *h = m->data - hl;
    h[0] = 0x82; /* FIN, binary */
    if (hl == 2) {
        h[1] = (uint8_t)m->len;
    } else if (hl == 4) {
        h[1] = 126;
        h[2] = (uint8_t)(m->len >> 8);
        h[3] = (uint8_t)m->len;
    } else {
        h[1] = 127;
        for (int i = 0; i < 8; i++)
            h[2 + i] = (uint8_t)((uint64_t)m->len >> (56 - 8 * i));
    }
}

void cs_msg_ws_seal(cs_msg *m)
{
    if (atomic_load_explicit(&m->ws_header, memory_order_relaxed) == 2)
        return;
    ws_header_write(m, ws_header_len(m));
    /* Relaxed: the message is not shared yet; whatever shares it (the broadcaster's lock or
     * release stores) publishes these bytes with it. */
    atomic_store_explicit(&m->ws_header, 2, memory_order_relaxed);
}

size_t cs_msg_ws_header(cs_msg *m)
{
    size_t hl = ws_header_len(m);
    unsigned st = atomic_load_explicit(&m->ws_header, memory_order_acquire);
    if (st == 2)
        return hl;
    unsigned zero = 0;
    if (st == 0 && atomic_compare_exchange_strong_explicit(&m->ws_header, &zero, 1, memory_order_acq_rel,
                                                           memory_order_acquire)) {
        ws_header_write(m, hl);
        atomic_store_explicit(&m->ws_header, 2, memory_order_release);
        return hl;
    }
    /* A message nobody sealed (built from the ring, or a cursor's own stampless BEGIN or END), asked
     * for by two threads at once: the other is writing ten bytes at most. */
    while (atomic_load_explicit(&m->ws_header, memory_order_acquire) != 2)
        ;
    return hl;
}

cs_msg *cs_msg_new(size_t cap)
{
    cs_msg *m = msg_alloc(cap, NULL);
    return m ? msg_reset(m) : NULL;
}

cs_msg *cs_msg_retain(cs_msg *m)
{
    atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
    return m;
}

static void pool_destroy(cs_msg_pool *p)
{
    for (size_t i = 0; i < p->nidle; i++)
        free(p->idle[i]);
    free(p->idle);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* Called with mu held; true when that was the last reference. */
static bool pool_unref_locked(cs_msg_pool *p)
{
    return --p->refs == 0;
}

static void pool_put(cs_msg_pool *p, cs_msg *m)
{
    pthread_mutex_lock(&p->mu);
    bool owned = p->idle != NULL; /* NULL once the owner let go */
    if (owned && p->nidle < p->keep) {
        p->idle[p->nidle++] = m;
        m = NULL;
    }
    bool last = pool_unref_locked(p);
    pthread_mutex_unlock(&p->mu);
    free(m);
    if (last)
        pool_destroy(p);
}

void cs_msg_release(cs_msg *m)
{
    if (!m || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (m->pool)
        pool_put(m->pool, m);
    else
        free(m);
}

cs_msg_pool *cs_msg_pool_new(size_t cap, size_t keep)
{
    return cs_msg_pool_new_aligned(cap, keep, SIZE_MAX);
}

cs_msg_pool *cs_msg_pool_new_aligned(size_t cap, size_t keep, size_t align_at)
{
    if (align_at != SIZE_MAX && (align_at > CS_MSG_ALIGN_AT_MAX))
        return NULL;
    cs_msg_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->idle = calloc(keep ? keep : 1, sizeof *p->idle);
    if (!p->idle || pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p->idle);
        free(p);
        return NULL;
    }
    p->cap = cap;
    p->keep = keep;
    p->align_at = align_at;
    p->refs = 1;
    return p;
}

cs_msg *cs_msg_pool_get(cs_msg_pool *p)
{
    pthread_mutex_lock(&p->mu);
    cs_msg *m = p->nidle ? p->idle[--p->nidle] : NULL;
    p->refs++; /* the message's, reused or new */
    pthread_mutex_unlock(&p->mu);
    if (!m && !(m = msg_alloc(p->cap, p))) {
        pthread_mutex_lock(&p->mu);
        pool_unref_locked(p); /* the owner still holds one: never the last */
        pthread_mutex_unlock(&p->mu);
        return NULL;
    }
    return msg_reset(m);
}

size_t cs_msg_pool_idle(cs_msg_pool *p)
{
    pthread_mutex_lock(&p->mu);
    size_t n = p->nidle;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void cs_msg_pool_free(cs_msg_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    cs_msg **idle = p->idle;
    size_t nidle = p->nidle;
    p->idle = NULL; /* later releases free their memory */
    p->nidle = 0;
    bool last = pool_unref_locked(p);
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; i < nidle; i++)
        free(idle[i]);
    free(idle);
    if (last)
        pool_destroy(p);
}
