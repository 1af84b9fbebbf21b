/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner's progress line (issue 27 item 4): the histogram its percentiles come from, the
 * line's text, what it counts, and the drawing thread on a pipe. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "benchrunner/progress.h"
#include "benchrunner/stats.h"
#include "common/godur.h"
#include "support/wait.h"

/* ---- the histogram ----------------------------------------------------------------------------- */

/* Every value's bucket stands for it within 1/256 (exactly below 512), buckets grow with values,
 * and the whole int64 range fits. */
static void hist_buckets_are_close_and_ordered(void **state)
{
    (void)state;
    for (int64_t v = 0; v < 512; v++)
        assert_int_equal(br_hist_value(br_hist_index(v)), v);
    assert_int_equal(br_hist_index(-5), 0);
    assert_true(br_hist_index(INT64_MAX) < BR_HIST_BUCKETS);
    assert_int_equal(br_hist_index(INT64_MAX), BR_HIST_BUCKETS - 1);
    size_t prev = 0;
    for (int64_t v = 512; v > 0 && v < INT64_MAX / 2; v += v / 97 + 1) {
        size_t i = br_hist_index(v);
        assert_true(i >= prev);
        prev = i;
        int64_t got = br_hist_value(i), diff = got > v ? got - v : v - got;
        if ((double)diff > (double)v / 256)
            fail_msg("%lld is counted as %lld", (long long)v, (long long)got);
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The histogram's nearest rank lands where the exact one does, within a bucket. */
static void hist_percentiles_match_exact_ones(void **state)
{
    (void)state;
    enum { N = 20000 };
    static int64_t vals[N];
    uint64_t *counts = calloc(BR_HIST_BUCKETS, sizeof *counts);
    assert_non_null(counts);
    assert_int_equal(br_hist_percentile(counts, 0, 50), 0);
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        vals[i] = (int64_t)(x % 50000000) + (i % 100 == 0 ? 200000000 : 0); /* a tail at 200 ms */
        counts[br_hist_index(vals[i])]++;
    }
    qsort(vals, N, sizeof *vals, cmp_i64);
    static const int ps[] = {1, 50, 90, 99, 100};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        int64_t exact = br_percentile(vals, N, ps[k]), got = br_hist_percentile(counts, N, ps[k]);
        int64_t diff = got > exact ? got - exact : exact - got;
        if ((double)diff > (double)exact / 256 + 1)
            fail_msg("p%d: %lld, exact %lld", ps[k], (long long)got, (long long)exact);
    }
    free(counts);
}

/* ---- the line ------------------------------------------------------------------------------------ */

static void line_text(void **state)
{
    (void)state;
    char buf[BR_PROGRESS_LINE_MAX];
    br_progress_view v = {.received = 1234, .expected = 5000, .subscribers = 1, .rate = 99.84, .has_delivery = true,
                          .p50 = 1234567, .p99 = 4560000, .elapsed_ns = 12 * CS_SEC + 900 * CS_MS};
    assert_string_equal(br_progress_format(&v, 0, buf, sizeof buf),
                        "1234 of 5000 ledgers  99.8/s  delivery p50 1.23ms p99 4.56ms  reconnects 0  abandons 0  12s");
    /* unbounded, a reconnect and abandons, stampless ledgers, minutes */
    v = (br_progress_view){.received = 77, .subscribers = 1, .rate = 0, .has_delivery = true, .p50 = 800,
                           .p99 = 120000, .reconnects = 2, .abandons = 3, .replayed = 4, .elapsed_ns = 65 * CS_SEC};
    assert_string_equal(br_progress_format(&v, 0, buf, sizeof buf),
                        "77 ledgers  0.0/s  delivery p50 800ns p99 120.0\xc2\xb5s  reconnects 2  abandons 3  "
                        "replayed 4  1m05s");
    /* nothing yet, several subscribers, hours */
    v = (br_progress_view){.expected = 400, .subscribers = 4, .elapsed_ns = 3725 * CS_SEC};
    assert_string_equal(br_progress_format(&v, 0, buf, sizeof buf),
                        "0 of 400 ledgers (4 subscribers)  0.0/s each  delivery -  reconnects 0  abandons 0  1h02m");
}

/* A terminal narrower than the line gets as many columns as it has: µ is one column, two bytes. */
static void line_fits_the_terminal(void **state)
{
    (void)state;
    char buf[BR_PROGRESS_LINE_MAX];
    br_progress_view v = {.received = 5, .subscribers = 1, .has_delivery = true, .p50 = 1500, .p99 = 1500};
    assert_string_equal(br_progress_format(&v, 10, buf, sizeof buf), "5 ledgers ");
    assert_string_equal(br_progress_format(&v, 36, buf, sizeof buf), "5 ledgers  0.0/s  delivery p50 1.5\xc2\xb5s");
    assert_string_equal(br_progress_format(&v, 35, buf, sizeof buf), "5 ledgers  0.0/s  delivery p50 1.5\xc2\xb5");
}

/* ---- the counts ---------------------------------------------------------------------------------- */

static br_progress *quiet_progress(int fd, size_t subs, uint64_t start, uint64_t end)
{
    br_progress_spec ps = {.fd = fd, .period_ns = 3600 * CS_SEC, .subscribers = subs, .start = start, .end = end,
                           .stamped = true};
    br_progress *p = br_progress_start(&ps);
    assert_non_null(p);
    return p;
}

static br_sample stamped(uint32_t seq, int64_t delivery, uint64_t reconnects)
{
    return (br_sample){.seq = seq, .bytes = 10, .has_delivery = true, .delivery = delivery, .reconnects = reconnects};
}

static void counts_what_arrives(void **state)
{
    (void)state;
    br_progress *p = quiet_progress(-1, 2, 0, 109); /* from the tip to 109, two subscribers */
    br_progress_view v;
    br_progress_view_at(p, br_mono_ns(), &v);
    assert_int_equal(v.received, 0);
    assert_int_equal(v.expected, 0); /* not known before the first ledger */
    assert_false(v.has_delivery);

    for (uint32_t seq = 100; seq < 110; seq++) {
        br_sample a = stamped(seq, seq * 1000, seq >= 105 ? 1 : 0), b = stamped(seq, 5000, 0);
        br_progress_note(p, 0, &a);
        br_progress_note(p, 1, &b);
    }
    br_sample ring = {.seq = 110, .discarded = 2}; /* a replay after an abandon, subscriber 2 */
    br_progress_note(p, 1, &ring);
    br_sample late = stamped(111, 1000, 3);
    br_progress_note(p, 1, &late);
    br_progress_view_at(p, br_mono_ns(), &v);
    assert_int_equal(v.received, 22);
    assert_int_equal(v.expected, 20); /* 100..109 for each */
    assert_int_equal(v.subscribers, 2);
    assert_int_equal(v.reconnects, 4); /* 1 and 3, counted once each */
    assert_int_equal(v.abandons, 2);
    assert_int_equal(v.replayed, 1);
    assert_true(v.has_delivery);
    /* 21 stamped values: 1000, 10 × 5000, 100000..109000: rank 11 and rank 21, within a bucket */
    assert_true(v.p50 >= 5000 - 5000 / 256 && v.p50 <= 5000 + 5000 / 256);
    assert_true(v.p99 >= 109000 - 109000 / 256 && v.p99 <= 109000 + 109000 / 256);
    br_progress_stop(p);

    p = quiet_progress(-1, 1, 7, 16); /* a known start: expected from the beginning */
    br_progress_view_at(p, br_mono_ns(), &v);
    assert_int_equal(v.expected, 10);
    br_progress_stop(p);
    br_progress_note(NULL, 0, &late); /* no progress line: nothing */
    br_progress_stop(NULL);
}

/* ---- drawing ------------------------------------------------------------------------------------- */

typedef struct drawn {
    int fd;
    char buf[4096];
    size_t len;
} drawn;

static bool has_two_lines(void *arg)
{
    drawn *d = arg;
    ssize_t n;
    while ((n = read(d->fd, d->buf + d->len, sizeof d->buf - 1 - d->len)) > 0)
        d->len += (size_t)n;
    d->buf[d->len] = '\0';
    const char *first = strstr(d->buf, "\r\033[K");
    return first && strstr(first + 4, "\r\033[K3 of 3 ledgers");
}

/* The thread redraws the line each period, "\r" and clear-to-end first, and stopping clears it. */
static void draws_each_period_and_clears(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
    br_progress_spec ps = {.fd = fds[1], .period_ns = 20 * CS_MS, .subscribers = 1, .start = 1, .end = 3};
    br_progress *p = br_progress_start(&ps);
    assert_non_null(p);
    for (uint32_t seq = 1; seq <= 3; seq++) {
        br_sample s = {.seq = seq};
        br_progress_note(p, 0, &s);
    }
    drawn d = {.fd = fds[0]};
    if (cs_wait_until(has_two_lines, &d, WAIT_MS) != 0)
        fail_msg("no two progress lines within %d ms: \"%s\"", WAIT_MS, d.buf);
    assert_non_null(strstr(d.buf, "\r\033[K3 of 3 ledgers  "));
    assert_null(strstr(d.buf, "replayed")); /* not stamped: stampless ledgers are the mode's own */
    assert_null(strchr(d.buf, '\n'));
    br_progress_stop(p);
    d.len = 0;
    has_two_lines(&d);
    size_t n = strlen(d.buf);
    assert_true(n >= 4 && strcmp(d.buf + n - 4, "\r\033[K") == 0);
    close(fds[0]);
    close(fds[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hist_buckets_are_close_and_ordered),
        cmocka_unit_test(hist_percentiles_match_exact_ones),
        cmocka_unit_test(line_text),
        cmocka_unit_test(line_fits_the_terminal),
        cmocka_unit_test(counts_what_arrives),
        cmocka_unit_test(draws_each_period_and_clears),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
