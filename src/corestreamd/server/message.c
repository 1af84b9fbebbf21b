#include "corestreamd/server/message.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

struct cs_msg_pool {
    pthread_mutex_t mu;
    size_t cap, keep;
    cs_msg **idle; /* a stack of `keep` slots */
    size_t nidle;
    /* One reference for the owner, one for every message out of the pool. */
    size_t refs;
};

static cs_msg *msg_alloc(size_t cap, cs_msg_pool *pool)
{
    cs_msg *m = malloc(sizeof *m + CS_MSG_HEADROOM + cap);
    if (!m)
        return NULL;
    m->pool = pool;
    m->cap = cap;
    m->published_ns = 0;
    m->data = m->buf + CS_MSG_HEADROOM;
    return m;
}

static cs_msg *msg_reset(cs_msg *m)
{
    atomic_init(&m->refs, 1);
    m->len = 0;
    m->origin = 0;
    return m;
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
