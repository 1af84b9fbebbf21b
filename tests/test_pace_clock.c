/* SPDX-License-Identifier: Apache-2.0 */
/* The paced adapter on the daemon's clock (cs_paced_source_new, cs_pace_clock_mono): the one
 * real-clock check beside test_pace.c's fake-clock cases. It shows the default clock is wired,
 * both reading the time and waiting, and that its wait wakes on a cancel fired from another
 * thread. The bounds are coarse and one-sided where load could move them: a wait may oversleep
 * without limit on a busy machine but never end early, and "woken by the cancel" only has to
 * beat the 7.5 minutes the wait would otherwise take. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <time.h>

#include "common/clock.h"
#include "corestreamd/sources/pace.h"
#include "corestreamd/sources/synthetic.h"

/* Fires the cancel after a delay, from another thread. */
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

/* A 25 ms cadence: the second start is at least 25 ms after the first (now and sleep_until are
 * the monotonic ones). Then an hour's window: the first 8 KiB of 64 KiB are due in 7.5 minutes,
 * and a cancel fired 50 ms into that wait ends it. */
static void test_default_clock_waits_and_wakes_on_cancel(void **state)
{
    (void)state;
    cs_cancel cancel;
    assert_int_equal(cs_cancel_init(&cancel), 0);
    cs_source *src = cs_paced_source_new(cs_synthetic_stream_new(64 << 10, false, &cancel),
                                         (cs_range){.from = 1, .to = 5, .bounded = true},
                                         3600 * CS_SEC, 25 * CS_MS, &cancel);
    assert_non_null(src);
    cs_emission em;
    cs_err err = {0};
    int64_t t0 = cs_mono_ns();
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(em.seq, 2);
    assert_true(cs_mono_ns() - t0 >= 25 * CS_MS);

    delayed_cancel d = {.cancel = &cancel, .ms = 50};
    assert_int_equal(pthread_create(&d.thread, NULL, delayed_cancel_run, &d), 0);
    static uint8_t buf[8 << 10];
    int64_t t1 = cs_mono_ns();
    assert_int_equal(src->ops->read(src, buf, sizeof buf, &err), -1);
    int64_t waited = cs_mono_ns() - t1;
    pthread_join(d.thread, NULL);
    assert_int_equal(err.kind, CS_ERR_CANCELLED);
    assert_string_equal(err.msg, "context canceled");
    assert_true(waited < 60 * CS_SEC);
    src->ops->destroy(src);
    cs_cancel_destroy(&cancel);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_clock_waits_and_wakes_on_cancel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
