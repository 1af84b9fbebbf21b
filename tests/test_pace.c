/* The paced adapter (PORTSPEC 1.4a; catalogue 53-59). Timing assertions are one-sided: oversleep
 * is unbounded on a loaded machine, undersleep would mean the pacing is broken. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/synthetic.h"
#include "corestreamd/sources/pace.h"
#include "corestreamd/sources/synthetic.h"

#define MAX_BODY (64 * 1024)

static int setup(void **state)
{
    cs_cancel *c = malloc(sizeof *c);
    if (!c || cs_cancel_init(c) != 0) {
        free(c);
        return -1;
    }
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    cs_cancel_destroy(*state);
    free(*state);
    return 0;
}

static cs_range bounded(uint32_t from, uint32_t to)
{
    return (cs_range){.from = from, .to = to, .bounded = true};
}

static double ms_since(int64_t t0)
{
    return (double)(cs_mono_ns() - t0) / 1e6;
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

/* Fires the cancel after a delay, from another thread: the stimulus for the cancel tests. */
typedef struct delayed_cancel {
    cs_cancel *cancel;
    long ms;
    pthread_t thread;
} delayed_cancel;

static void *delayed_cancel_run(void *arg)
{
    delayed_cancel *d = arg;
    struct timespec ts = {.tv_sec = d->ms / 1000, .tv_nsec = (d->ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
    cs_cancel_fire(d->cancel);
    return NULL;
}

static void delayed_cancel_start(delayed_cancel *d, cs_cancel *c, long ms)
{
    d->cancel = c;
    d->ms = ms;
    assert_int_equal(pthread_create(&d->thread, NULL, delayed_cancel_run, d), 0);
}

/* A hand-driven ledger stream: fixed payload, optional failure, never checks cancellation (so a
 * cancel can only be noticed by the adapter itself). */
typedef struct fake_stream {
    cs_ledger_stream base;
    const uint8_t *data;
    size_t len;
    bool fail;
    int pulls;
    uint32_t last_seq;
} fake_stream;

static int fake_pull(cs_ledger_stream *ls, uint32_t seq, const uint8_t **data, size_t *len,
                     cs_err *err)
{
    fake_stream *f = (fake_stream *)ls;
    f->pulls++;
    f->last_seq = seq;
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

/* 53 */
static void test_preserves_bytes(void **state)
{
    cs_source *src = cs_paced_source_new(cs_synthetic_stream_new(4096, false, *state),
                                         bounded(3, 5), 0, 0, *state);
    assert_non_null(src);
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
    src->ops->destroy(src);
}

/* 54 */
static void test_window_spreads_bytes(void **state)
{
    cs_source *src = cs_paced_source_new(cs_synthetic_stream_new(64 << 10, false, *state),
                                         bounded(1, 2), 50 * CS_MS, 0, *state);
    static uint8_t buf[MAX_BODY];
    cs_emission em;
    cs_err err = {0};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(src->ops->next(src, &em, &err), 1);
        int64_t t0 = cs_mono_ns();
        assert_int_equal(drain(src, buf, sizeof buf, 8 << 10), 64 << 10);
        assert_true(ms_since(t0) >= 40.0);
    }
    src->ops->destroy(src);
}

/* 55 */
static void test_zero_window_is_immediate(void **state)
{
    cs_source *src = cs_paced_source_new(cs_synthetic_stream_new(64 << 10, false, *state),
                                         bounded(1, 1), 0, 0, *state);
    static uint8_t buf[MAX_BODY];
    cs_emission em;
    cs_err err = {0};
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    int64_t t0 = cs_mono_ns();
    assert_int_equal(drain(src, buf, sizeof buf, 8 << 10), 64 << 10);
    assert_true(ms_since(t0) < 100.0);
    src->ops->destroy(src);
}

/* 56 */
static void test_cadence_spaces_emissions(void **state)
{
    cs_source *src = cs_paced_source_new(cs_synthetic_stream_new(512, false, *state),
                                         bounded(1, 3), 0, 30 * CS_MS, *state);
    static uint8_t buf[512];
    cs_emission em;
    cs_err err = {0};
    int64_t t0 = cs_mono_ns();
    int count = 0;
    for (int i = 0; i < 10 && src->ops->next(src, &em, &err) == 1; i++) {
        assert_int_equal(drain(src, buf, sizeof buf, 512), 512);
        count++;
    }
    assert_int_equal(count, 3);
    assert_true(ms_since(t0) >= 60.0);
    src->ops->destroy(src);
}

/* 57 */
static void test_forwards_source_errors(void **state)
{
    fake_stream f = {.base.ops = &fake_ops, .fail = true};
    cs_source *src = cs_paced_source_new(&f.base, bounded(7, 9), 0, 0, *state);
    cs_emission em;
    cs_err err = {0};
    assert_int_equal(src->ops->next(src, &em, &err), -1);
    assert_int_equal(err.kind, 42);
    assert_string_equal(err.msg, "boom");
    assert_int_equal(em.seq, 7); /* the ledger that was expected */
    src->ops->destroy(src);
}

/* 58 */
static void test_cancel_mid_window(void **state)
{
    cs_source *src = cs_paced_source_new(cs_synthetic_stream_new(64 << 10, false, *state),
                                         bounded(1, 1), 3600 * CS_SEC, 0, *state);
    cs_emission em;
    cs_err err = {0};
    int64_t t0 = cs_mono_ns();
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    delayed_cancel d;
    delayed_cancel_start(&d, *state, 50);
    static uint8_t buf[8 << 10];
    ssize_t n = 0;
    /* 8 reads cover the body; the first already waits 7.5 minutes. */
    for (int i = 0; i < 8 && (n = src->ops->read(src, buf, sizeof buf, &err)) > 0; i++)
        ;
    pthread_join(d.thread, NULL);
    assert_int_equal(n, -1);
    assert_int_equal(err.kind, CS_ERR_CANCELLED);
    assert_string_equal(err.msg, "context canceled");
    assert_true(ms_since(t0) < 5000.0);
    src->ops->destroy(src);
}

/* 59 */
static void test_cancel_mid_cadence_wait(void **state)
{
    cs_source *src = cs_paced_source_new(cs_synthetic_stream_new(512, false, *state),
                                         bounded(1, 5), 0, 3600 * CS_SEC, *state);
    static uint8_t buf[512];
    cs_emission em;
    cs_err err = {0};
    int count = 0, r = 0;
    for (int i = 0; i < 5 && (r = src->ops->next(src, &em, &err)) == 1; i++) {
        assert_int_equal(drain(src, buf, sizeof buf, 512), 512);
        count++;
        cs_cancel_fire(*state);
    }
    assert_int_equal(count, 1);
    assert_int_equal(r, -1);
    assert_int_equal(err.kind, CS_ERR_CANCELLED);
    assert_int_equal(em.seq, 2);
    src->ops->destroy(src);
}

/* The cadence wait itself wakes on a cancel from another thread (the stream here never checks
 * cancellation, so only the adapter's wait can notice it). */
static void test_cadence_wait_wakes_on_cancel(void **state)
{
    static const uint8_t body[] = "x";
    fake_stream f = {.base.ops = &fake_ops, .data = body, .len = 1};
    cs_source *src = cs_paced_source_new(&f.base, bounded(1, 5), 0, 3600 * CS_SEC, *state);
    cs_emission em;
    cs_err err = {0};
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    delayed_cancel d;
    delayed_cancel_start(&d, *state, 50);
    int64_t t0 = cs_mono_ns();
    assert_int_equal(src->ops->next(src, &em, &err), -1);
    pthread_join(d.thread, NULL);
    assert_int_equal(err.kind, CS_ERR_CANCELLED);
    assert_string_equal(err.msg, "context canceled");
    assert_int_equal(em.seq, 2);
    assert_int_equal(f.pulls, 2); /* the pull comes before the wait, as in the prototype */
    assert_true(ms_since(t0) < 5000.0);
    src->ops->destroy(src);
}

/* A late ledger re-anchors the grid: the one after it may start at once, but the next one is a
 * full cadence later, never a catch-up burst. */
static void test_late_ledger_reanchors_the_grid(void **state)
{
    static const uint8_t body[] = "x";
    fake_stream f = {.base.ops = &fake_ops, .data = body, .len = 1};
    const cs_dur cadence = 20 * CS_MS;
    cs_source *src = cs_paced_source_new(&f.base, bounded(1, 4), 0, cadence, *state);
    cs_emission em;
    cs_err err = {0};
    int64_t t[4];
    for (int i = 0; i < 4; i++) {
        if (i == 1) {
            /* Overrun the grid by three and a half slots, like a stalled store write. */
            struct timespec late = {.tv_nsec = 70 * 1000000};
            nanosleep(&late, NULL);
        }
        assert_int_equal(src->ops->next(src, &em, &err), 1);
        t[i] = cs_mono_ns();
    }
    /* Without the re-anchor ledgers 3 and 4 would both be overdue and start with ledger 2. */
    assert_true(t[3] - t[1] >= cadence);
    src->ops->destroy(src);
}

static void test_range_ending_at_the_ceiling_terminates(void **state)
{
    cs_source *src = cs_paced_source_new(cs_synthetic_stream_new(16, false, *state),
                                         bounded(4294967293u, 4294967295u), 0, 0, *state);
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
    cs_range r = {.from = 4294967294u, .bounded = false};
    cs_source *src = cs_paced_source_new(cs_synthetic_stream_new(16, false, *state), r, 0, 0,
                                         *state);
    cs_emission em;
    cs_err err = {0};
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(em.seq, 4294967295u);
    assert_int_equal(src->ops->next(src, &em, &err), 0);
    src->ops->destroy(src);
}

static void test_empty_ledger_body(void **state)
{
    fake_stream f = {.base.ops = &fake_ops, .data = (const uint8_t *)"", .len = 0};
    cs_source *src = cs_paced_source_new(&f.base, bounded(1, 2), 10 * CS_MS, 0, *state);
    cs_emission em;
    cs_err err = {0};
    uint8_t buf[16];
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(em.declared_size, 0);
    assert_int_equal(src->ops->read(src, buf, sizeof buf, &err), 0);
    src->ops->destroy(src);
}

static void test_read_returns_min_of_len_and_remaining(void **state)
{
    static const uint8_t body[] = "0123456789";
    fake_stream f = {.base.ops = &fake_ops, .data = body, .len = 10};
    cs_source *src = cs_paced_source_new(&f.base, bounded(1, 1), 1 * CS_MS, 0, *state);
    cs_emission em;
    cs_err err = {0};
    uint8_t buf[64];
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(src->ops->read(src, buf, 4, &err), 4);
    assert_int_equal(src->ops->read(src, buf + 4, sizeof buf - 4, &err), 6);
    assert_memory_equal(buf, body, 10);
    assert_int_equal(src->ops->read(src, buf, sizeof buf, &err), 0);
    assert_int_equal(src->ops->next(src, &em, &err), 0);
    src->ops->destroy(src);
}

/* With a window, a read whose deadline has passed still reports a cancellation; without one,
 * bytes are released regardless. */
static void test_cancel_after_deadline(void **state)
{
    static const uint8_t body[] = "0123456789";
    fake_stream f = {.base.ops = &fake_ops, .data = body, .len = 10};
    cs_source *src = cs_paced_source_new(&f.base, bounded(1, 2), 1 * CS_MS, 0, *state);
    cs_emission em;
    cs_err err = {0};
    uint8_t buf[16];
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(src->ops->read(src, buf, 5, &err), 5);
    struct timespec past = {.tv_nsec = 5 * 1000000};
    nanosleep(&past, NULL); /* the whole window is now over */
    cs_cancel_fire(*state);
    assert_int_equal(src->ops->read(src, buf, 5, &err), -1);
    assert_int_equal(err.kind, CS_ERR_CANCELLED);
    src->ops->destroy(src);
}

static void test_zero_window_ignores_cancel(void **state)
{
    static const uint8_t body[] = "0123456789";
    fake_stream f = {.base.ops = &fake_ops, .data = body, .len = 10};
    cs_source *src = cs_paced_source_new(&f.base, bounded(1, 1), 0, 0, *state);
    cs_emission em;
    cs_err err = {0};
    uint8_t buf[16];
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    cs_cancel_fire(*state);
    assert_int_equal(src->ops->read(src, buf, sizeof buf, &err), 10);
    assert_int_equal(src->ops->read(src, buf, sizeof buf, &err), 0);
    src->ops->destroy(src);
}

static void test_sequences_count_from_the_range(void **state)
{
    static const uint8_t body[] = "x";
    fake_stream f = {.base.ops = &fake_ops, .data = body, .len = 1};
    cs_source *src = cs_paced_source_new(&f.base, bounded(100, 101), 0, 0, *state);
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

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_preserves_bytes),
        T(test_window_spreads_bytes),
        T(test_zero_window_is_immediate),
        T(test_cadence_spaces_emissions),
        T(test_forwards_source_errors),
        T(test_cancel_mid_window),
        T(test_cancel_mid_cadence_wait),
        T(test_cadence_wait_wakes_on_cancel),
        T(test_late_ledger_reanchors_the_grid),
        T(test_range_ending_at_the_ceiling_terminates),
        T(test_unbounded_stops_at_the_last_sequence),
        T(test_empty_ledger_body),
        T(test_read_returns_min_of_len_and_remaining),
        T(test_cancel_after_deadline),
        T(test_zero_window_ignores_cancel),
        T(test_sequences_count_from_the_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
