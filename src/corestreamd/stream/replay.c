/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/stream/replay.h"

#include <pthread.h>
#include <stdlib.h>
#include <inttypes.h>
#include <string.h>
#include <xxhash.h>

#include "common/thread.h"
#include "corestreamd/stream/compress.h"
#include "wire/wire.h"

/* The small stored-chunk buffers' payload capacity: a 256 KiB chunk of ledger XDR compresses to
 * about 30 KB. */
#define CS_REPLAY_SMALL_CHUNK (64u << 10)

/* One ledger being turned into a stampless flow: item 0 is BEGIN, items 1..n the chunks, item
 * n+1 END. Items are claimed in order but produced by any free worker, so one catch-up
 * subscriber can use the whole pool; at most CS_REPLAY_DEPTH items exist ahead of the cursor. */
struct cs_replay {
    cs_replay_pool *pool;
    unsigned refs; /* the cursor's, one while queued, one per worker producing */
    uint32_t seq;
    int wake_arg;
    bool queued;
    bool released; /* the cursor let go: stop producing */
    bool opening;  /* a worker is mapping the ledger */
    int status;    /* CS_REPLAY_PENDING until a terminal error */
    cs_err err;
    /* The item that failed: the items before it are still handed out first, so the error comes in
     * their place of the flow whatever the workers' timing (an END that fails is never sent, the
     * chunks before it are). 0 for a failure before any item (the open). */
    size_t fail_at;
    /* What the open found, copied so that the replay needs no descriptor to know it: the
     * record and, with stored frames, their index and the frames file's tail (hashed last). */
    bool opened;
    cs_ledger_record rec;
    cs_frame *frames; /* rec.chunks entries, stored replays only */
    uint8_t *tail;
    size_t tail_len;
    /* The open ledger (its .xdr and its segment's frames descriptors), touched only by the worker reading
     * (reading, or opening). A held replay keeps it from the open until its last chunk is read;
     * a per-read one gets it from the ring for each read and lets it go right after, so a
     * subscriber that stops reading holds no descriptor of it (replay.h). */
    cs_ledger_ref *file;
    bool hold;
    size_t chunk_size; /* the recorded live chunking, else the pool's */
    /* The file is read and hashed in order, one chunk at a time (reading: a worker is at it), so
     * the END is only sent when the bytes sent hash to the recorded checksum. */
    XXH64_state_t *hash;
    /* Stored frames (ledger->frames_fd >= 0): the chunks are sent as published, and what is read
     * is hashed (XXH3) against the record's frames_xxh3 instead. */
    bool stored;
    XXH3_state_t *fhash, *rawhash;
    bool reading;
    size_t nitems;
    size_t claimed;
    size_t handed_out;
    size_t window; /* payload bytes of the items claimed and not yet handed out */
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
    /* Stored chunk messages: most zstd chunks fit the small ones; raw chunks (and zstd ones that
     * barely shrank) take the chunk-sized ones. Two sizes keep the idle buffers' memory near
     * what the chunks use. */
    cs_msg_pool *small, *msgs;
    void (*wake)(void *, int);
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

/* Item k's payload bytes as the window counts them: a stored chunk's recorded length, a chunk to
 * encode its raw length (its upper bound), BEGIN and END nothing. */
static size_t item_bytes(const cs_replay *r, size_t k)
{
    if (k == 0 || k >= r->nitems - 1)
        return 0;
    if (r->stored)
        return r->frames[k - 1].len;
    uint64_t off = (uint64_t)(k - 1) * r->chunk_size, left = r->rec.len - off;
    return left < r->chunk_size ? (size_t)left : r->chunk_size;
}

static bool can_claim_locked(const cs_replay *r)
{
    return r->opened && !r->released && !r->reading && r->status == CS_REPLAY_PENDING &&
           r->claimed < r->nitems && r->claimed < r->handed_out + CS_REPLAY_DEPTH &&
           (r->claimed == r->handed_out || r->window + item_bytes(r, r->claimed) <= CS_REPLAY_WINDOW_BYTES);
}

/* Takes the next item into the window; returns its index. */
static size_t claim_locked(cs_replay *r)
{
    r->window += item_bytes(r, r->claimed);
    return r->claimed++;
}

/* Whether a worker should look at r: to open it, or to produce its next items. Not for one free
 * slot: a worker woken per message costs the replay a futex, a context switch and (for the I/O
 * thread) a wake-up each, more than the pread itself, so the window refills in batches once half
 * of it was handed out. */
static bool needs_work_locked(const cs_replay *r)
{
    if (r->released || r->status != CS_REPLAY_PENDING)
        return false;
    if (!r->opened)
        return !r->opening;
    return can_claim_locked(r) && r->claimed - r->handed_out <= CS_REPLAY_DEPTH / 2 &&
           r->window <= CS_REPLAY_WINDOW_BYTES / 2;
}

static void replay_free(cs_replay *r)
{
    for (size_t k = r->handed_out; k < r->claimed; k++)
        if (r->slot[k % CS_REPLAY_DEPTH])
            cs_msg_release(r->slot[k % CS_REPLAY_DEPTH]);
    cs_ledger_ref_release(r->file);
    free(r->frames);
    free(r->tail);
    XXH64_freeState(r->hash);
    XXH3_freeState(r->fhash);
    XXH3_freeState(r->rawhash);
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

static int open_failed(cs_replay_pool *p, cs_replay *r, cs_err *err);

/* The ledger's descriptors for the read about to happen: the ones held, else the ring's ledger
 * again, if it is still the one this replay began (same length and checksum; for stored frames,
 * the same frames). A ledger gone from the ring meanwhile, or replaced by another run's, ends the
 * replay CS_REPLAY_NOT_RETAINED (the subscriber is too far behind); frames dropped meanwhile end a
 * stored one CS_REPLAY_FAILED. 0, or -1 with *status and err set. Reading worker only. */
static int file_acquire(cs_replay_pool *p, cs_replay *r, int *status, cs_err *err)
{
    if (r->file)
        return 0;
    cs_ledger_ref *f;
    if (cs_ring_get(p->ring, r->seq, &f, err) != 0) {
        *status = open_failed(p, r, err);
        return -1;
    }
    bool same = f->rec.len == r->rec.len && f->rec.xxh64 == r->rec.xxh64;
    bool frames = !r->stored || (f->frames_fd >= 0 && f->rec.frames_xxh3 == r->rec.frames_xxh3);
    if (!same || !frames) {
        cs_ledger_ref_release(f);
        *status = same ? CS_REPLAY_FAILED : CS_REPLAY_NOT_RETAINED;
        if (same)
            return cs_err_set(err, CS_RING_ERR_IO, "replay ledger %u: its stored frames were dropped while it was replayed",
                              r->seq);
        return cs_err_set(err, CS_RING_ERR_NOT_RETAINED,
                          "store: ledger not retained: ledger %u was replaced while it was replayed", r->seq);
    }
    r->file = f;
    return 0;
}

/* After a read: a per-read replay lets the ledger go at once; a held one when no chunk is left
 * to read (more false), so a finished replay never holds it while its END waits. */
static void file_done(cs_replay *r, bool more)
{
    if (r->file && (!r->hold || !more)) {
        cs_ledger_ref_release(r->file);
        r->file = NULL;
    }
}

/* Reads chunk k-1 into a fresh buffer and hashes it; only one worker reads a replay at a time, in
 * order (r->reading), so the hash sees the bytes in ledger order. Returns the buffer (malloc'd)
 * and its length, or NULL with *status and err set. */
static uint8_t *read_chunk(cs_replay_pool *p, cs_replay *r, size_t k, size_t *n, int *status, cs_err *err)
{
    uint64_t off = (uint64_t)(k - 1) * r->chunk_size;
    *n = item_bytes(r, k);
    uint8_t *buf = malloc(*n ? *n : 1);
    if (!buf) {
        *status = CS_REPLAY_FAILED;
        cs_err_set(err, 0, "replay ledger %u: out of memory", r->seq);
        return NULL;
    }
    if (file_acquire(p, r, status, err) != 0) {
        free(buf);
        return NULL;
    }
    int rc = cs_ledger_read(r->file, off, buf, *n, err);
    file_done(r, rc == 0 && k < r->nitems - 2);
    if (rc != 0) {
        *status = err->kind == CS_RING_ERR_CORRUPT ? CS_REPLAY_CORRUPT : CS_REPLAY_FAILED;
        free(buf);
        return NULL;
    }
    XXH64_update(r->hash, buf, *n);
    return buf;
}

/* Reads stored chunk k-1 into a CHUNK message as it was published, checks it against its index
 * entry's hash and hashes its payload; in order, like read_chunk. NULL with *status and err set on
 * failure (CS_REPLAY_CORRUPT for a chunk whose bytes changed); *frames_fault tells whether the
 * frames file (not the ledger) is at fault. */
static cs_msg *read_stored(cs_replay_pool *p, cs_replay *r, size_t k, int *status, bool *frames_fault, cs_err *err)
{
    const cs_frame *f = &r->frames[k - 1];
    size_t need = CS_WIRE_CHUNK_HEADER_LEN + f->len;
    cs_msg *m = need <= CS_WIRE_CHUNK_HEADER_LEN + CS_REPLAY_SMALL_CHUNK ? cs_msg_pool_get(p->small)
                : need <= CS_WIRE_CHUNK_HEADER_LEN + p->chunk_size ? cs_msg_pool_get(p->msgs)
                                                                   : cs_msg_new(need);
    if (!m) {
        *status = CS_REPLAY_FAILED;
        cs_err_set(err, 0, "replay ledger %u: out of memory", r->seq);
        return NULL;
    }
    if (cs_frame_read(r->file, (uint32_t)(k - 1), m->data + CS_WIRE_CHUNK_HEADER_LEN, err) != 0) {
        *status = err->kind == CS_RING_ERR_CORRUPT ? CS_REPLAY_CORRUPT : CS_REPLAY_FAILED;
        *frames_fault = f->codec != 0;
        cs_msg_release(m);
        return NULL;
    }
    /* Checked against its index entry before it can be handed out: a changed byte never leaves. */
    const uint8_t *payload = m->data + CS_WIRE_CHUNK_HEADER_LEN;
    uint64_t got = XXH3_64bits(payload, f->len);
    if (got != f->xxh3) {
        *status = CS_REPLAY_CORRUPT;
        *frames_fault = f->codec != 0;
        if (f->codec != 0)
            cs_err_set(err, CS_RING_ERR_CORRUPT,
                       "frames-%u.seg changed on disk: ledger %u's chunk %zu hashes to %016" PRIx64
                       ", the frames index says %016" PRIx64,
                       r->seq - r->seq % CS_RING_SEG_LEDGERS, r->seq, k - 1, got, f->xxh3);
        else
            cs_err_set(err, CS_RING_ERR_CORRUPT,
                       "ledger-%u.xdr changed on disk: chunk %zu hashes to %016" PRIx64 ", the frames index says %016" PRIx64,
                       r->seq, k - 1, got, f->xxh3);
        cs_msg_release(m);
        return NULL;
    }
    cs_wire_put_chunk_header(m->data, r->seq, (uint32_t)(k - 1), f->codec);
    m->len = need;
    m->origin = CS_MSG_STORED;
    XXH3_64bits_update(f->codec == 0 ? r->rawhash : r->fhash, payload, f->len);
    return m;
}

/* Builds the END once every chunk was read: the recorded checksum, and only if the bytes read
 * hash to it (the stored frames' own hash for a stored replay). */
static cs_msg *produce_end(cs_replay *r, int *status, bool *frames_fault, cs_err *err)
{
    const cs_ledger_record *rec = &r->rec;
    if (r->stored) {
        XXH3_64bits_update(r->fhash, r->tail, r->tail_len);
        uint64_t got = XXH3_64bits_digest(r->fhash), raw = XXH3_64bits_digest(r->rawhash);
        /* The ledger's own bytes first: if they changed, the ledger goes, whatever the frames. */
        if (raw != rec->raw_xxh3) {
            *status = CS_REPLAY_CORRUPT;
            *frames_fault = false;
            cs_err_set(err, CS_RING_ERR_CORRUPT,
                       "ledger-%u.xdr changed on disk: its bytes hash to %016" PRIx64 ", its record says %016" PRIx64
                       " (XXH3 of its raw chunks)",
                       r->seq, raw, rec->raw_xxh3);
            return NULL;
        }
        if (got != rec->frames_xxh3) {
            *status = CS_REPLAY_CORRUPT;
            *frames_fault = true;
            cs_err_set(err, CS_RING_ERR_CORRUPT,
                       "frames-%u.seg changed on disk: ledger %u's frames hash to %016" PRIx64
                       ", its record says %016" PRIx64,
                       r->seq - r->seq % CS_RING_SEG_LEDGERS, r->seq, got, rec->frames_xxh3);
            return NULL;
        }
        cs_msg *m = cs_msg_new(CS_WIRE_END_LEN);
        if (m)
            m->len = cs_wire_put_end(m->data, r->seq, rec->chunks, rec->len, 0, rec->xxh64);
        return m;
    }
    uint64_t sum = XXH64_digest(r->hash), want = rec->xxh64;
    if (sum != want) {
        *status = CS_REPLAY_CORRUPT;
        cs_err_set(err, CS_RING_ERR_CORRUPT,
                   "ledger-%u.xdr changed on disk: its bytes hash to %016" PRIx64 ", its record says %016" PRIx64,
                   r->seq, sum, want);
        return NULL;
    }
    cs_msg *m = cs_msg_new(CS_WIRE_END_LEN);
    if (m)
        m->len = cs_wire_put_end(m->data, r->seq, (uint32_t)(r->nitems - 2), rec->len, 0, want);
    return m;
}

/* NULL when out of memory (the caller says so, as for every item). */
static cs_msg *produce_begin(const cs_replay *r)
{
    cs_msg *m = cs_msg_new(CS_WIRE_BEGIN_LEN);
    if (m)
        m->len = cs_wire_put_begin(m->data, r->seq, 0);
    return m;
}

/* Item k of a stored replay: BEGIN, a stored chunk or END. */
static cs_msg *produce_stored(cs_replay_pool *p, cs_replay *r, size_t k, int *status, bool *frames_fault, cs_err *err)
{
    if (k == 0)
        return produce_begin(r);
    if (k == r->nitems - 1)
        return produce_end(r, status, frames_fault, err);
    return read_stored(p, r, k, status, frames_fault, err);
}

/* What a failed open means for the subscriber: out of the bounds, in a hole (a suspect ledger is
 * judged first: proven bad, it is a hole now), or a failure to retry. */
static int open_failed(cs_replay_pool *p, cs_replay *r, cs_err *err)
{
    if (err->kind == CS_RING_ERR_CORRUPT)
        cs_ring_condemn(p->ring, r->seq, err->msg);
    if (err->kind == CS_RING_ERR_NOT_RETAINED)
        return CS_REPLAY_NOT_RETAINED;
    uint32_t first, last;
    if (cs_ring_hole(p->ring, r->seq, &first, &last)) {
        cs_err_set(err, CS_RING_ERR_HOLE, "store: ledger %u is missing from the ring (ledgers %u to %u)", r->seq,
                   first, last);
        return CS_REPLAY_HOLE;
    }
    uint32_t oldest, latest;
    if (!cs_ring_bounds(p->ring, &oldest, &latest) || r->seq < oldest || r->seq > latest)
        return CS_REPLAY_NOT_RETAINED;
    return CS_REPLAY_FAILED;
}

/* A replay read something that differs from the record. Frames at fault cost the frames; bytes of
 * the ledger (or a raw chunk's hash in the frames index) are judged by the ring: a ledger that
 * hashes to its record stays, and its frames, whose index was wrong, are made again. */
static void replay_corrupt(cs_replay_pool *p, const cs_replay *r, bool frames_fault, const char *problem)
{
    if (frames_fault) {
        cs_ring_drop_frames(p->ring, r->seq, r->rec.frames_xxh3, problem);
        return;
    }
    if (cs_ring_condemn(p->ring, r->seq, problem) == CS_RING_VERDICT_GOOD && r->stored)
        cs_ring_drop_frames(p->ring, r->seq, r->rec.frames_xxh3, problem);
}

/* Takes in the ledger just opened: its hashes, what the replay must know of it (copied, so no
 * descriptor is needed for it later), its chunking, and the ledger itself, which a per-read
 * replay lets go of at once. 0, or -1 when out of memory (the ledger then let go too). Opening
 * worker, before opened is set: nobody else looks at these fields yet. */
static int take_ledger(cs_replay_pool *p, cs_replay *r, cs_ledger_ref *l)
{
    r->file = l;
    r->rec = l->rec;
    r->stored = l->frames_fd >= 0;
    r->chunk_size = l->rec.chunk_size ? l->rec.chunk_size : p->chunk_size;
    r->nitems = (size_t)((l->rec.len + r->chunk_size - 1) / r->chunk_size) + 2;
    bool ok = (r->hash = XXH64_createState()) != NULL;
    if (ok && r->stored) {
        r->fhash = XXH3_createState();
        r->rawhash = XXH3_createState();
        r->frames = malloc((l->rec.chunks ? l->rec.chunks : 1) * sizeof *r->frames);
        r->tail = malloc(l->frames_tail_len ? l->frames_tail_len : 1);
        ok = r->fhash && r->rawhash && r->frames && r->tail;
    }
    if (!ok) {
        file_done(r, false);
        return -1;
    }
    XXH64_reset(r->hash, 0);
    if (r->stored) {
        XXH3_64bits_reset(r->fhash);
        XXH3_64bits_reset(r->rawhash);
        memcpy(r->frames, l->frames, l->rec.chunks * sizeof *r->frames);
        memcpy(r->tail, l->frames_tail, l->frames_tail_len);
        r->tail_len = l->frames_tail_len;
    }
    file_done(r, r->nitems > 2);
    return 0;
}

/* Opens the ledger (checked against its record by the ring). Called and returns with the lock
 * held. */
static void open_locked(cs_replay_pool *p, cs_replay *r)
{
    r->opening = true;
    pthread_mutex_unlock(&p->mu);
    cs_ledger_ref *ledger = NULL;
    cs_err err;
    int status = CS_REPLAY_PENDING;
    if (cs_ring_get(p->ring, r->seq, &ledger, &err) != 0) {
        status = open_failed(p, r, &err);
    } else {
        if (ledger->frames_problem[0]) /* found by the open: those frames are made again */
            cs_ring_drop_frames(p->ring, r->seq, ledger->frames_claimed_xxh3, ledger->frames_problem);
        if (take_ledger(p, r, ledger) != 0) {
            status = CS_REPLAY_FAILED;
            cs_err_set(&err, 0, "replay ledger %u: out of memory", r->seq);
        }
    }
    pthread_mutex_lock(&p->mu);
    r->opening = false;
    if (status != CS_REPLAY_PENDING) {
        r->status = status;
        r->err = err;
        return;
    }
    r->opened = true;
}

static void notify(cs_replay_pool *p, const cs_replay *r)
{
    int arg = r->wake_arg;
    pthread_mutex_unlock(&p->mu);
    if (p->wake)
        p->wake(p->wake_ctx, arg);
    pthread_mutex_lock(&p->mu);
}

static void *worker_main(void *argp)
{
    worker_arg *a = argp;
    cs_replay_pool *p = a->pool;
    /* A catch-up can always wait: it takes what the live path and stellar-core leave. */
    cs_thread_role("cs-replay", cs_thread_background_nice());
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
        if (!r->opened && !r->opening && !r->released && r->status == CS_REPLAY_PENDING) {
            open_locked(p, r);
            if (r->status != CS_REPLAY_PENDING)
                notify(p, r);
        }
        if (can_claim_locked(r)) {
            size_t k = claim_locked(r), n = 1;
            bool chunk = k > 0 && k < r->nitems - 1;
            /* A stored replay is only read: this worker takes every free slot, BEGIN and END
             * included (in order, so the hashes still see the bytes in ledger order and END comes
             * after the last chunk's read), and wakes the I/O thread once for all. */
            bool batch = r->stored;
            if (batch)
                for (; n < CS_REPLAY_DEPTH && can_claim_locked(r); n++)
                    claim_locked(r);
            r->reading = chunk || batch;
            /* Let another worker take the next item of the same ledger meanwhile. */
            if (!r->queued && needs_work_locked(r))
                enqueue_locked(p, r);
            pthread_mutex_unlock(&p->mu);
            int status = CS_REPLAY_PENDING;
            bool frames_fault = false;
            cs_err err = {0};
            cs_msg *m[CS_REPLAY_DEPTH] = {0};
            size_t made = 0;
            if (batch) {
                /* No compression: the read is the whole job, done in order. BEGIN and END read
                 * nothing, so a batch of them alone needs no descriptor. */
                bool reads = k + n > 1 && k < r->nitems - 1;
                if (!reads || file_acquire(p, r, &status, &err) == 0)
                    while (made < n && (m[made] = produce_stored(p, r, k + made, &status, &frames_fault, &err)))
                        made++;
                if (reads)
                    file_done(r, made == n && k + n < r->nitems - 1);
                pthread_mutex_lock(&p->mu);
                r->reading = false;
                if (!r->queued && needs_work_locked(r))
                    enqueue_locked(p, r);
                pthread_mutex_unlock(&p->mu);
            } else if (k == 0) {
                m[0] = produce_begin(r);
            } else if (chunk) {
                size_t len;
                uint8_t *raw = read_chunk(p, r, k, &len, &status, &err);
                pthread_mutex_lock(&p->mu);
                r->reading = false; /* the next chunk may be read while this one is compressed */
                if (!r->queued && needs_work_locked(r))
                    enqueue_locked(p, r);
                pthread_mutex_unlock(&p->mu);
                if (raw && (m[0] = cs_encode_chunk(a->cctx, r->seq, (uint32_t)(k - 1), raw, len)))
                    m[0]->origin = CS_MSG_ENCODED;
                free(raw);
            } else {
                m[0] = produce_end(r, &status, &frames_fault, &err);
            }
            if (!batch)
                made = m[0] != NULL;
            if (status == CS_REPLAY_CORRUPT)
                replay_corrupt(p, r, frames_fault, err.msg);
            pthread_mutex_lock(&p->mu);
            if (status == CS_REPLAY_PENDING && made < n) {
                status = CS_REPLAY_FAILED;
                cs_err_set(&err, 0, "replay ledger %u: out of memory", r->seq);
            }
            /* The earliest failure wins: a worker still producing an earlier item may fail too. */
            if (status != CS_REPLAY_PENDING && (r->status == CS_REPLAY_PENDING || k + made < r->fail_at)) {
                r->status = status;
                r->err = err;
                r->fail_at = k + made;
            }
            for (size_t i = 0; i < made; i++)
                r->slot[(k + i) % CS_REPLAY_DEPTH] = m[i];
            notify(p, r);
        }
        unref_locked(p, r);
    }
    pthread_mutex_unlock(&p->mu);
    ZSTD_freeCCtx(a->cctx);
    free(a);
    return NULL;
}

cs_replay_pool *cs_replay_pool_new(int workers, cs_ring *ring, bool compress, int level, size_t chunk_size,
                                   void (*wake)(void *, int), void *wake_ctx, cs_err *err)
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
    /* Catch-up reuses its message memory instead of faulting in fresh pages per chunk: as many
     * idle buffers as two windows per worker hold. */
    p->small = cs_msg_pool_new(CS_WIRE_CHUNK_HEADER_LEN + CS_REPLAY_SMALL_CHUNK, 2 * CS_REPLAY_DEPTH * (size_t)workers);
    size_t big = chunk_size && chunk_size < CS_REPLAY_WINDOW_BYTES ? CS_REPLAY_WINDOW_BYTES / chunk_size : 1;
    p->msgs = cs_msg_pool_new(CS_WIRE_CHUNK_HEADER_LEN + chunk_size, 2 * big * (size_t)workers);
    p->wake = wake;
    p->wake_ctx = wake_ctx;
    p->threads = calloc((size_t)workers, sizeof *p->threads);
    if (!p->threads || !p->msgs || !p->small) {
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
    cs_msg_pool_free(p->small); /* messages still held by cursors free themselves later */
    cs_msg_pool_free(p->msgs);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cond);
    free(p);
}

cs_replay *cs_replay_start(cs_replay_pool *p, uint32_t seq, int wake_arg, bool hold)
{
    cs_replay *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->pool = p;
    r->refs = 1;
    r->seq = seq;
    r->wake_arg = wake_arg;
    r->hold = hold;
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
    if (r->status != CS_REPLAY_PENDING && k >= r->fail_at) {
        if (err)
            *err = r->err;
        rc = r->status;
    } else if (r->opened && k == r->nitems) {
        rc = CS_REPLAY_DONE;
    } else if (k < r->claimed && r->slot[k % CS_REPLAY_DEPTH]) {
        *out = r->slot[k % CS_REPLAY_DEPTH];
        r->slot[k % CS_REPLAY_DEPTH] = NULL;
        r->window -= item_bytes(r, k);
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

size_t cs_replay_ahead(cs_replay *r, size_t *bytes)
{
    cs_replay_pool *p = r->pool;
    size_t n = 0, b = 0;
    pthread_mutex_lock(&p->mu);
    for (size_t k = r->handed_out; k < r->claimed; k++)
        if (r->slot[k % CS_REPLAY_DEPTH]) {
            n++;
            b += item_bytes(r, k);
        }
    pthread_mutex_unlock(&p->mu);
    *bytes = b;
    return n;
}

cs_msg *cs_replay_sig(cs_replay *r)
{
    /* rec was set by the worker that opened it, before the END this follows was handed out
     * under the pool's lock; it does not change afterwards. */
    const cs_ledger_record *rec = r->opened ? &r->rec : NULL;
    if (!rec || !rec->sig_len)
        return NULL;
    cs_msg *m = cs_msg_new(rec->sig_len);
    if (m) {
        memcpy(m->data, rec->sig, rec->sig_len);
        m->len = rec->sig_len;
    }
    return m;
}

void cs_replay_release(cs_replay *r)
{
    if (!r)
        return;
    cs_replay_pool *p = r->pool;
    pthread_mutex_lock(&p->mu);
    r->released = true;
    /* No worker reads it any more: a ledger it holds goes now, not when a queued job lets go. */
    cs_ledger_ref *file = r->reading || r->opening ? NULL : r->file;
    if (file)
        r->file = NULL;
    unref_locked(p, r);
    pthread_mutex_unlock(&p->mu);
    cs_ledger_ref_release(file);
}
