/* SPDX-License-Identifier: Apache-2.0 */
/* The ledger hasher (ledgerhash.h). */
#include "corestreamd/stream/ledgerhash.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "common/invariant.h"
#include "common/thread.h"

#define FEEDER "ledger hasher: begin, add, finish and free on the source loop's thread (ledgerhash.h)"
#define DIGEST "ledger hasher: the SHA-256 context only by the thread holding the digest (ledgerhash.h)"

typedef struct piece {
    cs_msg *m;
    const uint8_t *p;
    size_t n;
} piece;

struct cs_hasher {
    cs_owner feeder;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work; /* cs-hash waits: a piece queued while the digest is free, or the stop */
    pthread_cond_t idle; /* the feeder waits: the digest given back */
    /* Under mu. */
    piece q[CS_HASHER_QUEUE];
    size_t head, count;
    bool stop;
    bool hasher_waits;
    bool feeder_waits;
    /* The digest: bound to the thread holding it (taken and given back under mu), unbound when
     * free. sha and failed belong to the holder. */
    cs_owner digest;
    EVP_MD_CTX *sha;
    bool failed;
};

/* ---- the digest, taken and given back under mu ------------------------------------------------ */

static void digest_take(cs_hasher *h)
{
    CS_CHECK(!cs_owner_bound(&h->digest), "ledger hasher: the digest has one holder at a time");
    cs_owner_bind(&h->digest);
}

static void digest_give(cs_hasher *h)
{
    cs_owner_release(&h->digest, DIGEST);
    if (h->feeder_waits)
        pthread_cond_signal(&h->idle);
    if (h->hasher_waits && h->count)
        pthread_cond_signal(&h->work);
}

/* The feeder takes the digest, waiting out the one piece cs-hash may be hashing. Holds mu. */
static void feeder_take(cs_hasher *h)
{
    while (cs_owner_bound(&h->digest)) {
        h->feeder_waits = true;
        pthread_cond_wait(&h->idle, &h->mu);
        h->feeder_waits = false;
    }
    digest_take(h);
}

static piece pop(cs_hasher *h)
{
    CS_CHECK(h->count > 0, "ledger hasher: a piece is taken from a non-empty queue");
    piece pc = h->q[h->head];
    h->head = (h->head + 1) % CS_HASHER_QUEUE;
    h->count--;
    return pc;
}

/* Hashes one piece and drops the hasher's reference to it. The digest's holder, without mu. */
static void hash_piece(cs_hasher *h, piece pc)
{
    CS_CHECK(cs_owner_bound(&h->digest), "ledger hasher: a piece is hashed by the digest's holder");
    CS_OWNED(&h->digest, DIGEST);
    if (EVP_DigestUpdate(h->sha, pc.p, pc.n) != 1)
        h->failed = true;
    cs_msg_release(pc.m);
}

/* ---- cs-hash ---------------------------------------------------------------------------------- */

static void *hasher_main(void *arg)
{
    cs_hasher *h = arg;
    cs_thread_role("cs-hash", CS_NICE_LIVE);
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (!h->stop && (h->count == 0 || cs_owner_bound(&h->digest))) {
            h->hasher_waits = true;
            pthread_cond_wait(&h->work, &h->mu);
            h->hasher_waits = false;
        }
        if (h->stop)
            break;
        digest_take(h);
        piece pc = pop(h);
        pthread_mutex_unlock(&h->mu);
        hash_piece(h, pc);
        pthread_mutex_lock(&h->mu);
        digest_give(h);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* ---- the feeder ------------------------------------------------------------------------------- */

/* Frees what new made, once cs-hash has ended or never started. */
static void destroy(cs_hasher *h)
{
    pthread_cond_destroy(&h->idle);
    pthread_cond_destroy(&h->work);
    pthread_mutex_destroy(&h->mu);
    EVP_MD_CTX_free(h->sha);
    free(h);
}

int cs_hasher_new(cs_hasher **out, cs_err *err)
{
    *out = NULL;
    cs_hasher *h = calloc(1, sizeof *h);
    if (!h || !(h->sha = EVP_MD_CTX_new())) {
        free(h);
        return cs_err_set(err, 0, "ledger hasher: out of memory");
    }
    cs_owner_bind(&h->feeder);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->work, NULL);
    pthread_cond_init(&h->idle, NULL);
    h->failed = EVP_DigestInit_ex(h->sha, EVP_sha256(), NULL) != 1;
    if (pthread_create(&h->thread, NULL, hasher_main, h) != 0) {
        destroy(h);
        return cs_err_set(err, 0, "ledger hasher: cannot start its thread");
    }
    *out = h;
    return 0;
}

/* Drops the queued pieces. Holds mu and the digest, or cs-hash has ended. */
static void drop_queued(cs_hasher *h)
{
    while (h->count)
        cs_msg_release(pop(h).m);
}

void cs_hasher_begin(cs_hasher *h)
{
    CS_OWNED(&h->feeder, FEEDER);
    pthread_mutex_lock(&h->mu);
    feeder_take(h);
    drop_queued(h);
    CS_OWNED(&h->digest, DIGEST);
    h->failed = EVP_DigestInit_ex(h->sha, EVP_sha256(), NULL) != 1;
    digest_give(h);
    pthread_mutex_unlock(&h->mu);
}

/* The queue is full: the feeder hashes the oldest piece itself rather than wait for cs-hash to
 * be scheduled, unless cs-hash made room while the feeder waited for the digest. Holds mu. */
static void make_room(cs_hasher *h)
{
    feeder_take(h);
    if (h->count == CS_HASHER_QUEUE) {
        piece pc = pop(h);
        pthread_mutex_unlock(&h->mu);
        hash_piece(h, pc);
        pthread_mutex_lock(&h->mu);
    }
    digest_give(h);
}

void cs_hasher_add(cs_hasher *h, cs_msg *m, const uint8_t *p, size_t n)
{
    CS_OWNED(&h->feeder, FEEDER);
    pthread_mutex_lock(&h->mu);
    if (h->count == CS_HASHER_QUEUE)
        make_room(h);
    /* Only the feeder queues, and the feeder is here: the full queue has a free slot now. */
    CS_CHECK(h->count < CS_HASHER_QUEUE, "ledger hasher: a piece is queued into a free slot");
    h->q[(h->head + h->count) % CS_HASHER_QUEUE] = (piece){.m = cs_msg_retain(m), .p = p, .n = n};
    h->count++;
    if (h->hasher_waits && !cs_owner_bound(&h->digest))
        pthread_cond_signal(&h->work);
    pthread_mutex_unlock(&h->mu);
}

int cs_hasher_finish(cs_hasher *h, uint8_t out[32], cs_err *err)
{
    CS_OWNED(&h->feeder, FEEDER);
    pthread_mutex_lock(&h->mu);
    feeder_take(h);
    /* Holding the digest, the feeder is the only one to pop: what is left is hashed here. */
    while (h->count) {
        piece pc = pop(h);
        pthread_mutex_unlock(&h->mu);
        hash_piece(h, pc);
        pthread_mutex_lock(&h->mu);
    }
    pthread_mutex_unlock(&h->mu);
    CS_OWNED(&h->digest, DIGEST);
    unsigned int dn = 0;
    bool failed = h->failed || EVP_DigestFinal_ex(h->sha, out, &dn) != 1 || dn != 32;
    pthread_mutex_lock(&h->mu);
    digest_give(h);
    pthread_mutex_unlock(&h->mu);
    return failed ? cs_err_set(err, 0, "SHA-256 of the ledger failed") : 0;
}

/* Ends cs-hash after the piece it is on, if any: it looks at stop before it takes another. */
static void stop_thread(cs_hasher *h)
{
    pthread_mutex_lock(&h->mu);
    h->stop = true;
    pthread_cond_signal(&h->work);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->thread, NULL);
}

void cs_hasher_free(cs_hasher *h)
{
    if (!h)
        return;
    CS_OWNED(&h->feeder, FEEDER);
    stop_thread(h);
    drop_queued(h); /* nothing else touches the queue now */
    destroy(h);
}
