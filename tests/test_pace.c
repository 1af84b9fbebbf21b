/* SPDX-License-Identifier: Apache-2.0 */
/* The paced adapter (pace.h, Timing) on a hand-advanced clock: nothing sleeps, time moves only
 * when the adapter waits (to the deadline it asked for) or a case moves it, so every assertion
 * is an exact instant and the cases pass the same on a busy machine. That the daemon's default
 * clock is wired and wakes on a cancel from another thread is test_pace_clock.c's one real-clock
 * check. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "common/synthetic.h"
#include "corestreamd/sources/pace.h"
#include "corestreamd/sources/synthetic.h"

#define MAX_BODY (64 * 1024)
#define MAX_SLEEPS 64
#define T0 (1000 * CS_SEC) /* where the fake clock starts: any origin will do */

/* The fake clock, keeping cs_pace_clock's contract: sleep_until records the deadline and jumps
 * to it at once; a cancel already set refuses the wait, whatever the deadline; a wait that would
 * reach past cancel_at ends there instead, firing the cancel, as a cancel from another thread
 * ends a real wait. */
typedef struct fake_clock {
    int64_t now;
    int64_t cancel_at;
    int sleeps;                   /* sleep_until calls */
    int64_t deadline[MAX_SLEEPS]; /* their deadlines, in order */
} fake_clock;

static int64_t fake_now(void *arg)
{
    return ((fake_clock *)arg)->now;
}

static int fake_sleep_until(void *arg, cs_cancel *cancel, int64_t deadline)
{
    fake_clock *c = arg;
    assert_true(c->sleeps < MAX_SLEEPS);
    c->deadline[c->sleeps++] = deadline;
    if (cs_cancel_is_set(cancel))
        return -1;
    if (deadline > c->cancel_at) {
        if (c->now < c->cancel_at)
            c->now = c->cancel_at;
        cs_cancel_fire(cancel);
        return -1;
    }
    if (deadline > c->now)
        c->now = deadline;
    return 0;
}

typedef struct fixture {
    cs_cancel cancel;
    fake_clock clock;
} fixture;

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    if (!fx || cs_cancel_init(&fx->cancel) != 0) {
        free(fx);
        return -1;
    }
    fx->clock.now = T0;
    fx->clock.cancel_at = INT64_MAX;
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    cs_cancel_destroy(&fx->cancel);
    free(fx);
    return 0;
}

/* A paced source over ls on fx's fake clock and cancel. */
static cs_source *paced(fixture *fx, cs_ledger_stream *ls, cs_range range, cs_dur window,
                        cs_dur cadence)
{
    const cs_pace_clock clock = {.now = fake_now, .sleep_until = fake_sleep_until,
                                 .arg = &fx->clock};
    cs_source *src =
        cs_paced_source_new_with_clock(ls, range, window, cadence, &fx->cancel, &clock);
    assert_non_null(src);
    return src;
}

static cs_ledger_stream *synthetic(fixture *fx, int64_t size)
{
    return cs_synthetic_stream_new(size, false, &fx->cancel);
}

static cs_range bounded(uint32_t from, uint32_t to)
{
    return (cs_range){.from = from, .to = to, .bounded = true};
}

/* Starts the next emission, which must be seq; returns the fake time it started at. */
static int64_t start_next(fixture *fx, cs_source *src, uint32_t seq)
{
    cs_emission em;
    cs_err err = {0};
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(em.seq, seq);
    return fx->clock.now;
}

/* Drains the current body in read_size pieces into out; returns the byte count. Bounded: each
 * pass adds a byte or ends, and a full buffer asks for 0 bytes, which ends it. */
static size_t drain(cs_source *src, uint8_t *out, size_t cap, size_t read_size)
{
    size_t got = 0;
    for (;;) {
        cs_err err = {0};
        size_t want = read_size < cap - got ? read_size : cap - got;
        ssize_t n = src->ops->read(src, out + got, want, &err);
        assert_true(n >= 0);
        if (n == 0)
            return got;
        got += (size_t)n;
    }
}

/* A hand-driven ledger stream: fixed payload, optional failure, each pull taking pull_cost on
 * the fake clock; never checks cancellation (so a cancel can only be noticed by the adapter). */
typedef struct fake_stream {
    cs_ledger_stream base;
    const uint8_t *data;
    size_t len;
    bool fail;
    fake_clock *clock;
    cs_dur pull_cost;
    int pulls;
    uint32_t last_seq;
} fake_stream;

static int fake_pull(cs_ledger_stream *ls, uint32_t seq, const uint8_t **data, size_t *len,
                     cs_err *err)
{
    fake_stream *f = (fake_stream *)ls;
    f->pulls++;
    f->last_seq = seq;
    if (f->clock)
        f->clock->now += f->pull_cost;
    if (f->fail)
        return cs_err_set(err, 42, "boom");
    *data = f->data;
    *len = f->len;
    return 1;
}

static void fake_destroy(cs_ledger_stream *ls)
{
    (void)ls; /* owned by the test's stack frame */
}

static const cs_ledger_stream_ops fake_ops = {.pull = fake_pull, .destroy = fake_destroy};

static const uint8_t ONE_BYTE[] = "x";
static const uint8_t TEN_BYTES[] = "0123456789";

/* ---- bytes and sequences ---- */

static void test_preserves_bytes(void **state)
{
    fixture *fx = *state;
    cs_source *src = paced(fx, synthetic(fx, 4096), bounded(3, 5), 0, 0);
    static uint8_t got[MAX_BODY], want[4096];
    cs_emission em;
    cs_err err = {0};
    for (uint32_t seq = 3; seq <= 5; seq++) {
        assert_int_equal(src->ops->next(src, &em, &err), 1);
        assert_int_equal(em.seq, seq);
        assert_int_equal(em.declared_size, 4096);
        assert_int_equal(drain(src, got, sizeof got, 100), 4096);
        memset(want, 0, sizeof want);
        cs_synthetic_fill(want, sizeof want, seq, false);
        assert_memory_equal(got, want, sizeof want);
    }
    assert_int_equal(src->ops->next(src, &em, &err), 0);
    assert_int_equal(fx->clock.sleeps, 0); /* neither window nor cadence: no wait at all */
    src->ops->destroy(src);
}

static void test_forwards_source_errors(void **state)
{
    fixture *fx = *state;
    fake_stream f = {.base.ops = &fake_ops, .fail = true};
    cs_source *src = paced(fx, &f.base, bounded(7, 9), 0, 20 * CS_MS);
    cs_emission em;
    cs_err err = {0};
    assert_int_equal(src->ops->next(src, &em, &err), -1);
    assert_int_equal(err.kind, 42);
    assert_string_equal(err.msg, "boom");
    assert_int_equal(em.seq, 7);           /* the ledger that was expected */
    assert_int_equal(fx->clock.sleeps, 0); /* a failed pull does not wait for its slot */
    src->ops->destroy(src);
}

static void test_range_ending_at_the_ceiling_terminates(void **state)
{
    fixture *fx = *state;
    cs_source *src = paced(fx, synthetic(fx, 16), bounded(4294967293u, 4294967295u), 0, 0);
    cs_emission em;
    cs_err err = {0};
    uint32_t seen[8];
    int count = 0, r;
    while (count < 8 && (r = src->ops->next(src, &em, &err)) == 1)
        seen[count++] = em.seq;
    assert_int_equal(r, 0);
    assert_int_equal(count, 3);
    assert_int_equal(seen[0], 4294967293u);
    assert_int_equal(seen[2], 4294967295u);
    assert_int_equal(src->ops->next(src, &em, &err), 0); /* stays ended, no wrap to 0 */
    src->ops->destroy(src);
}

static void test_unbounded_stops_at_the_last_sequence(void **state)
{
    fixture *fx = *state;
    cs_range r = {.from = 4294967294u, .bounded = false};
    cs_source *src = paced(fx, synthetic(fx, 16), r, 0, 0);
    cs_emission em;
    cs_err err = {0};
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(em.seq, 4294967295u);
    assert_int_equal(src->ops->next(src, &em, &err), 0);
    src->ops->destroy(src);
}

static void test_sequences_count_from_the_range(void **state)
{
    fixture *fx = *state;
    fake_stream f = {.base.ops = &fake_ops, .data = ONE_BYTE, .len = 1};
    cs_source *src = paced(fx, &f.base, bounded(100, 101), 0, 0);
    cs_emission em;
    cs_err err = {0};
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(em.seq, 100);
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(em.seq, 101);
    assert_int_equal(f.last_seq, 101);
    assert_int_equal(src->ops->next(src, &em, &err), 0);
    assert_int_equal(f.pulls, 2); /* a finished range does not pull again */
    src->ops->destroy(src);
}

/* ---- the emit window ---- */

/* 64 KiB read 8 KiB at a time over 50 ms: the k-th piece is due at start + 50 ms * k / 8, the
 * last exactly as the window closes; the second body's window starts where the first ended. */
static void test_window_spreads_bytes(void **state)
{
    fixture *fx = *state;
    const cs_dur window = 50 * CS_MS;
    cs_source *src = paced(fx, synthetic(fx, 64 << 10), bounded(1, 2), window, 0);
    static uint8_t buf[MAX_BODY];
    for (uint32_t seq = 1; seq <= 2; seq++) {
        int64_t start = start_next(fx, src, seq);
        int first = fx->clock.sleeps;
        assert_int_equal(drain(src, buf, sizeof buf, 8 << 10), 64 << 10);
        assert_int_equal(fx->clock.sleeps - first, 8);
        for (int k = 1; k <= 8; k++)
            assert_int_equal(fx->clock.deadline[first + k - 1], start + window * k / 8);
        assert_int_equal(fx->clock.now, start + window);
    }
    assert_int_equal(fx->clock.now, T0 + 2 * window);
    src->ops->destroy(src);
}

static void test_zero_window_is_immediate(void **state)
{
    fixture *fx = *state;
    cs_source *src = paced(fx, synthetic(fx, 64 << 10), bounded(1, 1), 0, 0);
    static uint8_t buf[MAX_BODY];
    start_next(fx, src, 1);
    assert_int_equal(drain(src, buf, sizeof buf, 8 << 10), 64 << 10);
    assert_int_equal(fx->clock.sleeps, 0);
    assert_int_equal(fx->clock.now, T0);
    src->ops->destroy(src);
}

/* The deadline follows the offset, not the read count: 16 bytes read 6 at a time over 1 ms are
 * due at 6/16, 12/16 and 16/16 of it. */
static void test_window_deadlines_follow_the_offset(void **state)
{
    fixture *fx = *state;
    static const uint8_t body[16] = "0123456789abcdef";
    fake_stream f = {.base.ops = &fake_ops, .data = body, .len = sizeof body};
    cs_source *src = paced(fx, &f.base, bounded(1, 1), 1 * CS_MS, 0);
    uint8_t buf[32];
    start_next(fx, src, 1);
    assert_int_equal(drain(src, buf, sizeof buf, 6), 16);
    assert_memory_equal(buf, body, sizeof body);
    assert_int_equal(fx->clock.sleeps, 3);
    assert_int_equal(fx->clock.deadline[0], T0 + 375 * CS_US);
    assert_int_equal(fx->clock.deadline[1], T0 + 750 * CS_US);
    assert_int_equal(fx->clock.deadline[2], T0 + 1 * CS_MS);
    src->ops->destroy(src);
}

/* A body's window starts at its first read, not at next(): a reader 3 ms late gets the last
 * byte 3 ms late, and the next emission is still on the cadence grid. */
static void test_window_starts_at_the_first_read(void **state)
{
    fixture *fx = *state;
    fake_stream f = {.base.ops = &fake_ops, .data = TEN_BYTES, .len = 10};
    cs_source *src = paced(fx, &f.base, bounded(1, 2), 10 * CS_MS, 20 * CS_MS);
    uint8_t buf[16];
    assert_int_equal(start_next(fx, src, 1), T0);
    fx->clock.now += 3 * CS_MS;
    assert_int_equal(drain(src, buf, sizeof buf, sizeof buf), 10);
    assert_int_equal(fx->clock.now, T0 + 13 * CS_MS);
    assert_int_equal(start_next(fx, src, 2), T0 + 20 * CS_MS);
    assert_int_equal(drain(src, buf, sizeof buf, sizeof buf), 10);
    assert_int_equal(fx->clock.now, T0 + 30 * CS_MS);
    src->ops->destroy(src);
}

static void test_empty_ledger_body(void **state)
{
    fixture *fx = *state;
    fake_stream f = {.base.ops = &fake_ops, .data = (const uint8_t *)"", .len = 0};
    cs_source *src = paced(fx, &f.base, bounded(1, 2), 10 * CS_MS, 0);
    cs_emission em;
    cs_err err = {0};
    uint8_t buf[16];
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(em.declared_size, 0);
    assert_int_equal(src->ops->read(src, buf, sizeof buf, &err), 0);
    assert_int_equal(fx->clock.sleeps, 0); /* nothing to spread */
    src->ops->destroy(src);
}

static void test_read_returns_min_of_len_and_remaining(void **state)
{
    fixture *fx = *state;
    fake_stream f = {.base.ops = &fake_ops, .data = TEN_BYTES, .len = 10};
    cs_source *src = paced(fx, &f.base, bounded(1, 1), 1 * CS_MS, 0);
    cs_emission em;
    cs_err err = {0};
    uint8_t buf[64];
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(src->ops->read(src, buf, 4, &err), 4);
    assert_int_equal(fx->clock.now, T0 + 400 * CS_US);
    assert_int_equal(src->ops->read(src, buf + 4, sizeof buf - 4, &err), 6);
    assert_int_equal(fx->clock.now, T0 + 1 * CS_MS);
    assert_memory_equal(buf, TEN_BYTES, 10);
    assert_int_equal(src->ops->read(src, buf, sizeof buf, &err), 0);
    assert_int_equal(src->ops->next(src, &em, &err), 0);
    src->ops->destroy(src);
}

/* ---- the cadence grid ---- */

static void test_cadence_spaces_emissions(void **state)
{
    fixture *fx = *state;
    const cs_dur cadence = 30 * CS_MS;
    cs_source *src = paced(fx, synthetic(fx, 512), bounded(1, 3), 0, cadence);
    static uint8_t buf[512];
    cs_emission em;
    cs_err err = {0};
    int64_t start[10];
    int count = 0;
    for (int i = 0; i < 10 && src->ops->next(src, &em, &err) == 1; i++) {
        start[count++] = fx->clock.now;
        assert_int_equal(drain(src, buf, sizeof buf, 512), 512);
    }
    assert_int_equal(count, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(start[i], T0 + i * cadence);
    assert_int_equal(fx->clock.sleeps, 3); /* the end of the range did not wait */
    src->ops->destroy(src);
}

/* Overrun the grid by three and a half slots, like a stalled store write: the late ledger's
 * successor starts at once (its slot re-anchored to now), the one after that a full cadence
 * later. Without the re-anchor ledgers 3 and 4 would both be overdue and start with ledger 2. */
static void test_late_ledger_reanchors_the_grid(void **state)
{
    fixture *fx = *state;
    fake_stream f = {.base.ops = &fake_ops, .data = ONE_BYTE, .len = 1};
    const cs_dur cadence = 20 * CS_MS;
    cs_source *src = paced(fx, &f.base, bounded(1, 4), 0, cadence);
    assert_int_equal(start_next(fx, src, 1), T0);
    fx->clock.now += 70 * CS_MS;
    assert_int_equal(start_next(fx, src, 2), T0 + 70 * CS_MS);
    assert_int_equal(start_next(fx, src, 3), T0 + 70 * CS_MS);
    assert_int_equal(start_next(fx, src, 4), T0 + 70 * CS_MS + cadence);
    src->ops->destroy(src);
}

/* A stall of fifty slots costs fifty slots: they are skipped, not emitted afterwards. */
static void test_long_stall_skips_the_missed_slots(void **state)
{
    fixture *fx = *state;
    fake_stream f = {.base.ops = &fake_ops, .data = ONE_BYTE, .len = 1};
    const cs_dur cadence = 20 * CS_MS;
    cs_source *src = paced(fx, &f.base, bounded(1, 6), 0, cadence);
    assert_int_equal(start_next(fx, src, 1), T0);
    fx->clock.now += 1 * CS_SEC;
    const int64_t back = T0 + 1 * CS_SEC;
    assert_int_equal(start_next(fx, src, 2), back);
    assert_int_equal(start_next(fx, src, 3), back);
    for (uint32_t seq = 4; seq <= 6; seq++)
        assert_int_equal(start_next(fx, src, seq), back + (seq - 3) * cadence);
    src->ops->destroy(src);
}

/* Late by less than a cadence: the grid stays where it was, the next ledger is on time. */
static void test_lateness_under_a_cadence_keeps_the_grid(void **state)
{
    fixture *fx = *state;
    fake_stream f = {.base.ops = &fake_ops, .data = ONE_BYTE, .len = 1};
    const cs_dur cadence = 20 * CS_MS;
    cs_source *src = paced(fx, &f.base, bounded(1, 4), 0, cadence);
    assert_int_equal(start_next(fx, src, 1), T0);
    fx->clock.now += cadence + 5 * CS_MS;
    assert_int_equal(start_next(fx, src, 2), T0 + cadence + 5 * CS_MS);
    assert_int_equal(start_next(fx, src, 3), T0 + 2 * cadence);
    assert_int_equal(start_next(fx, src, 4), T0 + 3 * cadence);
    src->ops->destroy(src);
}

/* The pull comes before the wait: a 15 ms pull on a 20 ms cadence leaves 5 ms to wait, so
 * the starts stay on the grid (waiting first would put each 15 ms after its slot). */
static void test_slow_pull_eats_into_the_wait(void **state)
{
    fixture *fx = *state;
    fake_stream f = {.base.ops = &fake_ops, .data = ONE_BYTE, .len = 1, .clock = &fx->clock};
    cs_source *src = paced(fx, &f.base, bounded(1, 3), 0, 20 * CS_MS);
    assert_int_equal(start_next(fx, src, 1), T0);
    f.pull_cost = 15 * CS_MS;
    assert_int_equal(start_next(fx, src, 2), T0 + 20 * CS_MS);
    assert_int_equal(start_next(fx, src, 3), T0 + 40 * CS_MS);
    src->ops->destroy(src);
}

/* A pull slower than the cadence sets the pace itself: every slot has passed by the time its
 * pull is done, so no wait is added, and a slot is never behind the previous start (the grid
 * re-anchors instead of building up a debt to repay as a burst). */
static void test_pull_slower_than_the_cadence_never_waits(void **state)
{
    fixture *fx = *state;
    const cs_dur pull = 25 * CS_MS;
    fake_stream f = {.base.ops = &fake_ops, .data = ONE_BYTE, .len = 1, .clock = &fx->clock,
                     .pull_cost = pull};
    cs_source *src = paced(fx, &f.base, bounded(1, 8), 0, 20 * CS_MS);
    int64_t prev = T0;
    for (uint32_t seq = 1; seq <= 8; seq++) {
        int64_t start = start_next(fx, src, seq);
        assert_int_equal(start, T0 + seq * pull); /* when its pull was done */
        int64_t slot = fx->clock.deadline[seq - 1];
        assert_true(slot <= start);
        assert_true(slot >= prev);
        prev = start;
    }
    src->ops->destroy(src);
}

static void test_finished_range_does_not_wait(void **state)
{
    fixture *fx = *state;
    fake_stream f = {.base.ops = &fake_ops, .data = ONE_BYTE, .len = 1};
    cs_source *src = paced(fx, &f.base, bounded(1, 1), 0, 20 * CS_MS);
    cs_emission em;
    cs_err err = {0};
    assert_int_equal(start_next(fx, src, 1), T0);
    assert_int_equal(src->ops->next(src, &em, &err), 0);
    assert_int_equal(fx->clock.sleeps, 1);
    assert_int_equal(fx->clock.now, T0);
    assert_int_equal(f.pulls, 1);
    src->ops->destroy(src);
}

/* ---- cancellation ---- */

/* A cancel 50 ms into a 7.5-minute piece wait (an hour's window over 8 pieces) ends that read. */
static void test_cancel_mid_window(void **state)
{
    fixture *fx = *state;
    cs_source *src = paced(fx, synthetic(fx, 64 << 10), bounded(1, 1), 3600 * CS_SEC, 0);
    fx->clock.cancel_at = T0 + 50 * CS_MS;
    cs_err err = {0};
    static uint8_t buf[8 << 10];
    start_next(fx, src, 1);
    assert_int_equal(src->ops->read(src, buf, sizeof buf, &err), -1);
    assert_int_equal(err.kind, CS_ERR_CANCELLED);
    assert_string_equal(err.msg, "context canceled");
    assert_int_equal(fx->clock.sleeps, 1);
    assert_int_equal(fx->clock.deadline[0], T0 + 3600 * CS_SEC / 8);
    assert_int_equal(fx->clock.now, T0 + 50 * CS_MS);
    src->ops->destroy(src);
}

/* A cancel between two emissions: the next one is refused at its wait and names its ledger. */
static void test_cancel_mid_cadence_wait(void **state)
{
    fixture *fx = *state;
    cs_source *src = paced(fx, synthetic(fx, 512), bounded(1, 5), 0, 3600 * CS_SEC);
    static uint8_t buf[512];
    cs_emission em;
    cs_err err = {0};
    int count = 0, r = 0;
    for (int i = 0; i < 5 && (r = src->ops->next(src, &em, &err)) == 1; i++) {
        assert_int_equal(drain(src, buf, sizeof buf, 512), 512);
        count++;
        cs_cancel_fire(&fx->cancel);
    }
    assert_int_equal(count, 1);
    assert_int_equal(r, -1);
    assert_int_equal(err.kind, CS_ERR_CANCELLED);
    assert_int_equal(em.seq, 2);
    assert_int_equal(fx->clock.now, T0); /* refused at once, not after the hour */
    src->ops->destroy(src);
}

/* The cadence wait itself ends on a cancel that arrives during it (the stream never checks
 * cancellation, so only the adapter's wait can notice it). */
static void test_cadence_wait_wakes_on_cancel(void **state)
{
    fixture *fx = *state;
    fake_stream f = {.base.ops = &fake_ops, .data = ONE_BYTE, .len = 1};
    cs_source *src = paced(fx, &f.base, bounded(1, 5), 0, 3600 * CS_SEC);
    cs_emission em;
    cs_err err = {0};
    start_next(fx, src, 1);
    fx->clock.cancel_at = T0 + 50 * CS_MS;
    assert_int_equal(src->ops->next(src, &em, &err), -1);
    assert_int_equal(err.kind, CS_ERR_CANCELLED);
    assert_string_equal(err.msg, "context canceled");
    assert_int_equal(em.seq, 2);
    assert_int_equal(f.pulls, 2); /* the pull comes before the wait, as in the prototype */
    assert_int_equal(fx->clock.deadline[1], T0 + 3600 * CS_SEC);
    assert_int_equal(fx->clock.now, T0 + 50 * CS_MS);
    src->ops->destroy(src);
}

/* With a window, a read whose deadline has passed still reports a cancellation; without one,
 * bytes are released regardless. */
static void test_cancel_after_deadline(void **state)
{
    fixture *fx = *state;
    fake_stream f = {.base.ops = &fake_ops, .data = TEN_BYTES, .len = 10};
    cs_source *src = paced(fx, &f.base, bounded(1, 2), 1 * CS_MS, 0);
    cs_emission em;
    cs_err err = {0};
    uint8_t buf[16];
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(src->ops->read(src, buf, 5, &err), 5);
    fx->clock.now += 5 * CS_MS; /* the whole window is now over */
    cs_cancel_fire(&fx->cancel);
    assert_int_equal(src->ops->read(src, buf, 5, &err), -1);
    assert_int_equal(err.kind, CS_ERR_CANCELLED);
    assert_true(fx->clock.deadline[1] < fx->clock.now); /* the deadline had passed */
    src->ops->destroy(src);
}

static void test_zero_window_ignores_cancel(void **state)
{
    fixture *fx = *state;
    fake_stream f = {.base.ops = &fake_ops, .data = TEN_BYTES, .len = 10};
    cs_source *src = paced(fx, &f.base, bounded(1, 1), 0, 0);
    cs_emission em;
    cs_err err = {0};
    uint8_t buf[16];
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    cs_cancel_fire(&fx->cancel);
    assert_int_equal(src->ops->read(src, buf, sizeof buf, &err), 10);
    assert_int_equal(src->ops->read(src, buf, sizeof buf, &err), 0);
    assert_int_equal(fx->clock.sleeps, 0);
    src->ops->destroy(src);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_preserves_bytes),
        T(test_forwards_source_errors),
        T(test_range_ending_at_the_ceiling_terminates),
        T(test_unbounded_stops_at_the_last_sequence),
        T(test_sequences_count_from_the_range),
        T(test_window_spreads_bytes),
        T(test_zero_window_is_immediate),
        T(test_window_deadlines_follow_the_offset),
        T(test_window_starts_at_the_first_read),
        T(test_empty_ledger_body),
        T(test_read_returns_min_of_len_and_remaining),
        T(test_cadence_spaces_emissions),
        T(test_late_ledger_reanchors_the_grid),
        T(test_long_stall_skips_the_missed_slots),
        T(test_lateness_under_a_cadence_keeps_the_grid),
        T(test_slow_pull_eats_into_the_wait),
        T(test_pull_slower_than_the_cadence_never_waits),
        T(test_finished_range_does_not_wait),
        T(test_cancel_mid_window),
        T(test_cancel_mid_cadence_wait),
        T(test_cadence_wait_wakes_on_cancel),
        T(test_cancel_after_deadline),
        T(test_zero_window_ignores_cancel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
