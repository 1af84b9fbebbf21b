/* SPDX-License-Identifier: Apache-2.0 */
/* The broadcaster (PORTSPEC 2.2; catalogue 48-52). The Go wake channel is the generation counter
 * `gen` in cs_snap plus the wake callback: "the handle fired" means the generation moved past the
 * one a watch handed out, which cs_broadcast_wait(b, gen, 0) reports without sleeping, and the
 * callback ran once. Guard failures return -1 with the exact message instead of panicking.
 * Also covers cs_broadcast_flow_state on a replaced flow, the flow's reference counting (run under
 * ASan: nothing leaks, nothing is used after free) and the chunk segments. The concurrent-watchers
 * test is the ThreadSanitizer target. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "corestreamd/stream/broadcast.h"
#include "corestreamd/stream/message.h"
#include "support/event.h"
#include "wire/wire.h"

#define HDR CS_WIRE_CHUNK_HEADER_LEN
#define SEC 1000000000LL
#define WAIT_NS (10 * SEC) /* bound on every wait; generous for sanitizer builds */
#define DEADLOCK_MS 2000   /* how long a watch may take before it counts as deadlocked */

/* ---- helpers ---- */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * SEC + ts.tv_nsec;
}

/* Thread-safe message builders (no cmocka asserts: the watchers call nothing here, but keep them
 * usable anywhere); NULL only on allocation failure, which the callers assert. */
static cs_msg *msg_of(const void *p, size_t n)
{
    cs_msg *m = cs_msg_new(n);
    if (!m)
        return NULL;
    memcpy(m->data, p, n);
    m->len = n;
    return m;
}

static cs_msg *begin_msg(uint32_t seq)
{
    uint8_t b[CS_WIRE_BEGIN_LEN];
    cs_wire_put_begin(b, seq, (int64_t)seq * 1000);
    cs_msg *m = msg_of(b, sizeof b);
    assert_non_null(m);
    return m;
}

/* A CHUNK whose payload spells "<seq>/<idx>", so any reader can check what it holds. */
static cs_msg *chunk_msg(uint32_t seq, uint32_t idx)
{
    char payload[32];
    int n = snprintf(payload, sizeof payload, "%u/%u", seq, idx);
    uint8_t b[HDR + sizeof payload];
    size_t len = cs_wire_append_chunk(b, seq, idx, CS_CODEC_RAW, (const uint8_t *)payload, (size_t)n);
    cs_msg *m = msg_of(b, len);
    assert_non_null(m);
    return m;
}

static cs_msg *end_msg(uint32_t seq, uint32_t count)
{
    uint8_t b[CS_WIRE_END_LEN];
    cs_wire_put_end(b, seq, count, count, (int64_t)seq, 0);
    cs_msg *m = msg_of(b, sizeof b);
    assert_non_null(m);
    return m;
}

static unsigned refs_of(cs_msg *m)
{
    return atomic_load(&m->refs);
}

/* Decodes m and checks it is the given message type for seq; for a CHUNK also its index and
 * "<seq>/<idx>" payload, for an END its chunk count. Returns NULL when it is, otherwise a
 * description of what is wrong (static storage per thread). */
static _Thread_local char why_buf[160];
static const char *check_msg(const cs_msg *m, uint8_t type, uint32_t seq, uint32_t idx_or_count)
{
    cs_wire_msg w;
    cs_err err = {0};
    if (!m)
        return "message is NULL";
    if (cs_wire_decode(m->data, m->len, &w, &err) != 0) {
        snprintf(why_buf, sizeof why_buf, "undecodable: %.100s", err.msg);
        return why_buf;
    }
    if (w.type != type || w.seq != seq) {
        snprintf(why_buf, sizeof why_buf, "type 0x%02x seq %u, want 0x%02x seq %u", w.type, w.seq,
                 type, seq);
        return why_buf;
    }
    if (type == CS_WIRE_TYPE_CHUNK) {
        char want[32];
        int n = snprintf(want, sizeof want, "%u/%u", seq, idx_or_count);
        if (w.chunk_idx != idx_or_count || w.payload_len != (size_t)n ||
            memcmp(w.payload, want, (size_t)n) != 0) {
            snprintf(why_buf, sizeof why_buf, "chunk %u of %u holds %.*s, want index %u holding %s",
                     w.chunk_idx, seq, (int)w.payload_len, (const char *)w.payload, idx_or_count, want);
            return why_buf;
        }
    }
    if (type == CS_WIRE_TYPE_END && w.chunk_count != idx_or_count) {
        snprintf(why_buf, sizeof why_buf, "END of %u counts %u chunks, want %u", seq, w.chunk_count,
                 idx_or_count);
        return why_buf;
    }
    return NULL;
}

#define assert_msg_ok(m, type, seq, n)                                                             \
    do {                                                                                           \
        const char *why_ = check_msg((m), (type), (seq), (n));                                     \
        if (why_)                                                                                  \
            fail_msg("%s", why_);                                                                  \
    } while (0)

/* The wake callback: counts calls and records the context it was given. */
typedef struct wake_rec {
    atomic_uint calls;
    atomic_uintptr_t last_ctx;
} wake_rec;

static void count_wake(void *ctx)
{
    wake_rec *w = ctx;
    atomic_fetch_add(&w->calls, 1);
    atomic_store(&w->last_ctx, (uintptr_t)ctx);
}

/* The generation handed out at gen has fired: a later publish or finish moved it on. Does not
 * sleep (timeout 0). */
static bool fired(cs_broadcaster *b, uint64_t gen)
{
    return cs_broadcast_wait(b, gen, 0);
}

/* cs_broadcast_watch on another thread, given ms to finish: false means it is stuck (the lock was
 * left held). The stuck thread is detached and its job leaked, since it may never return. */
typedef struct watch_job {
    cs_broadcaster *b;
    cs_snap snap;
    event done;
} watch_job;

static void *watch_thread(void *p)
{
    watch_job *j = p;
    cs_broadcast_watch(j->b, &j->snap);
    event_set(&j->done);
    return NULL;
}

static bool watch_within(cs_broadcaster *b, cs_snap *out, int ms)
{
    watch_job *j = calloc(1, sizeof *j);
    if (!j)
        return false;
    j->b = b;
    event_init(&j->done);
    pthread_t t;
    if (pthread_create(&t, NULL, watch_thread, j) != 0) {
        event_destroy(&j->done);
        free(j);
        return false;
    }
    if (!event_wait(&j->done, (int64_t)ms * 1000000)) {
        pthread_detach(t);
        return false;
    }
    pthread_join(t, NULL);
    *out = j->snap;
    event_destroy(&j->done);
    free(j);
    return true;
}

/* ---- 48: flow lifecycle ---- */

static void test_flow_lifecycle(void **state)
{
    (void)state;
    wake_rec w = {0};
    cs_broadcaster *b = cs_broadcaster_new(count_wake, &w);
    assert_non_null(b);

    cs_snap s;
    cs_broadcast_watch(b, &s);
    assert_int_equal(s.seq, 0);
    assert_null(s.flow);
    assert_int_equal(s.nchunks, 0);
    assert_null(s.end);
    assert_false(s.ended);
    assert_false(s.failed);
    /* The handle is open: nothing has been published since it was handed out. */
    assert_false(fired(b, s.gen));
    assert_int_equal(atomic_load(&w.calls), 0);
    cs_snap_release(&s);

    /* Each publish fires the handle handed out before it, exactly once through the callback, with
     * the context given at construction. */
    cs_msg *bm = begin_msg(7);
    uint64_t g = s.gen;
    assert_int_equal(cs_broadcast_begin(b, 7, bm, NULL), 0);
    assert_true(fired(b, g));
    assert_int_equal(atomic_load(&w.calls), 1);
    assert_ptr_equal((void *)atomic_load(&w.last_ctx), &w);

    cs_broadcast_watch(b, &s);
    assert_true(s.gen != g);
    assert_false(fired(b, s.gen));
    assert_int_equal(s.seq, 7);
    assert_non_null(s.flow);
    assert_int_equal(s.flow->seq, 7);
    assert_ptr_equal(s.flow->begin, bm);
    assert_msg_ok(s.flow->begin, CS_WIRE_TYPE_BEGIN, 7, 0);
    assert_int_equal(s.nchunks, 0);
    assert_null(s.end);
    assert_false(s.ended);
    g = s.gen;
    cs_snap_release(&s);
    assert_null(s.flow);

    cs_msg *c0 = chunk_msg(7, 0);
    assert_int_equal(cs_broadcast_chunk(b, c0, NULL), 0);
    assert_true(fired(b, g));
    assert_int_equal(atomic_load(&w.calls), 2);
    cs_broadcast_watch(b, &s);
    assert_int_equal(s.nchunks, 1);
    g = s.gen;
    cs_snap_release(&s);

    cs_msg *c1 = chunk_msg(7, 1);
    assert_int_equal(cs_broadcast_chunk(b, c1, NULL), 0);
    assert_true(fired(b, g));
    assert_int_equal(atomic_load(&w.calls), 3);

    cs_broadcast_watch(b, &s);
    assert_int_equal(s.seq, 7);
    assert_int_equal(s.nchunks, 2);
    assert_ptr_equal(cs_flow_chunk(s.flow, 0), c0);
    assert_ptr_equal(cs_flow_chunk(s.flow, 1), c1);
    assert_msg_ok(cs_flow_chunk(s.flow, 1), CS_WIRE_TYPE_CHUNK, 7, 1);
    assert_null(s.end); /* not complete before its END */
    g = s.gen;
    cs_snap_release(&s);

    cs_msg *em = end_msg(7, 2);
    assert_int_equal(cs_broadcast_end(b, em, NULL, NULL), 0);
    assert_true(fired(b, g));
    assert_int_equal(atomic_load(&w.calls), 4);
    cs_broadcast_watch(b, &s);
    assert_ptr_equal(s.end, em);
    assert_msg_ok(s.end, CS_WIRE_TYPE_END, 7, 2);
    assert_int_equal(s.nchunks, 2);
    assert_int_equal(s.seq, 7);
    assert_false(s.ended);
    assert_false(fired(b, s.gen));
    cs_snap_release(&s);

    cs_broadcaster_free(b);
}

/* Generations only move forward, one step per publish. */
static void test_generation_advances_on_every_publish(void **state)
{
    (void)state;
    cs_broadcaster *b = cs_broadcaster_new(NULL, NULL); /* a NULL wake hook is allowed */
    assert_non_null(b);
    cs_snap s;
    cs_broadcast_watch(b, &s);
    uint64_t prev = s.gen;
    for (uint32_t seq = 1; seq <= 3; seq++) {
        for (int step = 0; step < 4; step++) {
            int rc = step == 0   ? cs_broadcast_begin(b, seq, begin_msg(seq), NULL)
                     : step < 3  ? cs_broadcast_chunk(b, chunk_msg(seq, (uint32_t)step - 1), NULL)
                                 : cs_broadcast_end(b, end_msg(seq, 2), NULL, NULL);
            assert_int_equal(rc, 0);
            cs_broadcast_watch(b, &s);
            assert_true(s.gen > prev);
            prev = s.gen;
            cs_snap_release(&s);
        }
    }
    cs_broadcast_finish(b, false);
    cs_broadcast_watch(b, &s);
    assert_true(s.gen > prev);
    cs_snap_release(&s);
    cs_broadcaster_free(b);
}

/* The wake hook runs after the state change and outside the lock: from inside it, a watch on
 * another thread completes and already sees what was just published. */
typedef struct reentry {
    cs_broadcaster *b;
    int calls;
    int stuck;
    uint32_t seen_seq[4];
    size_t seen_chunks[4];
    bool seen_end[4];
    bool seen_ended[4];
} reentry;

static void reentrant_wake(void *ctx)
{
    reentry *r = ctx;
    cs_snap s;
    if (!watch_within(r->b, &s, DEADLOCK_MS)) {
        r->stuck++;
        return;
    }
    if (r->calls < 4) {
        r->seen_seq[r->calls] = s.seq;
        r->seen_chunks[r->calls] = s.nchunks;
        r->seen_end[r->calls] = s.end != NULL;
        r->seen_ended[r->calls] = s.ended;
    }
    r->calls++;
    cs_snap_release(&s);
}

static void test_wake_runs_after_the_change_outside_the_lock(void **state)
{
    (void)state;
    reentry r = {0};
    cs_broadcaster *b = cs_broadcaster_new(reentrant_wake, &r);
    assert_non_null(b);
    r.b = b;
    assert_int_equal(cs_broadcast_begin(b, 5, begin_msg(5), NULL), 0);
    assert_int_equal(r.stuck, 0);
    assert_int_equal(cs_broadcast_chunk(b, chunk_msg(5, 0), NULL), 0);
    assert_int_equal(cs_broadcast_end(b, end_msg(5, 1), NULL, NULL), 0);
    cs_broadcast_finish(b, false);
    assert_int_equal(r.stuck, 0);
    assert_int_equal(r.calls, 4);
    assert_int_equal(r.seen_seq[0], 5);
    assert_int_equal(r.seen_chunks[0], 0);
    assert_int_equal(r.seen_chunks[1], 1);
    assert_false(r.seen_end[1]);
    assert_true(r.seen_end[2]);
    assert_false(r.seen_ended[2]);
    assert_true(r.seen_ended[3]);
    cs_broadcaster_free(b);
}

/* Take the handle before deciding to sleep: a publish between watch() and the wait is not lost,
 * and a publish during the wait ends it. */
typedef struct delayed_pub {
    cs_broadcaster *b;
    int rc;
} delayed_pub;

/* Publishes once the main thread is parked in cs_broadcast_wait (the waiters hook says so), so the
 * publish lands inside the wait by construction. Looks every 1 ms, for at most WAIT_NS. */
static void *publish_later(void *p)
{
    delayed_pub *d = p;
    const struct timespec nap = {0, 1000000L};
    for (int64_t i = 0; i < WAIT_NS / 1000000 && cs_broadcast_waiters(d->b) == 0; i++)
        nanosleep(&nap, NULL);
    if (cs_broadcast_waiters(d->b) == 0) {
        d->rc = -4; /* the waiter never arrived */
        return NULL;
    }
    cs_msg *m = msg_of("late-begin", 10);
    d->rc = m ? cs_broadcast_begin(d->b, 9, m, NULL) : -2;
    return NULL;
}

static void test_wait_sees_publishes_after_watch(void **state)
{
    (void)state;
    cs_broadcaster *b = cs_broadcaster_new(NULL, NULL);
    assert_non_null(b);
    cs_snap s;

    /* Published after the watch but before the wait: the wait returns at once. */
    cs_broadcast_watch(b, &s);
    assert_int_equal(cs_broadcast_begin(b, 8, begin_msg(8), NULL), 0);
    assert_int_equal(cs_broadcast_end(b, end_msg(8, 0), NULL, NULL), 0);
    int64_t t0 = now_ns();
    assert_true(cs_broadcast_wait(b, s.gen, WAIT_NS));
    assert_true(now_ns() - t0 < WAIT_NS / 2);
    cs_snap_release(&s);

    /* Published from another thread while the waiter sleeps. */
    cs_broadcast_watch(b, &s);
    delayed_pub d = {.b = b, .rc = -3};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, publish_later, &d), 0);
    t0 = now_ns();
    bool changed = cs_broadcast_wait(b, s.gen, WAIT_NS);
    int64_t took = now_ns() - t0;
    pthread_join(t, NULL);
    assert_true(changed);
    assert_true(took < WAIT_NS / 2);
    assert_int_equal(d.rc, 0);
    cs_snap_release(&s);
    cs_broadcast_watch(b, &s);
    assert_int_equal(s.seq, 9);
    cs_snap_release(&s);
    cs_broadcaster_free(b);
}

/* With nothing published the wait times out, no earlier than asked, reporting no change; this
 * includes a timeout with a whole-seconds part. */
static void test_wait_times_out_without_a_publish(void **state)
{
    (void)state;
    cs_broadcaster *b = cs_broadcaster_new(NULL, NULL);
    assert_non_null(b);
    cs_snap s;
    cs_broadcast_watch(b, &s);
    /* The last one carries into tv_sec for any clock reading but an exact second. */
    const int64_t timeouts[] = {0, 30 * 1000000LL, 2 * SEC - 1};
    for (size_t i = 0; i < sizeof timeouts / sizeof timeouts[0]; i++) {
        int64_t t0 = now_ns();
        assert_false(cs_broadcast_wait(b, s.gen, timeouts[i]));
        int64_t took = now_ns() - t0;
        if (took < timeouts[i])
            fail_msg("wait(%lld ns) returned after %lld ns", (long long)timeouts[i], (long long)took);
        assert_true(took < timeouts[i] + WAIT_NS);
    }
    cs_snap_release(&s);
    cs_broadcaster_free(b);
}

/* ---- 49: a snapshot is stable ---- */

static void test_snapshot_is_stable(void **state)
{
    (void)state;
    cs_broadcaster *b = cs_broadcaster_new(NULL, NULL);
    assert_non_null(b);
    cs_msg *bm = begin_msg(1), *alpha = chunk_msg(1, 0);
    assert_int_equal(cs_broadcast_begin(b, 1, bm, NULL), 0);
    assert_int_equal(cs_broadcast_chunk(b, alpha, NULL), 0);

    cs_snap s;
    cs_broadcast_watch(b, &s);

    cs_msg *beta = chunk_msg(1, 1), *em = end_msg(1, 2);
    assert_int_equal(cs_broadcast_chunk(b, beta, NULL), 0);
    assert_int_equal(cs_broadcast_end(b, em, NULL, NULL), 0);
    assert_int_equal(cs_broadcast_begin(b, 2, begin_msg(2), NULL), 0);

    /* The snapshot still shows exactly the prefix it saw. */
    assert_int_equal(s.seq, 1);
    assert_int_equal(s.nchunks, 1);
    assert_null(s.end);
    assert_false(s.ended);
    /* Its flow outlives the replacement and reads as it did. */
    assert_int_equal(s.flow->seq, 1);
    assert_ptr_equal(s.flow->begin, bm);
    assert_msg_ok(s.flow->begin, CS_WIRE_TYPE_BEGIN, 1, 0);
    assert_ptr_equal(cs_flow_chunk(s.flow, 0), alpha);
    assert_msg_ok(cs_flow_chunk(s.flow, 0), CS_WIRE_TYPE_CHUNK, 1, 0);

    /* flow_state reads the replaced flow's final state: both chunks and its END. */
    size_t n = 99;
    cs_msg *end = NULL;
    cs_broadcast_flow_state(b, s.flow, &n, &end);
    assert_int_equal(n, 2);
    assert_ptr_equal(end, em);
    assert_ptr_equal(cs_flow_chunk(s.flow, 1), beta);
    assert_msg_ok(cs_flow_chunk(s.flow, 1), CS_WIRE_TYPE_CHUNK, 1, 1);
    assert_msg_ok(end, CS_WIRE_TYPE_END, 1, 2);

    /* The current flow is the new one. */
    cs_snap cur;
    cs_broadcast_watch(b, &cur);
    assert_int_equal(cur.seq, 2);
    assert_ptr_not_equal(cur.flow, s.flow);
    assert_int_equal(cur.nchunks, 0);
    cs_snap_release(&cur);
    cs_snap_release(&s);
    cs_broadcaster_free(b);
}

/* flow_state on a flow that is still open, and on one replaced while still growing is
 * impossible (begin refuses an open flow), so: open, then complete, then replaced. */
static void test_flow_state_follows_a_held_flow(void **state)
{
    (void)state;
    cs_broadcaster *b = cs_broadcaster_new(NULL, NULL);
    assert_non_null(b);
    assert_int_equal(cs_broadcast_begin(b, 4, begin_msg(4), NULL), 0);
    cs_snap s;
    cs_broadcast_watch(b, &s);
    size_t n = 99;
    cs_msg *end = (cs_msg *)1;
    cs_broadcast_flow_state(b, s.flow, &n, &end);
    assert_int_equal(n, 0);
    assert_null(end);

    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(cs_broadcast_chunk(b, chunk_msg(4, i), NULL), 0);
    cs_broadcast_flow_state(b, s.flow, &n, &end);
    assert_int_equal(n, 3);
    assert_null(end);
    assert_int_equal(s.nchunks, 0); /* the snapshot itself does not move */

    cs_msg *em = end_msg(4, 3);
    assert_int_equal(cs_broadcast_end(b, em, NULL, NULL), 0);
    assert_int_equal(cs_broadcast_begin(b, 5, begin_msg(5), NULL), 0);
    assert_int_equal(cs_broadcast_chunk(b, chunk_msg(5, 0), NULL), 0);
    cs_broadcast_finish(b, false);
    cs_broadcast_flow_state(b, s.flow, &n, &end);
    assert_int_equal(n, 3); /* the new flow's chunk is not counted against the old one */
    assert_ptr_equal(end, em);
    for (uint32_t i = 0; i < 3; i++)
        assert_msg_ok(cs_flow_chunk(s.flow, i), CS_WIRE_TYPE_CHUNK, 4, i);
    cs_snap_release(&s);
    cs_broadcaster_free(b);
}

/* ---- 50: finish is final and idempotent ---- */

static void test_finish_is_final_and_idempotent(void **state)
{
    (void)state;
    wake_rec w = {0};
    cs_broadcaster *b = cs_broadcaster_new(count_wake, &w);
    assert_non_null(b);
    assert_int_equal(cs_broadcast_begin(b, 3, begin_msg(3), NULL), 0);
    cs_msg *em = end_msg(3, 0);
    assert_int_equal(cs_broadcast_end(b, em, NULL, NULL), 0);
    cs_snap s;
    cs_broadcast_watch(b, &s);
    uint64_t g = s.gen;
    cs_snap_release(&s);
    assert_int_equal(atomic_load(&w.calls), 2);

    cs_broadcast_finish(b, false);
    assert_true(fired(b, g));
    assert_int_equal(atomic_load(&w.calls), 3);
    cs_broadcast_watch(b, &s);
    assert_true(s.ended);
    assert_false(s.failed);
    assert_int_equal(s.seq, 3); /* the last flow is kept */
    assert_ptr_equal(s.end, em);
    g = s.gen;
    cs_snap_release(&s);

    /* A second finish changes nothing: no wake, same generation, still ended, and its failure
     * flag is ignored. */
    cs_broadcast_finish(b, true);
    assert_false(fired(b, g));
    assert_int_equal(atomic_load(&w.calls), 3);
    cs_broadcast_watch(b, &s);
    assert_true(s.ended);
    assert_false(s.failed);
    assert_int_equal(s.gen, g);
    assert_int_equal(s.seq, 3);
    cs_snap_release(&s);
    cs_broadcaster_free(b);
}

static void test_finish_records_failure_once(void **state)
{
    (void)state;
    cs_broadcaster *b = cs_broadcaster_new(NULL, NULL);
    assert_non_null(b);
    cs_broadcast_finish(b, true);
    cs_snap s;
    cs_broadcast_watch(b, &s);
    assert_true(s.ended);
    assert_true(s.failed);
    assert_int_equal(s.seq, 0); /* finished before any ledger */
    assert_null(s.flow);
    cs_snap_release(&s);
    cs_broadcast_finish(b, false);
    cs_broadcast_watch(b, &s);
    assert_true(s.failed);
    cs_snap_release(&s);
    cs_broadcaster_free(b);

    /* Finishing mid-flow leaves the open flow as it was: an ended watch sees what was published. */
    b = cs_broadcaster_new(NULL, NULL);
    assert_non_null(b);
    assert_int_equal(cs_broadcast_begin(b, 11, begin_msg(11), NULL), 0);
    assert_int_equal(cs_broadcast_chunk(b, chunk_msg(11, 0), NULL), 0);
    cs_broadcast_finish(b, true);
    cs_broadcast_watch(b, &s);
    assert_true(s.ended);
    assert_true(s.failed);
    assert_int_equal(s.seq, 11);
    assert_int_equal(s.nchunks, 1);
    assert_null(s.end);
    cs_snap_release(&s);
    cs_broadcaster_free(b);
}

/* ---- 51: guard failures do not hold the lock ---- */

typedef enum { OP_BEGIN1, OP_BEGIN2, OP_CHUNK, OP_END, OP_FINISH } op;

typedef struct guard_case {
    const char *name;
    op setup[4];
    int nsetup;
    op publish;
    const char *want;
} guard_case;

static int apply(cs_broadcaster *b, op o, cs_msg *m, cs_err *err)
{
    switch (o) {
    case OP_BEGIN1:
        return cs_broadcast_begin(b, 1, m ? m : begin_msg(1), err);
    case OP_BEGIN2:
        return cs_broadcast_begin(b, 2, m ? m : begin_msg(2), err);
    case OP_CHUNK:
        return cs_broadcast_chunk(b, m ? m : chunk_msg(1, 0), err);
    case OP_END:
        return cs_broadcast_end(b, m ? m : end_msg(1, 0), NULL, err);
    case OP_FINISH:
        cs_broadcast_finish(b, false);
        return 0;
    }
    return -1;
}

static void test_guards_fail_without_holding_the_lock(void **state)
{
    (void)state;
    static const guard_case cases[] = {
        {"begin after finish", {OP_FINISH}, 1, OP_BEGIN1,
         "server: ledger begun after the stream was finished"},
        {"begin over an open flow", {OP_BEGIN1}, 1, OP_BEGIN2,
         "server: ledger begun while the previous flow is still open"},
        {"chunk outside a flow", {OP_FINISH}, 0, OP_CHUNK,
         "server: chunk published outside an open flow"},
        {"end after end", {OP_BEGIN1, OP_END}, 2, OP_END, "server: end published outside an open flow"},
        /* Beyond the Go table: the other ways to be outside an open flow. */
        {"end with no flow", {OP_FINISH}, 0, OP_END, "server: end published outside an open flow"},
        {"chunk after end", {OP_BEGIN1, OP_END}, 2, OP_CHUNK,
         "server: chunk published outside an open flow"},
        {"chunk after finish", {OP_BEGIN1, OP_FINISH}, 2, OP_CHUNK,
         "server: chunk published outside an open flow"},
        {"end after finish", {OP_BEGIN1, OP_CHUNK, OP_FINISH}, 3, OP_END,
         "server: end published outside an open flow"},
        /* Finished wins over the open flow. */
        {"begin over an open flow after finish", {OP_BEGIN1, OP_FINISH}, 2, OP_BEGIN2,
         "server: ledger begun after the stream was finished"},
        {"begin over a complete flow after finish", {OP_BEGIN1, OP_END, OP_FINISH}, 3, OP_BEGIN2,
         "server: ledger begun after the stream was finished"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const guard_case *c = &cases[i];
        print_message("guard: %s\n", c->name);
        wake_rec w = {0};
        cs_broadcaster *b = cs_broadcaster_new(count_wake, &w);
        assert_non_null(b);
        for (int k = 0; k < c->nsetup; k++)
            assert_int_equal(apply(b, c->setup[k], NULL, NULL), 0);
        cs_snap before;
        cs_broadcast_watch(b, &before);
        unsigned wakes = atomic_load(&w.calls);

        /* Hold an extra reference to see the guard release the caller's. */
        cs_msg *m = c->publish == OP_CHUNK ? chunk_msg(1, 0)
                    : c->publish == OP_END ? end_msg(1, 0)
                                           : begin_msg(c->publish == OP_BEGIN1 ? 1 : 2);
        cs_msg_retain(m);
        cs_err err = {0};
        int rc = apply(b, c->publish, m, &err);
        assert_int_equal(rc, -1);
        assert_string_equal(err.msg, c->want);
        assert_int_equal(refs_of(m), 1);
        cs_msg_release(m);
        assert_int_equal(atomic_load(&w.calls), wakes);

        /* A later watch does not deadlock, and sees the state untouched. */
        cs_snap after;
        if (!watch_within(b, &after, DEADLOCK_MS))
            fail_msg("%s: watch deadlocked after the guard failure", c->name);
        assert_int_equal(after.gen, before.gen);
        assert_int_equal(after.seq, before.seq);
        assert_ptr_equal(after.flow, before.flow);
        assert_int_equal(after.nchunks, before.nchunks);
        assert_ptr_equal(after.end, before.end);
        assert_int_equal(after.ended, before.ended);
        assert_false(fired(b, before.gen));
        cs_snap_release(&after);
        cs_snap_release(&before);

        /* A NULL err is allowed and behaves the same. */
        if (c->publish != OP_FINISH)
            assert_int_equal(apply(b, c->publish, NULL, NULL), -1);

        /* The lock is usable by publishers too: finishing and watching still work. */
        cs_broadcast_finish(b, false);
        if (!watch_within(b, &after, DEADLOCK_MS))
            fail_msg("%s: watch deadlocked after finish", c->name);
        assert_true(after.ended);
        cs_snap_release(&after);
        cs_broadcaster_free(b);
    }
}

/* A guard failure leaves the open flow usable: the rejected BEGIN did not disturb ledger 1. */
static void test_flow_continues_after_a_refused_begin(void **state)
{
    (void)state;
    cs_broadcaster *b = cs_broadcaster_new(NULL, NULL);
    assert_non_null(b);
    assert_int_equal(cs_broadcast_begin(b, 1, begin_msg(1), NULL), 0);
    assert_int_equal(cs_broadcast_chunk(b, chunk_msg(1, 0), NULL), 0);
    cs_err err = {0};
    assert_int_equal(cs_broadcast_begin(b, 2, begin_msg(2), &err), -1);
    cs_snap s;
    if (!watch_within(b, &s, DEADLOCK_MS)) /* before publishing again, which would hang */
        fail_msg("watch deadlocked after the refused begin");
    cs_snap_release(&s);
    assert_int_equal(cs_broadcast_chunk(b, chunk_msg(1, 1), NULL), 0);
    assert_int_equal(cs_broadcast_end(b, end_msg(1, 2), NULL, NULL), 0);
    cs_broadcast_watch(b, &s);
    assert_int_equal(s.seq, 1);
    assert_int_equal(s.nchunks, 2);
    assert_msg_ok(cs_flow_chunk(s.flow, 1), CS_WIRE_TYPE_CHUNK, 1, 1);
    assert_msg_ok(s.end, CS_WIRE_TYPE_END, 1, 2);
    cs_snap_release(&s);
    assert_int_equal(cs_broadcast_begin(b, 2, begin_msg(2), NULL), 0);
    cs_broadcaster_free(b);
}

/* ---- reference counting ---- */

static void test_flows_are_freed_with_their_last_reference(void **state)
{
    (void)state;
    cs_broadcaster *b = cs_broadcaster_new(NULL, NULL);
    assert_non_null(b);

    /* Extra references on each of ledger 1's messages reveal when the flow lets go of them. */
    cs_msg *bm = cs_msg_retain(begin_msg(1));
    cs_msg *cm = cs_msg_retain(chunk_msg(1, 0));
    cs_msg *em = cs_msg_retain(end_msg(1, 1));
    assert_int_equal(cs_broadcast_begin(b, 1, bm, NULL), 0);
    assert_int_equal(cs_broadcast_chunk(b, cm, NULL), 0);
    assert_int_equal(cs_broadcast_end(b, em, NULL, NULL), 0);

    cs_snap s1, s2;
    cs_broadcast_watch(b, &s1);
    cs_broadcast_watch(b, &s2);
    assert_ptr_equal(s1.flow, s2.flow);
    assert_int_equal(atomic_load(&s1.flow->refs), 3); /* the broadcaster and two snapshots */

    /* Replaced: the broadcaster's reference goes, the snapshots keep the flow alive. */
    assert_int_equal(cs_broadcast_begin(b, 2, begin_msg(2), NULL), 0);
    assert_int_equal(atomic_load(&s1.flow->refs), 2);
    assert_int_equal(refs_of(bm), 2);
    assert_int_equal(refs_of(cm), 2);
    assert_int_equal(refs_of(em), 2);

    cs_snap_release(&s1);
    assert_null(s1.flow);
    assert_null(s1.end);
    assert_int_equal(refs_of(bm), 2);
    cs_snap_release(&s2); /* the last reference: the flow and its holds go */
    assert_int_equal(refs_of(bm), 1);
    assert_int_equal(refs_of(cm), 1);
    assert_int_equal(refs_of(em), 1);
    cs_msg_release(bm);
    cs_msg_release(cm);
    cs_msg_release(em);

    /* Released twice is harmless for a snapshot (it forgets its flow). */
    cs_snap_release(&s2);

    /* A snapshot outlives the broadcaster. */
    cs_msg *b2 = NULL;
    cs_snap s3;
    cs_broadcast_watch(b, &s3);
    b2 = cs_msg_retain(s3.flow->begin);
    assert_int_equal(refs_of(b2), 2);
    cs_broadcaster_free(b);
    assert_int_equal(refs_of(b2), 2);
    assert_int_equal(atomic_load(&s3.flow->refs), 1);
    assert_msg_ok(s3.flow->begin, CS_WIRE_TYPE_BEGIN, 2, 0);
    cs_snap_release(&s3);
    assert_int_equal(refs_of(b2), 1);
    cs_msg_release(b2);

    /* With no snapshot out, freeing the broadcaster frees its open flow and every chunk. */
    b = cs_broadcaster_new(NULL, NULL);
    assert_non_null(b);
    cs_msg *held = cs_msg_retain(chunk_msg(3, 0));
    assert_int_equal(cs_broadcast_begin(b, 3, begin_msg(3), NULL), 0);
    assert_int_equal(cs_broadcast_chunk(b, held, NULL), 0);
    for (uint32_t i = 1; i < 300; i++) /* across a segment boundary */
        assert_int_equal(cs_broadcast_chunk(b, chunk_msg(3, i), NULL), 0);
    cs_broadcaster_free(b);
    assert_int_equal(refs_of(held), 1);
    cs_msg_release(held);

    cs_broadcaster_free(NULL); /* allowed */
    cs_flow_release(NULL);     /* allowed */
}

static void test_retain_and_release_a_flow_directly(void **state)
{
    (void)state;
    cs_broadcaster *b = cs_broadcaster_new(NULL, NULL);
    assert_non_null(b);
    cs_msg *bm = cs_msg_retain(begin_msg(6));
    assert_int_equal(cs_broadcast_begin(b, 6, bm, NULL), 0);
    cs_snap s;
    cs_broadcast_watch(b, &s);
    cs_flow *f = cs_flow_retain(s.flow);
    assert_ptr_equal(f, s.flow);
    cs_snap_release(&s);
    assert_int_equal(cs_broadcast_end(b, end_msg(6, 0), NULL, NULL), 0);
    cs_broadcaster_free(b);
    assert_int_equal(refs_of(bm), 2); /* f still holds the flow */
    assert_int_equal(f->seq, 6);
    cs_flow_release(f);
    assert_int_equal(refs_of(bm), 1);
    cs_msg_release(bm);
}

/* ---- chunk segments ---- */

static void test_chunks_cross_segment_boundaries(void **state)
{
    (void)state;
    cs_broadcaster *b = cs_broadcaster_new(NULL, NULL);
    assert_non_null(b);
    assert_int_equal(cs_broadcast_begin(b, 21, begin_msg(21), NULL), 0);
    const uint32_t total = 3 * CS_FLOW_SEG_LEN + 5;
    cs_snap at_boundary = {0};
    for (uint32_t i = 0; i < total; i++) {
        assert_int_equal(cs_broadcast_chunk(b, chunk_msg(21, i), NULL), 0);
        if (i + 1 == CS_FLOW_SEG_LEN)
            cs_broadcast_watch(b, &at_boundary);
    }
    assert_int_equal(at_boundary.nchunks, CS_FLOW_SEG_LEN);
    cs_snap s;
    cs_broadcast_watch(b, &s);
    assert_int_equal(s.nchunks, total);
    for (uint32_t i = 0; i < total; i++)
        assert_msg_ok(cs_flow_chunk(s.flow, i), CS_WIRE_TYPE_CHUNK, 21, i);
    for (uint32_t i = 0; i < at_boundary.nchunks; i++)
        assert_msg_ok(cs_flow_chunk(at_boundary.flow, i), CS_WIRE_TYPE_CHUNK, 21, i);
    cs_snap_release(&s);
    cs_snap_release(&at_boundary);
    cs_broadcaster_free(b);
}

/* The segment table caps one flow at CS_FLOW_MAX_SEGS * CS_FLOW_SEG_LEN chunks (more than a
 * 256 MiB ledger at the minimum chunk size); one more is refused like a guard failure. */
static void test_too_many_chunks_is_refused(void **state)
{
    (void)state;
    cs_broadcaster *b = cs_broadcaster_new(NULL, NULL);
    assert_non_null(b);
    assert_int_equal(cs_broadcast_begin(b, 1, begin_msg(1), NULL), 0);
    const size_t cap = (size_t)CS_FLOW_MAX_SEGS * CS_FLOW_SEG_LEN;
    assert_true(cap >= (size_t)CS_MAX_PAYLOAD_SIZE / CS_MIN_CHUNK_SIZE);
    cs_msg *tiny = msg_of("x", 1);
    assert_non_null(tiny);
    for (size_t i = 0; i < cap; i++)
        if (cs_broadcast_chunk(b, cs_msg_retain(tiny), NULL) != 0)
            fail_msg("chunk %zu refused below the cap", i);
    cs_snap s;
    cs_broadcast_watch(b, &s);
    uint64_t g = s.gen;
    assert_int_equal(s.nchunks, cap);
    cs_snap_release(&s);

    cs_err err = {0};
    assert_int_equal(cs_broadcast_chunk(b, cs_msg_retain(tiny), &err), -1);
    assert_string_equal(err.msg, "server: too many chunks in one flow");
    assert_int_equal(refs_of(tiny), cap + 1); /* the refused one was released */
    if (!watch_within(b, &s, DEADLOCK_MS))
        fail_msg("watch deadlocked after the refused chunk");
    assert_int_equal(s.nchunks, cap);
    assert_int_equal(s.gen, g);
    cs_snap_release(&s);
    assert_int_equal(cs_broadcast_end(b, end_msg(1, (uint32_t)cap), NULL, NULL), 0);
    cs_broadcaster_free(b);
    assert_int_equal(refs_of(tiny), 1);
    cs_msg_release(tiny);
}

/* ---- 52: concurrent watchers ---- */

#define WATCHERS 8
#define FLOWS 300
#define CHUNKS 3

typedef struct watcher {
    pthread_t t;
    cs_broadcaster *b;
    char failure[256]; /* empty when all went well */
    uint32_t last_seq;
    bool last_complete;
    bool saw_end;
    unsigned snapshots;
} watcher;

#define WFAIL(w, ...)                                                                              \
    do {                                                                                           \
        snprintf((w)->failure, sizeof (w)->failure, __VA_ARGS__);                                  \
        cs_snap_release(&s);                                                                       \
        return NULL;                                                                               \
    } while (0)

static void *watch_loop(void *p)
{
    watcher *w = p;
    uint32_t last_seq = 0;
    size_t last_chunks = 0;
    bool last_complete = false;
    for (;;) {
        cs_snap s;
        cs_broadcast_watch(w->b, &s);
        w->snapshots++;
        if (s.seq < last_seq)
            WFAIL(w, "flow went backwards: %u after %u", s.seq, last_seq);
        if (s.seq == last_seq && s.nchunks < last_chunks)
            WFAIL(w, "ledger %u chunk prefix shrank from %zu to %zu", s.seq, last_chunks, s.nchunks);
        if (s.seq == last_seq && last_complete && !s.end)
            WFAIL(w, "ledger %u became incomplete again", s.seq);
        if (s.seq != 0) {
            if (!s.flow || s.flow->seq != s.seq)
                WFAIL(w, "snapshot of ledger %u holds flow %u", s.seq, s.flow ? s.flow->seq : 0);
            if (s.nchunks > CHUNKS)
                WFAIL(w, "ledger %u shows %zu chunks, more than %d", s.seq, s.nchunks, CHUNKS);
            const char *why = check_msg(s.flow->begin, CS_WIRE_TYPE_BEGIN, s.seq, 0);
            for (size_t i = 0; !why && i < s.nchunks; i++)
                why = check_msg(cs_flow_chunk(s.flow, i), CS_WIRE_TYPE_CHUNK, s.seq, (uint32_t)i);
            if (!why && s.end) {
                why = check_msg(s.end, CS_WIRE_TYPE_END, s.seq, CHUNKS);
                if (!why && s.nchunks != CHUNKS)
                    why = "END published before every chunk was visible";
            }
            if (why)
                WFAIL(w, "ledger %u: %s", s.seq, why);
        } else if (s.flow || s.nchunks || s.end) {
            WFAIL(w, "seq 0 snapshot carries a flow");
        }
        last_seq = s.seq;
        last_chunks = s.nchunks;
        last_complete = s.end != NULL;
        w->saw_end |= s.end != NULL;
        if (s.ended) {
            /* An ended watch has already seen everything published. */
            if (s.seq != FLOWS || s.nchunks != CHUNKS || !s.end || s.failed)
                WFAIL(w, "ended on ledger %u with %zu chunks, end %s, failed %d; want %d complete",
                      s.seq, s.nchunks, s.end ? "set" : "missing", s.failed, FLOWS);
            w->last_seq = s.seq;
            w->last_complete = true;
            cs_snap_release(&s);
            return NULL;
        }
        uint64_t gen = s.gen;
        cs_snap_release(&s); /* may drop the last reference to a replaced flow */
        if (!cs_broadcast_wait(w->b, gen, WAIT_NS)) {
            snprintf(w->failure, sizeof w->failure, "no wake within 10s after ledger %u", last_seq);
            return NULL;
        }
    }
}

static void test_concurrent_watchers(void **state)
{
    (void)state;
    wake_rec wr = {0};
    cs_broadcaster *b = cs_broadcaster_new(count_wake, &wr);
    assert_non_null(b);
    watcher ws[WATCHERS];
    memset(ws, 0, sizeof ws);
    for (int i = 0; i < WATCHERS; i++) {
        ws[i].b = b;
        assert_int_equal(pthread_create(&ws[i].t, NULL, watch_loop, &ws[i]), 0);
    }
    for (uint32_t seq = 1; seq <= FLOWS; seq++) {
        assert_int_equal(cs_broadcast_begin(b, seq, begin_msg(seq), NULL), 0);
        for (uint32_t i = 0; i < CHUNKS; i++)
            assert_int_equal(cs_broadcast_chunk(b, chunk_msg(seq, i), NULL), 0);
        assert_int_equal(cs_broadcast_end(b, end_msg(seq, CHUNKS), NULL, NULL), 0);
    }
    cs_broadcast_finish(b, false);
    for (int i = 0; i < WATCHERS; i++)
        pthread_join(ws[i].t, NULL); /* each watcher ends: on ended, or after a bounded wait */
    for (int i = 0; i < WATCHERS; i++) {
        if (ws[i].failure[0])
            fail_msg("watcher %d: %s", i, ws[i].failure);
        assert_int_equal(ws[i].last_seq, FLOWS);
        assert_true(ws[i].last_complete);
        assert_true(ws[i].snapshots >= 1);
    }
    assert_int_equal(atomic_load(&wr.calls), FLOWS * (CHUNKS + 2) + 1);
    cs_broadcaster_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flow_lifecycle),
        cmocka_unit_test(test_generation_advances_on_every_publish),
        cmocka_unit_test(test_wake_runs_after_the_change_outside_the_lock),
        cmocka_unit_test(test_wait_sees_publishes_after_watch),
        cmocka_unit_test(test_wait_times_out_without_a_publish),
        cmocka_unit_test(test_snapshot_is_stable),
        cmocka_unit_test(test_flow_state_follows_a_held_flow),
        cmocka_unit_test(test_finish_is_final_and_idempotent),
        cmocka_unit_test(test_finish_records_failure_once),
        cmocka_unit_test(test_guards_fail_without_holding_the_lock),
        cmocka_unit_test(test_flow_continues_after_a_refused_begin),
        cmocka_unit_test(test_flows_are_freed_with_their_last_reference),
        cmocka_unit_test(test_retain_and_release_a_flow_directly),
        cmocka_unit_test(test_chunks_cross_segment_boundaries),
        cmocka_unit_test(test_too_many_chunks_is_refused),
        cmocka_unit_test(test_concurrent_watchers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
