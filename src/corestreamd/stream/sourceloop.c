/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/stream/sourceloop.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/clock.h"
#include "common/log.h"
#include "corestreamd/stream/ledgerhash.h"
#include "corestreamd/stream/ringwriter.h"
#include "wire/ledgersig.h"
#include "wire/wire.h"

/* Idle raw chunk buffers kept between ledgers: a 64 MiB ledger's worth (256 chunks at the default
 * 256 KiB), so the gate shape's 14.5 MiB ledgers never touch fresh memory. */
#define CHUNK_POOL_BYTES ((size_t)64 << 20)

/* The raw chunks of the ledger being emitted, kept for the ring write after END. */
typedef struct ledger_parts {
    cs_msg **msgs;
    size_t n, cap;
} ledger_parts;

static int parts_push(ledger_parts *p, cs_msg *m)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        cs_msg **grown = realloc(p->msgs, cap * sizeof *grown);
        if (!grown)
            return -1;
        p->msgs = grown;
        p->cap = cap;
    }
    p->msgs[p->n++] = m;
    return 0;
}

static void parts_clear(ledger_parts *p)
{
    for (size_t i = 0; i < p->n; i++)
        cs_msg_release(p->msgs[i]);
    p->n = 0;
}

/* Reads until buf is full, the body ends, or an error. Returns bytes read or -1. */
static ssize_t fill_chunk(cs_source *src, uint8_t *buf, size_t len, cs_err *err)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = src->ops->read(src, buf + got, len - got, err);
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

static void abort_on_bug(const cs_err *e)
{
    /* Guard failures mean the loop itself broke the flow grammar: never continue. */
    CS_LOG(CS_LOG_ERROR, "corestreamd internal error", KV_S("error", e->msg));
    abort();
}

/* What the loop carries from one ledger to the next. */
typedef struct loop_state {
    XXH64_state_t *hash;
    cs_hasher *hasher; /* SHA-256 of the ledger, beside the loop, when the loop signs */
    ledger_parts parts;
    cs_ring_writer *writer;
    cs_msg_pool *chunk_pool;
    uint32_t prev; /* the last ledger published; 0 before the first */
    /* The signature of the ledger before the one being emitted (signed ledgers chain), when
     * known: this run's last, or at start the ring's record of the ledger before. */
    bool have_prev_sig;
    uint8_t prev_sig[CS_SIG_LEN];
} loop_state;

/* The SIG message of the ledger just read, as its source gave it (a relay) or signed here: NULL
 * when it is unsigned. A signature that cannot be made is logged and the ledger goes out unsigned
 * (clients that check signatures refuse it). */
static cs_msg *ledger_sig(cs_source_loop *l, loop_state *st, uint32_t seq, uint64_t total, uint64_t sum)
{
    uint8_t buf[CS_WIRE_SIG_MAX_LEN];
    size_t n = 0;
    cs_sig sig = {.seq = seq};
    if (l->src->ops->signature) {
        n = l->src->ops->signature(l->src, buf);
        if (n && cs_sig_decode(buf, n, &sig, NULL) != 0)
            n = 0;
    } else if (l->signing) {
        if (st->have_prev_sig)
            memcpy(sig.prev, st->prev_sig, CS_SIG_LEN);
        cs_err e;
        if (cs_hasher_finish(st->hasher, sig.sha256, &e) == 0 && cs_signing_sign(l->signing, &sig, total, sum, &e) == 0)
            n = cs_sig_encode(&sig, buf);
        else
            CS_LOG(CS_LOG_ERROR, "ledger signing failed; the ledger goes out unsigned", KV_U("ledger", seq),
                   KV_S("error", e.msg));
    }
    st->have_prev_sig = n != 0;
    if (!n)
        return NULL;
    memcpy(st->prev_sig, sig.sig, CS_SIG_LEN);
    cs_msg *m = cs_msg_new(n);
    if (m) {
        memcpy(m->data, buf, n);
        m->len = n;
        m->published_ns = cs_mono_ns();
    }
    return m;
}

/* The ledger being emitted: its BEGIN's stamp, the bytes and chunks so far. */
typedef struct emitting {
    uint32_t seq;
    int64_t start;
    uint64_t total;
    uint32_t idx;
} emitting;

/* BEGIN of em->seq: the first (again false) or a fresh one after the source voided the bytes so
 * far (again true), which replaces the open flow. BEGIN goes out before the first body read, so
 * T_emit cannot collapse to zero when a read blocks for the whole window. */
static int begin_ledger(cs_source_loop *l, emitting *em, bool again, loop_state *st, cs_err *err)
{
    cs_err e;
    cs_msg *begin = cs_msg_new(CS_WIRE_BEGIN_LEN);
    if (!begin)
        return cs_err_set(err, 0, "ledger %u: out of memory", em->seq);
    em->start = cs_wall_ns();
    em->total = 0;
    em->idx = 0;
    XXH64_reset(st->hash, 0);
    if (st->hasher)
        cs_hasher_begin(st->hasher);
    begin->len = cs_wire_put_begin(begin->data, em->seq, em->start);
    begin->published_ns = cs_mono_ns();
    if (l->metrics && cs_m_state(l->metrics) == CS_SRC_CATCHING_UP)
        cs_m_set_state(l->metrics, CS_SRC_STREAMING);
    if ((again ? cs_broadcast_rebegin(l->bc, em->seq, begin, &e) : cs_broadcast_begin(l->bc, em->seq, begin, &e)) != 0)
        abort_on_bug(&e);
    return 0;
}

/* The source voided what it handed out of this ledger: the chunks already submitted reach the old
 * flow first, then a fresh BEGIN replaces it (subscribers inside it start again, PROTOCOL.md
 * rule 4), and nothing of the void bytes reaches the ring. */
static int restart_ledger(cs_source_loop *l, emitting *em, loop_state *st, cs_err *err)
{
    cs_pipeline_flush(l->pipeline);
    parts_clear(&st->parts);
    CS_LOG(CS_LOG_WARN, "ledger begins again: the bytes sent of it were void", KV_U("ledger", em->seq),
           KV_U("bytes", em->total), KV_U("chunks", em->idx));
    return begin_ledger(l, em, true, st, err);
}

/* Emits one ledger. Returns 0, 1 when cancelled, -1 on failure. */
static int emit_ledger(cs_source_loop *l, const cs_emission *ems, loop_state *st, uint64_t *sum, cs_msg **sig,
                       cs_err *err)
{
    XXH64_state_t *hash = st->hash;
    ledger_parts *parts = &st->parts;
    cs_msg_pool *chunk_pool = st->chunk_pool;
    emitting em = {.seq = ems->seq};
    uint32_t seq = em.seq;
    cs_err e;
    if (begin_ledger(l, &em, false, st, err) != 0)
        return -1;
    for (;;) {
        cs_msg *raw = cs_msg_pool_get(chunk_pool);
        if (!raw)
            return cs_err_set(err, 0, "ledger %u: out of memory", seq);
        ssize_t n = fill_chunk(l->src, raw->data + CS_WIRE_CHUNK_HEADER_LEN, l->chunk_size, &e);
        if (n <= 0) {
            cs_msg_release(raw);
            if (n == 0)
                break;
            if (e.kind == CS_ERR_CANCELLED)
                return 1;
            if (e.kind == CS_ERR_LEDGER_VOID) {
                if (restart_ledger(l, &em, st, err) != 0)
                    return -1;
                continue;
            }
            return cs_err_set(err, 0, "source failed emitting ledger %u: %s", seq, e.msg);
        }
        if (em.total + (uint64_t)n > l->max_payload) {
            cs_msg_release(raw);
            return cs_err_set(err, 0, "ledger %u ran past the %llu-byte protocol payload cap mid-emission",
                              seq, (unsigned long long)l->max_payload);
        }
        em.total += (uint64_t)n;
        raw->len = CS_WIRE_CHUNK_HEADER_LEN + (size_t)n;
        XXH64_update(hash, raw->data + CS_WIRE_CHUNK_HEADER_LEN, (size_t)n);
        if (st->hasher) /* hashed beside the loop (ledgerhash.h): reading goes on meanwhile */
            cs_hasher_add(st->hasher, raw, raw->data + CS_WIRE_CHUNK_HEADER_LEN, (size_t)n);
        if (parts_push(parts, cs_msg_retain(raw)) != 0) {
            cs_msg_release(raw);
            cs_msg_release(raw);
            return cs_err_set(err, 0, "ledger %u: out of memory", seq);
        }
        cs_pipeline_submit(l->pipeline, raw, seq, em.idx++);
    }
    cs_pipeline_flush(l->pipeline);
    if (ems->declared_size > 0 && em.total != ems->declared_size)
        return cs_err_set(err, 0, "ledger %u body is %llu bytes, source declared %llu", seq,
                          (unsigned long long)em.total, (unsigned long long)ems->declared_size);

    cs_msg *end = cs_msg_new(CS_WIRE_END_LEN);
    if (!end)
        return cs_err_set(err, 0, "ledger %u: out of memory", seq);
    int64_t emit_end = cs_wall_ns();
    *sum = XXH64_digest(hash);
    end->len = cs_wire_put_end(end->data, seq, em.idx, em.total, emit_end, *sum);
    *sig = ledger_sig(l, st, seq, em.total, *sum);
    end->published_ns = cs_mono_ns();
    /* Counted before END goes out, so a scrape after a subscriber saw END counts that ledger. */
    if (l->metrics) {
        cs_metrics *m = l->metrics;
        cs_m_observe_ns(&m->t_emit, emit_end - em.start);
        cs_m_add1(&m->ledgers_emitted, 1);
        cs_m_add1(&m->bytes_raw, em.total);
        cs_m_add1(&m->bytes_framing, CS_WIRE_BEGIN_LEN + CS_WIRE_END_LEN);
        atomic_store_explicit(&m->latest_emitted, seq, memory_order_relaxed);
        atomic_store_explicit(&m->latest_emitted_at, (uint64_t)emit_end, memory_order_relaxed);
    }
    if (cs_broadcast_end(l->bc, end, *sig ? cs_msg_retain(*sig) : NULL, &e) != 0)
        abort_on_bug(&e);
    return 0;
}

/* The flow just ended, holding the CHUNK messages as published (compressed or not, per chunk):
 * a reference, so the ring stores those very messages. The source loop is the only publisher, so
 * the current flow is this ledger's. */
static cs_flow *published_flow(cs_source_loop *l, uint32_t seq, size_t nchunks)
{
    cs_snap snap;
    cs_broadcast_watch(l->bc, &snap);
    cs_flow *f = NULL;
    if (snap.flow && snap.seq == seq && snap.end && snap.nchunks == nchunks)
        f = cs_flow_retain(snap.flow);
    cs_snap_release(&snap);
    return f;
}

static void log_streaming(cs_source_loop *l, uint32_t seq, uint64_t bytes, size_t chunks)
{
    uint32_t oldest, latest;
    cs_ring_bounds(l->ring, &oldest, &latest);
    CS_LOG(CS_LOG_INFO, "streaming", KV_U("ledger", seq), KV_U("bytes", bytes), KV_U("chunks", chunks),
           KV_U("retained_oldest", oldest), KV_U("retained_latest", latest),
           KV_I("subscribers", l->subscribers ? atomic_load(l->subscribers) : 0));
}

/* The source's writer went away (on) or is back (off): readiness follows. Source loop thread. */
static void on_reconnecting(void *arg, bool on)
{
    cs_source_loop *l = arg;
    if (l->metrics)
        cs_m_set_state(l->metrics, on ? CS_SRC_RECONNECTING : l->published ? CS_SRC_STREAMING : CS_SRC_CATCHING_UP);
}

/* The source waits for ledger seq past a message it skipped (seq), or has it (0): readiness
 * follows. Source loop thread. */
static void on_waiting(void *arg, uint32_t seq)
{
    cs_source_loop *l = arg;
    if (!l->metrics)
        return;
    atomic_store_explicit(&l->metrics->waiting_for, seq, memory_order_relaxed);
    cs_m_set_state(l->metrics, seq ? CS_SRC_WAITING : l->published ? CS_SRC_STREAMING : CS_SRC_CATCHING_UP);
}

enum { STEP_NEXT, STEP_ENDED, STEP_CANCELLED, STEP_FAILED };

/* The checks on an emission before anything of it is published. Returns 0, or -1 with err. */
static int check_emission(const cs_source_loop *l, uint32_t prev, const cs_emission *em, cs_err *err)
{
    bool past_gap = em->after_gap && em->seq > prev;
    if (prev != 0 && em->seq != (uint32_t)(prev + 1) && !past_gap)
        return cs_err_set(err, 0, "source emitted ledger %u after %u: sequences must be dense and ascending",
                          em->seq, prev);
    if (em->declared_size > l->max_payload)
        return cs_err_set(err, 0, "ledger %u is %llu bytes, over the %llu-byte protocol payload cap", em->seq,
                          (unsigned long long)em->declared_size, (unsigned long long)l->max_payload);
    return 0;
}

/* Hands the ledger just published to the ring writer: only now the disk, and off this thread, so
 * live delivery never pays for the ring write. */
static void store_ledger(cs_source_loop *l, loop_state *st, uint32_t seq, uint64_t sum, const cs_msg *sig)
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < st->parts.n; i++)
        bytes += st->parts.msgs[i]->len - CS_WIRE_CHUNK_HEADER_LEN;
    size_t chunks = st->parts.n;
    cs_ring_writer_submit(st->writer, seq, st->parts.msgs, st->parts.n, published_flow(l, seq, st->parts.n),
                          l->chunk_size, sum, sig);
    st->parts = (ledger_parts){0};
    if (seq % 100 == 0) {
        /* The log reports the ring as it stands with this ledger in it. */
        cs_ring_writer_wait(st->writer);
        log_streaming(l, seq, bytes, chunks);
    }
}

/* The first ledger this run signs chains to the ring's ledger before it, when the ring has that
 * one signed (a restart goes on with the chain its subscribers hold). */
static void chain_from_ring(cs_source_loop *l, loop_state *st, uint32_t seq)
{
    cs_ledger_ref *ref;
    cs_sig sig;
    if (seq < 2 || cs_ring_get(l->ring, seq - 1, &ref, NULL) != 0)
        return;
    if (ref->rec.sig_len && cs_sig_decode(ref->rec.sig, ref->rec.sig_len, &sig, NULL) == 0) {
        memcpy(st->prev_sig, sig.sig, CS_SIG_LEN);
        st->have_prev_sig = true;
    }
    cs_ledger_ref_release(ref);
}

/* One ledger: asked of the source, checked, published, stored. */
static int step(cs_source_loop *l, loop_state *st, cs_err *err)
{
    /* The previous ledger reaches the ring before the next is asked for, so it never serves the
     * current flow, and a source comparing re-emitted ledgers with the ring finds every one
     * already published there (sources/rejoin.h). The wait overlaps nothing it used to: the next
     * BEGIN waited for it anyway. */
    cs_ring_writer_wait(st->writer);
    cs_emission em = {0};
    cs_err e;
    int got = l->src->ops->next(l->src, &em, &e);
    if (got == 0)
        return STEP_ENDED;
    if (got < 0) {
        if (e.kind == CS_ERR_CANCELLED)
            return STEP_CANCELLED;
        cs_err_set(err, 0, "source failed at ledger %u: %s", em.seq, e.msg);
        return STEP_FAILED;
    }
    if (check_emission(l, st->prev, &em, err) != 0)
        return STEP_FAILED;
    if (st->prev == 0 && l->signing)
        chain_from_ring(l, st, em.seq);
    uint64_t sum = 0;
    cs_msg *sig = NULL;
    int r = emit_ledger(l, &em, st, &sum, &sig, err);
    if (r != 0) {
        cs_msg_release(sig);
        parts_clear(&st->parts);
        return r == 1 ? STEP_CANCELLED : STEP_FAILED;
    }
    st->prev = em.seq;
    store_ledger(l, st, em.seq, sum, sig);
    cs_msg_release(sig);
    l->published++;
    if (l->on_progress)
        l->on_progress(l->progress_arg, em.seq);
    return STEP_NEXT;
}

int cs_source_loop_run(cs_source_loop *l, cs_err *err)
{
    char range[64];
    cs_range_format(l->range, range, sizeof range);
    /* The state first: whoever read the line finds the source catching up. */
    if (l->metrics)
        cs_m_set_state(l->metrics, CS_SRC_CATCHING_UP);
    CS_LOG(CS_LOG_INFO, "source loop starting", KV_S("range", range), KV_U("chunk_size", l->chunk_size));

    loop_state st = {.hash = XXH64_createState()};
    /* Raw chunk buffers come back once the ring has their ledger; up to CHUNK_POOL_BYTES of them
     * wait for the next ledger instead of going back to malloc. */
    size_t chunk_cap = CS_WIRE_CHUNK_HEADER_LEN + l->chunk_size;
    size_t keep = CHUNK_POOL_BYTES / chunk_cap;
    /* Payloads page-aligned, so the ring can write them with O_DIRECT (store/ring.h). */
    st.chunk_pool = cs_msg_pool_new_aligned(chunk_cap, keep < 16 ? 16 : keep, CS_WIRE_CHUNK_HEADER_LEN);
    /* Only a loop that signs hashes: a relayed signature (ops->signature) needs no SHA-256 here. */
    bool signs = l->signing && !l->src->ops->signature;
    if (!st.hash || !st.chunk_pool || (signs && cs_hasher_new(&st.hasher, err) != 0) ||
        cs_ring_writer_new(&st.writer, l->ring, err) != 0) {
        XXH64_freeState(st.hash);
        cs_hasher_free(st.hasher);
        cs_msg_pool_free(st.chunk_pool);
        return cs_err_set(err, 0, "source loop: out of memory");
    }
    l->src->reconnecting = on_reconnecting;
    l->src->reconnecting_arg = l;
    l->src->waiting = on_waiting;
    l->src->waiting_arg = l;
    if (l->on_progress)
        l->on_progress(l->progress_arg, 0);
    int how;
    while ((how = step(l, &st, err)) == STEP_NEXT)
        ;
    /* Whatever way the loop ended, the last completed ledger is retained before the stream is
     * declared over. */
    cs_ring_writer_wait(st.writer);
    cs_ring_writer_free(st.writer);
    if (l->metrics)
        cs_m_set_state(l->metrics, how == STEP_FAILED      ? CS_SRC_FAILED
                                   : how == STEP_CANCELLED ? CS_SRC_STOPPED
                                                           : CS_SRC_ENDED);
    if (how == STEP_CANCELLED)
        CS_LOG(CS_LOG_INFO, "source loop cancelled", KV_U("ledgers", l->published));
    else if (how == STEP_ENDED)
        CS_LOG(CS_LOG_INFO, "source exhausted", KV_U("ledgers", l->published));
    free(st.parts.msgs);
    XXH64_freeState(st.hash);
    cs_hasher_free(st.hasher); /* what a cancelled ledger left queued is dropped */
    cs_msg_pool_free(st.chunk_pool); /* chunks still in a flow or a replay free themselves later */
    return how == STEP_FAILED ? -1 : 0;
}
