/* SPDX-License-Identifier: Apache-2.0 */
/* --compress-level auto's controller (levelctl.h), driven with synthetic timings: it steps down
 * under load, up with headroom, holds still in between, and never leaves its range. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "corestreamd/stream/levelctl.h"

#define CHUNK 262144
/* The gate shape: 14.5 MiB over 7.5 ms is about 0.5 ns of source time per byte. */
#define GATE_ARRIVAL_NS ((int64_t)(CHUNK * 0.5))

static cs_level_load calm(int64_t arrival_ns, int idle)
{
    return (cs_level_load){.bytes = CHUNK, .arrival_ns = arrival_ns, .idle = idle};
}

static bool valid(int level)
{
    return level >= CS_AUTO_LEVEL_MIN && level <= CS_AUTO_LEVEL_MAX && level != 0;
}

static void test_starts_at_level_1_within_range(void **state)
{
    (void)state;
    cs_level_ctl c;
    cs_level_ctl_init(&c, 4);
    assert_int_equal(c.level, CS_AUTO_LEVEL_START);
    assert_int_equal(CS_AUTO_LEVEL_START, 1);
    assert_int_equal(CS_AUTO_LEVEL_MIN, -7);
    assert_int_equal(CS_AUTO_LEVEL_MAX, 3);
    for (int l = CS_AUTO_LEVEL_MIN; l <= CS_AUTO_LEVEL_MAX; l++)
        if (l != 0)
            assert_true(cs_level_ctl_cost(&c, l) > 0);
    /* Faster levels are estimated cheaper before anything is measured. */
    assert_true(cs_level_ctl_cost(&c, -7) < cs_level_ctl_cost(&c, -1));
    assert_true(cs_level_ctl_cost(&c, -1) < cs_level_ctl_cost(&c, 1));
    assert_true(cs_level_ctl_cost(&c, 1) < cs_level_ctl_cost(&c, 3));
}

/* Every queue full (chunks shipping raw): one level down per `workers` chunks, 1 → -1 (0 is
 * skipped) → ... → -7, and it stays there. */
static void test_steps_down_under_pressure_to_the_floor(void **state)
{
    (void)state;
    cs_level_ctl c;
    cs_level_ctl_init(&c, 4);
    cs_level_load full = {.bytes = CHUNK, .arrival_ns = GATE_ARRIVAL_NS, .backlogged = 4, .all_full = true};
    int want[] = {-1, -2, -3, -4, -5, -6, -7};
    for (size_t s = 0; s < sizeof want / sizeof want[0]; s++) {
        assert_int_equal(cs_level_ctl_pick(&c, &full), want[s]);
        for (int i = 1; i < 4; i++) /* the chunks cut at the old level are still queued */
            assert_int_equal(cs_level_ctl_pick(&c, &full), want[s]);
    }
    for (int i = 0; i < 100; i++)
        assert_int_equal(cs_level_ctl_pick(&c, &full), CS_AUTO_LEVEL_MIN);
    assert_int_equal(c.steps_down, 7);
}

/* Every encoder has a chunk waiting behind the one it compresses: also pressure, although
 * nothing ships raw yet. Fewer backlogged encoders than that is not. */
static void test_backlog_on_every_encoder_is_pressure(void **state)
{
    (void)state;
    cs_level_ctl c;
    cs_level_ctl_init(&c, 2);
    cs_level_load some = {.bytes = CHUNK, .backlogged = 1};
    for (int i = 0; i < 10; i++)
        assert_int_equal(cs_level_ctl_pick(&c, &some), 1);
    cs_level_load all = {.bytes = CHUNK, .backlogged = 2};
    assert_int_equal(cs_level_ctl_pick(&c, &all), -1);
}

/* A slow box: level 1 measured at 2 ns/B while the gate shape's budget is 0.5 x 4 x 0.7 = 1.4
 * ns/B. The controller steps to -1 (estimated from the table, rescaled by what it measured) and
 * stays: level 1 is known not to fit, so it does not climb back. */
static void test_steps_down_when_the_level_cannot_keep_pace(void **state)
{
    (void)state;
    cs_level_ctl c;
    cs_level_ctl_init(&c, 4);
    cs_level_ctl_observe(&c, 1, CHUNK, 2 * CHUNK);
    assert_true(cs_level_ctl_cost(&c, 1) == 2.0);
    cs_level_load l = calm(GATE_ARRIVAL_NS, 4);
    assert_int_equal(cs_level_ctl_pick(&c, &l), -1);
    for (int i = 0; i < 500; i++)
        assert_int_equal(cs_level_ctl_pick(&c, &l), -1);
}

/* Measured costs move the estimate of levels not yet used: a box twice as slow as the table at
 * level 1 is estimated twice as slow (after the EWMA settles) at level -7 too. */
static void test_measurements_rescale_unmeasured_levels(void **state)
{
    (void)state;
    cs_level_ctl c;
    cs_level_ctl_init(&c, 4);
    double before = cs_level_ctl_cost(&c, -7);
    double table1 = cs_level_ctl_cost(&c, 1);
    for (int i = 0; i < 200; i++)
        cs_level_ctl_observe(&c, 1, CHUNK, (int64_t)(2 * table1 * CHUNK));
    double after = cs_level_ctl_cost(&c, -7);
    assert_true(after > 1.9 * before && after < 2.1 * before);
}

/* A slow source (10 ns/B) and cheap measured levels: up one level at a time, no faster than one
 * step per CS_AUTO_UP_SPACING chunks, to 3, never beyond. */
static void test_steps_up_with_headroom_to_the_ceiling(void **state)
{
    (void)state;
    cs_level_ctl c;
    cs_level_ctl_init(&c, 4);
    cs_level_load l = calm(10 * CHUNK, 2);
    int prev = c.level, last_step = 0;
    for (int i = 1; i <= 200; i++) {
        int lv = cs_level_ctl_pick(&c, &l);
        cs_level_ctl_observe(&c, lv, CHUNK, CHUNK / 2); /* 0.5 ns/B whatever the level */
        assert_true(valid(lv));
        if (lv != prev) {
            assert_int_equal(lv, prev + 1);
            if (last_step)
                assert_true(i - last_step >= CS_AUTO_UP_SPACING);
            last_step = i;
        }
        prev = lv;
    }
    assert_int_equal(prev, CS_AUTO_LEVEL_MAX);
    assert_int_equal(c.steps_up, 2);
}

/* No step up while no encoder is idle, whatever the budget says. */
static void test_no_step_up_without_an_idle_encoder(void **state)
{
    (void)state;
    cs_level_ctl c;
    cs_level_ctl_init(&c, 4);
    cs_level_load l = calm(10 * CHUNK, 0);
    for (int i = 0; i < 200; i++)
        assert_int_equal(cs_level_ctl_pick(&c, &l), 1);
}

/* The per-chunk latency cap: an 8 MiB chunk may not take over 1 ms, i.e. 0.12 ns/B, which no
 * level meets at the table's speeds: the controller goes to the floor even with a slow source. */
static void test_chunk_latency_cap(void **state)
{
    (void)state;
    cs_level_ctl c;
    cs_level_ctl_init(&c, 4);
    cs_level_load l = {.bytes = 8 << 20, .arrival_ns = (int64_t)100 * (8 << 20), .idle = 4};
    int lv = 0;
    for (int i = 0; i < 20; i++)
        lv = cs_level_ctl_pick(&c, &l);
    assert_int_equal(lv, CS_AUTO_LEVEL_MIN);
}

/* After pressure, headroom does not bring the level back up for CS_AUTO_UP_COOLDOWN chunks. */
static void test_pressure_delays_step_ups(void **state)
{
    (void)state;
    cs_level_ctl c;
    cs_level_ctl_init(&c, 1);
    cs_level_load full = {.bytes = CHUNK, .backlogged = 1, .all_full = true};
    assert_int_equal(cs_level_ctl_pick(&c, &full), -1);
    cs_level_load l = calm(10 * CHUNK, 1);
    for (int i = 1; i < CS_AUTO_UP_COOLDOWN; i++)
        assert_int_equal(cs_level_ctl_pick(&c, &l), -1);
    assert_int_equal(cs_level_ctl_pick(&c, &l), 1); /* 0 is skipped on the way up too */
}

/* A ledger's first chunk (arrival 0) says nothing about the source's rate. */
static void test_first_chunk_does_not_move_the_rate(void **state)
{
    (void)state;
    cs_level_ctl c;
    cs_level_ctl_init(&c, 4);
    cs_level_load l = calm(GATE_ARRIVAL_NS, 0);
    cs_level_ctl_pick(&c, &l);
    double rate = c.arrival;
    assert_true(rate == 0.5);
    l.arrival_ns = 0;
    cs_level_ctl_pick(&c, &l);
    assert_true(c.arrival == rate);
}

static void test_bad_observations_are_ignored(void **state)
{
    (void)state;
    cs_level_ctl c;
    cs_level_ctl_init(&c, 4);
    cs_level_ctl_observe(&c, 0, CHUNK, 1000); /* ignored too; and the controller is this thread's now */
    cs_level_ctl before = c;
    cs_level_ctl_observe(&c, 4, CHUNK, 1000);
    cs_level_ctl_observe(&c, -8, CHUNK, 1000);
    cs_level_ctl_observe(&c, 1, 0, 1000);
    cs_level_ctl_observe(&c, 1, CHUNK, 0);
    cs_level_ctl_observe(&c, 1, CHUNK, -5);
    assert_memory_equal(&c, &before, sizeof c);
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* Any mix of loads and timings: always a level in range, never zstd's 0, and one step at most
 * per chunk. */
static void test_never_outside_bounds(void **state)
{
    (void)state;
    uint64_t seed = 12;
    for (int workers = 1; workers <= 8; workers *= 2) {
        cs_level_ctl c;
        cs_level_ctl_init(&c, workers);
        int prev = c.level;
        for (int i = 0; i < 100000; i++) {
            cs_level_load l = {.bytes = 4096 + lcg(&seed) % (8u << 20),
                               .arrival_ns = (int64_t)(lcg(&seed) % 4) * (int64_t)(lcg(&seed) % 5000000),
                               .idle = (int)(lcg(&seed) % (unsigned)(workers + 1)),
                               .backlogged = (int)(lcg(&seed) % (unsigned)(workers + 1)),
                               .all_full = lcg(&seed) % 10 == 0};
            int lv = cs_level_ctl_pick(&c, &l);
            assert_true(valid(lv));
            int d = lv > prev ? lv - prev : prev - lv;
            assert_true(d == 1 || d == 0 || (d == 2 && (lv == 1 || lv == -1)));
            prev = lv;
            cs_level_ctl_observe(&c, lv, l.bytes, (int64_t)(lcg(&seed) % 20000000));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_starts_at_level_1_within_range),
        cmocka_unit_test(test_steps_down_under_pressure_to_the_floor),
        cmocka_unit_test(test_backlog_on_every_encoder_is_pressure),
        cmocka_unit_test(test_steps_down_when_the_level_cannot_keep_pace),
        cmocka_unit_test(test_measurements_rescale_unmeasured_levels),
        cmocka_unit_test(test_steps_up_with_headroom_to_the_ceiling),
        cmocka_unit_test(test_no_step_up_without_an_idle_encoder),
        cmocka_unit_test(test_chunk_latency_cap),
        cmocka_unit_test(test_pressure_delays_step_ups),
        cmocka_unit_test(test_first_chunk_does_not_move_the_rate),
        cmocka_unit_test(test_bad_observations_are_ignored),
        cmocka_unit_test(test_never_outside_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
