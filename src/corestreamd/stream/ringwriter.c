/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/stream/ringwriter.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/futex.h"
#include "common/log.h"
#include "common/thread.h"
#include "wire/wire.h"

/* The hand-over is one slot and two doorbells, so a ledger costs no system call on either side
 * unless the other side sleeps: the submitter fills the slot and rings posted (posted.word then
 * counts hand-overs, and stops); the writer writes it and rings done (done.word counts ledgers
 * written). The slot's fields are written before posted's ring and read after it is seen, and the
 * submitter touches them again only once done has caught up: the doorbells' atomics order them. */
struct cs_ring_writer {
    cs_ring *ring;
    pthread_t thread;
    cs_bell posted, done;
    _Atomic bool stop;
    uint32_t submitted; /* the submitting thread's: ledgers handed over */
    bool full;          /* the slot holds a ledger (an empty ledger has no msgs) */
    uint32_t seq;
    cs_msg **msgs;
    size_t n;
    cs_flow *flow;
    cs_ledger_record rec;
    /* Writer thread only: the failure being reported, so it is logged once per transition. */
    bool failing;
    uint64_t missed; /* ledgers not retained since the failure began */
};

static int write_ledger(cs_ring *ring, uint32_t seq, cs_msg **msgs, size_t n, const cs_flow *flow,
                        const cs_ledger_record *rec, cs_err *err)
{
    struct iovec stack_iov[128];
    struct iovec *iov = n <= 64 ? stack_iov : malloc(2 * n * sizeof *iov);
    if (!iov)
        return cs_err_set(err, 0, "retain ledger %u: out of memory", seq);
    struct iovec *chunks = flow ? iov + n : NULL;
    for (size_t i = 0; i < n; i++) {
        iov[i].iov_base = msgs[i]->data + CS_WIRE_CHUNK_HEADER_LEN;
        iov[i].iov_len = msgs[i]->len - CS_WIRE_CHUNK_HEADER_LEN;
        if (chunks) {
            /* The very messages subscribers were sent: their payloads are stored as they are. */
            const cs_msg *c = cs_flow_chunk(flow, i);
            chunks[i].iov_base = c->data;
            chunks[i].iov_len = c->len;
        }
    }
    bool reset = false;
    int rc = cs_ring_put(ring, seq, iov, n, chunks, chunks ? n : 0, rec, &reset, err);
    if (iov != stack_iov)
        free(iov);
    if (rc != 0)
        return cs_err_prefix(err, "retain ledger %u: ", seq);
    if (reset)
        CS_LOG(CS_LOG_WARN, "retention reset: ledger does not continue the retained range", KV_U("ledger", seq));
    return 0;
}

/* A ring write failure costs the ring, never the live flow: logged when writes start failing and
 * when they work again, not per ledger. */
static void note_result(cs_ring_writer *w, uint32_t seq, int rc, const cs_err *err)
{
    if (rc != 0) {
        if (!w->failing)
            CS_LOG(CS_LOG_ERROR, "ring write failed; live streaming continues, the ring keeps its range until a write works",
                   KV_U("ledger", seq), KV_S("error", err->msg));
        w->failing = true;
        w->missed++;
        return;
    }
    if (w->failing)
        CS_LOG(CS_LOG_INFO, "ring write recovered", KV_U("ledger", seq), KV_U("ledgers_not_retained", w->missed));
    w->failing = false;
    w->missed = 0;
}

static void *writer_main(void *arg)
{
    cs_ring_writer *w = arg;
    /* The background priority (nice 19 unless --background-nice): when the cores are busy, delivery
     * runs first; when they are not, this runs at once. */
    cs_thread_role("cs-ring", cs_thread_background_nice());
    cs_ring_take_put_thread(w->ring); /* this thread alone puts, until it stops */
    uint32_t handled = 0;
    for (;;) {
        uint32_t posted = atomic_load(&w->posted.word);
        if (posted == handled) {
            if (atomic_load(&w->stop))
                break;
            cs_bell_wait(&w->posted, posted, -1);
            continue;
        }
        /* A ring of posted is a ledger unless it was the stop's, which comes after every ledger. */
        if (!w->full) {
            handled = posted;
            continue;
        }
        cs_err err;
        int rc = write_ledger(w->ring, w->seq, w->msgs, w->n, w->flow, &w->rec, &err);
        note_result(w, w->seq, rc, &err);
        for (size_t i = 0; i < w->n; i++)
            cs_msg_release(w->msgs[i]);
        free(w->msgs);
        if (w->flow)
            cs_flow_release(w->flow);
        w->msgs = NULL;
        w->flow = NULL;
        w->full = false;
        handled = posted;
        cs_bell_ring(&w->done, INT_MAX);
    }
    cs_ring_leave_put_thread(w->ring);
    return NULL;
}

int cs_ring_writer_new(cs_ring_writer **out, cs_ring *ring, cs_err *err)
{
    cs_ring_writer *w = calloc(1, sizeof *w);
    if (!w)
        return cs_err_set(err, 0, "source loop: out of memory");
    w->ring = ring;
    if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
        free(w);
        return cs_err_set(err, 0, "source loop: cannot start the ring writer");
    }
    *out = w;
    return 0;
}

void cs_ring_writer_submit(cs_ring_writer *w, uint32_t seq, cs_msg **msgs, size_t n, cs_flow *flow,
                           size_t chunk_size, uint64_t xxh64, const cs_msg *sig)
{
    uint64_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += msgs[i]->len - CS_WIRE_CHUNK_HEADER_LEN;
    w->rec = (cs_ledger_record){.len = len, .chunks = (uint32_t)n, .chunk_size = (uint32_t)chunk_size, .xxh64 = xxh64};
    if (sig && sig->len <= sizeof w->rec.sig) {
        memcpy(w->rec.sig, sig->data, sig->len);
        w->rec.sig_len = (uint16_t)sig->len;
    }
    w->seq = seq;
    w->msgs = msgs;
    w->n = n;
    w->flow = flow;
    w->full = true;
    w->submitted++;
    cs_bell_ring(&w->posted, 1);
}

/* Whether every ledger handed over is written. */
static bool caught_up(cs_ring_writer *w, uint32_t *done)
{
    *done = atomic_load(&w->done.word);
    return w->submitted == *done;
}

void cs_ring_writer_wait(cs_ring_writer *w)
{
    uint32_t done;
    while (!caught_up(w, &done))
        cs_bell_wait(&w->done, done, -1);
}

void cs_ring_writer_free(cs_ring_writer *w)
{
    if (!w)
        return;
    cs_ring_writer_wait(w);
    atomic_store(&w->stop, true);
    cs_bell_ring(&w->posted, 1);
    pthread_join(w->thread, NULL);
    free(w);
}
