/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner's statistics (PORTSPEC 4.3, 4.4; catalogue cases 18, 20-27): percentiles, the latency
 * format, the summary to the character and the CSV. The full-text expectations were produced by
 * the prototype's Go code (stats.go) fed the same samples. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "benchrunner/stats.h"
#include "common/godur.h"
#include "support/tmpdir.h"

#define BASE ((int64_t)5000 * CS_SEC) /* an arbitrary monotonic reading */

static br_collector *new_collector(const char *label)
{
    br_collector *c = br_collector_new(label);
    assert_non_null(c);
    return c;
}

static void add(br_collector *c, int64_t at, br_sample s)
{
    assert_int_equal(br_collector_add(c, BASE + at, &s), 0);
}

/* The summary, checked against want in full. */
static void assert_summary(const br_collector *c, const char *want)
{
    char *got = br_collector_summary(c);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void assert_summary_contains(const br_collector *c, const char *needle)
{
    char *got = br_collector_summary(c);
    assert_non_null(got);
    if (!strstr(got, needle))
        fail_msg("summary is missing \"%s\":\n%s", needle, got);
    free(got);
}

static void assert_summary_lacks(const br_collector *c, const char *needle)
{
    char *got = br_collector_summary(c);
    assert_non_null(got);
    if (strstr(got, needle))
        fail_msg("summary unexpectedly has \"%s\":\n%s", needle, got);
    free(got);
}

static const char *fmt(int64_t d)
{
    static char buf[BR_DUR_STR_MAX];
    return br_fmt_dur(d, buf, sizeof buf);
}

/* ---- case 20: TestPercentile ---------------------------------------------------------------- */

static void percentile_nearest_rank(void **state)
{
    (void)state;
    int64_t sorted[10];
    for (int i = 0; i < 10; i++)
        sorted[i] = (i + 1) * CS_MS;
    /* Nearest rank over ten values: p50 is the 5th, p90 the 9th, p99 the 10th. */
    static const struct {
        int p;
        int64_t want;
    } cases[] = {{0, 1 * CS_MS},  {10, 1 * CS_MS},  {50, 5 * CS_MS},  {90, 9 * CS_MS},
                 {95, 10 * CS_MS}, {99, 10 * CS_MS}, {100, 10 * CS_MS}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(br_percentile(sorted, 10, cases[i].p), cases[i].want);
    assert_int_equal(br_percentile(NULL, 0, 50), 0);
}

static void percentile_small_and_odd_sizes(void **state)
{
    (void)state;
    int64_t one[] = {7};
    assert_int_equal(br_percentile(one, 1, 0), 7);
    assert_int_equal(br_percentile(one, 1, 50), 7);
    assert_int_equal(br_percentile(one, 1, 99), 7);
    int64_t three[] = {1, 2, 3};
    /* idx = floor((p*3+99)/100) - 1 */
    assert_int_equal(br_percentile(three, 3, 33), 1); /* (99+99)/100-1 = 0 */
    assert_int_equal(br_percentile(three, 3, 34), 2); /* (102+99)/100-1 = 1 */
    assert_int_equal(br_percentile(three, 3, 50), 2);
    assert_int_equal(br_percentile(three, 3, 90), 3);
    assert_int_equal(br_percentile(three, 3, 200), 3); /* clamped */
    int64_t hundred[100];
    for (int i = 0; i < 100; i++)
        hundred[i] = i + 1;
    assert_int_equal(br_percentile(hundred, 100, 50), 50);
    assert_int_equal(br_percentile(hundred, 100, 99), 99);
    assert_int_equal(br_percentile(hundred, 100, 100), 100);
}

/* ---- case 21: TestCollectorSummary ----------------------------------------------------------- */

static void collector_summary(void **state)
{
    (void)state;
    br_collector *c = new_collector("test run");
    for (int i = 0; i < 4; i++)
        add(c, i * 10 * CS_MS,
            (br_sample){.seq = (uint32_t)(100 + i), .bytes = 1024, .delivery = CS_MS, .has_delivery = true});

    assert_summary_contains(c, "test run");
    assert_summary_contains(c, "ledgers      4 (100..103)");
    assert_summary_contains(c, "delivery");
    assert_summary_contains(c, "1.00ms");
    assert_int_equal(br_collector_elapsed(c), 30 * CS_MS);
    int64_t gaps[4];
    assert_int_equal(br_collector_metric(c, BR_METRIC_INTER_ARRIVAL, gaps), 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(gaps[i], 10 * CS_MS);

    assert_summary(c, "\n=== test run ===\n"
                      "ledgers      4 (100..103)\n"
                      "bytes        0.00 MiB (mean 1.0 KiB/ledger)\n"
                      "elapsed      30ms\n"
                      "throughput   100.0 ledgers/s, 0.1 MiB/s\n"
                      "inter-arrival p50 10.00ms  p90 10.00ms  p99 10.00ms  max 10.00ms\n"
                      "delivery      p50 1.00ms  p90 1.00ms  p99 1.00ms  max 1.00ms\n");
    br_collector_free(c);
}

/* ---- case 22: TestCollectorSummaryWithoutStamps ---------------------------------------------- */

static void collector_summary_without_stamps(void **state)
{
    (void)state;
    br_collector *c = new_collector("local");
    add(c, 0, (br_sample){.seq = 1, .bytes = 10});
    add(c, CS_MS, (br_sample){.seq = 2, .bytes = 10});
    assert_summary_contains(c, "no emit stamps");
    /* No chunks: no fallbacks line; no deliveries: neither t_emit nor pipeline. */
    assert_summary(c, "\n=== local ===\n"
                      "ledgers      2 (1..2)\n"
                      "bytes        0.00 MiB (mean 0.0 KiB/ledger)\n"
                      "elapsed      1ms\n"
                      "throughput   1000.0 ledgers/s, 0.0 MiB/s\n"
                      "inter-arrival p50 1.00ms  p90 1.00ms  p99 1.00ms  max 1.00ms\n"
                      "delivery     no emit stamps in this mode (nothing to measure against)\n");
    br_collector_free(c);
}

/* Emits and pipelines without any delivery are not printed (the localtap shape). */
static void summary_hides_emit_and_pipeline_without_delivery(void **state)
{
    (void)state;
    br_collector *c = new_collector("local tap (core's pipe, no network)");
    add(c, 0, (br_sample){.seq = 9, .bytes = 100, .chunks = 3, .emit = 7 * CS_MS, .has_emit = true,
                          .pipeline = 7 * CS_MS, .has_pipeline = true});
    assert_summary(c, "\n=== local tap (core's pipe, no network) ===\n"
                      "ledgers      1 (9..9)\n"
                      "bytes        0.00 MiB (mean 0.1 KiB/ledger)\n"
                      "elapsed      0s\n"
                      "inter-arrival n/a\n"
                      "delivery     no emit stamps in this mode (nothing to measure against)\n"
                      "fallbacks    0 partial deliveries discarded (live flow abandoned, ring redelivered)\n");
    br_collector_free(c);
}

/* ---- case 23: TestCollectorSummaryEmpty ------------------------------------------------------ */

static void collector_summary_empty(void **state)
{
    (void)state;
    br_collector *c = new_collector("empty");
    assert_summary_contains(c, "no ledgers received");
    assert_summary(c, "\n=== empty ===\nno ledgers received\n");
    assert_int_equal(br_collector_len(c), 0);
    assert_int_equal(br_collector_elapsed(c), 0);
    assert_int_equal(br_collector_metric(c, BR_METRIC_INTER_ARRIVAL, NULL), 0);
    br_collector_free(c);
}

/* ---- case 24: TestCollectorPartialStamps ----------------------------------------------------- */

static void collector_partial_stamps(void **state)
{
    (void)state;
    br_collector *c = new_collector("mixed");
    add(c, 0, (br_sample){.seq = 1, .bytes = 10, .chunks = 1}); /* replayed, no stamp */
    add(c, CS_MS, (br_sample){.seq = 2, .bytes = 10, .chunks = 1, .delivery = 2 * CS_MS, .has_delivery = true,
                              .pipeline = 17 * CS_MS, .has_pipeline = true, .emit = 15 * CS_MS, .has_emit = true});
    assert_summary_contains(c, "1 ledger(s) excluded");
    assert_summary_contains(c, "t_emit");
    assert_summary_contains(c, "15.00ms");
    assert_summary_contains(c, "pipeline");
    assert_summary_contains(c, "17.00ms");
    assert_summary_contains(c, "fallbacks    0 partial deliveries discarded");
    assert_summary(c, "\n=== mixed ===\n"
                      "ledgers      2 (1..2)\n"
                      "bytes        0.00 MiB (mean 0.0 KiB/ledger)\n"
                      "elapsed      1ms\n"
                      "throughput   1000.0 ledgers/s, 0.0 MiB/s\n"
                      "inter-arrival p50 1.00ms  p90 1.00ms  p99 1.00ms  max 1.00ms\n"
                      "t_emit        p50 15.00ms  p90 15.00ms  p99 15.00ms  max 15.00ms\n"
                      "delivery      p50 2.00ms  p90 2.00ms  p99 2.00ms  max 2.00ms\n"
                      "pipeline      p50 17.00ms  p90 17.00ms  p99 17.00ms  max 17.00ms\n"
                      "             1 ledger(s) excluded: replayed from retention, no emit stamp\n"
                      "fallbacks    0 partial deliveries discarded (live flow abandoned, ring redelivered)\n");
    br_collector_free(c);
}

/* ---- case 25: TestCollectorCountsFallbacks --------------------------------------------------- */

static void collector_counts_fallbacks(void **state)
{
    (void)state;
    br_collector *c = new_collector("fallbacks");
    add(c, 0, (br_sample){.seq = 1, .bytes = 10, .chunks = 1, .discarded = 2});
    add(c, CS_MS, (br_sample){.seq = 2, .bytes = 10, .chunks = 1, .discarded = 1});
    assert_int_equal(br_collector_fallbacks(c), 3);
    assert_true(br_collector_chunked(c));
    assert_summary_contains(c, "3 partial deliveries discarded");
    assert_summary_contains(c, "\nfallbacks    3 partial deliveries discarded (live flow abandoned, ring "
                               "redelivered)\n");
    br_collector_free(c);
}

/* ---- case 26: TestWriteCSV ------------------------------------------------------------------- */

static char *csv_text(const br_collector *c)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(br_collector_write_csv(c, f), 0);
    assert_int_equal(fclose(f), 0);
    return text;
}

static void write_csv(void **state)
{
    (void)state;
    br_collector *c = new_collector("csv");
    add(c, 0, (br_sample){.seq = 7, .bytes = 100});
    add(c, 5 * CS_MS, (br_sample){.seq = 8, .bytes = 200, .chunks = 2, .delivery = 3 * CS_MS, .has_delivery = true,
                                  .pipeline = 18 * CS_MS, .has_pipeline = true, .emit = 15 * CS_MS,
                                  .has_emit = true, .discarded = 1});
    char *text = csv_text(c);
    /* Header columns 0, 5 and 6 are sequence, emit_ns and delivery_ns; row 1 has no gap and no
     * measurements; row 2 has the 5 ms gap and every measurement. */
    assert_string_equal(text, "sequence,bytes,chunks,since_start_ns,inter_arrival_ns,emit_ns,delivery_ns,"
                              "pipeline_ns,discarded_partials\n"
                              "7,100,0,0,0,,,,0\n"
                              "8,200,2,5000000,5000000,15000000,3000000,18000000,1\n");
    free(text);
    br_collector_free(c);
}

static void write_csv_partial_columns_and_negatives(void **state)
{
    (void)state;
    br_collector *c = new_collector("csv");
    add(c, 0, (br_sample){.seq = 4294967294u, .bytes = 268435456, .chunks = 1024, .delivery = -5,
                          .has_delivery = true});
    add(c, 3, (br_sample){.seq = 4294967295u, .bytes = 0, .chunks = 0, .emit = 0, .has_emit = true,
                          .pipeline = -7, .has_pipeline = true, .discarded = 4294967295u});
    add(c, 2, (br_sample){.seq = 1, .bytes = 1}); /* a clock that went backwards: negative gap */
    char *text = csv_text(c);
    assert_string_equal(text, "sequence,bytes,chunks,since_start_ns,inter_arrival_ns,emit_ns,delivery_ns,"
                              "pipeline_ns,discarded_partials\n"
                              "4294967294,268435456,1024,0,0,,-5,,0\n"
                              "4294967295,0,0,3,3,0,,-7,4294967295\n"
                              "1,1,0,2,-1,,,,0\n");
    free(text);
    br_collector_free(c);
}

static void write_csv_empty_is_header_only(void **state)
{
    (void)state;
    br_collector *c = new_collector("csv");
    char *text = csv_text(c);
    assert_string_equal(text, "sequence,bytes,chunks,since_start_ns,inter_arrival_ns,emit_ns,delivery_ns,"
                              "pipeline_ns,discarded_partials\n");
    free(text);
    br_collector_free(c);
}

/* ---- case 18: TestWriteCSVFile, and its errors ----------------------------------------------- */

static void write_csv_file(void **state)
{
    (void)state;
    cs_tmpdir tmp;
    assert_int_equal(cs_tmpdir_make(&tmp, "benchstats"), 0);
    const char *dir = tmp.path;
    char path[PATH_MAX + 16], missing[PATH_MAX + 32];
    cs_tmpdir_join(&tmp, "out.csv", path, sizeof path);

    br_collector *c = new_collector("file");
    add(c, 0, (br_sample){.seq = 1, .bytes = 10, .delivery = CS_MS, .has_delivery = true});
    /* A stale longer file is truncated, not overwritten in place. */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < 100; i++)
        fputs("stale stale stale stale stale stale stale stale\n", f);
    fclose(f);

    cs_err err;
    assert_int_equal(br_write_csv_file(path, c, &err), 0);
    f = fopen(path, "r");
    assert_non_null(f);
    char body[1024];
    size_t n = fread(body, 1, sizeof body - 1, f);
    fclose(f);
    body[n] = '\0';
    assert_true(strncmp(body, "sequence,bytes", 14) == 0);
    assert_string_equal(body, "sequence,bytes,chunks,since_start_ns,inter_arrival_ns,emit_ns,delivery_ns,"
                              "pipeline_ns,discarded_partials\n"
                              "1,10,0,0,0,,1000000,,0\n");

    /* Go's os.Create error wording. */
    snprintf(missing, sizeof missing, "%s/no-such-dir/out.csv", dir);
    assert_int_equal(br_write_csv_file(missing, c, &err), -1);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "open %s: no such file or directory", missing);
    assert_string_equal(err.msg, want);
    assert_int_equal(br_write_csv_file(dir, c, &err), -1);
    snprintf(want, sizeof want, "open %s: is a directory", dir);
    assert_string_equal(err.msg, want);

    br_collector_free(c);
    assert_int_equal(cs_tmpdir_remove(&tmp), 0);
}

/* ---- case 27: TestFmtDur, and the edges of each unit ------------------------------------------ */

static void fmt_dur(void **state)
{
    (void)state;
    assert_string_equal(fmt(500), "500ns");
    assert_string_equal(fmt(1500), "1.5\xc2\xb5s");
    assert_string_equal(fmt(2 * CS_MS), "2.00ms");
}

static void fmt_dur_edges(void **state)
{
    (void)state;
    /* Below 1 µs, negatives included (skewed clocks), integer nanoseconds. */
    assert_string_equal(fmt(-5), "-5ns");
    assert_string_equal(fmt(-1500000), "-1500000ns");
    assert_string_equal(fmt(INT64_MIN), "-9223372036854775808ns");
    assert_string_equal(fmt(0), "0ns");
    assert_string_equal(fmt(999), "999ns");
    /* 1 µs up to 1 ms: one decimal of microseconds, with U+00B5 MICRO SIGN. */
    assert_string_equal(fmt(1000), "1.0µs");
    assert_string_equal(fmt(1000), "1.0\xc2\xb5s");
    assert_string_equal(fmt(999949), "999.9µs");
    assert_string_equal(fmt(999950), "1000.0µs"); /* still below 1 ms, as Go prints it */
    assert_string_equal(fmt(999999), "1000.0µs");
    /* 1 ms and above: two decimals of milliseconds, never switching to seconds. */
    assert_string_equal(fmt(1000000), "1.00ms");
    assert_string_equal(fmt(1499999), "1.50ms");
    assert_string_equal(fmt(1234567890), "1234.57ms");
    assert_string_equal(fmt(61 * CS_SEC), "61000.00ms");
}

/* ---- elapsed: Duration.Round(ms), halves away from zero, then Duration.String ----------------- */

static void dur_round_half_away_from_zero(void **state)
{
    (void)state;
    assert_int_equal(br_dur_round(1499999, CS_MS), CS_MS);
    assert_int_equal(br_dur_round(1500000, CS_MS), 2 * CS_MS);
    assert_int_equal(br_dur_round(2500000, CS_MS), 3 * CS_MS);
    assert_int_equal(br_dur_round(499999, CS_MS), 0);
    assert_int_equal(br_dur_round(500000, CS_MS), CS_MS);
    assert_int_equal(br_dur_round(-1499999, CS_MS), -CS_MS);
    assert_int_equal(br_dur_round(-1500000, CS_MS), -2 * CS_MS);
    assert_int_equal(br_dur_round(-2500000, CS_MS), -3 * CS_MS);
    assert_int_equal(br_dur_round(7, 0), 7);
    assert_int_equal(br_dur_round(7, -1), 7);
    /* Saturation at the ends, like Go. */
    assert_int_equal(br_dur_round(INT64_MAX, CS_MS), INT64_MAX);
    assert_int_equal(br_dur_round(INT64_MIN, CS_MS), INT64_MIN);
    assert_int_equal(br_dur_round(9223372036854775000LL, CS_MS), INT64_MAX); /* rounding up overflows */
    assert_int_equal(br_dur_round(9223372036854499999LL, CS_MS), 9223372036854000000LL);
    assert_int_equal(br_dur_round(-9223372036854775000LL, CS_MS), INT64_MIN);
}

/* elapsed as printed: rounded to the millisecond, in Go's Duration.String. */
static void assert_elapsed_line(int64_t last_arrival, const char *want_line)
{
    br_collector *c = new_collector("elapsed");
    add(c, 0, (br_sample){.seq = 1, .bytes = 1});
    add(c, last_arrival, (br_sample){.seq = 2, .bytes = 1});
    assert_summary_contains(c, want_line);
    br_collector_free(c);
}

static void elapsed_rounding(void **state)
{
    (void)state;
    assert_elapsed_line(1499999, "\nelapsed      1ms\n");
    assert_elapsed_line(1500000, "\nelapsed      2ms\n");
    assert_elapsed_line(2500000, "\nelapsed      3ms\n");
    assert_elapsed_line(400000, "\nelapsed      0s\n");
    assert_elapsed_line(1234567890, "\nelapsed      1.235s\n");
    assert_elapsed_line(61 * CS_SEC + 499999, "\nelapsed      1m1s\n");
    assert_elapsed_line(3600 * CS_SEC + 2 * CS_MS, "\nelapsed      1h0m0.002s\n");
    /* A sub-millisecond run still has a rate: elapsed > 0 before rounding. */
    br_collector *c = new_collector("fast");
    add(c, 0, (br_sample){.seq = 1, .bytes = 1048576});
    add(c, 400000, (br_sample){.seq = 2, .bytes = 1048576});
    assert_summary_contains(c, "\nelapsed      0s\nthroughput   2500.0 ledgers/s, 5000.0 MiB/s\n");
    br_collector_free(c);
}

/* One ledger: zero elapsed, no throughput, no inter-arrival. */
static void single_ledger(void **state)
{
    (void)state;
    br_collector *c = new_collector("one");
    add(c, 0, (br_sample){.seq = 55000000, .bytes = 15196160, .chunks = 58, .delivery = 1234567,
                          .has_delivery = true, .pipeline = 9 * CS_MS, .has_pipeline = true, .emit = 7500 * CS_US,
                          .has_emit = true});
    assert_summary(c, "\n=== one ===\n"
                      "ledgers      1 (55000000..55000000)\n"
                      "bytes        14.49 MiB (mean 14840.0 KiB/ledger)\n"
                      "elapsed      0s\n"
                      "inter-arrival n/a\n"
                      "t_emit        p50 7.50ms  p90 7.50ms  p99 7.50ms  max 7.50ms\n"
                      "delivery      p50 1.23ms  p90 1.23ms  p99 1.23ms  max 1.23ms\n"
                      "pipeline      p50 9.00ms  p90 9.00ms  p99 9.00ms  max 9.00ms\n"
                      "fallbacks    0 partial deliveries discarded (live flow abandoned, ring redelivered)\n");
    br_collector_free(c);
}

/* Percentiles are taken over sorted values (arrival order does not matter), negatives format as
 * nanoseconds, and the first and last sequences are in arrival order, not min/max. */
static void summary_sorts_and_keeps_arrival_order(void **state)
{
    (void)state;
    br_collector *c = new_collector("order");
    static const int64_t deliveries[] = {5 * CS_MS, -5, 999, 2500, 3 * CS_MS};
    for (int i = 0; i < 5; i++)
        add(c, i * CS_MS,
            (br_sample){.seq = (uint32_t)(10 - i), .bytes = 1, .chunks = 1, .delivery = deliveries[i],
                        .has_delivery = true});
    add(c, 6 * CS_MS, (br_sample){.seq = 3, .bytes = 1, .chunks = 1});
    add(c, 7 * CS_MS, (br_sample){.seq = 2, .bytes = 1, .chunks = 1, .discarded = 1});
    assert_summary(c, "\n=== order ===\n"
                      "ledgers      7 (10..2)\n"
                      "bytes        0.00 MiB (mean 0.0 KiB/ledger)\n"
                      "elapsed      7ms\n"
                      "throughput   857.1 ledgers/s, 0.0 MiB/s\n"
                      "inter-arrival p50 1.00ms  p90 2.00ms  p99 2.00ms  max 2.00ms\n"
                      "delivery      p50 2.5µs  p90 5.00ms  p99 5.00ms  max 5.00ms\n"
                      "             2 ledger(s) excluded: replayed from retention, no emit stamp\n"
                      "fallbacks    1 partial deliveries discarded (live flow abandoned, ring redelivered)\n");
    int64_t vals[8];
    assert_int_equal(br_collector_metric(c, BR_METRIC_DELIVERY, vals), 5);
    assert_int_equal(vals[1], -5); /* arrival order, unsorted */
    assert_int_equal(br_collector_metric(c, BR_METRIC_EMIT, NULL), 0);
    assert_int_equal(br_collector_metric(c, BR_METRIC_PIPELINE, NULL), 0);
    br_collector_free(c);
}

static void summary_without_chunks_has_no_fallbacks_line(void **state)
{
    (void)state;
    br_collector *c = new_collector("local");
    add(c, 0, (br_sample){.seq = 1, .bytes = 1, .discarded = 0});
    assert_summary_lacks(c, "fallbacks");
    br_collector_free(c);
}

/* Arrival offsets are measured from the first sample, whatever the clock's origin. */
static void since_start_is_relative(void **state)
{
    (void)state;
    br_collector *c = br_collector_new("rel");
    assert_non_null(c);
    br_sample s = {.seq = 1, .since_start = 12345};
    assert_int_equal(br_collector_add(c, 777, &s), 0);
    s.seq = 2;
    assert_int_equal(br_collector_add(c, 1777, &s), 0);
    assert_int_equal(br_collector_sample(c, 0)->since_start, 0);
    assert_int_equal(br_collector_sample(c, 1)->since_start, 1000);
    assert_string_equal(br_collector_label(c), "rel");
    assert_false(br_collector_chunked(c));
    br_collector_free(c);
    br_collector_free(NULL);
}

/* Many samples: the array grows, and the totals stay exact. */
static void many_samples(void **state)
{
    (void)state;
    br_collector *c = new_collector("many");
    for (int i = 0; i < 5000; i++)
        add(c, (int64_t)i * 600 * CS_MS,
            (br_sample){.seq = (uint32_t)(i + 1), .bytes = 15196160, .chunks = 58, .delivery = (i % 100 + 1) * CS_US * 10,
                        .has_delivery = true});
    assert_int_equal(br_collector_len(c), 5000);
    assert_int_equal(br_collector_sample(c, 4999)->seq, 5000);
    assert_summary_contains(c, "ledgers      5000 (1..5000)\n"
                               "bytes        72460.94 MiB (mean 14840.0 KiB/ledger)\n"
                               "elapsed      49m59.4s\n"
                               "throughput   1.7 ledgers/s, 24.2 MiB/s\n"
                               "inter-arrival p50 600.00ms  p90 600.00ms  p99 600.00ms  max 600.00ms\n"
                               "delivery      p50 500.0µs  p90 900.0µs  p99 990.0µs  max 1.00ms\n");
    br_collector_free(c);
}

/* ---- --resume: the reconnects line and column ----------------------------------------------- */

static void resume_adds_reconnects(void **state)
{
    (void)state;
    br_collector *c = new_collector("r");
    br_collector_set_resume(c, true);
    add(c, 0, (br_sample){.seq = 7, .bytes = 100, .chunks = 1});
    add(c, 5 * CS_MS, (br_sample){.seq = 8, .bytes = 100, .chunks = 1, .reconnects = 2});
    br_collector_set_reconnects(c, 3);
    assert_int_equal(br_collector_reconnects(c), 3);
    assert_summary_contains(c, "fallbacks    0 partial deliveries discarded (live flow abandoned, ring "
                               "redelivered)\nreconnects   3\n");
    char *text = csv_text(c);
    assert_string_equal(text, "sequence,bytes,chunks,since_start_ns,inter_arrival_ns,emit_ns,delivery_ns,"
                              "pipeline_ns,discarded_partials,reconnects\n"
                              "7,100,1,0,0,,,,0,0\n"
                              "8,100,1,5000000,5000000,,,,0,2\n");
    free(text);
    /* without --resume: neither */
    br_collector_set_resume(c, false);
    assert_summary_lacks(c, "reconnects");
    text = csv_text(c);
    assert_null(strstr(text, "reconnects"));
    free(text);
    br_collector_free(c);
}

/* ---- --subscribers: the pooled summary ---------------------------------------------------------- */

static void fanout_summary(void **state)
{
    (void)state;
    br_collector *a = new_collector("a"), *b = new_collector("b");
    /* a: deliveries 1..4 ms; b: 10 ms, one replayed ledger (no stamp) and a discarded partial */
    for (int i = 0; i < 4; i++)
        add(a, i * 10 * CS_MS, (br_sample){.seq = 20 + (uint32_t)i, .bytes = 10, .chunks = 1,
                                           .delivery = (i + 1) * CS_MS, .has_delivery = true});
    add(b, 0, (br_sample){.seq = 20, .bytes = 10, .chunks = 1});
    add(b, 10 * CS_MS, (br_sample){.seq = 21, .bytes = 10, .chunks = 1, .discarded = 1,
                                   .delivery = 10 * CS_MS, .has_delivery = true});
    br_collector_set_reconnects(b, 1);
    br_subscriber_result subs[] = {{a, "ok"}, {b, "remoteledger: read: boom"}};
    char *got = br_fanout_summary("fan", subs, 2, true);
    assert_non_null(got);
    assert_string_equal(got,
                        "\n=== fan ===\n"
                        "subscribers  2 on one thread: 1 ended well, 1 failed\n"
                        "ledgers      6 in all, per subscriber min 2 max 4\n"
                        "delivery      p50 3.00ms  p90 10.00ms  p99 10.00ms  max 10.00ms\n"
                        "worst p99    10.00ms (subscriber 2)\n"
                        "fallbacks    1 partial deliveries discarded in all (live flow abandoned, ring redelivered)\n"
                        "replayed     1 ledgers in all without an emit stamp (sent from retention)\n"
                        "reconnects   1 in all\n"
                        "sub   ledgers  range                   p50        p99        max        discarded replayed "
                        "reconnects result\n"
                        "1     4        20..23                  2.00ms     4.00ms     4.00ms     0         0        "
                        "0          ok\n"
                        "2     2        20..21                  10.00ms    10.00ms    10.00ms    1         1        "
                        "1          remoteledger: read: boom\n");
    free(got);
    /* without resume: no reconnects anywhere */
    got = br_fanout_summary("fan", subs, 2, false);
    assert_non_null(got);
    assert_null(strstr(got, "reconnects"));
    free(got);
    br_collector_free(a);
    br_collector_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(percentile_nearest_rank),
        cmocka_unit_test(percentile_small_and_odd_sizes),
        cmocka_unit_test(collector_summary),
        cmocka_unit_test(collector_summary_without_stamps),
        cmocka_unit_test(summary_hides_emit_and_pipeline_without_delivery),
        cmocka_unit_test(collector_summary_empty),
        cmocka_unit_test(collector_partial_stamps),
        cmocka_unit_test(collector_counts_fallbacks),
        cmocka_unit_test(write_csv),
        cmocka_unit_test(write_csv_partial_columns_and_negatives),
        cmocka_unit_test(write_csv_empty_is_header_only),
        cmocka_unit_test(write_csv_file),
        cmocka_unit_test(fmt_dur),
        cmocka_unit_test(fmt_dur_edges),
        cmocka_unit_test(dur_round_half_away_from_zero),
        cmocka_unit_test(elapsed_rounding),
        cmocka_unit_test(single_ledger),
        cmocka_unit_test(summary_sorts_and_keeps_arrival_order),
        cmocka_unit_test(summary_without_chunks_has_no_fallbacks_line),
        cmocka_unit_test(since_start_is_relative),
        cmocka_unit_test(many_samples),
        cmocka_unit_test(resume_adds_reconnects),
        cmocka_unit_test(fanout_summary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
